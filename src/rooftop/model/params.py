"""What a transformer's weights are: its layers' parts and the parameter tree (what it stores
beyond them, KV cache and training state, is model/memory.py; what it computes, transformer.py,
which prices the same weights, described once here as ``Part``s, through cost/op.py).

- ``attention_parts(cfg)``, ``mlp_parts(cfg, moe)``: every weight and norm of a layer with
  its named dims (``dim_sizes``); ``param_tree(cfg) -> ParamTree``: parameters total, active
  per token and multiplied in matmuls (the N of 6N), as a tree: embedding, layers by group
  (attention q/k/v/o or MLA's q_a/q_b/kv_a/kv_b/o, norms; MLP gate/up/down, or router,
  experts, shared experts), final norm, unembedding. ``params_total``, ``params_active``,
  ``params_matmul_active``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace

from rooftop.cost.cost import OpTag
from rooftop.model.config import TransformerConfig
from rooftop.model.layers import layer_groups
from rooftop.model.tags import OP_TAGS

# ---------------------------------------------------------------- weights


@dataclass(frozen=True)
class Part:
    """One parametric piece of a layer: a weight applied as ``x[..., *dims_in] @
    W[*dims_in, *dims_out]`` (a norm has no dims_in: a scale over dims_out), with an
    optional bias over dims_out, ``copies`` instances of which ``active`` run per token."""

    name: str
    dims_in: tuple[str, ...]
    dims_out: tuple[str, ...]
    bias: bool = False
    copies: int = 1
    active: float = 1.0

    @property
    def is_norm(self) -> bool:
        return not self.dims_in

    def params(self, sizes: dict[str, int]) -> float:
        out = math.prod(sizes[d] for d in self.dims_out)
        return float(math.prod(sizes[d] for d in self.dims_in) * out + (out if self.bias else 0))


def dim_sizes(cfg: TransformerConfig) -> dict[str, int]:
    """Sizes of the named dims (docs/concepts.md glossary; R_* and H_* for MLA, F_e for experts)."""
    s = {
        "D": cfg.d_model,
        "F": cfg.d_ff,
        "N": cfg.n_heads,
        "K": cfg.n_kv_heads,
        "H": cfg.head_dim,
        "G": cfg.n_heads // cfg.n_kv_heads,
        "V": cfg.vocab_size,
        "P": cfg.max_seq_len,
    }
    if cfg.moe:
        s |= {"E": cfg.moe.n_experts, "F_e": cfg.moe.d_ff_expert, "F_s": cfg.moe.d_ff_shared, "ONE": 1}
    if cfg.linear:
        la = cfg.linear
        s |= {
            "C_qkvz": 2 * la.key_dim + 2 * la.value_dim,  # q, k, v and the output gate z
            "N_ba": 2 * la.n_value_heads,  # beta (write strength) and alpha (decay) per value head
            "C_lconv": la.conv_dim,
            "W_lconv": la.conv_kernel,
            "H_lv": la.value_head_dim,
            "V_lin": la.value_dim,
            "N_lv": la.n_value_heads,
            "H_lk": la.key_head_dim,
        }
    if cfg.ssm:
        sm = cfg.ssm
        s |= {
            "I": sm.d_inner,
            "C_sconv": sm.conv_dim,
            "W_sconv": sm.conv_kernel + (1 if sm.conv_bias else 0),  # taps, and a bias per channel
            "N_s": sm.d_state,
        }
        if sm.version == 2:  # in_proj: x and the gate z (2 d_inner), B and C (2 G N), dt (one per head)
            s |= {"C_in": 2 * sm.d_inner + 2 * sm.n_groups * sm.d_state + sm.n_heads, "H_s3": 3 * sm.n_heads}
        else:  # in_proj: x and z; x_proj: dt (rank R), B and C (N each); A (d_inner x N) and D (d_inner)
            s |= {"C_in": 2 * sm.d_inner, "R_dt": sm.dt_rank, "R_dtbc": sm.dt_rank + 2 * sm.d_state,
                  "N_s1": sm.d_state + 1}  # fmt: skip
    if cfg.mla:
        m = cfg.mla
        s |= {
            "R_q": m.q_lora_rank,
            "R_kv": m.kv_lora_rank,
            "R_kvr": m.kv_lora_rank + m.qk_rope_head_dim,
            "H_nope": m.qk_nope_head_dim,
            "H_rope": m.qk_rope_head_dim,
            "H_v": m.v_head_dim,
            "H_qk": m.qk_nope_head_dim + m.qk_rope_head_dim,
            "H_kv": m.qk_nope_head_dim + m.v_head_dim,
        }
    return s


def _linear_parts(cfg: TransformerConfig) -> list[Part]:
    """Gated DeltaNet (transformers Qwen3NextGatedDeltaNet): in_proj_qkvz, in_proj_ba, the depthwise
    conv over q, k, v (no bias), A_log and dt_bias per value head, the gated RMSNorm over a value
    head, out_proj."""
    return [
        Part("in_qkvz", ("D",), ("C_qkvz",)),
        Part("in_ba", ("D",), ("N_ba",)),
        Part("conv", (), ("C_lconv", "W_lconv")),
        Part("decay", (), ("N_ba",)),
        Part("out_norm", (), ("H_lv",)),
        Part("o", ("V_lin",), ("D",)),
    ]


def _ssm_parts(cfg: TransformerConfig, out: str = "o") -> list[Part]:
    """Mamba-2 (transformers NemotronHMamba2Mixer): in_proj, conv1d (with its bias), A_log, D and
    dt_bias per head, gated RMSNorm over d_inner, out_proj. Mamba (JambaMambaMixer): in_proj,
    conv1d, x_proj (dt, B, C), dt_proj with bias, A_log (d_inner x N) and D, the dt/B/C norms, out_proj
    (named ``out``: "ssm_o" beside an attention's "o" in a hybrid layer)."""
    m = cfg.ssm
    if m is None:  # the config refuses an "ssm" layer without its table
        return []
    parts = [Part("in_proj", ("D",), ("C_in",), m.proj_bias), Part("conv", (), ("C_sconv", "W_sconv"))]
    if m.version == 2:
        parts += [Part("ssm_params", (), ("H_s3",))] + ([Part("out_norm", (), ("I",))] if m.gated_norm else [])
    else:
        parts += [
            Part("x_proj", ("I",), ("R_dtbc",)),
            Part("dt_proj", ("R_dt",), ("I",), True),
            Part("ssm_params", (), ("I", "N_s1")),
        ]
        if m.bc_norms:
            parts.append(Part("out_norm", (), ("R_dtbc",)))
    return [*parts, Part(out, ("I",), ("D",), m.proj_bias)]


def attention_parts(cfg: TransformerConfig, mixer: str = "global") -> dict[str, Part]:
    """Mixer weights and norms of one layer of ``mixer`` (config.ATTENTION_KINDS; norm = the
    pre-norm; post_norm for 4 norms): attention, MLA, gated DeltaNet or a state-space layer."""
    nb = cfg.norm == "layernorm" and cfg.norm_bias
    if mixer == "none":
        return {}
    parts = [Part("norm", (), ("D",), nb)]
    if mixer in ("linear", "ssm"):
        parts += _linear_parts(cfg) if mixer == "linear" else _ssm_parts(cfg)
        return {p.name: p for p in parts}
    if cfg.mla is None:
        parts += [
            Part("q", ("D",), ("N", "H"), cfg.qkv_bias),
            Part("k", ("D",), ("K", "H"), cfg.qkv_bias),
            Part("v", ("D",), ("K", "H"), cfg.qkv_bias),
        ]
        if cfg.attention_gate:  # Qwen3-Next: q_proj also emits a per-head output gate
            parts.append(Part("q_gate", ("D",), ("N", "H"), cfg.qkv_bias))
        if cfg.qk_norm:
            parts += [Part("q_norm", (), ("H",)), Part("k_norm", (), ("H",))]
        parts.append(Part("o", ("N", "H"), ("D",), cfg.out_bias))
    else:
        if cfg.mla.q_lora_rank:
            parts += [
                Part("q_a", ("D",), ("R_q",)),
                Part("q_a_norm", (), ("R_q",)),
                Part("q_b", ("R_q",), ("N", "H_qk")),
            ]
        else:
            parts.append(Part("q", ("D",), ("N", "H_qk")))
        parts += [
            Part("kv_a", ("D",), ("R_kvr",)),
            Part("kv_a_norm", (), ("R_kv",)),
            Part("kv_b", ("R_kv",), ("N", "H_kv")),
            Part("o", ("N", "H_v"), ("D",), cfg.out_bias),
        ]
    if mixer == "hybrid":  # the state-space layer beside the attention (config.ATTENTION_KINDS)
        parts += _ssm_parts(cfg, "ssm_o")
    if cfg.norms_per_layer == 4:
        parts.append(Part("post_norm", (), ("D",), nb))
    return {p.name: p for p in parts}


def mlp_parts(cfg: TransformerConfig, moe: bool, present: bool = True) -> dict[str, Part]:
    """MLP weights and norms of one layer; for MoE the router, the routed experts
    (``experts/gate`` ...: E copies, top_k active) and the shared experts (``shared/...``, with
    their sigmoid gate); none for a layer without a feed-forward block (``present`` False)."""
    if not present:
        return {}
    nb = cfg.norm == "layernorm" and cfg.norm_bias
    parts = [Part("norm", (), ("D",), nb)] if cfg.norms_per_layer >= 2 else []

    def ffn(prefix: str, f: str, copies: int = 1, active: float = 1.0) -> list[Part]:
        gate = [Part(prefix + "gate", ("D",), (f,), cfg.mlp_bias, copies, active)] if cfg.mlp_kind.gated else []
        return [
            *gate,
            Part(prefix + "up", ("D",), (f,), cfg.mlp_bias, copies, active),
            Part(prefix + "down", (f,), ("D",), cfg.mlp_bias, copies, active),
        ]

    if moe and cfg.moe:
        parts.append(Part("router", ("D",), ("E",), cfg.moe.router_bias))
        parts += ffn("experts/", "F_e", cfg.moe.n_experts, cfg.moe.top_k)
        if cfg.moe.n_shared_experts:
            n = cfg.moe.n_shared_experts
            parts += ffn("shared/", "F_s", n, n)
            if cfg.moe.shared_gate:
                parts.append(Part("shared_gate", ("D",), ("ONE",)))
    else:
        parts += ffn("", "F")
    if cfg.norms_per_layer == 4:
        parts.append(Part("post_norm", (), ("D",), nb))
    return {p.name: p for p in parts}


# ---------------------------------------------------------------- parameters


@dataclass(frozen=True)
class ParamTree:
    """Parameters as a tree. ``params``: stored; ``active``: used by one token (routed
    experts count top_k of E; the input embedding table counts whole, the convention of most
    published "active" figures, e.g. Mixtral's 12.9B, or not at all when the model's card leaves
    it out, ``TransformerConfig.active_excludes_embedding``: gpt-oss-120b's 5.13B); ``matmul``:
    multiplied by one token in a matmul, the N of the 2N / 6N rule (no embedding lookup, no norms or biases; a tied
    unembedding counts here although it stores nothing). ``count``: layers in a group."""

    name: str
    params: float
    active: float
    matmul: float
    kind: str = "group"
    count: int = 1
    children: tuple[ParamTree, ...] = ()
    tag: OpTag | None = None  # a leaf's: the tag of the op that uses the weight (model/tags.py)

    @staticmethod
    def node(name: str, children: Iterable[ParamTree], count: int = 1) -> ParamTree:
        kids = tuple(c.scaled(count) for c in children)
        return ParamTree(
            name,
            sum(c.params for c in kids),
            sum(c.active for c in kids),
            sum(c.matmul for c in kids),
            "group",
            count,
            kids,
        )

    def scaled(self, k: int) -> ParamTree:
        if k == 1:
            return self
        kids = tuple(c.scaled(k) for c in self.children)
        return ParamTree(
            self.name, self.params * k, self.active * k, self.matmul * k, self.kind, self.count, kids, self.tag
        )

    def leaves(self) -> Iterator[ParamTree]:
        """Every leaf under this node, in order (the node itself when it is one)."""
        if not self.children:
            yield self
        for child in self.children:
            yield from child.leaves()

    def find(self, path: str) -> ParamTree:
        node = self
        for part in path.split("/"):
            match = [c for c in node.children if c.name == part]
            if not match:
                names = ", ".join(c.name for c in node.children)
                raise KeyError(f"no {part!r} under {node.name!r} (children: {names})")
            node = match[0]
        return node


def _part_leaf(part: Part, sizes: dict[str, int], attention_block: bool = False) -> ParamTree:
    per = part.params(sizes)
    frac = part.active / part.copies
    matmul_params = 0.0 if part.is_norm else (per - (math.prod(sizes[d] for d in part.dims_out) if part.bias else 0))
    name = part.name.split("/")[-1]
    tag = OP_TAGS[name]
    return ParamTree(
        name,
        per * part.copies,
        per * part.copies * frac,
        matmul_params * part.copies * frac,
        "norm" if part.is_norm else "matmul",
        tag=replace(tag, expert=part.name.startswith("experts/"), attention_block=attention_block),
    )


def _parts_tree(name: str, parts: dict[str, Part], sizes: dict[str, int], attention_block: bool = False) -> ParamTree:
    top: list[ParamTree] = []
    subs: dict[str, list[ParamTree]] = {}
    for key, part in parts.items():
        if "/" in key:
            sub = key.split("/")[0]
            if sub not in subs:
                subs[sub] = []
                top.append(ParamTree(sub, 0, 0, 0))  # placeholder keeps the order
            subs[sub].append(_part_leaf(part, sizes, attention_block))
        else:
            top.append(_part_leaf(part, sizes, attention_block))
    return ParamTree.node(name, [ParamTree.node(t.name, subs[t.name]) if t.name in subs else t for t in top])


def param_tree(cfg: TransformerConfig) -> ParamTree:
    """The parameter tree (see ParamTree). DeepSeek-V3's multi-token-prediction module is not
    part of a TransformerConfig, so it is not counted (671B main model, DeepSeek-V3 report)."""
    s = dim_sizes(cfg)
    vd = float(cfg.vocab_size * cfg.d_model)
    # the card's convention (TransformerConfig.active_excludes_embedding): the table stored, not active
    kids = [
        ParamTree(
            "embedding", vd, 0.0 if cfg.active_excludes_embedding else vd, 0.0, "embedding", tag=OP_TAGS["embedding"]
        )
    ]
    if cfg.positions == "learned":
        pd = float(cfg.max_seq_len * cfg.d_model)
        kids.append(ParamTree("positions", pd, pd, 0.0, "embedding", tag=OP_TAGS["positions"]))
    groups = []
    for g in layer_groups(cfg):
        layer = []
        if g.mixer != "none":
            layer.append(_parts_tree(mixer_block(g.mixer), attention_parts(cfg, g.mixer), s, attention_block=True))
        if g.mlp:
            layer.append(_parts_tree("moe" if g.moe else "mlp", mlp_parts(cfg, g.moe), s))
        groups.append(ParamTree.node(g.name, layer, g.count))
    kids.append(ParamTree.node("layers", groups))
    fn = float(cfg.norm_params)
    kids.append(ParamTree("final_norm", fn, fn, 0.0, "norm", tag=OP_TAGS["final_norm"]))
    head = 0.0 if cfg.tied_embeddings else vd
    kids.append(ParamTree("unembedding", head, head, vd, "matmul", tag=OP_TAGS["unembedding"]))
    return ParamTree.node("model", kids)


def mixer_block(mixer: str) -> str:
    """The name of a layer's mixer block in the cost and parameter trees: "attention" for every
    kind of attention, "linear_attention" or "ssm" for the recurrent ones."""
    return {"linear": "linear_attention", "ssm": "ssm"}.get(mixer, "attention")


def params_total(cfg: TransformerConfig) -> float:
    return param_tree(cfg).params


def params_active(cfg: TransformerConfig) -> float:
    """Parameters active per token, counted as the model's card counts them: with the input
    embedding table (Mixtral's 12.9B), or without it when ``cfg.active_excludes_embedding``
    (gpt-oss: 5.13B of gpt-oss-120b, OpenAI's model card, Table 1; see ParamTree)."""
    return param_tree(cfg).active


def params_matmul_active(cfg: TransformerConfig) -> float:
    """N of the 6N rule: weights one token multiplies (see ParamTree.matmul)."""
    return param_tree(cfg).matmul
