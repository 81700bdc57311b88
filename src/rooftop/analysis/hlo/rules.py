"""The per-instruction counting rules of HLO analysis: opcode tables, the operands each rule reads, and the
FLOPs of dots, convolutions and fused attention read from an instruction's shapes and attributes through
cost/op.py. :mod:`rooftop.analysis.hlo.pricing` applies them to an instruction; its docstring states the rules."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from rooftop.analysis.hlo.ir import Instruction
from rooftop.analysis.hlo.mesh import CollectiveUse
from rooftop.analysis.hlo.shapes import MAX_INT, Shape
from rooftop.cost.cost import Cost, Gemm
from rooftop.cost.op import ConvDim, convolution, dot_general, fused_attention_flops
from rooftop.dtypes import hlo_dtype
from rooftop.errors import InvalidConfigError, ParseError, shown
from rooftop.reason_codes import ReasonCode
from rooftop.reasons import Note, Reason


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


ZERO_COST = _words("parameter constant get-tuple-element tuple bitcast after-all add-dependency partition-id "
                   "replica-id opt-barrier domain get-dimension-size while call conditional")  # fmt: skip
TRANSCENDENTAL = _words("exponential exponential-minus-one log log-plus-one logistic power sqrt cbrt rsqrt tanh "
                        "sine cosine tan atan2 erf")  # fmt: skip
ELEMENTWISE = _words(
    "add subtract multiply divide maximum minimum negate abs sign floor ceil round-nearest-afz round-nearest-even "
    "remainder and or xor not shift-left shift-right-arithmetic shift-right-logical compare select clamp convert "
    "is-finite real imag complex popcnt count-leading-zeros reduce-precision stochastic-convert"
)
APPLIED = _words("reduce reduce-window map scatter select-and-scatter all-reduce sort")
#: cuDNN convolutions: which of (operand 0, operand 1, result) are the forward (input, kernel, output).
CONV_TARGETS = {"__cudnn$convForward": (0, 1, 2), "__cudnn$convBiasActivationForward": (0, 1, 2),
                "__cudnn$convForwardGraph": (0, 1, 2), "__cudnn$convBackwardInput": (2, 1, 0),
                "__cudnn$convBackwardFilter": (0, 2, 1)}  # fmt: skip
#: an instruction whose name says XLA runs it on one TensorCore of a megacore chip (TPU v4, v5p): XLA names
#: the fusions it keeps on one core ``*.in_megacore_fusion*`` (and ``*in_megacore*`` for other such ops)
ONE_CORE_MARK = "in_megacore"
#: operands the counting rules read, by opcode: (at least, at most, what they are), as XLA's verifier states.
ARITY = {
    "dot": (2, 2, "lhs, rhs"), "convolution": (2, 2, "input, kernel"),
    "select-and-scatter": (3, 3, "operand, source, init_value"), "scatter": (3, None, "operands, indices, updates"),
    "reduce": (2, None, "inputs, init_values"), "reduce-window": (2, None, "inputs, init_values"),
    "dynamic-update-slice": (2, None, "operand, update, start indices"), "dynamic-slice": (1, None, "operand, indices"),
    "slice": (1, 1, "operand"), "bitcast": (1, 1, "operand"), "sort": (1, None, "operands"),
}  # fmt: skip
COUNT_RE = re.compile(r"[0-9]{1,19}")


def cut(name: str, limit: int = 80) -> str:
    """A name from the text for a note, cut to about ``limit`` characters."""
    return name if len(name) <= limit else f"{name[: limit - 20]}...{name[-12:]}"


def check_arity(instr: Instruction) -> None:
    """The operands a counting rule reads are there (ARITY), else a ParseError naming the line."""
    rule = ARITY.get(instr.opcode)
    if rule is None:
        return
    least, most, what = rule
    got = len(instr.operands)
    if got < least or (most is not None and got > most):
        want = f"{least}" if least == most else f"at least {least}"
        raise ParseError(
            f"{instr.opcode} {shown(instr.name)} takes {want} operands ({what}), got {got}", line=instr.line
        )


def drop_workspace(shape: Shape) -> Shape:
    """A cuBLAS / cuDNN result tuple without its trailing u8/s8 scratch workspace."""
    parts = shape.tuple_shapes or ()
    if len(parts) > 1 and parts[-1].dtype in ("u8", "s8") and parts[-1].rank == 1:
        return Shape("tuple", (), None, parts[:-1])
    return shape


def lhs_rhs(instr: Instruction) -> tuple[Shape | None, Shape | None]:
    """The shapes of the first two operands (None when unknown or absent: the FLOP rules then raise)."""
    shapes = instr.operand_shapes
    return (shapes[0] if shapes else None), (shapes[1] if len(shapes) > 1 else None)


def dot_flops(instr: Instruction, lhs: Shape | None, rhs: Shape | None, out: Shape, dims: dict[str, Any]) -> Cost:
    """FLOPs (and the matmul shape) of a dot or GEMM custom-call through cost/op.py ``dot_general``."""
    if lhs is None or rhs is None:
        raise ParseError(f"{instr.opcode} {shown(instr.name)}: operand shapes unknown", line=instr.line)
    batch = (dims["lhs_batch_dims"], dims["rhs_batch_dims"])
    contracting = (dims["lhs_contracting_dims"], dims["rhs_contracting_dims"])
    try:
        lhs_t, rhs_t = (lhs.dims, hlo_dtype(lhs.dtype)), (rhs.dims, hlo_dtype(rhs.dtype))
        return dot_general(lhs_t, rhs_t, batch, contracting, hlo_dtype(out.dtype))
    except InvalidConfigError as exc:
        raise ParseError(
            f"{instr.opcode} {shown(instr.name)}: {str(exc).removeprefix('dot: ')}", line=instr.line
        ) from None


def conv_flops(instr: Instruction, lhs: Shape | None, rhs: Shape | None, out: Shape) -> dict[tuple[str, str], float]:
    """FLOPs of a convolution from dim_labels and window through cost/op.py ``convolution``."""
    labels, window = instr.dim_labels, instr.window or {}
    if labels is None or lhs is None or rhs is None:
        raise ParseError(f"{instr.opcode} {shown(instr.name)}: needs dim_labels and operand shapes", line=instr.line)
    lhs_l, rhs_l, out_l = labels
    for what, names, shape in (("input", lhs_l, lhs), ("kernel", rhs_l, rhs), ("output", out_l, out)):
        if len(names) != shape.rank or shape.is_tuple:
            raise ParseError(
                f"{instr.opcode} {shown(instr.name)}: dim_labels name {len(names)} {what} dims ({names}) but the "
                f"{what} {shown(str(shape))} has {shape.rank}; give one label per dim",
                line=instr.line,
            )
    digits = sorted(c for c in lhs_l if c.isdigit())
    sizes = window.get("size", ())
    if sizes and len(sizes) != len(digits):
        raise ParseError(
            f"{instr.opcode} {shown(instr.name)}: window has {len(sizes)} dims but dim_labels {lhs_l} name "
            f"{len(digits)} spatial dims; give one window entry per spatial dim",
            line=instr.line,
        )
    kernel = [rhs.dims[rhs_l.index(d)] for d in digits]
    if instr.opcode == "convolution" and sizes and list(sizes) != kernel:
        raise ParseError(
            f"{instr.opcode} {shown(instr.name)}: window size {'x'.join(map(str, sizes))} differs from the kernel's "
            f"spatial dims {'x'.join(map(str, kernel))}; the window is the kernel's size",
            line=instr.line,
        )

    def get(key: str, i: int, default: int) -> int:
        return window[key][i] if i < len(window.get(key, ())) else default

    spatial = [
        ConvDim(lhs.dims[lhs_l.index(d)], kernel[i], out.dims[out_l.index(d)], get("stride", i, 1),
                get("pad_low", i, 0), get("lhs_dilate", i, 1), get("rhs_dilate", i, 1))
        for i, d in enumerate(digits)
    ]  # fmt: skip
    dtypes = (hlo_dtype(lhs.dtype), hlo_dtype(rhs.dtype), hlo_dtype(out.dtype))
    batch, features = lhs.dims[lhs_l.index("b")], (lhs.dims[lhs_l.index("f")], out.dims[out_l.index("f")])
    cost = convolution(batch, *features, spatial, dtypes, instr.feature_group_count, instr.batch_group_count)
    return dict(cost.flops_by)


def attention_flops(instr: Instruction, target: str, shapes: list[Shape]) -> tuple[float, Note]:
    """Fused attention FLOPs (module docstring). TransformerEngine states B, H, Sq, Sk, D and the mask in
    backend_config (NVTE mask types 2-5 are causal); a cuDNN fmha call is read from Q, K, V (operands
    0-2) laid out [B, S, H, D], with the mask from cudnn_fmha_backend_config."""
    config = instr.backend_config or {}
    if target.startswith("te_fused_attn"):
        keys = ("input_batch", "attn_heads", "q_max_seqlen", "kv_max_seqlen", "qk_head_dim", "v_head_dim")
        b, h, sq, sk, dqk, dv = (config_count(instr, config, k) for k in keys)
        mask = config.get("mask_type", 0)
        if isinstance(mask, str) and COUNT_RE.fullmatch(mask) is None:  # an enum name, e.g. NVTE_CAUSAL_MASK
            causal = "CAUSAL" in mask.upper()
        else:
            causal = config_count(instr, config, "mask_type") in (2, 3, 4, 5)
    else:
        q, k, v = (shapes + shapes[-1:] * 3)[:3] if shapes else (instr.shape,) * 3
        b, sq, h, dqk = (list(q.dims) + [1] * 4)[:4]
        sk, dv = (k.dims[1] if k.rank > 1 else 1), (v.dims[-1] if v.rank else 1)
        b, sq, h, dqk, sk, dv = (max(x, 0) for x in (b, sq, h, dqk, sk, dv))  # unbounded dims (?) count as 0
        fmha = config.get("cudnn_fmha_backend_config")
        causal = "CAUSAL" in str(fmha.get("mask_type", "") if isinstance(fmha, dict) else "").upper()
    backward = "backward" in target.lower()
    flops = fused_attention_flops(b, h, sq, sk, dqk, dv, causal, backward)
    return flops, Reason.of(ReasonCode.HLO_FUSED_ATTENTION, backward=backward, b=b, h=h, sq=sq, sk=sk, dqk=dqk, dv=dv,
                            causal=causal)  # fmt: skip


def config_count(instr: Instruction, config: dict[str, Any], key: str) -> int:
    """A non-negative integer field of a backend_config (an int or a string of ASCII digits); 0 when absent."""
    value = config.get(key, 0)
    text = str(value) if isinstance(value, (int, str)) and not isinstance(value, bool) else ""
    if COUNT_RE.fullmatch(text) is None or int(text) > MAX_INT:
        raise ParseError(
            f"custom-call {shown(instr.name)}: backend_config {key}={shown(value)} is not a count; expected an "
            'integer in [0, 2**63 - 1], e.g. 2 or "2"',
            line=instr.line,
        )
    return int(text)


@dataclass
class FlopTally:
    """An instruction's (or a computation's) FLOPs by (unit, dtype) as the rules above count them, with
    its transcendentals, collectives, FLOP-unknown custom-calls, notes and matmul shapes."""

    by: dict[tuple[str, str], float] = field(default_factory=dict)
    transcendentals: float = 0.0
    collectives: list[CollectiveUse] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)
    gemms: list[Gemm] = field(default_factory=list)  # the matmuls run once per execution (shape model)

    def add(self, unit: str, hlo_type: str, flops: float) -> None:
        if flops:
            key = (unit, hlo_dtype(hlo_type))
            self.by[key] = self.by.get(key, 0.0) + flops

    def add_dot(self, cost: Cost) -> None:
        self.by.update(cost.flops_by)
        if cost.gemm is not None:
            self.gemms.append(cost.gemm)

    def merge(self, other: FlopTally, times: float = 1.0, everything: bool = True) -> None:
        for key, v in other.by.items():
            self.by[key] = self.by.get(key, 0.0) + times * v
        self.transcendentals += times * other.transcendentals
        if times == 1:
            self.gemms += other.gemms
        if everything:
            self.collectives += other.collectives
            self.unknown += other.unknown
            self.notes += other.notes

    @property
    def flops(self) -> float:
        return sum(self.by.values())
