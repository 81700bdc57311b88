"""Transformer math: parameters, and the per-layer ops of a Workload priced through cost/op.py.

This is the one place a layer's FLOP and byte formulas live (the weights' shapes and the
parameter tree are in params.py, re-exported here; passes.py assembles these ops, with the
embedding, head and loss, into the whole model's passes). Planners (training, serving) and the CLI call:

- ``param_tree(cfg) -> ParamTree`` and ``params_total/params_active/params_matmul_active``.
- ``layer_groups(cfg) -> tuple[LayerGroup, ...]`` (layers.py): runs of identical layers
  (dense vs MoE, global vs sliding-window attention) and how many of each.
- ``layer_costs(cfg, workload, dtypes, group) -> CostTree``: one layer's forward ops, e.g.
  ``layer/attention/q``, ``layer/attention/scores``, ``layer/mlp/down``, ``layer/moe/experts/up``.
- ``op_context(cfg, workload, dtypes)`` and ``leaf``: how an op outside the layers (embedding,
  unembedding, loss: passes.py) is priced and tagged the same way.
- per-token summaries derived from the model's trees (``flops_per_token_train``, ...) are in per_token.py.

Conventions (and sources):

- A matmul of an (M x K) by a (K x N) matrix is 2MKN FLOPs (cost/op.py), so a token costs
  2 FLOPs per weight it multiplies in the forward pass and 4 more in the backward pass (one
  matmul for the input gradient, one for the weight gradient): training = 6N + attention
  (Kaplan et al. 2020 section 2.1; Chinchilla, Hoffmann et al. 2022 appendix F; PaLM,
  Chowdhery et al. 2022 appendix B). The input-embedding lookup is a gather: 0 FLOPs.
- Attention per layer per (query, key) pair: QK^T 2 N H_qk and AV 2 N H_v FLOPs (N heads).
  We count only the pairs a causal mask keeps: a query at position i sees i keys (at most the
  sliding window), so a training sequence of T tokens has T(T+1)/2 pairs, (T+1)/2 per token
  (cost/op.py ``attended_pairs``): what a kernel that skips masked blocks does, and the FlashAttention
  benchmarks' convention (Dao et al. 2022: 4 B T^2 N H / 2 forward FLOPs when causal). PaLM
  appendix B (12 L H Q T per token, forward + backward), Megatron (Narayanan et al. 2021) and
  "How to Scale Your Model" Part 4 (12 B T^2 N H per layer) count the full T per token:
  ``Workload(causal=False)`` gives that count (tests/golden reproduces PaLM's).
- Vector-unit FLOPs (norms, rotary embedding, softmax, activations, residual adds) are
  kept under the "vector" unit with per-element counts from config.py (estimates); they are
  excluded from the per-token "model FLOPs" summaries, as in the 6N convention.
- Bytes: each matmul reads its input and weight and writes its output (cost/op.py);
  attention is priced as one fused (flash-style) kernel whose scores never reach HBM;
  elementwise ops read and write their operands once. The backward pass is priced as twice
  the forward (FLOPs and bytes).
- Multi-head latent attention: naive form (keys/values up-projected) for train and prefill;
  the absorbed form for decode (W_UK applied to the query, attention over the cached latent,
  W_UV after it: DeepSeek-V2, Liu et al. 2024, section 2.1.2), which keeps the matmul FLOPs
  at 2 x params(kv_b) per token and makes the attention FLOPs per pair 2N(R_kv + H_rope) + 2N R_kv.
- Mixture of experts: each token's top_k experts (plus shared ones) run; expert weights read
  per step are those of the expected number of distinct experts touched by uniform routing,
  E(1 - (1 - k/E)^tokens). Capacity-factor padding and token dropping are not modelled.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from rooftop.cost.cost import Cost, CostTree
from rooftop.cost.op import Operand, attended_pairs, elementwise, explicit, matmul
from rooftop.dtypes import dtype_bytes
from rooftop.model.blocks import MLAConfig, conv_flops_per_element
from rooftop.model.config import TransformerConfig
from rooftop.model.eager import kv_expand_bytes, unfused_act, unfused_norm, unfused_rope
from rooftop.model.layers import LayerGroup, layer_groups
from rooftop.model.memory import kv_cache_elements_per_token
from rooftop.model.params import (
    Part,
    attention_parts,
    dim_sizes,
    mixer_block,
    mlp_parts,
)
from rooftop.model.tags import OP_TAGS
from rooftop.model.workload import Dtypes, Workload

SOFTMAX_FLOPS_PER_ELEMENT = 5.0  # max, subtract, exp, sum, divide
ROPE_FLOPS_PER_ELEMENT = 3.0  # x cos + rotate(x) sin
ROUTING_FLOPS_PER_EXPERT = 5.0  # softmax/sigmoid over the router logits, top-k selection
MLA_ABSORBED_PHASES = ("decode",)


def leaf(name: str, cost: Cost, expert: bool = False, attention_block: bool = False) -> CostTree:
    """A leaf of the cost tree with its tag (OP_TAGS; ``expert`` for a routed expert's ops,
    ``attention_block`` for the ops of a layer's attention block)."""
    tag = OP_TAGS[name]
    if expert or attention_block:
        tag = replace(tag, expert=expert, attention_block=attention_block)
    return CostTree(name, cost, (), tag)


# ---------------------------------------------------------------- ops of one layer


@dataclass(frozen=True)
class OpContext:
    cfg: TransformerConfig
    w: Workload
    dt: Dtypes
    sizes: dict[str, int]
    rows: tuple[str, ...]

    @property
    def tokens(self) -> float:
        return float(self.w.tokens)

    def proj(self, part: Part, rows: tuple[str, ...] | None = None, touched: float = 1.0) -> Cost:
        rows = self.rows if rows is None else rows
        lhs = Operand((*rows, *part.dims_in), self.dt.activations, "activations")
        rhs = Operand((*part.dims_in, *part.dims_out), self.dt.weights, "weights")
        out = Operand((*rows, *part.dims_out), self.dt.activations, "activations")
        cost = matmul(lhs, rhs, out, self.sizes, self.dt.matmul or None)
        if part.bias:
            cost += explicit(out.elements(self.sizes), 0.0, self.dt.activations, "vector")
        if touched != 1.0:
            cost += explicit(0.0, rhs.nbytes(self.sizes) * (touched - 1.0), self.dt.weights, kind="weights")
        return cost

    def einsum(self, lhs: tuple[str, ...], rhs: tuple[str, ...], out: tuple[str, ...]) -> Cost:
        """A weight matmul that is not a plain projection (e.g. per-head weights)."""
        a, w = self.dt.activations, self.dt.weights
        act = "activations"
        return matmul(
            Operand(lhs, a, act), Operand(rhs, w, "weights"), Operand(out, a, act), self.sizes, self.dt.matmul or None
        )

    def norm(self, width: float) -> Cost:
        return self.vec(self.tokens * width, self.cfg.norm_kind.flops_per_element)

    def unfused(self, name: str, elements: float, extra_bytes_per_element: float) -> list[tuple[str, Cost]]:
        """The op ``name``: the eager kernels' bytes beyond a fused elementwise op's over ``elements``
        (model/eager.py), as a one-op list under ``fused=False`` when there are any (else empty)."""
        if self.w.fused or not extra_bytes_per_element:
            return []
        nbytes = elements * extra_bytes_per_element
        return [(name, explicit(0.0, nbytes, self.dt.activations, "vector", "activations"))]

    def unfused_norm(self, name: str) -> list[tuple[str, Cost]]:
        extra = unfused_norm(self.cfg, dtype_bytes(self.dt.activations))[1]
        return self.unfused(f"{name}_unfused", self.tokens * self.cfg.d_model, extra)

    def vec(self, elements: float, flops_per_element: float, inputs: int = 1) -> Cost:
        return elementwise(elements, self.dt.activations, flops_per_element, inputs, kind="activations")


def _residual(c: OpContext) -> Cost:
    """Residual add (2 reads, 1 write per element); with dropout also the dropout's read,
    write and one-byte mask on the branch output."""
    elements = c.tokens * c.cfg.d_model
    add = c.vec(elements, 1.0, 2)
    if not c.w.dropout:
        return add
    dropout = elements * (2 * dtype_bytes(c.dt.activations) + 1)
    return add + explicit(elements, dropout, c.dt.activations, "vector", "activations")


def _attention_core(
    c: OpContext, window: int, qk: float, v: float, k_bytes: float, v_bytes: float, kv_kind: str = "kv_cache"
) -> list[tuple[str, Cost]]:
    """scores (QK^T), softmax, values (AV) as one fused kernel: FLOPs over the attended
    pairs; bytes = Q read, K and V read once (``k_bytes``/``v_bytes``, of ``kv_kind``: the
    cache when serving, activations in training), O written."""
    w, n = c.w, c.cfg.n_heads
    pairs = w.batch * attended_pairs(w.seq_len, w.kv_len, window, w.causal)
    act = dtype_bytes(c.dt.activations)
    # Unfused (flash=False, e.g. Megatron-LM 2021): QK^T writes the scores, the masked softmax
    # reads them and writes the probabilities, AV reads the probabilities: 4 bytes-per-element
    # passes over the N x pairs matrix (Dao et al. 2022, section 2.2, standard attention).
    matrix = 0.0 if w.flash else pairs * n * act
    dropped = matrix * (2 + 1 / act) if w.dropout else 0.0  # read, write, 1-byte mask
    kv_kind = "activations" if c.w.phase == "train" else kv_kind
    dt = c.dt.activations
    k_read, v_read = explicit(0.0, k_bytes, dt, kind=kv_kind), explicit(0.0, v_bytes, dt, kind=kv_kind)
    return [
        ("scores", explicit(2.0 * pairs * n * qk, c.tokens * n * qk * act + matrix, dt, kind="activations") + k_read),
        ("softmax", explicit(SOFTMAX_FLOPS_PER_ELEMENT * pairs * n, 2 * matrix + dropped, dt, "vector", "activations")),
        ("values", explicit(2.0 * pairs * n * v, c.tokens * n * v * act + matrix, dt, kind="activations") + v_read),
    ]


def _kv_read_tokens(w: Workload, window: int) -> float:
    return float(w.batch * (min(w.kv_len, window + w.seq_len - 1) if window else w.kv_len))


def _kv_dtype(c: OpContext) -> str:
    return c.dt.activations if c.w.phase == "train" else c.dt.kv_cache


def _kv_write(c: OpContext) -> list[tuple[str, Cost]]:
    if c.w.phase == "train":
        return []
    nbytes = c.tokens * kv_cache_elements_per_token(c.cfg) * dtype_bytes(c.dt.kv_cache)
    return [("kv_cache_write", explicit(0.0, nbytes, c.dt.kv_cache, kind="kv_cache"))]


def _gqa_ops(c: OpContext, p: dict[str, Part], window: int) -> list[tuple[str, Cost]]:
    cfg = c.cfg
    ops: list[tuple[str, Cost]] = [(name, c.proj(p[name])) for name in ("q", "q_gate", "k", "v") if name in p]
    ops += [
        (name, c.norm(cfg.head_dim * (cfg.n_heads if name == "q_norm" else cfg.n_kv_heads)))
        for name in ("q_norm", "k_norm")
        if name in p
    ]
    if cfg.positions == "rotary":
        rotated = c.tokens * (cfg.n_heads + cfg.n_kv_heads) * cfg.head_dim
        ops.append(("rope", c.vec(rotated, ROPE_FLOPS_PER_ELEMENT)))
        ops += c.unfused("rope_unfused", rotated, unfused_rope(dtype_bytes(c.dt.activations))[1])
    kv = _kv_read_tokens(c.w, window) * cfg.n_kv_heads * cfg.head_dim * dtype_bytes(_kv_dtype(c))
    if c.w.expand_kv and c.w.phase == "train":  # K, V copied to every query head (model/eager.kv_expand_bytes)
        expand = c.tokens * kv_expand_bytes(cfg, dtype_bytes(c.dt.activations))
        ops += [("kv_expand", explicit(0.0, expand, c.dt.activations, "vector", "activations"))] if expand else []
    return ops + _kv_write(c) + _attention_core(c, window, cfg.head_dim, cfg.head_dim, kv, kv)


def _mla_ops(c: OpContext, p: dict[str, Part], m: MLAConfig) -> list[tuple[str, Cost]]:
    n = c.cfg.n_heads
    q = ["q_a", "q_a_norm", "q_b"] if m.q_lora_rank else ["q"]
    ops = [(x, c.norm(m.q_lora_rank) if x == "q_a_norm" else c.proj(p[x])) for x in q]
    ops += [("kv_a", c.proj(p["kv_a"])), ("kv_a_norm", c.norm(m.kv_lora_rank))]
    rope = c.vec(c.tokens * (n + 1) * m.qk_rope_head_dim, ROPE_FLOPS_PER_ELEMENT)
    cached = _kv_read_tokens(c.w, 0) * dtype_bytes(_kv_dtype(c))
    if c.w.phase in MLA_ABSORBED_PHASES:  # attention over the latent: one shared "key head" of R_kv + H_rope
        # W_UK (key half of kv_b) applied to the query, W_UV (value half) after attention:
        # together 2 N R_kv (H_nope + H_v) FLOPs per token = 2 x params(kv_b).
        ops += [
            ("q_absorb", c.einsum(("B", "T", "N", "H_nope"), ("N", "H_nope", "R_kv"), ("B", "T", "N", "R_kv"))),
            ("rope", rope),
            *_kv_write(c),
        ]
        ops += _attention_core(
            c,
            0,
            m.kv_lora_rank + m.qk_rope_head_dim,
            m.kv_lora_rank,
            cached * (m.kv_lora_rank + m.qk_rope_head_dim),
            0.0,
        )
        return [*ops, ("v_up", c.einsum(("B", "T", "N", "R_kv"), ("N", "R_kv", "H_v"), ("B", "T", "N", "H_v")))]
    kv_rows = ("B", "S") if c.w.phase == "prefill" else c.rows  # prefill up-projects a cached prefix too
    ops += [("kv_b", c.proj(p["kv_b"], kv_rows)), ("rope", rope), *_kv_write(c)]
    act = dtype_bytes(c.dt.activations)
    k_bytes = _kv_read_tokens(c.w, 0) * n * (m.qk_nope_head_dim + m.qk_rope_head_dim) * act
    v_bytes = _kv_read_tokens(c.w, 0) * n * m.v_head_dim * act
    # the naive form attends over up-projected keys and values (activations), not over the cache
    qk = m.qk_nope_head_dim + m.qk_rope_head_dim
    return ops + _attention_core(c, 0, qk, m.v_head_dim, k_bytes, v_bytes, "activations")


def _state_io(c: OpContext, elements: float) -> float:
    """Bytes of reading and writing each sequence's recurrent state once per call (a decode step,
    a prefill chunk, a training sequence); fused kernels keep it on chip in between."""
    return 2.0 * c.w.batch * elements * dtype_bytes(_kv_dtype(c))


def _state_kind(c: OpContext) -> str:
    return "activations" if c.w.phase == "train" else "kv_cache"


def _conv(c: OpContext, channels: int, kernel: int) -> Cost:
    """The causal depthwise conv (2 FLOPs a tap, then SiLU: 4) over ``channels``; it reads and writes
    each sequence's last kernel - 1 inputs per channel (its share of the constant state)."""
    state = _state_io(c, (kernel - 1) * channels)
    return c.vec(c.tokens * channels, conv_flops_per_element(kernel)) + explicit(0.0, state, kind=_state_kind(c))


def _linear_ops(c: OpContext, p: dict[str, Part]) -> list[tuple[str, Cost]]:
    """Gated DeltaNet: projections, the depthwise conv (2 FLOPs a tap, then SiLU), and the gated
    delta rule per token and value head over its dk x dv state S: decay S, read k^T S, write
    beta (v - k^T S) k^T, read q^T S: 7 dk dv FLOPs (Yang et al. 2024, eq. 10; computed in chunks
    as matmuls, so on the matrix unit), whatever the context length."""
    la = c.cfg.linear
    if la is None:
        return []
    act = dtype_bytes(c.dt.activations)
    flops = c.tokens * la.scan_flops_per_token
    qkv_o = c.tokens * (la.conv_dim + la.value_dim) * act
    state = _state_io(c, la.state_elements)
    return [
        ("in_qkvz", c.proj(p["in_qkvz"])),
        ("in_ba", c.proj(p["in_ba"])),
        ("conv", _conv(c, la.conv_dim, la.conv_kernel)),
        (
            "scan",
            explicit(flops, qkv_o, c.dt.activations, kind="activations") + explicit(0.0, state, kind=_state_kind(c)),
        ),
        ("out_norm", c.vec(c.tokens * la.value_dim, c.cfg.norm_kind.flops_per_element + 5.0, 2)),
    ]


def _ssm_ops(c: OpContext, p: dict[str, Part]) -> list[tuple[str, Cost]]:
    """Mamba / Mamba-2: projections, the depthwise conv (2 FLOPs a tap, then SiLU), and the
    selective scan per token and channel over its d_state state: decay, input B x, output C h:
    6 d_state FLOPs (Gu & Dao 2023, section 3.3; Mamba-2's SSD computes it in chunks as matmuls,
    Dao & Gu 2024 section 6, so on the matrix unit; Mamba's scan is elementwise, on the vector unit)."""
    m = c.cfg.ssm
    if m is None:
        return []
    act = dtype_bytes(c.dt.activations)
    unit = "matrix" if m.version == 2 else "vector"
    flops = c.tokens * m.scan_flops_per_token
    xbc_y = c.tokens * (m.conv_dim + m.d_inner) * act
    ops = [
        ("in_proj", c.proj(p["in_proj"])),
        ("conv", _conv(c, m.conv_dim, m.conv_kernel)),
    ]
    if m.version == 1:
        ops += [("x_proj", c.proj(p["x_proj"])), ("dt_proj", c.proj(p["dt_proj"]))]
    scan = explicit(flops, xbc_y, c.dt.activations, unit, "activations")
    ops.append(("scan", scan + explicit(0.0, _state_io(c, m.state_elements), kind=_state_kind(c))))
    if m.version == 2 and m.gated_norm:
        ops.append(("out_norm", c.vec(c.tokens * m.d_inner, c.cfg.norm_kind.flops_per_element + 5.0, 2)))
    elif m.version == 2:  # the output gated by SiLU(z) alone (SiLU 4 FLOPs, the product 1)
        ops.append(("ssm_gate", c.vec(c.tokens * m.d_inner, 5.0, 2)))
    return ops


def _attention(c: OpContext, window: int, mixer: str = "global") -> CostTree:
    """The mixer block of one layer: attention (GQA or MLA), gated DeltaNet, a state-space layer, or
    attention and a state-space layer side by side ("hybrid"), each from its pre-norm to its residual add."""
    p = attention_parts(c.cfg, mixer)
    ops = [("norm", c.norm(c.cfg.d_model)), *c.unfused_norm("norm")]
    if mixer == "linear":
        ops += _linear_ops(c, p)
    elif mixer == "ssm":
        ops += _ssm_ops(c, p)
    else:
        ops += _gqa_ops(c, p, window) if c.cfg.mla is None else _mla_ops(c, p, c.cfg.mla)
    if mixer == "hybrid":  # the state-space layer beside the attention, its output added to the attention's
        ops += [*_ssm_ops(c, p), ("ssm_o", c.proj(p["ssm_o"])), ("combine", c.vec(c.tokens * c.cfg.d_model, 1.0, 2))]
    ops += [("o", c.proj(p["o"])), ("residual", _residual(c))]
    if "post_norm" in p:
        ops += [("post_norm", c.norm(c.cfg.d_model)), *c.unfused_norm("post_norm")]
    return CostTree.node(mixer_block(mixer), (leaf(n, cost, attention_block=True) for n, cost in ops))


def _ffn(
    c: OpContext, p: dict[str, Part], prefix: str, rows: tuple[str, ...], elems: float, touched: float
) -> list[tuple[str, Cost]]:
    """gate/up, activation, down of one (possibly expert) MLP over ``elems`` hidden elements."""
    names = [n for n in ("gate", "up") if prefix + n in p]
    ops = [(n, c.proj(p[prefix + n], rows, touched)) for n in names]
    mk = c.cfg.mlp_kind
    ops.append(("act", c.vec(elems, mk.flops_per_element, 2 if mk.gated else 1)))
    ops += c.unfused("act_unfused", elems, unfused_act(c.cfg, dtype_bytes(c.dt.activations))[1])
    return [*ops, ("down", c.proj(p[prefix + "down"], rows, touched))]


def _mlp(c: OpContext, moe: bool) -> CostTree:
    cfg, p = c.cfg, mlp_parts(c.cfg, moe)
    kids: list[CostTree] = [leaf(n, x) for n, x in [("norm", c.norm(cfg.d_model)), *c.unfused_norm("norm")]]
    kids = kids if "norm" in p else []
    if moe and cfg.moe:
        e = cfg.moe
        assign = {**c.sizes, "A": int(c.tokens * e.top_k)}
        touched = e.touched(c.tokens)
        cx = OpContext(cfg, c.w, c.dt, assign, ("A",))
        kids += [
            leaf("router", c.proj(p["router"])),
            leaf("routing", c.vec(c.tokens * e.n_experts, ROUTING_FLOPS_PER_EXPERT)),
            CostTree.node(
                "experts",
                (
                    leaf(n, x, expert=True)
                    for n, x in _ffn(cx, p, "experts/", ("A",), assign["A"] * e.d_ff_expert, touched)
                ),
            ),
        ]
        if e.n_shared_experts:
            sh = {**c.sizes, "A": int(c.tokens * e.n_shared_experts)}
            cs = OpContext(cfg, c.w, c.dt, sh, ("A",))
            kids.append(
                CostTree.node(
                    "shared",
                    (
                        leaf(n, x)
                        for n, x in _ffn(cs, p, "shared/", ("A",), sh["A"] * e.d_ff_shared, e.n_shared_experts)
                    ),
                )
            )
            if "shared_gate" in p:  # sigmoid(x w) scales the shared experts' output
                gate = c.proj(p["shared_gate"]) + c.vec(c.tokens * (1 + cfg.d_model), 4.0)
                kids.append(leaf("shared_gate", gate))
        kids.append(leaf("combine", c.vec(c.tokens * (e.top_k + e.n_shared_experts) * cfg.d_model, 2.0)))
    else:
        kids += [leaf(n, x) for n, x in _ffn(c, p, "", c.rows, c.tokens * cfg.d_ff, 1.0)]
    kids.append(leaf("residual", _residual(c)))
    if "post_norm" in p:
        kids += [leaf(n, x) for n, x in [("post_norm", c.norm(cfg.d_model)), *c.unfused_norm("post_norm")]]
    return CostTree.node("moe" if moe else "mlp", kids)


def op_context(cfg: TransformerConfig, workload: Workload, dtypes: Dtypes) -> OpContext:
    sizes = {**dim_sizes(cfg), "B": workload.batch, "T": workload.seq_len, "S": workload.kv_len}
    return OpContext(cfg, workload, dtypes, sizes, ("B", "T"))


def layer_costs(
    cfg: TransformerConfig, workload: Workload, dtypes: Dtypes | None = None, group: LayerGroup | None = None
) -> CostTree:
    """Forward ops of ONE layer of ``group`` (default: the first group) for ``workload``:
    ``layer/attention/{norm, q, k, v, rope, kv_cache_write, scores, softmax, values, o,
    residual}`` (MLA: q_a, q_a_norm, q_b, kv_a, kv_a_norm, kv_b; decode: q_absorb, v_up) and
    ``layer/mlp/{norm, gate, up, act, down, residual}`` or ``layer/moe/{norm, router, routing,
    experts/{gate, up, act, down}, shared/{...}, combine, residual}``. Every leaf is a Cost
    for all ``workload.batch x workload.seq_len`` tokens; multiply by ``group.count`` for the
    group (model_costs does). For a train workload these are the forward ops only: the
    backward pass is 2 x these, and a remat policy re-runs the leaves whose ``OP_CATEGORY``
    is in its ``recompute`` set (model_costs builds both). Planners shard by dividing the
    workload (batch, seq_len) or by pricing the same leaves with sharded dims."""
    c = op_context(cfg, workload, dtypes or Dtypes())
    g = group or layer_groups(cfg)[0]
    blocks = [_attention(c, g.window, g.mixer)] if g.mixer != "none" else []
    return CostTree.node("layer", blocks + ([_mlp(c, g.moe)] if g.mlp else []))
