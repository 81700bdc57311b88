"""Linear attention (gated DeltaNet) and state-space scans (Mamba, Mamba-2) as the custom ops of LLM engines
record them, and the causal depthwise conv1d in front of them, priced by what their registered schema says
each argument is (:data:`SCAN_OPS`, each with its source): families ``scan`` and ``conv1d``.

The FLOPs per token are the model's (model/blocks.py, one rule per physical fact): the gated delta rule
``DELTA_RULE_FLOPS`` (7) per element of each value head's dk x dv state, the selective scan ``SCAN_FLOPS`` (6)
per element of each channel's d_state state, the conv ``2 x taps (+ 4 for SiLU)`` per output element. Bytes:
each input read and each output written once, and each sequence's recurrent state (and conv window) read and
written once per call (a cache of many slots is touched only at the call's sequences: ``2 x sequences x
state row``). What the shapes say:

- conv1d: the weight [D, W] gives the channels and taps; the tokens are x's elements / D (x [D, T] packed with
  offsets [B + 1], [B, D, L], or [B, D] for one decode token); the state row is the state's last dim x D;
- selective scan (Mamba-1): A [D, N] gives channels and state size, u [D, T] (offsets [B + 1]) or [B, D, L]
  the tokens; on the vector unit, as the model prices it;
- gated DeltaNet (vLLM's ``gdn_attention_core``, the block's conv, gating and delta rule in one op): qkv
  [T, 2 H_k d_k + H_v d_v], b [T, H_v], out [T, H_v, d_v]; d_k is in no shape and is taken equal to d_v
  (Qwen3-Next, Qwen3.5 and Kimi Linear: 128 and 128), the conv 4 taps (the model's default, Qwen3-Next's
  ``linear_conv_kernel_dim``); the sequences and tokens come from the step annotation (vLLM's ``execute_...``;
  a T padded to a CUDA-graph size runs the annotation's tokens), else T tokens of one sequence (a lower bound
  on the state traffic). Tokens beyond one a sequence are prefill tokens, computed in chunks of
  ``FLA_CHUNK`` (flash-linear-attention ``chunk_gated_delta_rule``, chunk_size 64): besides the state terms,
  per value head and token, 2 C (3 d_k + 2 d_v) FLOPs of intra-chunk products (K K^T, Q K^T, the
  triangular system's A K and A V, and (Q K^T) V, each C x C x d) and 2 C^2 / 3 of the triangular solve;
  a decode token (one a sequence) runs the recurrence alone (``fused_recurrent``);
- lightning attention decode (MiniMax, SGLang): q [B, H, L, D], the state [B, H, D, E]: ``LIGHTNING_FLOPS``
  (5) per state element, head and token (no model block of this kind yet).

Triton kernels (the conv, fla's chunk and recurrent kernels, the SSD kernels ``_chunk_scan_fwd_kernel``,
``_chunk_state_fwd_kernel``, ``_state_passing_fwd_kernel``, ``_bmm_chunk_fwd_kernel``,
``selective_state_update``) have no torch op of their own: a kernel is attributed to the innermost op with
shapes whose span holds its launch (launches.py), i.e. to the engine's block op that launched it
(``vllm::gdn_attention_core``), and priced there.

Sources (argument order of each schema; studied, not copied): vLLM ``csrc/torch_bindings.cpp`` @ 00256d59
(``selective_scan_fwd``) and its earlier builds (``causal_conv1d_fwd`` / ``causal_conv1d_update``, before the
conv moved to Triton); vLLM ``model_executor/layers/mamba/gdn_linear_attn.py`` @ 0218d050
(``gdn_attention_core``); SGLang ``sgl-kernel`` ``causal_conv1d`` (STABLE_TORCH_LIBRARY_FRAGMENT(sgl_kernel));
TensorRT-LLM ``thop`` ``causal_conv1d`` (TORCH_LIBRARY_FRAGMENT(trtllm)); Dao-AILab/causal-conv1d
``causal_conv1d/cpp_functions.py`` @ 0d2252d1 (``DaoAILab::`` custom ops); fla-org/flash-linear-attention
``fla/ops/gated_delta_rule/chunk.py`` @ bc3b101d (chunk size)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from rooftop.analysis.torch.families import SeqStats
from rooftop.analysis.torch.op import Price, TorchOp, fmt_shape
from rooftop.analysis.torch.sources import VLLM
from rooftop.cost.cost import Cost
from rooftop.cost.op import explicit
from rooftop.dtypes import dtype_bytes
from rooftop.errors import InvalidConfigError
from rooftop.model.blocks import DELTA_RULE_FLOPS, LinearAttentionConfig, SSMConfig, conv_flops_per_element
from rooftop.reason_codes import ReasonCode
from rooftop.reasons import Reason

#: tokens a chunk of flash-linear-attention's chunked gated delta rule (fla chunk.py: chunk_size=64)
FLA_CHUNK = 64
#: taps of a gated DeltaNet conv when no argument gives them (Qwen3-Next's linear_conv_kernel_dim, the default
#: of the model's LinearAttentionConfig)
GDN_CONV_TAPS = 4


@dataclass(frozen=True)
class Conv1d:
    """Which argument of a causal conv1d is what: ``x``, ``weight`` [D, W], ``bias``, ``state`` (conv window
    [.., D, S]), ``offsets`` (cumulative [B + 1]), ``silu`` (a bool argument); ``update``: a decode step
    (x [B, D] or [B, D, L]); ``backward``: reads dout, writes dx and dweight. A separate output (Dao-AILab's
    ``out``) or one written over x moves the same bytes."""

    x: int
    weight: int
    bias: int | None = None
    state: int | None = None
    offsets: int | None = None
    silu: int | None = None
    update: bool = False
    backward: bool = False


@dataclass(frozen=True)
class Scan:
    """A selective scan (Mamba-1): u, delta, A [D, N], B, C, z (gate), the offsets and the state cache."""

    u: int
    delta: int
    a: int
    b: int
    c: int
    z: int | None
    offsets: int | None
    state: int | None


@dataclass(frozen=True)
class DeltaNet:
    """A gated DeltaNet block op: ``qkv`` [T, conv channels], ``beta`` [T, H_v], ``gate`` [T, H_v], ``out``
    [T, H_v, d_v]."""

    qkv: int
    beta: int
    gate: int
    out: int


@dataclass(frozen=True)
class Lightning:
    """Decayed linear attention decode (MiniMax's lightning attention): q, k [B, H, L, D], v [B, H, L, E], the
    past state [B, H, D, E] and the new state written."""

    q: int
    k: int
    v: int
    past: int
    new: int
    out: int


@dataclass(frozen=True)
class Opaque:
    """A block op whose shapes do not give its sizes: why it has no price (its figure: the op)."""

    why: ReasonCode


class ScanOp(NamedTuple):
    spec: Conv1d | Scan | DeltaNet | Lightning | Opaque
    source: str


_FWD = "(x!, weight, bias_?, conv_states!?, query_start_loc?, cache_indices?, has_initial_state?, silu_activation, " \
    "pad_slot_id)"  # fmt: skip
_UPD = "(x!, conv_state!, weight, bias_?, silu_activation, cache_seqlens_?, conv_state_indices?, pad_slot_id)"
_DAO = "Dao-AILab/causal-conv1d cpp_functions.py @ 0d2252d1"

# fmt: off
#: op name -> (which argument is what, source of the schema)
SCAN_OPS: dict[str, ScanOp] = {
    **{f"{ns}::causal_conv1d_fwd": ScanOp(Conv1d(0, 1, bias=2, state=3, offsets=4, silu=7), f"{src}: "
                                          f"causal_conv1d_fwd{_FWD}")
       for ns, src in (("_C", VLLM), ("sgl_kernel", "SGLang sgl-kernel causal_conv1d"),
                       ("trtllm", "TensorRT-LLM thop causal_conv1d"))},
    **{f"{ns}::causal_conv1d_update": ScanOp(Conv1d(0, 2, bias=3, state=1, silu=4, update=True),
                                             f"{src}: causal_conv1d_update{_UPD}")
       for ns, src in (("_C", VLLM), ("sgl_kernel", "SGLang sgl-kernel causal_conv1d"),
                       ("trtllm", "TensorRT-LLM thop causal_conv1d"))},
    "DaoAILab::_causal_conv1d_fwd_cpp": ScanOp(
        Conv1d(0, 1, bias=2, state=4, silu=7),
        _DAO + ": _causal_conv1d_fwd_cpp(x [B, D, L], weight [D, W], bias?, seq_idx?, initial_states? [B, D, W-1], "
        "out!, final_states_out!?, silu_activation)"),
    "DaoAILab::_causal_conv1d_update_cpp": ScanOp(
        Conv1d(0, 2, bias=3, state=1, silu=5, update=True),
        _DAO + ": _causal_conv1d_update_cpp(x, conv_state!, weight, bias?, out!, silu_activation, cache_seqlens?, "
        "conv_state_indices?)"),
    "DaoAILab::_causal_conv1d_bwd_cpp": ScanOp(
        Conv1d(0, 1, bias=2, silu=11, backward=True),
        _DAO + ": _causal_conv1d_bwd_cpp(x, weight, bias?, dout, seq_idx?, initial_states?, dfinal_states?, dx!, "
        "dweight!, dbias!?, dinitial_states!?, silu_activation)"),
    "_C::selective_scan_fwd": ScanOp(
        Scan(u=0, delta=1, a=2, b=3, c=4, z=6, offsets=9, state=12),
        VLLM + " @ 00256d59: selective_scan_fwd(u!, delta!, A!, B!, C!, D_?, z_!?, delta_bias_?, delta_softplus, "
        "query_start_loc?, cache_indices?, has_initial_state?, ssm_states!, ...)"),
    "vllm::gdn_attention_core": ScanOp(
        DeltaNet(qkv=0, beta=1, gate=2, out=3),
        "vLLM model_executor/layers/mamba/gdn_linear_attn.py @ 0218d050: gdn_attention_core(mixed_qkv, b, a, "
        "core_attn_out!, layer_name) (direct_register_custom_op)"),
    "sgl_kernel::lightning_attention_decode": ScanOp(
        Lightning(q=0, k=1, v=2, past=3, new=6, out=5),
        "SGLang sgl-kernel common_extension.cc @ 0063ef14 and csrc/attention/lightning_attention_decode_kernel.cu: "
        "lightning_attention_decode(q, k, v, past_kv, slope, output!, new_kv!)"),
    # block ops whose args hold the projections, not the heads and state sizes: their Triton kernels (SSD's
    # _chunk_scan_fwd_kernel, _chunk_state_fwd_kernel, _state_passing_fwd_kernel, _bmm_chunk_fwd_kernel,
    # selective_state_update, the conv) land on them, unpriced with the reason
    "vllm::mamba_mixer2": ScanOp(
        Opaque(ReasonCode.TORCH_MAMBA2_MIXER_OPAQUE),
        "vLLM model_executor/layers/mamba/mamba_mixer2.py @ bb435dbd: mamba_mixer2(projected_states, output!, "
        "layer_name)"),
    "vllm::gdn_attention": ScanOp(
        Opaque(ReasonCode.TORCH_DELTANET_LAYER_OPAQUE),
        "vLLM qwen3_next.py (earlier builds): gdn_attention(hidden_states, output!, layer_name)"),
}
# fmt: on


def scan_family(entry: ScanOp) -> str:
    return "conv1d" if isinstance(entry.spec, Conv1d) else "scan"


def _count(op: TorchOp, i: int | None) -> int | None:
    shape = op.tensor(i) if i is not None else None
    return int(shape[0]) if shape is not None and len(shape) == 1 and shape[0] >= 1 else None


def _state_row_bytes(op: TorchOp, i: int | None, channels: int) -> float:
    """Bytes of one sequence's row of a state cache [.., channels, S] (0 when the op has none)."""
    shape = op.tensor(i) if i is not None else None
    if not shape or len(shape) < 2:
        return 0.0
    return float(shape[-1]) * channels * dtype_bytes(op.dtype(i)) if i is not None else 0.0  # i set: shape


def _channels_over_tokens(
    op: TorchOp,
    x_at: int,
    w_at: int,
    offsets_at: int | None,
    x_name: str,
    w_name: str,
    w_dims: str,
    one_per_row: bool = False,
) -> tuple[int, int, float, int]:
    """A per-channel operand ``w`` [D, K] over an input ``x`` of D channels: (D, K, tokens, sequences). The
    sequences are x's rows when x is [B, D, L] or a decode update (``one_per_row``), else the offsets' count
    less one, else one."""
    x, w = op.need(x_at, w_at)
    if len(w) != 2:
        raise InvalidConfigError(f"{w_name} {fmt_shape(w)} is not {w_dims}")
    channels, k = w
    tokens = op.elements(x_at) / channels
    if not tokens.is_integer() or channels not in x:
        raise InvalidConfigError(f"{x_name} {fmt_shape(x)} has no dim of {w_name}'s {channels} channels")
    offsets = _count(op, offsets_at)
    seqs = x[0] if one_per_row or len(x) == 3 else offsets - 1 if offsets and offsets > 1 else 1
    return channels, k, tokens, seqs


def conv1d(op: TorchOp, spec: Conv1d) -> Price:
    """A causal depthwise conv over D channels of W taps (module docstring)."""
    channels, taps, tokens, seqs = _channels_over_tokens(op, spec.x, spec.weight, spec.offsets, "input",
                                                         "conv weight", "[D, W]", spec.update)  # fmt: skip
    silu = op.flag(spec.silu) if spec.silu is not None else None
    flops = tokens * channels * conv_flops_per_element(taps, silu is not False)
    state = 2.0 * seqs * _state_row_bytes(op, spec.state, channels)
    weights = sum(op.nbytes(i) for i in (spec.weight, spec.bias) if i is not None and op.tensor(i) is not None)
    act = op.nbytes(spec.x)
    if spec.backward:  # x and dout read, dx written; the weight read and its gradient written
        what = Reason(ReasonCode.TORCH_CONV1D_BACKWARD, (("channels", channels), ("taps", taps), ("tokens", tokens)))
        return Price(explicit(2.0 * flops, 3.0 * act + 2.0 * weights, op.dtype(spec.x), "vector"), what)
    moved = 2.0 * act + weights + state
    what = Reason(ReasonCode.TORCH_CONV1D, (("channels", channels), ("sequences", seqs), ("silu", silu is not False),
                                            ("taps", taps), ("tokens", tokens), ("update", spec.update)))  # fmt: skip
    return Price(explicit(flops, moved, op.dtype(spec.x), "vector"), what)


def selective_scan(op: TorchOp, spec: Scan) -> Price:
    """Mamba-1's selective scan: the model's SCAN_FLOPS x D x N per token (module docstring)."""
    channels, n, tokens, seqs = _channels_over_tokens(op, spec.u, spec.a, spec.offsets, "u", "A", "[D, N]")
    cfg = SSMConfig(d_inner=channels, d_state=n, version=1, dt_rank=1)
    flops = tokens * cfg.scan_flops_per_token
    gated = spec.z is not None and op.tensor(spec.z) is not None
    reads = sum(op.nbytes(i) for i in op.reads() if i != spec.state and op.tensor(i) is not None)
    written = op.nbytes(spec.u) * (2 if gated else 1)  # the output, and its gated copy
    state_row = float(cfg.state_elements) * (dtype_bytes(op.dtype(spec.state)) if spec.state is not None else 4.0)
    moved = reads + written + 2.0 * seqs * state_row
    per_element = cfg.scan_flops_per_token / cfg.state_elements
    figures = (("channels", channels), ("flops", per_element), ("sequences", seqs), ("states", n), ("tokens", tokens))
    what = Reason(ReasonCode.TORCH_SELECTIVE_SCAN, figures)
    return Price(explicit(flops, moved, op.dtype(spec.u), "vector"), what)


def chunk_flops_per_token(dk: int, dv: int, chunk: int = FLA_CHUNK) -> float:
    """Intra-chunk FLOPs of the chunked gated delta rule per token and value head (module docstring)."""
    return 2.0 * chunk * (3 * dk + 2 * dv) + 2.0 * chunk * chunk / 3


def gated_deltanet(op: TorchOp, spec: DeltaNet, stats: SeqStats | None) -> Price:
    """vLLM's gated DeltaNet core: conv, gating and the delta rule of T tokens (module docstring)."""
    qkv, beta, out = op.need(spec.qkv, spec.beta, spec.out)
    if len(qkv) != 2 or len(out) != 3 or not beta:
        raise InvalidConfigError(f"qkv {fmt_shape(qkv)} / out {fmt_shape(out)} are not [T, C] / [T, H_v, d_v]")
    tokens, channels = qkv
    hv, dv = out[1], out[2]
    key_dim, odd = divmod(channels - hv * dv, 2)
    if odd or key_dim < dv or key_dim % dv:
        raise InvalidConfigError(f"{channels} channels are not 2 H_k d_k + {hv} x {dv} with d_k = d_v = {dv}")
    cfg = LinearAttentionConfig(key_dim // dv, hv, dv, dv, GDN_CONV_TAPS)
    annotated = stats is not None and stats.sq <= tokens  # the call holds the whole batch (maybe padded)
    run, seqs = (stats.sq, stats.requests) if stats is not None and annotated else (tokens, 1)
    chunked = max(run - seqs, 0) if annotated else 0
    scan = run * cfg.scan_flops_per_token + chunked * hv * chunk_flops_per_token(cfg.key_head_dim, dv)
    conv = run * channels * conv_flops_per_element(cfg.conv_kernel)
    act, dt = dtype_bytes(op.dtype(spec.qkv)), op.dtype(spec.out)
    state = 2.0 * seqs * (cfg.state_elements * dtype_bytes(dt) + (cfg.conv_kernel - 1) * channels * act)
    # a token's bytes: conv reads qkv and writes its output, the delta rule reads it back and writes out; b, a read
    per_token = (3.0 * op.nbytes(spec.qkv) + op.nbytes(spec.out) + op.nbytes(spec.beta) + op.nbytes(spec.gate)) / tokens
    moved = per_token * run + state
    cost: Cost = explicit(scan, moved, dt, "matrix") + explicit(conv, 0.0, dt, "vector")
    what = Reason(ReasonCode.TORCH_GATED_DELTANET, (("annotated", annotated), ("channels", channels),
                                                    ("chunk", FLA_CHUNK), ("chunked", chunked), ("dv", dv),
                                                    ("flops", DELTA_RULE_FLOPS), ("key_heads", cfg.n_key_heads),
                                                    ("run", run), ("sequences", seqs), ("taps", cfg.conv_kernel),
                                                    ("tokens", tokens), ("value_heads", hv)))  # fmt: skip
    return Price(cost, what, "annotated lengths" if annotated else "")


#: FLOPs of a decayed linear-attention step per token and state element: the decay (1), the k v^T outer
#: product added (2), q read out of the new state (2) (sgl-kernel lightning_attention_decode_kernel.cu:
#: new_kv = exp(-slope) past_kv + k v^T, output = q new_kv)
LIGHTNING_FLOPS = 5.0


def lightning_decode(op: TorchOp, spec: Lightning) -> Price:
    """MiniMax lightning attention decode: LIGHTNING_FLOPS x D x E per head and token; q, k, v and the past
    state read, the new state and the output written."""
    q, state = op.need(spec.q, spec.past)
    if len(q) != 4 or len(state) != 4:
        raise InvalidConfigError(f"q {fmt_shape(q)} / past_kv {fmt_shape(state)} are not [B, H, L, D] / [B, H, D, E]")
    b, h, steps, d = q
    e = state[-1]
    flops = LIGHTNING_FLOPS * b * h * steps * d * e
    moved = sum(op.nbytes(i) for i in op.reads() if op.tensor(i) is not None)  # every argument moved once
    what = Reason(ReasonCode.TORCH_LIGHTNING_DECODE, (("b", b), ("d", d), ("e", e), ("flops", LIGHTNING_FLOPS),
                                                      ("h", h), ("steps", steps)))  # fmt: skip
    return Price(explicit(flops, moved, op.dtype(spec.q), "vector"), what)


def scan_price(op: TorchOp, entry: ScanOp, stats: SeqStats | None = None) -> Price:
    """The Price of a linear-attention, SSM-scan or conv1d op by its schema; a shape its rule cannot read
    gives no Cost and says why."""
    try:
        if isinstance(entry.spec, Conv1d):
            return conv1d(op, entry.spec)
        if isinstance(entry.spec, Scan):
            return selective_scan(op, entry.spec)
        if isinstance(entry.spec, Lightning):
            return lightning_decode(op, entry.spec)
        if isinstance(entry.spec, Opaque):
            return Price(None, Reason(entry.spec.why, (("op", op.name),)))
        return gated_deltanet(op, entry.spec, stats)
    except (InvalidConfigError, IndexError, ValueError, ZeroDivisionError) as exc:
        figures = (("error", str(exc)), ("family", scan_family(entry)), ("op", op.name))
        return Price(None, Reason(ReasonCode.TORCH_RULE_ERROR, figures))
