"""Shapes and layouts of XLA HLO text, and the parser for shape strings.

Grammar (as XLA prints it, see the XLA documentation "Shapes and layout" and "Tiled layout"):

    shape   := array | tuple
    tuple   := "(" [ [comment] shape ("," [comment] shape)* ] ")"      comment = /*index=5*/
    array   := dtype "[" [dim ("," dim)*] "]" [ "{" layout "}" ]
    dim     := INT | "<=" INT (dynamic, bounded) | "?" (unbounded, stored as -1)
    layout  := [INT ("," INT)*] [":" item*]       minor_to_major, then T(..)(..) tiles, S(n) memory space, ...

Byte counts are floats in bytes (SI base unit); sub-byte types count fractional bytes (s4 = 0.5).
Also the readers of small integer attributes: integer lists (``{1,2}``) and ``window={...}``.
Device lists (replica groups, iota and mesh forms) are in :mod:`rooftop.analysis.hlo.groups`.

Bounds, as XLA's ShapeUtil::ValidateShape and window checks state them: integers are ASCII digits and at
most ``MAX_INT`` = 2**63 - 1 (XLA's int64); an array holds at most ``MAX_INT`` elements, also once padded
to its tiles; window sizes, strides and dilations are at least 1.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from rooftop.errors import InvalidConfigError, ParseError, shown

#: bytes per element of every HLO primitive type (sub-byte types are fractional).
_BYTES_BY_TYPE = {
    0.125: "s1 u1",
    0.25: "s2 u2",
    0.5: "s4 u4 f4e2m1fn",
    1.0: "pred s8 u8 f8e5m2 f8e4m3 f8e4m3fn f8e4m3b11fnuz f8e5m2fnuz f8e4m3fnuz f8e3m4 f8e8m0fnu",
    2.0: "bf16 f16 s16 u16",
    4.0: "f32 s32 u32",
    8.0: "f64 s64 u64 c64",
    16.0: "c128",
    0.0: "token opaque",
}
ELEMENT_BYTES: dict[str, float] = {name: size for size, names in _BYTES_BY_TYPE.items() for name in names.split()}

#: dtype name used for tuple shapes.
TUPLE = "tuple"
_MAX_TUPLE_DEPTH = 64
#: the largest integer HLO text holds (dims, ids, counts are int64 in XLA), and the most elements of an array.
MAX_INT = 2**63 - 1
_ASCII_INT_RE = re.compile(r"[0-9]{1,19}")

_ARRAY_RE = re.compile(r"([a-z][a-z0-9]*)\[([^\]]*)\](\{[^{}]*\})?")
_LAYOUT_ITEM_RE = re.compile(r"\s*([A-Z#*]*)\(([^()]*)\)")
_PAREN_RE = re.compile(r"[()]")


@dataclass(frozen=True, slots=True)
class Layout:
    """Physical layout: dims in minor-to-major order, tiles (first applies to the shape), memory space."""

    minor_to_major: tuple[int, ...]
    tiles: tuple[tuple[int, ...], ...] = ()
    memory_space: int = 0

    def __str__(self) -> str:
        text = ",".join(map(str, self.minor_to_major))
        extra = "".join("(" + ",".join("*" if t < 0 else str(t) for t in tile) + ")" for tile in self.tiles)
        extra = ("T" + extra) if extra else ""
        if self.memory_space:
            extra += f"S({self.memory_space})"
        return "{" + text + (":" + extra if extra else "") + "}"


@dataclass(frozen=True, slots=True)
class Shape:
    """An HLO array shape (dtype, dims, layout) or a tuple of shapes (dtype "tuple", tuple_shapes set).

    ``dynamic_dims`` lists the indices of dims printed as ``<=N`` (N is the bound kept in ``dims``)."""

    dtype: str
    dims: tuple[int, ...] = ()
    layout: Layout | None = None
    tuple_shapes: tuple[Shape, ...] | None = None
    dynamic_dims: tuple[int, ...] = ()

    #: the element counts, worked out once (a module's instructions share one Shape per text and read them
    #: many times): num_elements and padded_elements, set by __post_init__
    _elements: int = field(default=0, init=False, repr=False, compare=False)
    _padded: int = field(default=0, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.tuple_shapes is not None:
            leaves = self.leaves()
            object.__setattr__(self, "_elements", sum(leaf._elements for leaf in leaves))
            object.__setattr__(self, "_padded", sum(leaf._padded for leaf in leaves))
            return
        if self.dtype not in ELEMENT_BYTES:
            raise InvalidConfigError(f"unknown HLO element type {shown(self.dtype)}; known: {', '.join(ELEMENT_BYTES)}")
        if any(d < -1 or d > MAX_INT for d in self.dims):
            raise InvalidConfigError(f"shape {shown(str(self))} has a dim outside [0, 2**63 - 1] (or ? for unbounded)")
        if self.layout is not None and self.layout.minor_to_major:
            if sorted(self.layout.minor_to_major) != list(range(len(self.dims))):
                raise InvalidConfigError(
                    f"layout minor_to_major {shown(self.layout.minor_to_major)} is not a permutation of the "
                    f"{len(self.dims)} dims of {self.dtype}{shown(list(self.dims))}"
                )
        elements = math.prod(max(d, 0) for d in self.dims)
        padded = self._padded_count() if self.layout is not None else elements
        if elements > MAX_INT or padded > MAX_INT:
            raise InvalidConfigError(
                f"shape {shown(str(self))} holds more than 2**63 - 1 elements (with tile padding), XLA's limit "
                "for one array; dims multiply to the element count"
            )
        object.__setattr__(self, "_elements", elements)
        object.__setattr__(self, "_padded", padded)

    @property
    def is_tuple(self) -> bool:
        return self.tuple_shapes is not None

    @property
    def rank(self) -> int:
        return len(self.dims)

    @property
    def element_bytes(self) -> float:
        """Bytes per element; 0.0 for tuples, token and opaque."""
        return ELEMENT_BYTES.get(self.dtype, 0.0)

    @property
    def num_elements(self) -> int:
        """Product of the dims (unbounded ``?`` dims count as 0); tuples: the sum over their leaves."""
        return self._elements

    @property
    def logical_bytes(self) -> float:
        """num_elements * element_bytes, summed over tuple leaves."""
        return sum(leaf.num_elements * leaf.element_bytes for leaf in self.leaves())

    @property
    def padded_dims(self) -> tuple[int, ...]:
        """Dims after rounding the tiled dims up to multiples of the first tile (minor-most dims first)."""
        layout = self.layout
        if layout is None or not layout.tiles or self.tuple_shapes is not None:
            return self.dims
        dims = list(self.dims)
        order = layout.minor_to_major or tuple(range(len(dims) - 1, -1, -1))
        tile = layout.tiles[0]
        for k in range(1, min(len(tile), len(dims)) + 1):
            size, dim = tile[-k], order[k - 1]
            if size > 0 and dims[dim] > 0:
                dims[dim] = -(-dims[dim] // size) * size
        return tuple(dims)

    @property
    def padded_elements(self) -> int:
        """Elements in memory with tile padding. A tile of higher rank than the array treats the missing
        major dims as size 1, padded up to the tile (``f32[]{:T(128)}`` holds 128 elements)."""
        return self._padded

    def _padded_count(self) -> int:
        """padded_elements of an array shape, worked out."""
        count = math.prod(max(d, 0) for d in self.padded_dims)
        if self.layout is not None and self.layout.tiles and count:
            tile = self.layout.tiles[0]
            count *= math.prod(max(t, 1) for t in tile[: max(len(tile) - len(self.dims), 0)])
        return count

    @property
    def padded_bytes(self) -> float:
        """Bytes in memory including the padding of the first tile, summed over tuple leaves."""
        return sum(leaf.padded_elements * leaf.element_bytes for leaf in self.leaves())

    def leaves(self) -> tuple[Shape, ...]:
        """The array shapes of a (nested) tuple in order; an array shape is its own single leaf."""
        if self.tuple_shapes is None:
            return (self,)
        out: list[Shape] = []
        stack: list[Shape] = [self]
        while stack:
            shape = stack.pop()
            if shape.tuple_shapes is None:
                out.append(shape)
            else:
                stack.extend(reversed(shape.tuple_shapes))
        return tuple(out)

    def __str__(self) -> str:
        if self.tuple_shapes is not None:
            return "(" + ", ".join(str(s) for s in self.tuple_shapes) + ")"
        dims = ",".join(
            ("<=" if i in self.dynamic_dims else "") + ("?" if d < 0 else str(d)) for i, d in enumerate(self.dims)
        )
        return f"{self.dtype}[{dims}]" + (str(self.layout) if self.layout is not None else "")


def parse_int(text: str, what: str, lo: int = 0, hi: int = MAX_INT) -> int:
    """A non-negative decimal integer in ASCII digits read from ``text``, within [lo, hi] (by default
    [0, 2**63 - 1], XLA's int64); ParseError names ``what``, the value and the rule otherwise."""
    text = text.strip()
    if _ASCII_INT_RE.fullmatch(text) is None:
        top = "2**63 - 1" if hi == MAX_INT else str(hi)
        raise ParseError(f"expected an integer (ASCII digits, at most {top}) in {what}, got {shown(text)}")
    value = int(text)
    if not lo <= value <= hi:
        top = "2**63 - 1" if hi == MAX_INT else str(hi)
        raise ParseError(f"{what} {shown(text)} is out of range: expected an integer in [{lo}, {top}]")
    return value


def _signed(text: str, what: str) -> int:
    text = text.strip()
    return -parse_int(text[1:], what) if text.startswith("-") else parse_int(text, what)


def _window_ints(text: str, what: str) -> tuple[int, ...]:
    """``3x3`` -> (3, 3): sizes, strides and dilations of a window, each at least 1."""
    return tuple(parse_int(v, what, lo=1) for v in text.split("x"))


def parse_layout(body: str) -> Layout:
    """Parse the inside of a layout's braces, e.g. ``2,1,0:T(8,128)(2,1)S(1)``."""
    order_text, _, rest = body.partition(":")
    order = tuple(parse_int(t, "layout") for t in order_text.split(",")) if order_text.strip() else ()
    tiles: list[tuple[int, ...]] = []
    memory_space = 0
    pos, letter = 0, ""
    while pos < len(rest):
        match = _LAYOUT_ITEM_RE.match(rest, pos)
        if match is None:
            if rest[pos:].strip():
                raise ParseError(
                    f"expected a layout item like T(8,128) or S(1) in {shown(body)}, got {shown(rest[pos:])}"
                )
            break
        letter = match.group(1) or letter
        args = match.group(2)
        if letter == "T":
            tiles.append(tuple(-1 if a.strip() == "*" else parse_int(a, "tile") for a in args.split(",") if a.strip()))
        elif letter == "S":
            memory_space = parse_int(args, "memory space")
        pos = match.end()
    return Layout(order, tuple(tiles), memory_space)


def _dims(text: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    if not text:
        return (), ()
    dims: list[int] = []
    dynamic: list[int] = []
    for i, part in enumerate(text.split(",")):
        part = part.strip()
        if part.startswith("<="):
            dynamic.append(i)
            part = part[2:]
        dims.append(-1 if part == "?" else parse_int(part, "shape dims"))
    return tuple(dims), tuple(dynamic)


def _array(match: re.Match[str]) -> Shape:
    dtype, dims_text, layout_text = match.groups()
    if dtype not in ELEMENT_BYTES:
        raise ParseError(f"unknown element type {shown(dtype)} in shape {shown(match.group(0))}")
    dims, dynamic = _dims(dims_text)
    layout = parse_layout(layout_text[1:-1]) if layout_text else None
    try:
        return Shape(dtype, dims, layout, None, dynamic)
    except InvalidConfigError as exc:
        raise ParseError(str(exc)) from None


def strip_comments(text: str) -> str:
    """``text`` without its /*...*/ comments, in one pass (an unclosed /* keeps the rest as it is)."""
    parts, pos = [], 0
    while True:
        start = text.find("/*", pos)
        end = text.find("*/", start + 2) if start >= 0 else -1
        if end < 0:
            parts.append(text[pos:])
            return "".join(parts)
        parts.append(text[pos:start])
        pos = end + 2


def tuple_end(text: str, pos: int) -> int:
    """Index just past the ``)`` matching the ``(`` at ``text[pos]``; -1 if it is not closed."""
    depth = 0
    for match in _PAREN_RE.finditer(text, pos):
        depth += 1 if match.group() == "(" else -1
        if depth == 0:
            return match.end()
    return -1


def _skip(text: str, pos: int) -> int:
    """Skip blanks and /*...*/ comments."""
    while True:
        while pos < len(text) and text[pos] in " \t":
            pos += 1
        if not text.startswith("/*", pos):
            return pos
        end = text.find("*/", pos + 2)
        if end < 0:
            raise ParseError(f"unterminated /* comment in shape {shown(text)}")
        pos = end + 2


def _finish(text: str, pos: int, shape: Shape) -> Shape:
    if text[pos:].strip():
        raise ParseError(f"unexpected text {shown(text[pos:])} after tuple shape")
    return shape


def _parse_tuple(text: str) -> Shape:
    """Parse a whole tuple shape text (starts with '(') without recursion."""
    stack: list[list[Shape]] = []
    pos = 0
    while True:
        pos = _skip(text, pos)
        char = text[pos : pos + 1]
        if char == "(":
            if len(stack) >= _MAX_TUPLE_DEPTH:
                raise ParseError(f"tuple shape nested deeper than {_MAX_TUPLE_DEPTH} levels")
            stack.append([])
            pos += 1
            continue
        if char == ")" and stack and not stack[-1]:
            item = Shape(TUPLE, (), None, ())
            stack.pop()
            pos += 1
            if not stack:
                return _finish(text, pos, item)
        else:
            match = _ARRAY_RE.match(text, pos)
            if match is None or not stack:
                raise ParseError(
                    f"expected a shape like f32[2,3]{{1,0}} at {shown(text[pos : pos + 30])} in {shown(text)}"
                )
            item, pos = _array(match), match.end()
        while True:  # attach item, then close as many tuples as the text closes
            stack[-1].append(item)
            pos = _skip(text, pos)
            char = text[pos : pos + 1]
            if char == ",":
                pos += 1
                break
            if char != ")":
                raise ParseError(f"expected ',' or ')' in tuple shape {shown(text)}, got {shown(text[pos : pos + 20])}")
            pos += 1
            item = Shape(TUPLE, (), None, tuple(stack.pop()))
            if not stack:
                return _finish(text, pos, item)


class ShapeReader:
    """Parses shapes at a position in a line, caching each distinct shape text (HLO repeats shapes a lot)."""

    __slots__ = ("cache",)

    def __init__(self) -> None:
        self.cache: dict[str, Shape] = {}

    def read(self, text: str, pos: int) -> tuple[Shape, int]:
        """The shape starting at ``text[pos]`` and the index just after it."""
        if text.startswith("(", pos):
            end = tuple_end(text, pos)
            if end < 0:
                raise ParseError(f"unclosed '(' in tuple shape {text[pos : pos + 60]!r}")
        else:
            match = _ARRAY_RE.match(text, pos)
            if match is None:
                raise ParseError(f"expected a shape like f32[2,3]{{1,0}}, got {text[pos : pos + 40]!r}")
            end = match.end()
        key = text[pos:end]
        shape = self.cache.get(key)
        if shape is None:
            shape = self.parse(key)
        return shape, end

    def parse(self, text: str) -> Shape:
        """Parse one whole shape text, e.g. ``(f32[2]{0}, s32[])`` or ``bf16[8,128]{1,0:T(8,128)}``."""
        shape = self.cache.get(text)
        if shape is not None:
            return shape
        key = text.strip()
        shape = self.cache.get(key)
        if shape is not None:
            self.cache[text] = shape
            return shape
        if "/*" in key and not key.startswith("("):
            key = strip_comments(key).strip()
        if key.startswith("("):
            shape = _parse_tuple(key)
        else:
            match = _ARRAY_RE.fullmatch(key)
            if match is None:
                raise ParseError(f"expected a shape like f32[2,3]{{1,0}}, got {key[:60]!r}")
            shape = _array(match)
        self.cache[key] = self.cache[text] = shape
        return shape


def parse_shape(text: str) -> Shape:
    """Parse one HLO shape string: ``f32[3,5]{1,0:T(2,2)}``, ``(f32[2]{0}, s32[])``, ``token[]``."""
    return ShapeReader().parse(text)


def parse_window(text: str) -> dict[str, tuple[int, ...]]:
    """``{size=3x3 stride=2x2 pad=0_1x0_1 lhs_dilate=1x1 rhs_dilate=1x1}`` -> size, stride, pad_low,
    pad_high, lhs_dilate, rhs_dilate (defaults 1 / 0 per spatial dim when absent). Sizes, strides and
    dilations are at least 1, pads any integer (XLA's window checks)."""
    fields: dict[str, str] = {}
    for item in text.strip().strip("{}").split():
        key, eq, value = item.partition("=")
        if not eq:
            raise ParseError(f"expected key=value in window {shown(text)}, got {shown(item)}")
        fields[key] = value
    size = _window_ints(fields["size"], "window size") if fields.get("size") else ()
    rank = len(size)
    out: dict[str, tuple[int, ...]] = {"size": size}
    for key in ("stride", "lhs_dilate", "rhs_dilate"):
        out[key] = _window_ints(fields[key], f"window {key}") if key in fields else (1,) * rank
    pads = [p.split("_") for p in fields["pad"].split("x")] if "pad" in fields else [["0", "0"]] * rank
    if any(len(p) != 2 for p in pads):
        raise ParseError(f"expected pad=low_high per dim in window {shown(text)}")
    out["pad_low"] = tuple(_signed(p[0], "window pad") for p in pads)
    out["pad_high"] = tuple(_signed(p[1], "window pad") for p in pads)
    if any(len(v) != rank for v in out.values()):
        raise ParseError(f"window {shown(text)} gives different numbers of spatial dims per field")
    return out


def int_list(text: str, what: str = "integer list", lo: int = 0, hi: int = MAX_INT) -> tuple[int, ...]:
    """``{1,2}`` / ``1,2`` / ``{}`` -> a tuple of ints in [lo, hi]; anything else raises ParseError."""
    body = text.strip()
    if body.startswith("{") and body.endswith("}"):
        body = body[1:-1]
    return tuple(parse_int(t, what, lo, hi) for t in body.split(",")) if body.strip() else ()
