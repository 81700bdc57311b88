"""Element types: bytes per element and how they name compute precision."""

from __future__ import annotations

from rooftop.errors import UnknownNameError

#: bytes per element of each dtype rooftop knows (HLO spellings included).
DTYPE_BYTES: dict[str, float] = {
    "fp32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "int8": 1.0,
    "int4": 0.5,
    "fp4": 0.5,
    "int32": 4.0,
    "fp64": 8.0,
}

_ALIASES = {
    "f32": "fp32",
    "float32": "fp32",
    "float": "fp32",
    "tf32": "fp32",
    "bfloat16": "bf16",
    "f16": "fp16",
    "float16": "fp16",
    "half": "fp16",
    "f8": "fp8",
    "float8": "fp8",
    "f8e4m3fn": "fp8",
    "f8e5m2": "fp8",
    "e4m3": "fp8",
    "e5m2": "fp8",
    "s8": "int8",
    "u8": "int8",
    "i8": "int8",
    "s4": "int4",
    "u4": "int4",
    "i4": "int4",
    "s32": "int32",
    "u32": "int32",
    "i32": "int32",
    "f64": "fp64",
    "float64": "fp64",
}

#: precision rank used to pick the compute dtype of a mixed-dtype op (the wider one computes).
_RANK = {"int4": 0, "fp4": 0, "int8": 1, "fp8": 1, "bf16": 2, "fp16": 2, "fp32": 3, "int32": 3, "fp64": 4}


def canonical_dtype(name: str) -> str:
    """ "bfloat16" -> "bf16", "s8" -> "int8"; unknown names raise with close matches."""
    key = name.strip().lower()
    key = _ALIASES.get(key, key)
    if key not in DTYPE_BYTES:
        raise UnknownNameError("dtype", name, list(DTYPE_BYTES) + list(_ALIASES))
    return key


def dtype_bytes(name: str) -> float:
    return DTYPE_BYTES[canonical_dtype(name)]


def compute_dtype(*names: str) -> str:
    """The dtype a mixed op computes in: the widest of its inputs (bf16 x int8 -> bf16)."""
    canon = [canonical_dtype(n) for n in names]
    return max(canon, key=lambda d: _RANK[d])
