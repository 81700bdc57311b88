"""The HLO data model: ``Instruction``, ``Computation``, ``HloModule``, and the decoders of raw attribute
values (quoted strings, ``{k=v ...}`` fields, JSON / MLIR backend configs).

:mod:`rooftop.analysis.hlo.parse` builds these from text; the attribute values stay raw strings and the ``Instruction``
properties decode them on demand (XLA documentation: operation semantics, shapes and layout).
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, TypeVar

from rooftop.analysis.hlo.groups import device_groups, replica_groups
from rooftop.analysis.hlo.shapes import MAX_INT, Shape, int_list, parse_int, parse_window
from rooftop.errors import ParseError, UnknownNameError, shown

STRUCT_RE = re.compile(r'"(?:[^"\\]|\\.)*"|"|[(){}\[\],]')
#: key=value or key="value"; a key starts at a word boundary (linear time on long runs of word characters).
_META_RE = re.compile(r'(?<![\w.\-])([\w.\-]++)=(?:"([^"\\]*+(?:\\.[^"\\]*+)*+)"|([^\s}]*+))')
_NAT_RE = re.compile(r"[0-9]{1,19}")
#: one ``{2}: (0, {})`` entry of output_to_operand_aliasing: output index -> (operand number, operand index)
_ALIAS_RE = re.compile(r"\{([0-9,\s]*)\}\s*:\s*\(\s*([0-9]{1,19})\s*,\s*\{([0-9,\s]*)\}\s*(?:,[^)]*)?\)")
#: dim_labels: input (b, f and spatial digits), kernel (i, o and the same digits), output (b, f, digits).
_LABELS_RE = re.compile(r"\s*([0-9a-z]+)_([0-9a-z]+)->([0-9a-z]+)\s*")
T = TypeVar("T")
intern = sys.intern


@dataclass(frozen=True, slots=True, eq=False)
class Instruction:
    """One HLO instruction. ``attributes`` holds the raw text of every attribute after the operand list
    (except ``metadata``, decoded into ``metadata``); the parser adds ``literal`` for constants (payloads up
    to 1024 characters, else ``literal_chars``) and ``parameter_number`` for parameters. Treat the dicts as
    read-only. ``operand_shapes`` come from the text or, in the short form, from the defining instructions
    of the same computation (None when unknown)."""

    name: str
    opcode: str
    shape: Shape
    operands: tuple[str, ...]
    operand_shapes: tuple[Shape | None, ...]
    attributes: dict[str, str]
    metadata: Mapping[str, str]
    called_computations: tuple[str, ...]
    is_root: bool
    line: int

    def _decode(self, key: str, decoder: Callable[[str], T]) -> T | None:
        raw = self.attributes.get(key)
        if raw is None:
            return None
        try:
            return decoder(raw)
        except (ParseError, ValueError, ArithmeticError, LookupError, TypeError, RecursionError) as exc:
            raise ParseError(f"{shown(self.name)}: bad {key}={shown(raw)}: {exc}", line=self.line) from None

    @property
    def fusion_kind(self) -> str | None:
        """kLoop / kInput / kOutput / kCustom for fusions, else None."""
        return self.attributes.get("kind") if self.opcode == "fusion" else None

    @property
    def replica_groups(self) -> list[list[int]] | None:
        """Device ids per group (explicit, iota and mesh forms expanded); [] for ``{}``; None if absent."""
        return self._decode("replica_groups", replica_groups)

    @property
    def source_target_pairs(self) -> list[tuple[int, int]] | None:
        pairs = self._decode("source_target_pairs", device_groups)
        if pairs is not None and any(len(p) != 2 for p in pairs):
            raise ParseError(f"{shown(self.name)}: source_target_pairs must be pairs", line=self.line)
        return None if pairs is None else [(p[0], p[1]) for p in pairs]

    @property
    def dot_dims(self) -> dict[str, tuple[int, ...]]:
        """lhs/rhs batch and contracting dims of a dot, or of a cuBLAS gemm custom-call's backend_config."""
        keys = ("lhs_batch_dims", "lhs_contracting_dims", "rhs_batch_dims", "rhs_contracting_dims")
        if not any(k in self.attributes for k in keys) and self.opcode == "custom-call":
            numbers = _dig(self.backend_config, "gemm_backend_config", "dot_dimension_numbers")
            if isinstance(numbers, dict):
                return {k: _ints(numbers.get(k.replace("_dims", "_dimensions"), []), self) for k in keys}
        return {k: self._decode(k, int_list) or () for k in keys}

    @property
    def dimensions(self) -> tuple[int, ...] | None:
        return self._decode("dimensions", int_list)

    @property
    def channel_id(self) -> int | None:
        return self._decode("channel_id", one_int)

    @property
    def tuple_index(self) -> int | None:
        return self._decode("index", one_int)

    @property
    def parameter_number(self) -> int | None:
        return self._decode("parameter_number", one_int)

    @property
    def feature_group_count(self) -> int:
        return self._decode("feature_group_count", one_int) or 1

    @property
    def batch_group_count(self) -> int:
        return self._decode("batch_group_count", one_int) or 1

    @property
    def window(self) -> dict[str, tuple[int, ...]] | None:
        """Convolution / reduce-window window: size, stride, pad_low, pad_high, lhs_dilate, rhs_dilate."""
        return self._decode("window", parse_window)

    @property
    def dim_labels(self) -> tuple[str, str, str] | None:
        """``b01f_01io->b01f`` -> ("b01f", "01io", "b01f"): lhs, kernel and output dim labels. The input and
        output name b and f once each, the kernel i and o once each, and all three the same spatial dims
        0, 1, ... once each (XLA's ConvolutionDimensionNumbers)."""
        raw = self.attributes.get("dim_labels")
        if raw is None:
            return None
        match = _LABELS_RE.fullmatch(raw)
        problem = "expected three label groups" if match is None else _labels_problem(match.groups())
        if match is None or problem:
            raise ParseError(
                f"{shown(self.name)}: bad dim_labels={shown(raw)}: {problem}; expected e.g. b01f_01io->b01f "
                "(input b, f and spatial dims 0..n-1; kernel i, o and the same spatial dims; output b, f and the same)",
                line=self.line,
            )
        return match.group(1), match.group(2), match.group(3)

    @property
    def custom_call_target(self) -> str | None:
        return self._decode("custom_call_target", unquote)

    @property
    def frontend_attributes(self) -> dict[str, str]:
        return self._decode("frontend_attributes", decode_fields) or {}

    @property
    def output_operand_aliasing(self) -> dict[tuple[int, ...], tuple[int, tuple[int, ...]]]:
        """``output_to_operand_aliasing={{2}: (0, {})}`` as {(2,): (0, ())}: the result leaves that live in the
        buffer of an operand (leaf); {} when absent."""
        return self._decode("output_to_operand_aliasing", _aliasing) or {}

    @property
    def backend_config(self) -> dict[str, Any] | None:
        """backend_config as a dict: JSON (quoted or not), or MLIR ``{k = v : type, ...}``; else None."""
        raw = self.attributes.get("backend_config")
        return None if raw is None else decode_config(raw)

    @property
    def trip_count(self) -> int | None:
        """A while loop's ``known_trip_count`` from backend_config; None when XLA did not record one."""
        if self.opcode != "while":
            return None
        count = _dig(self.backend_config, "known_trip_count", "n")
        return _nat(str(count)) if isinstance(count, (int, str)) and not isinstance(count, bool) else None

    @property
    def async_kind(self) -> str | None:
        """ "start" / "update" / "done" for async halves (all-gather-start, async-done, copy-start, ...)."""
        try:
            return _ASYNC_KINDS[self.opcode]
        except KeyError:
            return _async_kind(self.opcode)

    @property
    def op_name(self) -> str | None:
        return self.metadata.get("op_name")


#: the async half each opcode seen so far is (read per instruction by every pass: a lookup, not a scan)
_ASYNC_KINDS: dict[str, str | None] = {}


def _async_kind(opcode: str) -> str | None:
    found = next((k for k in ("start", "update", "done") if opcode.endswith("-" + k)), None)
    if len(_ASYNC_KINDS) < 4096:  # opcodes are a small vocabulary; a bound all the same
        _ASYNC_KINDS[opcode] = found
    return found


_INSTRUCTION_SETTERS = tuple(getattr(Instruction, f.name).__set__ for f in fields(Instruction))
(_SET_NAME, _SET_OPCODE, _SET_SHAPE, _SET_OPERANDS, _SET_OPERAND_SHAPES, _SET_ATTRIBUTES, _SET_METADATA, _SET_CALLED,
 _SET_ROOT, _SET_LINE) = _INSTRUCTION_SETTERS  # fmt: skip


def new_instruction(values: tuple[Any, ...]) -> Instruction:
    """Instruction(*values) without the frozen dataclass's per-field object.__setattr__ (2x faster)."""
    name, opcode, shape, operands, operand_shapes, attributes, metadata, called, is_root, line = values
    instr = object.__new__(Instruction)
    _SET_NAME(instr, name)
    _SET_OPCODE(instr, opcode)
    _SET_SHAPE(instr, shape)
    _SET_OPERANDS(instr, operands)
    _SET_OPERAND_SHAPES(instr, operand_shapes)
    _SET_ATTRIBUTES(instr, attributes)
    _SET_METADATA(instr, metadata)
    _SET_CALLED(instr, called)
    _SET_ROOT(instr, is_root)
    _SET_LINE(instr, line)
    return instr


@dataclass(frozen=True, slots=True, eq=False)
class Computation:
    """A named list of instructions; ``params`` are its parameter instructions ordered by number."""

    name: str
    params: tuple[Instruction, ...]
    instructions: tuple[Instruction, ...]
    is_entry: bool
    root: Instruction
    by_name: dict[str, Instruction] = field(repr=False, default_factory=dict)
    line: int = 0

    def instruction(self, name: str) -> Instruction:
        """The instruction called ``name`` (a leading % is ignored)."""
        found = self.by_name.get(name.lstrip("%"))
        if found is None:
            raise UnknownNameError(f"instruction in computation {self.name}", name, self.by_name)
        return found

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lstrip("%") in self.by_name

    def __iter__(self) -> Iterator[Instruction]:
        return iter(self.instructions)

    def __len__(self) -> int:
        return len(self.instructions)


@dataclass(frozen=True, slots=True, eq=False)
class HloModule:
    """A parsed module: computations in text order, the entry, header attributes (raw) and the
    source-location tables (``tables["StackFrames"][1] == "{file_location_id=1 parent_frame_id=1}"``)."""

    name: str
    computations: dict[str, Computation]
    entry: Computation
    attributes: dict[str, str]
    tables: dict[str, dict[int, str]] = field(default_factory=dict)
    source: str = "<hlo>"

    def computation(self, name: str) -> Computation:
        found = self.computations.get(name.lstrip("%"))
        if found is None:
            raise UnknownNameError("computation", name, self.computations)
        return found

    def instructions(self) -> Iterator[tuple[Computation, Instruction]]:
        """Every (computation, instruction) pair in text order."""
        for comp in self.computations.values():
            for instr in comp.instructions:
                yield comp, instr

    def num_instructions(self) -> int:
        return sum(len(c.instructions) for c in self.computations.values())

    def callees(self, instr: Instruction) -> tuple[Computation, ...]:
        return tuple(self.computations[name] for name in instr.called_computations)

    def base_opcode(self, instr: Instruction) -> str:
        """The operation an async half stands for: all-gather for all-gather-start, the wrapped root's
        opcode for async-start/async-done (e.g. reduce-scatter); otherwise the opcode itself."""
        kind = instr.async_kind
        if kind is None:
            return instr.opcode
        base = instr.opcode[: -len(kind) - 1]
        if base == "async" and instr.called_computations:
            return self.computations[instr.called_computations[0]].root.opcode
        return base

    def async_pairs(self, computation: Computation | None = None) -> list[tuple[Instruction, Instruction]]:
        """(start, done) pairs, following done -> update* -> start through operand 0."""
        comps = [computation] if computation is not None else list(self.computations.values())
        pairs = []
        for comp in comps:
            for instr in comp.instructions:
                if instr.async_kind != "done" or not instr.operands:
                    continue
                start = comp.by_name.get(instr.operands[0])
                for _ in range(len(comp.instructions)):  # a chain of updates is at most every instruction
                    if start is None or start.async_kind != "update" or not start.operands:
                        break
                    start = comp.by_name.get(start.operands[0])
                if start is not None and start.async_kind == "start":
                    pairs.append((start, instr))
        return pairs

    def source_location(self, instr: Instruction) -> tuple[str, int] | None:
        """(file, line) of an instruction from its metadata, following stack_frame_id through the tables."""
        meta = instr.metadata
        line = _nat(meta.get("source_line"))
        if "source_file" in meta and line is not None:
            return meta["source_file"], line
        frame = self.tables.get("StackFrames", {}).get(_nat(meta.get("stack_frame_id")) or 0)
        loc_id = _nat(decode_fields(frame).get("file_location_id")) if frame else None
        loc = self.tables.get("FileLocations", {}).get(loc_id or 0)
        fields = decode_fields(loc) if loc else {}
        name = self.tables.get("FileNames", {}).get(_nat(fields.get("file_name_id")) or 0)
        line = _nat(fields.get("line"))
        return (unquote(name), line) if name is not None and line is not None else None


# --- value decoders ----------------------------------------------------------------------------------


def unquote(text: str) -> str:
    """``"a\\"b"`` -> ``a"b``; text without surrounding quotes is returned stripped."""
    text = text.strip()
    if len(text) >= 2 and text[0] == '"' and text[-1] == '"':
        text = text[1:-1]
        if "\\" in text:
            text = _unescape(text)
    return text


def _dig(value: Any, *keys: str) -> Any:
    """value[k1][k2]... through nested dicts; None where a level is missing or not a dict."""
    for key in keys:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def _nat(text: str | None) -> int | None:
    """A non-negative integer from ASCII digits (at most 2**63 - 1), else None."""
    if not text or _NAT_RE.fullmatch(text) is None:
        return None
    value = int(text)
    return value if value <= MAX_INT else None


def one_int(text: str) -> int:
    """An optionally negative integer in ASCII digits, its magnitude at most 2**63 - 1."""
    body = text.strip()
    return -parse_int(body[1:], "integer") if body.startswith("-") else parse_int(body, "integer")


def _ints(values: Any, instr: Instruction) -> tuple[int, ...]:
    if not isinstance(values, list) or not all(
        not isinstance(v, bool) and isinstance(v, (int, str)) and _NAT_RE.fullmatch(str(v)) for v in values
    ):
        raise ParseError(
            f"{shown(instr.name)}: expected a list of dim numbers in backend_config, got {shown(values)}",
            line=instr.line,
        )
    return tuple(int(v) for v in values)


def _aliasing(text: str) -> dict[tuple[int, ...], tuple[int, tuple[int, ...]]]:
    body = text.strip()
    if not (body.startswith("{") and body.endswith("}")):
        raise ValueError("expected {{output index}: (operand, {operand index}), ...}")
    entries = split_top(body[1:-1]) if body[1:-1].strip() else []
    out = {}
    for entry in entries:
        match = _ALIAS_RE.fullmatch(entry.strip())
        if match is None:
            raise ValueError(f"expected an entry like {{0}}: (1, {{}}), got {shown(entry.strip())}")
        out[int_list(match.group(1))] = (int(match.group(2)), int_list(match.group(3)))
    return out


def _labels_problem(groups: tuple[str, ...]) -> str:
    """What is wrong with (input, kernel, output) dim labels, or "" when they are consistent."""
    spatial = []
    for labels, letters in zip(groups, ("bf", "io", "bf"), strict=True):
        for letter in letters:
            if labels.count(letter) != 1:
                return f"{shown(labels)} must name {letter!r} once"
        rest = [c for c in labels if c not in letters]
        if any(not c.isdigit() for c in rest) or len(set(rest)) != len(rest):
            return f"{shown(labels)} may hold only {letters[0]!r}, {letters[1]!r} and distinct spatial digits"
        spatial.append(sorted(rest))
    if spatial[0] != spatial[1] or spatial[0] != spatial[2]:
        return "the input, kernel and output name different spatial dims"
    if spatial[0] != [str(i) for i in range(len(spatial[0]))]:
        return "spatial dims must be 0, 1, ... in some order"
    return ""


class LazyFields(Mapping[str, str]):
    """The ``{k=v ...}`` fields of ``text`` as a read-only mapping, decoded (:func:`decode_fields`) when first
    read: an instruction's metadata, which most passes never look at."""

    __slots__ = ("_fields", "_text")
    _fields: dict[str, str] | None

    def __init__(self, text: str) -> None:
        self._text, self._fields = text, None

    def _decoded(self) -> dict[str, str]:
        if self._fields is None:
            self._fields = decode_fields(self._text)
        return self._fields

    def __getitem__(self, key: str) -> str:
        return self._decoded()[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self._decoded().get(key, default)

    def __contains__(self, key: object) -> bool:
        return key in self._decoded()

    def __iter__(self) -> Iterator[str]:
        return iter(self._decoded())

    def __len__(self) -> int:
        return len(self._decoded())

    def __repr__(self) -> str:
        return repr(self._decoded())


def decode_fields(text: str) -> dict[str, str]:
    """``{op_name="a b" stack_frame_id=3}`` or ``{k="v",k2="w"}`` -> {key: unquoted value}."""
    return {intern(k): (_unescape(q) if "\\" in q else q) or r for k, q, r in _META_RE.findall(text)}


def _unescape(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text)


def split_top(text: str) -> list[str]:
    """Split at commas outside brackets, braces, parentheses and strings."""
    parts, depth, start = [], 0, 0
    for match in STRUCT_RE.finditer(text):
        token = match.group()
        if token in "({[":
            depth += 1
        elif token in ")}]":
            depth -= 1
        elif token == "," and depth == 0:
            parts.append(text[start : match.start()])
            start = match.end()
    parts.append(text[start:])
    return parts


def _mlir_value(text: str) -> Any:
    value = text.rsplit(" : ", 1)[0].strip() if " : " in text else text.strip()
    if value in ("true", "false"):
        return value == "true"
    for kind in (int, float):
        try:
            return kind(value)
        except ValueError:
            pass
    return unquote(value)


def decode_config(raw: str) -> dict[str, Any] | None:
    """A backend_config value as a dict: JSON (possibly as a quoted string) or the MLIR attribute
    dictionary form ``{attn_heads = 16 : i64, is_training = true}``; None for anything else."""
    text = raw.strip()
    if text.startswith('"'):
        text = unquote(text)
    if not text.startswith("{"):
        return None
    try:
        value = json.loads(text)
        return value if isinstance(value, dict) else None
    except (ValueError, RecursionError):
        pass
    out: dict[str, Any] = {}
    for item in split_top(text.strip()[1:-1]):
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            return None
        out[unquote(key)] = _mlir_value(value)
    return out
