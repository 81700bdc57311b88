"""XLA HLO text -> ``HloModule``: computations of instructions with shapes, operands and raw attributes.

Reads what XLA prints today: ``jax.jit(f).lower(x).compile().as_text()`` (with the FileNames /
FunctionNames / FileLocations / StackFrames tables and ``stack_frame_id`` metadata), XLA dump files
(``*.before_optimizations.txt``, ``*.after_optimizations.txt``) and the short form without ``%`` and
without operand shapes. Line-oriented: one compiled regex match per instruction line on the common path,
shapes cached by their text, attributes split with a regex and checked for balance only where needed;
an instruction spanning several lines (a multi-line constant literal) is joined before it is parsed.

Attribute values stay raw strings; the ``Instruction`` properties decode them on demand. The data model
(``HloModule``, ``Computation``, ``Instruction``) and the value decoders live in
:mod:`rooftop.analysis.hlo.ir`. The text format is described in the XLA documentation (operation semantics, shapes
and layout, tiled layout).
"""

from __future__ import annotations

import io
import re
import sys
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

from rooftop.analysis.gcpause import paused_gc
from rooftop.analysis.hlo.groups import MAX_DEVICES
from rooftop.analysis.hlo.ir import (
    STRUCT_RE,
    Computation,
    HloModule,
    Instruction,
    LazyFields,
    new_instruction,
    split_top,
)
from rooftop.analysis.hlo.shapes import Shape, ShapeReader, parse_int, strip_comments
from rooftop.analysis.hlo.textfile import MAX_LINE_CHARS, open_text, text_lines
from rooftop.errors import ParseError, shown

_NAME = r"[^\s=%(){},\"]+"
_FAST_RE = re.compile(
    r"\s*(ROOT\s+)?%?(" + _NAME + r")\s*=\s*([a-z][a-z0-9]*\[[^\]]*\](?:\{[^{}]*\})?)\s+([a-z][a-z0-9_\-]*)\("
)
_HEAD_RE = re.compile(r"\s*(ROOT\s+)?%?(" + _NAME + r")\s*=\s*")
_OPCODE_RE = re.compile(r"\s*([a-z][a-z0-9_\-]*)\(")
_NAME_RE = re.compile(_NAME)
_ATTR_RE = re.compile(r",\s*(?=[A-Za-z_][\w.\-]*=)")
_STR = r'"(?:[^"\\]++|\\.)*+"'
_BRACES = r"\{(?:[^{}\"]++|" + _STR + r")*+\}"
for _ in range(5):  # balanced braces nested up to 6 deep (JSON backend configs), strings skipped
    _BRACES = r"\{(?:[^{}\"]++|" + _STR + "|" + _BRACES + r")*+\}"
_ATOM = "(?:" + _STR + "|" + _BRACES + r'|\[[^\[\]"]*+\]|\([^()"]*+\)|[^,{}\[\]()"]++)'
_ATTR_FAST_RE = re.compile(r",\s*([A-Za-z_][\w.\-]*)=(" + _ATOM + "*+)")
_CLOSE_RE = re.compile(r"\)(?=\s*(?:,\s*[A-Za-z_][\w.\-]*=|$))")
_COMPUTATION_RE = re.compile(r"(ENTRY\b\s*)?%?(" + _NAME + r")?\s*(\(.*\)\s*->.*?)?\s*\{")
_TABLE_ROW_RE = re.compile(r"([0-9]{1,19})\s+(.*)")
_TABLE_HEAD_RE = re.compile(r"[A-Z][A-Za-z]*")
_CALL_KEYS = frozenset(
    "calls to_apply condition body branch_computations true_computation false_computation "
    "called_computations select scatter".split()
)
intern = sys.intern
_LITERAL_MAX_CHARS = 1024
#: 8-bit integer and pred constants keep literals up to this long: a kernel's block mask (a splash
#: attention mask of 8 heads x 64 x 64 blocks prints in about 100,000 characters)
_MASK_LITERAL_MAX_CHARS = 1 << 17
_MASK_TYPES = frozenset(("s8", "u8", "pred"))
_MAX_JOINED_CHARS = MAX_LINE_CHARS  # a multi-line instruction joined: bounded as a line is
_MAX_RETRIES = 8
#: the metadata of an instruction without any (shared: read-only)
_NO_FIELDS = LazyFields("")


def _close_paren(text: str, pos: int) -> int:
    """Index of the ')' closing the '(' at ``pos``, skipping strings; -1 when the text ends first."""
    depth = 0
    for match in STRUCT_RE.finditer(text, pos):
        token = match.group()
        if token == "(":
            depth += 1
        elif token == ")":
            depth -= 1
            if depth == 0:
                return match.start()
        elif token == '"':
            return -1
    return -1


class _Incomplete(Exception):
    """The instruction continues on the next line."""


# --- the parser --------------------------------------------------------------------------------------

_Attrs = dict[str, str]
#: (name, opcode, shape, operands, operand shapes or None, attributes, metadata, called, is_root, line)
_Meta = Mapping[str, str]
_Record = tuple[
    str, str, Shape, tuple[str, ...], tuple[Shape | None, ...] | None, _Attrs, _Meta, tuple[str, ...], bool, int
]


class _Parser:
    def __init__(self, source: str) -> None:
        self.source = source
        self.shapes = ShapeReader()
        self.tables: dict[str, dict[int, str]] = {}
        self.computations: dict[str, Computation] = {}
        self.last_line = 0

    def error(self, line: int | None, message: str) -> ParseError:
        return ParseError(message, source=self.source, line=line)

    def run(self, lines: Iterable[str]) -> HloModule:
        """Parse with the cyclic garbage collector paused: the parser makes millions of small acyclic
        objects, and collection passes over a growing heap would make large modules quadratic."""
        with paused_gc():
            return self._run(lines)

    def _run(self, lines: Iterable[str]) -> HloModule:
        numbered = enumerate(lines, 1)
        name, attributes = self._header(numbered)
        table: dict[int, str] | None = None
        for number, line in numbered:
            self.last_line = number
            text = line.strip()
            if not text or text.startswith("//"):
                continue
            if text.endswith("{"):
                self._computation(text, number, numbered)
                table = None
                continue
            row = _TABLE_ROW_RE.fullmatch(text) if table is not None else None
            if row is not None and table is not None:  # a row of FileNames / StackFrames / ...
                table[int(row.group(1))] = row.group(2)
            elif _TABLE_HEAD_RE.fullmatch(text):
                table = self.tables.setdefault(text, {})
            else:
                raise self.error(number, f"expected a computation like 'name {{' or 'ENTRY name {{', got {text[:60]!r}")
        return self._module(name, attributes)

    def _header(self, numbered: Iterator[tuple[int, str]]) -> tuple[str, dict[str, str]]:
        for number, line in numbered:
            text = line.strip().lstrip("\ufeff")
            if not text or text.startswith("//"):
                continue
            match = re.match(r"HloModule\s+([^\s,]+)\s*", text)
            if match is None:
                raise self.error(number, f"expected 'HloModule <name>' at the start of HLO text, got {text[:60]!r}")
            rest = text[match.end() :]
            if rest and not rest.startswith(","):
                raise self.error(number, f"expected ',' after the module name, got {rest[:40]!r}")
            try:
                attributes = self._attributes(rest, 0) if rest else {}
                devices = 1
                for key in ("num_partitions", "replica_count"):
                    if key in attributes:
                        devices *= parse_int(attributes[key], key, lo=1, hi=MAX_DEVICES)
                if devices > MAX_DEVICES:
                    raise ParseError(f"num_partitions x replica_count = {devices} devices, more than {MAX_DEVICES}")
            except _Incomplete:
                raise self.error(number, "module header attributes are not closed") from None
            except ParseError as exc:
                raise self.error(number, str(exc)) from None
            return match.group(1), attributes
        raise self.error(None, "empty input: expected 'HloModule <name>'")

    def _computation(self, text: str, number: int, numbered: Iterator[tuple[int, str]]) -> None:
        match = _COMPUTATION_RE.fullmatch(text)
        if match is None or (match.group(2) is None and match.group(1) is None):
            raise self.error(number, f"expected a computation like 'name {{' or 'ENTRY name {{', got {text[:60]!r}")
        name = match.group(2) or "ENTRY"
        if name in self.computations:
            raise self.error(number, f"computation {shown(name)} is defined twice")
        records: list[_Record] = []
        for line_number, line in numbered:
            self.last_line = line_number
            fast = _FAST_RE.match(line)
            if fast is not None:
                try:
                    records.append(self._instruction(line, line_number, fast))
                except _Incomplete:
                    records.append(self._joined(line, line_number, numbered))
                continue
            stripped = line.strip()
            if not stripped or stripped.startswith("//"):
                continue
            if stripped.startswith("}"):
                self._close(stripped, line_number)
                self.computations[name] = self._build(name, bool(match.group(1)), records, number)
                return
            try:
                records.append(self._instruction(line, line_number, None))
            except _Incomplete:
                records.append(self._joined(line, line_number, numbered))
        raise self.error(
            self.last_line, f"computation {shown(name)} opened at line {number} is not closed (expected '}}')"
        )

    def _close(self, text: str, number: int) -> None:
        rest = text[1:].strip()
        if rest and not re.fullmatch(r",\s*execution_thread=\"[^\"]*\"", rest):
            raise self.error(number, f"expected end of line after '}}', got {rest[:40]!r}")

    def _joined(self, first: str, number: int, numbered: Iterator[tuple[int, str]]) -> _Record:
        """Join the lines of an instruction that spans several (multi-line literal, wrapped attributes)."""
        parts = [first]
        depth, size, retries = _depth(first), len(first), 0
        for line_number, line in numbered:
            self.last_line = line_number
            parts.append(line)
            depth += _depth(line)
            size += len(line)
            if size > _MAX_JOINED_CHARS or retries > _MAX_RETRIES:
                break
            if depth <= 0 and not line.rstrip().endswith(","):
                text = "\n".join(parts)
                try:
                    return self._instruction(text, number, _FAST_RE.match(text))
                except _Incomplete:
                    retries += 1
        raise self.error(number, "instruction is not terminated (expected ')' or '}' before the end of input)")

    def _instruction(self, text: str, number: int, fast: re.Match[str] | None) -> _Record:
        try:
            if fast is not None:
                is_root, name, opcode = fast.group(1), fast.group(2), fast.group(4)
                shape_text = fast.group(3)
                shape = self.shapes.cache.get(shape_text) or self.shapes.parse(shape_text)
                open_pos = fast.end() - 1
            else:
                is_root, name, shape, opcode, open_pos = self._slow_head(text)
            return self._rest(text, number, name, opcode, shape, bool(is_root), open_pos)
        except ParseError as exc:
            if exc.line is not None:
                raise
            raise self.error(number, str(exc)) from None
        except (ValueError, IndexError, KeyError, TypeError, RecursionError, OverflowError) as exc:
            raise self.error(number, f"malformed instruction ({type(exc).__name__}: {exc})") from None

    def _slow_head(self, text: str) -> tuple[str | None, str, Shape, str, int]:
        head = _HEAD_RE.match(text)
        if head is None:
            word = text.strip().split(None, 1)
            if not word:
                raise ParseError("expected an instruction like 'name = f32[2] add(a, b)', got an empty line")
            got = word[1][:40] if len(word) > 1 else "end of line"
            raise ParseError(f"expected '=' after instruction name {word[0][:40]!r}, got {got!r}")
        shape, pos = self.shapes.read(text, head.end())
        op = _OPCODE_RE.match(text, pos)
        if op is None or not text[pos : pos + 1].isspace():
            raise ParseError(
                f"expected an opcode and '(' after the shape of {shown(head.group(2))}, got {text[pos : pos + 40]!r}"
            )
        return head.group(1), head.group(2), shape, op.group(1), op.end() - 1

    def _rest(
        self, text: str, number: int, name: str, opcode: str, shape: Shape, is_root: bool, open_pos: int
    ) -> _Record:
        found = _CLOSE_RE.search(text, open_pos)
        close = found.start() if found is not None else -1
        if (
            close < 0
            or text.find('"', open_pos, close) >= 0
            or (text.count("(", open_pos + 1, close) != text.count(")", open_pos, close))
        ):
            close = _close_paren(text, open_pos)
            if close < 0:
                raise _Incomplete
        inside = text[open_pos + 1 : close]
        attributes = self._attributes(text, close + 1)
        metadata_text = attributes.pop("metadata", None)
        metadata = LazyFields(metadata_text) if metadata_text else _NO_FIELDS
        operands: tuple[str, ...] = ()
        operand_shapes: tuple[Shape | None, ...] | None = ()
        if opcode == "constant":
            if len(inside) <= _LITERAL_MAX_CHARS or (
                shape.dtype in _MASK_TYPES and len(inside) <= _MASK_LITERAL_MAX_CHARS
            ):
                attributes["literal"] = inside.strip()
            else:
                attributes["literal_chars"] = str(len(inside))
        elif opcode == "parameter":
            attributes["parameter_number"] = str(parse_int(inside, "parameter number"))
        elif inside and not inside.isspace():
            operands, operand_shapes = self._operands(inside)
        called: tuple[str, ...] = ()
        if not _CALL_KEYS.isdisjoint(attributes):
            called = tuple(_callee(v) for k, v in attributes.items() if k in _CALL_KEYS for v in _callees(v))
        return (name, opcode, shape, operands, operand_shapes, attributes, metadata, called, is_root, number)

    def _attributes(self, text: str, pos: int) -> dict[str, str]:
        """The ``, key=value`` list from ``text[pos:]`` (values raw, brackets and strings balanced)."""
        out: dict[str, str] = {}
        end, match = len(text), _ATTR_FAST_RE.match
        while pos < end:
            found = match(text, pos)
            if found is None:
                tail = text[pos:].lstrip()
                if not tail or tail.startswith("//"):  # end of line, or a trailing // comment
                    return out
                return self._attributes_slow(text[pos:], out)
            out[intern(found.group(1))] = found.group(2).strip()
            pos = found.end()
        return out

    def _attributes_slow(self, rest: str, out: dict[str, str]) -> dict[str, str]:
        """Exact split at top-level ', key=' (strings skipped, brackets counted), linear in the text."""
        cuts, depth = [], 0
        for match in STRUCT_RE.finditer(rest):
            token = match.group()
            if token == '"':
                raise _Incomplete  # a string left open: the value may go on in the next line
            if token in "({[":
                depth += 1
            elif token in ")}]":
                depth -= 1
                if depth < 0:
                    raise ParseError(f"unbalanced {token!r} in attributes {rest.strip()[:60]!r}")
            elif token == "," and depth == 0 and _ATTR_RE.match(rest, match.start()):
                cuts.append(match.start())
        if depth or rest.rstrip().endswith(","):
            raise _Incomplete
        if not cuts or rest[: cuts[0]].strip():
            raise ParseError(f"expected ', key=value' after the operand list, got {rest.strip()[:60]!r}")
        for start, end in zip(cuts, [*cuts[1:], len(rest)], strict=True):
            key, _, value = rest[_ATTR_RE.match(rest, start).end() : end].partition("=")  # type: ignore[union-attr]
            out[intern(key)] = value.strip()
        return out

    def _operands(self, inside: str) -> tuple[tuple[str, ...], tuple[Shape | None, ...] | None]:
        if "/*" in inside:
            inside = strip_comments(inside)
        if "%" not in inside:
            names = [t.strip() for t in inside.split(",")]
            if all(_NAME_RE.fullmatch(n) for n in names):
                return tuple(names), None
            return self._operands_generic(inside)
        parts = inside.split("%")
        names, shapes, shape_text = [], [], parts[0]
        cached, parse, valid = self.shapes.cache.get, self.shapes.parse, _NAME_RE.fullmatch
        for part in parts[1:]:
            name, _, after = part.partition(",")
            name = name.strip()
            if not valid(name):
                raise ParseError(f"expected an operand name after '%', got {name[:40]!r}")
            names.append(name)
            shapes.append(cached(shape_text) or (parse(shape_text) if shape_text.strip() else None))
            shape_text = after
        if shape_text.strip():
            raise ParseError(f"unexpected text {shape_text.strip()[:40]!r} at the end of the operand list")
        return tuple(names), tuple(shapes)

    def _operands_generic(self, inside: str) -> tuple[tuple[str, ...], tuple[Shape | None, ...]]:
        names, shapes = [], []
        for item in split_top(inside):
            shape_text, _, name = item.strip().rpartition(" ")
            if not _NAME_RE.fullmatch(name):
                raise ParseError(f"expected an operand name, got {item.strip()[:40]!r}")
            names.append(name)
            shapes.append(self.shapes.parse(shape_text) if shape_text.strip() else None)
        return tuple(names), tuple(shapes)

    def _build(self, name: str, is_entry: bool, records: list[_Record], number: int) -> Computation:
        if not records:
            raise self.error(number, f"computation {shown(name)} has no instructions")
        shapes: dict[str, Shape] = {rec[0]: rec[2] for rec in records}
        if len(shapes) != len(records):
            seen: set[str] = set()
            for rec in records:
                if rec[0] in seen:
                    raise self.error(
                        rec[9], f"instruction {shown(rec[0])} is defined twice in computation {shown(name)}"
                    )
                seen.add(rec[0])
        instructions, roots = [], []
        defined = shapes.__contains__
        for rec in records:
            operands, operand_shapes = rec[3], rec[4]
            if not all(map(defined, operands)):
                operand = next(o for o in operands if o not in shapes)
                raise self.error(
                    rec[9], f"operand {shown(operand)} of {shown(rec[0])} is not defined in computation {shown(name)}"
                )
            if operand_shapes is None or None in operand_shapes:
                given = operand_shapes or (None,) * len(operands)
                operand_shapes = tuple(s if s is not None else shapes[o] for s, o in zip(given, operands, strict=True))
                rec = (*rec[:4], operand_shapes, *rec[5:])
            instr = new_instruction(rec)  # a record is an instruction's fields in order
            instructions.append(instr)
            if rec[8]:
                roots.append(instr)
        if len(roots) > 1:
            raise self.error(roots[1].line, f"computation {shown(name)} has more than one ROOT")
        by_name = dict(zip(shapes, instructions, strict=True))
        return Computation(name, self._params(name, instructions), tuple(instructions), is_entry,
                           roots[0] if roots else instructions[-1], by_name, number)  # fmt: skip

    def _params(self, name: str, instructions: list[Instruction]) -> tuple[Instruction, ...]:
        params: dict[int, Instruction] = {}
        for instr in instructions:
            if instr.opcode == "parameter":
                index = int(instr.attributes["parameter_number"])
                if index in params:
                    raise self.error(instr.line, f"parameter({index}) appears twice in computation {shown(name)}")
                params[index] = instr
        return tuple(params[i] for i in sorted(params))

    def _module(self, name: str, attributes: dict[str, str]) -> HloModule:
        comps = self.computations
        if not comps:
            raise self.error(self.last_line or None, f"module {shown(name)} has no computations")
        entries = [c for c in comps.values() if c.is_entry]
        if len(entries) > 1:
            raise self.error(entries[1].line, f"module {shown(name)} has more than one ENTRY computation")
        for comp in comps.values():
            for instr in comp.instructions:
                for callee in instr.called_computations:
                    if callee not in comps:
                        raise self.error(
                            instr.line, f"{shown(instr.name)} calls computation {shown(callee)}, which is not defined"
                        )
        entry = entries[0] if entries else list(comps.values())[-1]
        return HloModule(name, comps, entry, attributes, self.tables, self.source)


def _depth(line: str) -> int:
    return line.count("(") + line.count("{") - line.count(")") - line.count("}")


def _callees(value: str) -> list[str]:
    if "=" in value or "\n" in value:  # an inline computation body, not a reference
        return []
    body = value.strip()
    if body.startswith("{") and body.endswith("}"):
        body = body[1:-1]
    return [v for v in body.split(",") if v.strip()]


def _callee(text: str) -> str:
    name = text.strip().lstrip("%")
    if not _NAME_RE.fullmatch(name):
        raise ParseError(f"expected a computation name, got {text.strip()[:40]!r}")
    return name


def parse_hlo(text: str, source: str = "<hlo>") -> HloModule:
    """Parse HLO module text. Malformed text raises ParseError naming the line and what was expected."""
    if not isinstance(text, str):
        raise ParseError(f"expected HLO text as str, got {type(text).__name__}", source=source)
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return _Parser(source).run(text.split("\n"))


def parse_hlo_file(path: str | Path) -> HloModule:
    """Parse an HLO text file (e.g. an XLA ``*.after_optimizations.txt`` dump), streaming it line by line."""
    source = str(path)
    try:
        with open_text(path, source) as raw:  # opened once: a pipe (rooftop hlo <(zcat dump.gz)) is read whole
            if b"\x00" in raw.peek(8192)[:8192]:
                raise ParseError("not HLO text: the file holds binary data (NUL bytes)", source=source)
            with io.TextIOWrapper(raw, encoding="utf-8") as handle:
                return _Parser(source).run(text_lines(handle, source))
    except UnicodeDecodeError as exc:
        raise ParseError(f"not HLO text: not valid UTF-8 ({exc.reason})", source=source) from None
    except OSError as exc:
        raise ParseError(f"cannot read HLO file: {exc.strerror or exc}", source=source) from None


def parse_instruction(line: str, line_number: int = 1, source: str = "<hlo>") -> Instruction:
    """Parse one instruction line on its own (operand shapes stay None unless the text gives them)."""
    parser = _Parser(source)
    try:
        record = parser._instruction(line, line_number, _FAST_RE.match(line))
    except _Incomplete:
        raise parser.error(line_number, "instruction is not terminated (expected ')' or '}')") from None
    name, opcode, shape, operands, operand_shapes, attributes, metadata, called, is_root, number = record
    if operand_shapes is None:
        operand_shapes = (None,) * len(operands)
    return Instruction(name, opcode, shape, operands, operand_shapes, attributes, metadata, called, is_root, number)
