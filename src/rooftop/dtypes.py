"""Element types: bytes per element, how they name compute precision, and their spellings in HLO,
PyTorch profiles and NCCL (the one table of each; analysis/ reads them here)."""

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

#: HLO element type (XLA's PrimitiveType, as HLO text spells it) -> the dtype whose rate prices it: types
#: without a rate of their own compute as the nearest class (pred as int8, s16 and s64 as int32, c64 as fp32);
#: other f8 types are fp8 and anything else fp32 (``hlo_dtype``)
HLO_DTYPES: dict[str, str] = {
    "f32": "fp32", "bf16": "bf16", "f16": "fp16", "f64": "fp64", "c64": "fp32", "c128": "fp64", "f4e2m1fn": "fp4",
    "f8e4m3fn": "fp8", "f8e5m2": "fp8",
    **dict.fromkeys(("s8", "u8", "pred"), "int8"),
    **dict.fromkeys(("s4", "u4", "s2", "u2", "s1", "u1"), "int4"),
    **dict.fromkeys(("s16", "u16", "s32", "u32", "s64", "u64"), "int32"),
}  # fmt: skip
#: ``Input type`` of a tensor argument in a PyTorch profile (the C++ type names) -> dtype.
TORCH_DTYPES: dict[str, str] = {
    "float": "fp32", "double": "fp64", "c10::Half": "fp16", "c10::BFloat16": "bf16", "c10::Float8_e4m3fn": "fp8",
    "c10::Float8_e5m2": "fp8", "c10::Float8_e4m3fnuz": "fp8", "c10::Float8_e5m2fnuz": "fp8", "int": "int32",
    "long int": "int32", "short int": "int32", "signed char": "int8", "unsigned char": "int8", "bool": "int8",
    "c10::Float4_e2m1fn_x2": "fp4",
}  # fmt: skip
#: ``Input type`` spellings whose stored element packs several values: values per recorded element.
#: PyTorch's ``float4_e2m1fn_x2`` holds "two elements packed into one byte", the e2m1 FP4 of the OCP MX spec
#: v1.0 section 5.3.3 (PyTorch c10/util/Float4_e2m1fn_x2.h; element size 1): a recorded shape counts bytes,
#: each holding two fp4 values of DTYPE_BYTES["fp4"].
TORCH_PACKED: dict[str, int] = {"c10::Float4_e2m1fn_x2": 2}
#: NCCL kernel ``dtype`` in a PyTorch profile (c10 ScalarType names) -> dtype.
NCCL_DTYPES: dict[str, str] = {
    "Float": "fp32", "Double": "fp64", "Half": "fp16", "BFloat16": "bf16", "Float8_e4m3fn": "fp8",
    "Float8_e5m2": "fp8", "Int": "int32", "Long": "int32", "Char": "int8", "Byte": "int8", "Bool": "int8",
}  # fmt: skip

#: the HLO spellings of exactly a dtype's width, accepted wherever a dtype is named (``canonical_dtype``)
_HLO_NAMES = ("f32", "f16", "f64", "f8e4m3fn", "f8e5m2", "s8", "u8", "s4", "u4", "s32", "u32")

_ALIASES = {
    **{name: HLO_DTYPES[name] for name in _HLO_NAMES},
    "float32": "fp32",
    "float": "fp32",
    "tf32": "fp32",
    "bfloat16": "bf16",
    "float16": "fp16",
    "half": "fp16",
    "f8": "fp8",
    "float8": "fp8",
    "e4m3": "fp8",
    "e5m2": "fp8",
    "i8": "int8",
    "i4": "int4",
    "i32": "int32",
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


def hlo_dtype(hlo_type: str) -> str:
    """The dtype an HLO element type computes as (``HLO_DTYPES``; other f8 types -> fp8, the rest fp32)."""
    return HLO_DTYPES.get(hlo_type, "fp8" if hlo_type.startswith("f8") else "fp32")


def dtype_bytes(name: str) -> float:
    return DTYPE_BYTES[canonical_dtype(name)]


def compute_dtype(*names: str) -> str:
    """The dtype a mixed op computes in: the widest of its inputs (bf16 x int8 -> bf16)."""
    canon = [canonical_dtype(n) for n in names]
    return max(canon, key=lambda d: _RANK[d])
