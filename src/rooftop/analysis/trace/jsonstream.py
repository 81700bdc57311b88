"""An incremental reader of one JSON document, for traces too large to hold as text.

The text is read in chunks (:data:`_CHUNK_CHARS` characters) into a sliding buffer; values are decoded
from it one at a time with ``json.JSONDecoder.raw_decode``, or, inside an array, as many whole elements as
the buffer holds (up to 64 Ki characters) in one decoder call (:meth:`JsonStream.array`). Errors name the
line they are on.

Those batches (nearly all of a trace's text) are decoded with orjson where it is installed (the ``fast``
extra), else with the json module; both give the same values (:func:`decode_array`), and so the same
reports. Set :data:`fast_json` to None to use the json module only.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import IO, Any, NoReturn

from rooftop.errors import ParseError

#: orjson where installed (the `fast` extra) at 3.10 or later (3.9.0 and older read values nested past 1024
#: levels, which json refuses); None: the json module only
fast_json: ModuleType | None
try:
    import orjson as fast_json
except ImportError:  # pragma: no cover - exercised where orjson is not installed
    fast_json = None
if fast_json is not None and tuple(int(p) for p in re.findall(r"[0-9]+", fast_json.__version__)[:2]) < (3, 10):
    fast_json = None  # pragma: no cover

_CHUNK_CHARS = 1 << 20
_MAX_VALUE_CHARS = 1 << 26  # one JSON value (an event, a metadata value) longer than this is not a trace
_BATCH_CHARS = 1 << 10  # decode array elements in batches when at least this much text holds whole ones
#: at most this much text decoded in one call (when it holds whole elements): the events are mapped while
#: they are still in the CPU's cache (a batch of 1 Mi characters took 15% longer to decode and map)
_BATCH_MAX_CHARS = 1 << 16
_WS = re.compile(r"[ \t\n\r]*")
#: where one element of an array may end and the next begin: "}", a comma and "{", JSON whitespace between
#: (the text of a value may hold the same: a cut found by it is checked by the reader that parses up to it)
_CUT = re.compile(r"\}[ \t\n\r]*,[ \t\n\r]*\{")
_STDLIB = json.JSONDecoder()
#: 19 digits in a row: an integer that may lie past 64 bits (orjson reads those as floats, json as ints)
_LONG_RUN = 19
_DIGITS_AS_HASH = bytes.maketrans(b"0123456789", b"#" * 10)
_LONG_NUMBER = b"#" * _LONG_RUN
_EIGHT_DIGITS = 0x0101010101010101  # eight bytes that are each 1: a word of eight digits (:func:`long_digits`)
_FEW_WORDS = 16  # up to this many words of eight digits, each one's run is measured alone
_SEARCH_WHOLE_BYTES = 1 << 25  # text searched whole (:func:`long_digits`) before numpy is imported for it
_searched = 0


class JsonStream:
    """Incremental reader of one JSON document: values are decoded from a sliding buffer, one at a time or,
    inside an array, as many whole elements as the buffer holds in one decoder call (:meth:`array`)."""

    def __init__(self, text: IO[str], source: str) -> None:
        self.text, self.source = text, source
        self.buf, self.pos, self.eof, self.lines_before = "", 0, False, 0
        self.decoder = json.JSONDecoder()
        self.batch_at: tuple[int, int] | None = None  # (start, index) of an array element that failed
        self.batch_start: int | None = None  # where the list of elements being handed out starts
        self.consumed = 0  # characters dropped from the front of the buffer
        self.bad_cuts: set[int] = set()  # offsets (from the start of the text) of cuts that failed
        #: the splits ahead (:meth:`split_at`): offsets of the text near which an array is split between
        #: readers, and the element start each one's split is at (:meth:`cut_after`), once found
        self.splits: list[int] = []
        self.split: int | None = None
        self.on_split: Callable[[int], bool] | None = None  # at a split: True stops the array there
        self.stopped = False  # an array stopped at a split
        try:  # the lines of the text dropped are counted when an error names its line, reading it again
            self.recount = text.seekable()
        except (OSError, ValueError):
            self.recount = False

    def fill(self, chars: int | None = None) -> None:
        if self.pos > 0:
            if not self.recount:
                self.lines_before += self.buf.count("\n", 0, self.pos)
            self.consumed += self.pos
            self.bad_cuts = {c for c in self.bad_cuts if c >= self.consumed}
            self.buf, self.pos = self.buf[self.pos :], 0
        chunk = self.text.read(chars or _CHUNK_CHARS)
        self.eof = not chunk
        self.buf += chunk

    def peek(self) -> str:
        while True:
            self.pos = _WS.match(self.buf, self.pos).end()  # type: ignore[union-attr]
            if self.pos < len(self.buf) or self.eof:
                return self.buf[self.pos : self.pos + 1]
            self.fill()

    def expect(self, char: str, what: str) -> None:
        if self.peek() != char:
            self.fail(f"expected {what}")
        self.pos += 1

    def value(self) -> Any:
        self.peek()
        chars = _CHUNK_CHARS
        while True:
            try:
                obj, end = self.decoder.raw_decode(self.buf, self.pos)
                if end < len(self.buf) or self.eof:
                    self.pos = end
                    return obj
            except json.JSONDecodeError as exc:
                if self.eof:
                    self.fail(f"invalid JSON ({exc.msg})", exc.pos)
                if len(self.buf) - self.pos > _MAX_VALUE_CHARS:  # no trace event is this long: stop reading
                    limit = f"or a value longer than {_MAX_VALUE_CHARS >> 20} Mi characters"
                    self.fail(f"invalid JSON ({exc.msg}, {limit})", exc.pos)
            except ValueError:  # an integer past Python's 4,300-digit conversion limit
                self.fail("invalid JSON: a number with more than 4300 digits")
            except RecursionError:
                self.fail("invalid JSON: values nested too deeply to read")
            self.fill(chars)  # the value may continue in the next chunk
            chars *= 2

    def fail(self, message: str, at: int | None = None) -> NoReturn:
        if at is None and self.batch_at is not None:
            at = self._element_end(*self.batch_at)
        at = self.pos if at is None else at
        line = self._lines_dropped() + self.buf.count("\n", 0, at) + 1
        raise ParseError(message, source=self.source, line=line)

    def _lines_dropped(self) -> int:
        """The line breaks in the text dropped from the buffer: counted as it was dropped, or (a seekable
        text, which is not read on after an error) by reading it again from its start."""
        if not self.recount or not self.consumed:
            return self.lines_before
        self.text.seek(0)
        left, lines = self.consumed, 0
        while left > 0:
            chunk = self.text.read(min(left, _CHUNK_CHARS))
            if not chunk:
                break
            lines += chunk.count("\n")
            left -= len(chunk)
        return lines

    def array(self, *, unterminated_ok: bool = False, resume: bool = False) -> Iterator[list[Any]]:
        """Yield the elements of the array starting here, in lists: as many whole elements as the buffer
        holds, decoded in one call (while a list is handed out, ``pos`` is where it starts: :meth:`failed_at`
        finds an element's line from there), or one element read alone. The Chrome "JSON array format" may
        lack its ``]``. With ``resume``, the reader stands at an element inside the array (:meth:`skip_to`).
        At a split (:meth:`split_at`) that :attr:`on_split` takes, it stops (:attr:`stopped`)."""
        if not resume:
            self.expect("[", "'['")
            if self.peek() == "]":
                self.pos += 1
                return
        while True:
            if self.splits and self._at_split():
                self.stopped = True
                return
            batch = self._batch()
            if batch is None:
                yield [self.value()]
            else:
                items, end = batch
                self.batch_start = self.pos
                yield items
                self.batch_start, self.pos = None, end
            char = self.peek()
            self.pos += 1
            if char == "]" or (char in ("", ",") and unterminated_ok and self.peek() == ""):
                return
            if char != ",":
                self.fail("expected ',' or ']' in the traceEvents array")

    def failed_at(self, index: int, message: str) -> NoReturn:
        """Fail at element ``index`` of the list :meth:`array` handed out last."""
        if self.batch_start is not None:
            self.batch_at = (self.batch_start, index)
        self.fail(message)

    def _batch(self) -> tuple[list[Any], int] | None:
        """The whole array elements from here to the last ``},`` in the buffer (in the next
        :data:`_BATCH_MAX_CHARS` characters when there is one), decoded in one call, and the end of the last
        one; None when there is no such cut or it does not end an element of this array (it lies in a string
        or a nested value: "[" + text + "]" is then not one JSON array, and the elements up to it are read
        one at a time). The values are those of :meth:`value`."""
        self.peek()
        if not self.eof and len(self.buf) - self.pos < _BATCH_MAX_CHARS:  # a batch's worth of text in the buffer:
            self.fill()  # else the element the buffer cuts would be tried (and fail, counting its lines) first
        pos, tries = self.pos, 3
        end = len(self.buf) if not self.splits else self._split_limit()  # no batch reaches past a split
        cut = self.buf.rfind("},", pos, min(end, pos + _BATCH_MAX_CHARS))
        if cut - pos < _BATCH_CHARS:  # elements longer than that: as many as the buffer holds
            cut = self.buf.rfind("},", pos, end)
        if cut - pos >= _BATCH_CHARS:  # a cut in a string ("a},{b" in a name): the one before it, outside
            cut = _outside_strings(self.buf, pos, cut) or -1
        while tries and cut - pos >= _BATCH_CHARS:
            if cut + self.consumed not in self.bad_cuts:
                try:
                    return decode_array("[" + self.buf[pos : cut + 1] + "]"), cut + 1
                except (ValueError, RecursionError):  # a cut inside a value, or a value value() reports
                    self.bad_cuts.add(cut + self.consumed)
                    tries -= 1
                    outside = _outside_strings(self.buf, pos, cut)
                    if outside is not None and outside != cut:  # the cut was in a string ("a},{b" in a name)
                        cut = outside
                        continue
            cut = self.buf.rfind("},", pos, pos + (cut - pos) // 2 + 2)  # one in the first half
        return None

    def split_at(self, offsets: list[int], on_split: Callable[[int], bool]) -> None:
        """Split the array being read near each of ``offsets`` (of the text, ascending): the split near
        ``x`` is at the element start :meth:`cut_after` finds from ``x``. No batch reaches past a split; when
        the reader stands at one, ``on_split(offset)`` says whether the array stops there. A split the reader
        passes inside an element (the cut lay in a value's text) is dropped, as is one it cannot find."""
        self.splits, self.split, self.on_split = list(offsets), None, on_split

    def _split_limit(self) -> int:
        """How far into the buffer a batch may reach: up to the next split, found once its offset is in the
        buffer ahead of the reader."""
        while self.splits and self.split is None:
            x = self.splits[0]
            if x >= self.consumed + len(self.buf):
                return len(self.buf)  # not read yet: no batch reaches it
            if x < self.consumed + self.pos:
                self.splits.pop(0)  # passed inside one element: dropped
                continue
            self.split = self.cut_after(x)
            if self.split is None:
                self.splits.clear()
        return len(self.buf) if self.split is None else min(len(self.buf), self.split - self.consumed)

    def _at_split(self) -> bool:
        """At an element start: whether the array stops at a split here (a split passed is dropped)."""
        self.peek()
        here = self.consumed + self.pos
        while self.splits:
            if self.split is None:
                self._split_limit()
                if self.split is None:
                    return False
            if here < self.split:
                return False
            if here == self.split and self.on_split is not None and self.on_split(here):
                return True
            if self.splits:  # (not taken, it may have dropped them all)
                self.splits.pop(0)  # passed inside an element, or not taken: the next one
            self.split = None
        return False

    def cut_after(self, x: int) -> int | None:
        """Where the first "}" "," "{" (whitespace between) from offset ``x`` of the text puts its "{" (the
        reader stands at or before ``x``; text is read as needed); None when there is none. Any two readers
        of the same text find the same offset: the first whole match in a buffer is the first in the text."""
        start = x  # (each character is searched about once: a match across the buffer's end starts at its last "}")
        while True:
            found = _CUT.search(self.buf, start - self.consumed)
            if found is not None:
                return self.consumed + found.end() - 1
            if self.eof:
                return None
            last = self.buf.rfind("}", start - self.consumed)
            start = max(start, self.consumed + (last if last >= 0 else len(self.buf)))
            self.fill()

    def skip_to(self, x: int) -> int | None:
        """Read the text on, without decoding it, to the first cut (:meth:`cut_after`) from offset ``x``,
        and stand there, at an element start; that offset, or None (no cut: the reader is at the end)."""
        while self.consumed + len(self.buf) <= x and not self.eof:
            self.pos = len(self.buf)
            self.fill()
        self.pos = min(len(self.buf), max(self.pos, x - self.consumed))
        at = self.cut_after(x)
        if at is not None:
            self.pos = at - self.consumed
        return at

    def _element_end(self, start: int, index: int) -> int:
        """Where element ``index`` of the batch decoded from ``start`` ends (for error lines)."""
        pos = end = start
        for k in range(index + 1):
            if k:
                pos = _WS.match(self.buf, end).end() + 1  # type: ignore[union-attr]  # past the comma
            _, end = self.decoder.raw_decode(self.buf, _WS.match(self.buf, pos).end())  # type: ignore[union-attr]
        return end


#: most "}," a failed cut looks back over for one outside the strings
_CUT_LOOKS = 64


def _outside_strings(buf: str, start: int, cut: int) -> int | None:
    """The last ``},`` at or before ``cut`` outside every string of ``buf[start:]`` (``start`` begins an array
    element): one after an even number of unescaped quotes. Looked for only after a decode failed at ``cut``:
    text such as ``"a},{b"`` in names put every cut inside a string, and each failure cost a whole batch's
    decoding (7x slower, then one element at a time). None when none is found in :data:`_CUT_LOOKS` tries."""
    for _ in range(_CUT_LOOKS):
        if cut < start:
            return None
        text = buf[start:cut]
        quotes = text.count('"') - text.count('\\"') + text.count('\\\\"')  # \" escapes a quote, \\" does not
        if quotes % 2 == 0:
            return cut
        cut = buf.rfind("},", start, cut)
    return None


def decode_array(text: str, fast: bool = True) -> list[Any]:
    """The JSON array ``text``, as ``json.loads`` reads it (ValueError or RecursionError where it fails).

    With ``fast`` and orjson installed (:data:`fast_json`), orjson decodes it (faster), except text with
    a run of 19 or more digits: orjson reads an integer past 64 bits as a float, where json keeps the
    int. Where orjson rejects the text (NaN and Infinity, which json accepts; a number past the float
    range, which json reads as inf; a lone surrogate escape; nesting past 1024 levels; malformed JSON),
    json decodes it, so the values and the errors are json's.
    One case differs: on Python 3.11, json's nesting limit is the recursion limit less the stack in use
    (a little under 1,000 levels), so a value nested between that and 1024 levels is read only by orjson."""
    if fast and fast_json is not None:
        data = text.encode("utf-8", "surrogatepass")
        if not long_digits(data):
            try:
                return fast_json.loads(data)  # type: ignore[no-any-return]
            except ValueError:  # orjson.JSONDecodeError: json decides (the same value or its error)
                pass
    return _STDLIB.decode(text)  # type: ignore[no-any-return]


def long_digits(data: bytes) -> bool:
    """Whether ``data`` holds a run of :data:`_LONG_RUN` (19) or more ASCII digits.

    Such a run holds a whole 8-byte word of digits at an offset divisible by 8. Those words are found with
    numpy (a few microseconds for 64 KiB, where translating the text and searching it takes about 100); the
    runs through a few of them are then measured one by one, and text with many of them (a trace of
    13-digit timestamps) is searched whole, as before. The answer is exact either way. Until numpy is
    loaded (by the analysis) and while less than :data:`_SEARCH_WHOLE_BYTES` were read, the text is searched
    whole: importing numpy costs as much CPU as searching some 50 MiB (a small trace read alone is read
    in about half the time)."""
    global _searched
    if "numpy" not in sys.modules and _searched < _SEARCH_WHOLE_BYTES:
        _searched += len(data)
        return data.translate(_DIGITS_AS_HASH).find(_LONG_NUMBER) >= 0
    import numpy as np

    digit = (np.frombuffer(data, np.uint8) - 48 < 10).view(np.uint8)  # 1 for a digit (the others wrap past 9)
    whole = len(digit) // 8 * 8
    words = np.flatnonzero(digit[:whole].view(np.uint64) == _EIGHT_DIGITS).tolist()
    if len(words) > _FEW_WORDS:
        return data.translate(_DIGITS_AS_HASH).find(_LONG_NUMBER) >= 0
    side = _LONG_RUN - 8  # 19 digits in a row through a word lie within this many bytes of it, either side
    return any(
        data[max(0, 8 * w - side) : 8 * w + 8 + side].translate(_DIGITS_AS_HASH).find(_LONG_NUMBER) >= 0 for w in words
    )


def value_key(value: Any) -> str | bytes | None:
    """A hashable text of a decoded JSON value, equal for two values only when they are equal with the
    same types throughout (``1``, ``1.0`` and ``true`` differ, as do ``0.0`` and ``-0.0``): orjson's JSON
    text where orjson is installed and writes the value without a ``null`` (it writes NaN and inf as
    ``null``, as it writes None), else ``repr``; None where neither can write it (nested too deep, an
    integer too long). The two kinds of key never equal each other."""
    if fast_json is not None:
        try:
            text: bytes = fast_json.dumps(value)
        except TypeError:  # orjson.JSONEncodeError: an int past 64 bits, a lone surrogate, deep nesting
            pass
        else:
            if b"null" not in text:
                return text
    try:
        return repr(value)
    except (RecursionError, ValueError):
        return None
