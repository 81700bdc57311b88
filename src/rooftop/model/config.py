"""TransformerConfig: the architecture of a decoder-only transformer as validated data,
read from a catalog TOML table or imported from a Hugging Face ``config.json``.

One dataclass covers today's dense and mixture-of-experts decoders:

- attention: multi-head, grouped-query and multi-query (``n_kv_heads`` = ``n_heads``, a
  divisor of it, or 1), a ``head_dim`` free of ``d_model / n_heads`` (Gemma), optional
  q/k/v and output biases (Qwen2, GPT-3), q/k norms (Gemma 3), sliding-window layers in a
  repeating pattern (Mistral 7B v0.1, Gemma 2/3), and multi-head latent attention
  (``MLAConfig``, DeepSeek-V2/V3) whose KV cache is the compressed latent;
- MLP: gated (SwiGLU, GeGLU; three matrices) or plain (GELU/ReLU; two matrices), dense or
  mixture-of-experts (``MoEConfig``: routed top-k experts, shared experts, first dense layers);
- positions: rotary (no parameters), learned (``max_seq_len x d_model``) or none;
- norms: RMSNorm or LayerNorm (with or without bias), 1 (parallel layers), 2 (pre-norm)
  or 4 (Gemma 2's pre- and post-norms) per layer; tied or separate unembedding.

The block kinds' sub-configs (``MoEConfig``, ``MLAConfig``, ``LinearAttentionConfig``, ``SSMConfig``) are
model/blocks.py, the bounds every size is checked against model/limits.py. Runs of identical layers are
model/layers.py; what the ops are priced for (``Workload``, ``Dtypes``) is model/workload.py. Catalog
tables, Hugging Face ``config.json`` files and ``--dims`` are read by model/catalog.py.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import cached_property

from rooftop.errors import InvalidConfigError, UnknownNameError, shown
from rooftop.model.blocks import LinearAttentionConfig, MLAConfig, MoEConfig, SSMConfig
from rooftop.model.heads import HeadCount, head_counts, heads_error
from rooftop.model.limits import MAX_PATTERN, MAX_TOKENS, check_positive, flags
from rooftop.units import divisors


@dataclass(frozen=True)
class MlpKind:
    """An MLP activation: gated (``act(x W_gate) * (x W_up)``, three matrices) or not,
    and the vector FLOPs per hidden element (one per arithmetic op, a transcendental as one;
    an estimate: fused kernels vary)."""

    gated: bool
    flops_per_element: float
    description: str


#: MLP activations. SwiGLU/GeGLU: Shazeer 2020 "GLU Variants Improve Transformer".
MLP_KINDS: dict[str, MlpKind] = {
    "swiglu": MlpKind(True, 5.0, "silu(x W_gate) * (x W_up): sigmoid (exp, add, divide), multiply, gate multiply"),
    "geglu": MlpKind(True, 9.0, "gelu_tanh(x W_gate) * (x W_up): ~8 ops for the tanh GELU, gate multiply"),
    "gelu": MlpKind(False, 8.0, "gelu_tanh(x W_up): ~8 ops for the tanh approximation"),
    "relu": MlpKind(False, 1.0, "max(0, x W_up)"),
    # squared ReLU (So et al. 2021, "Primer"), Nemotron-H's MLP
    "relu2": MlpKind(False, 2.0, "relu(x W_up)^2: max, multiply"),
}


@dataclass(frozen=True)
class NormKind:
    """A normalization layer: parameters per element of d_model (scale, plus bias for a
    LayerNorm with bias) and vector FLOPs per element normalized (estimate)."""

    flops_per_element: float
    description: str


NORM_KINDS: dict[str, NormKind] = {
    "rmsnorm": NormKind(4.0, "square, sum, scale by 1/rms, multiply by weight (Zhang & Sennrich 2019)"),
    "layernorm": NormKind(7.0, "mean, subtract, square, sum, scale, weight, bias (Ba et al. 2016)"),
}

POSITIONS = ("rotary", "learned", "none")
#: the token mixer of a layer (``attention_pattern`` entries): "global" causal attention over every key,
#: "local" a sliding window of ``sliding_window`` keys, "chunked" attention inside fixed chunks of
#: ``attention_chunk`` keys (Llama 4), "linear" linear attention with a constant-size state
#: (``LinearAttentionConfig``: gated DeltaNet), "ssm" a state-space layer (``SSMConfig``: Mamba, Mamba-2),
#: "none" no mixer (an MLP-only layer, as Nemotron-H's), "hybrid" global attention and a state-space layer
#: side by side on the same normed input, their outputs summed (Falcon-H1's parallel hybrid: Zuo et al. 2025)
ATTENTION_KINDS = ("global", "local", "chunked", "linear", "ssm", "none", "hybrid")
#: the mixers that attend over a KV cache that grows with the context
ATTENTION_MIXERS = ("global", "local", "chunked", "hybrid")
#: the feed-forward block of a layer (``ffn_pattern`` entries): "dense" MLP of ``d_ff``, "moe" the
#: ``MoEConfig`` experts, "none" no feed-forward (a mixer-only layer, as Nemotron-H's)
FFN_KINDS = ("dense", "moe", "none")


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


_FLAGS = (
    "norm_bias",
    "tied_embeddings",
    "qkv_bias",
    "out_bias",
    "mlp_bias",
    "qk_norm",
    "parallel_layers",
    "attention_gate",
    "active_excludes_embedding",
)


@dataclass(frozen=True)
class TransformerConfig:
    """A decoder-only transformer. Dims use the glossary of docs/concepts.md: D =
    ``d_model``, F = ``d_ff``, N = ``n_heads``, K = ``n_kv_heads``, H = ``head_dim``,
    L = ``n_layers``, V = ``vocab_size``. ``n_kv_heads`` defaults to ``n_heads`` and
    ``head_dim`` to ``d_model // n_heads``. Layer ``i`` is a stack of two typed blocks: the mixer
    ``attention_pattern[i % len(attention_pattern)]`` (ATTENTION_KINDS: "global", "local" a causal
    window of ``sliding_window`` keys, "chunked" chunks of ``attention_chunk`` keys, "linear",
    "ssm", "none") and the feed-forward ``ffn_pattern[i % len(ffn_pattern)]`` (FFN_KINDS; empty:
    "moe" from layer ``moe.first_dense_layers`` on when the model has experts, else "dense").
    ``attention_gate``: a sigmoid gate on the attention output from a second query-sized projection
    (Qwen3-Next's gated attention). ``active_excludes_embedding``: the model card counts active
    parameters without the input embedding table (gpt-oss); else with it (Mixtral)."""

    name: str
    vocab_size: int
    d_model: int
    n_layers: int
    n_heads: int
    d_ff: int
    n_kv_heads: int = 0
    head_dim: int = 0
    mlp: str = "swiglu"
    norm: str = "rmsnorm"
    norm_bias: bool = False
    norms_per_layer: int = 2
    positions: str = "rotary"
    max_seq_len: int = 4096
    tied_embeddings: bool = False
    qkv_bias: bool = False
    out_bias: bool = False
    mlp_bias: bool = False
    qk_norm: bool = False
    parallel_layers: bool = False
    sliding_window: int = 0
    attention_pattern: tuple[str, ...] = ("global",)
    attention_chunk: int = 0
    attention_gate: bool = False
    ffn_pattern: tuple[str, ...] = ()
    active_excludes_embedding: bool = False
    moe: MoEConfig | None = None
    mla: MLAConfig | None = None
    linear: LinearAttentionConfig | None = None
    ssm: SSMConfig | None = None
    source: str = ""

    def __post_init__(self) -> None:
        owner = f"model {shown(self.name)}"
        if not isinstance(self.name, str) or not self.name:
            raise InvalidConfigError("a model needs a name")
        for sub, cls in (
            ("moe", MoEConfig),
            ("mla", MLAConfig),
            ("linear", LinearAttentionConfig),
            ("ssm", SSMConfig),
        ):
            if getattr(self, sub) is not None and not isinstance(getattr(self, sub), cls):
                raise InvalidConfigError(f"{owner}: {sub} must be a {cls.__name__} or None")
        if not self.n_kv_heads:  # MLA: per-head keys and values (the cache is the latent, see MLAConfig)
            object.__setattr__(self, "n_kv_heads", self.n_heads)
        if not self.head_dim and self.mla is not None:
            object.__setattr__(self, "head_dim", self.mla.qk_nope_head_dim + self.mla.qk_rope_head_dim)
        if not self.head_dim and _whole(self.n_heads) and _whole(self.d_model) and self.n_heads > 0:
            object.__setattr__(self, "head_dim", self.d_model // self.n_heads)
        if not isinstance(self.attention_pattern, (list, tuple)):
            raise InvalidConfigError(
                f"{owner}: attention_pattern={shown(self.attention_pattern)} must be a list, e.g. ['local', 'global']"
            )
        object.__setattr__(self, "attention_pattern", tuple(self.attention_pattern))
        if not isinstance(self.ffn_pattern, (list, tuple)):
            raise InvalidConfigError(
                f"{owner}: ffn_pattern={shown(self.ffn_pattern)} must be a list, e.g. ['dense', 'moe']"
            )
        object.__setattr__(self, "ffn_pattern", tuple(self.ffn_pattern))
        check_positive(
            owner,
            vocab_size=self.vocab_size,
            d_model=self.d_model,
            n_layers=self.n_layers,
            n_heads=self.n_heads,
            d_ff=self.d_ff,
            n_kv_heads=self.n_kv_heads,
            head_dim=self.head_dim,
            max_seq_len=self.max_seq_len,
        )
        for key in ("sliding_window", "attention_chunk"):
            window = getattr(self, key)
            if not _whole(window) or not 0 <= window <= MAX_TOKENS:
                raise InvalidConfigError(
                    f"{owner}: {key}={shown(window)} must be a whole number in [0, {MAX_TOKENS:,}] (0: none)"
                )
        if self.n_heads % self.n_kv_heads:
            valid = divisors(self.n_heads)
            raise InvalidConfigError(
                f"{owner}: n_kv_heads={self.n_kv_heads} does not divide n_heads={self.n_heads};"
                f" valid: {', '.join(map(str, valid))}"
            )
        flags(owner, self, _FLAGS)
        for kind, value, choices in (
            ("mlp activation", self.mlp, MLP_KINDS),
            ("norm", self.norm, NORM_KINDS),
            ("position encoding", self.positions, POSITIONS),
        ):
            if not isinstance(value, str) or value not in choices:
                raise UnknownNameError(kind, value, choices)
        if not _whole(self.norms_per_layer) or self.norms_per_layer not in (1, 2, 4):
            raise InvalidConfigError(
                f"{owner}: norms_per_layer={self.norms_per_layer} must be 1 (parallel layers),"
                " 2 (pre-norm) or 4 (pre- and post-norm)"
            )
        self._check_attention(owner)
        if self.moe is not None and self.moe.first_dense_layers > self.n_layers:
            raise InvalidConfigError(
                f"{owner}: moe.first_dense_layers={self.moe.first_dense_layers} exceeds n_layers={self.n_layers}"
            )

    def _check_attention(self, owner: str) -> None:
        if not self.attention_pattern or len(self.attention_pattern) > MAX_PATTERN:
            raise InvalidConfigError(
                f"{owner}: attention_pattern has {len(self.attention_pattern):,} entries; give 1 to {MAX_PATTERN:,} "
                "(e.g. ['global'] or ['local', 'global'])"
            )
        for kind in self.attention_pattern:
            if not isinstance(kind, str) or kind not in ATTENTION_KINDS:
                raise UnknownNameError("attention kind", kind, ATTENTION_KINDS)
        if "local" in self.attention_pattern and not self.sliding_window:
            raise InvalidConfigError(
                f"{owner}: attention_pattern has 'local' layers but sliding_window is 0; give the window in tokens"
            )
        if self.mla is not None and "local" in self.attention_pattern:
            raise InvalidConfigError(f"{owner}: sliding-window layers with MLA are not supported")
        for kind, field, what in (
            ("chunked", "attention_chunk", "the chunk in tokens"),
            ("linear", "linear", "a [linear] table"),
            ("ssm", "ssm", "an [ssm] table"),
            ("hybrid", "ssm", "an [ssm] table"),
        ):
            if kind in self.attention_pattern and not getattr(self, field):
                raise InvalidConfigError(f"{owner}: attention_pattern has {kind!r} layers but no {field}; give {what}")
        if len(self.ffn_pattern) > MAX_PATTERN:
            raise InvalidConfigError(
                f"{owner}: ffn_pattern has {len(self.ffn_pattern):,} entries; at most {MAX_PATTERN:,}"
            )
        for kind in self.ffn_pattern:
            if not isinstance(kind, str) or kind not in FFN_KINDS:
                raise UnknownNameError("feed-forward kind", kind, FFN_KINDS)
        if "moe" in self.ffn_pattern and self.moe is None:
            raise InvalidConfigError(f"{owner}: ffn_pattern has 'moe' layers but no [moe] table")

    @property
    def mlp_kind(self) -> MlpKind:
        return MLP_KINDS[self.mlp]

    @property
    def norm_kind(self) -> NormKind:
        return NORM_KINDS[self.norm]

    @property
    def norm_params(self) -> int:
        """Parameters of one norm over d_model: a scale, plus a bias for LayerNorm with bias."""
        return self.d_model * (2 if self.norm == "layernorm" and self.norm_bias else 1)

    @property
    def tp_regions_per_layer(self) -> int:
        """Tensor-parallel regions of one layer, each closed by one reduction of its output (an all-reduce,
        or a reduce-scatter under sequence parallelism): two for a serial layer (attention, then the MLP
        on its output), one for a parallel layer (y = x + Attn(LN x) + MLP(LN x): both read the same
        input and their outputs are summed before one reduction; Chowdhery et al. 2022, PaLM, section 2,
        "Parallel Layers")."""
        return 1 if self.parallel_layers else 2

    @property
    def value_head_dim(self) -> int:
        """Width of one query head's attention output (the values it mixes): MLA's v_head_dim, else head_dim."""
        return self.mla.v_head_dim if self.mla is not None else self.head_dim

    def kv_heads_fit(self, tp: int) -> bool:
        """Whether the KV heads divide over a TP group of ``tp`` chips: each chip holds whole KV heads (tp
        divides K) or a copy of one (K divides tp: replicated once tp > K); a cache without heads (MLA's
        latent, ``tp_kv_heads`` None) puts no rule on tp."""
        k = self.tp_kv_heads
        return k is None or k % tp == 0 or tp % k == 0

    @cached_property
    def tp_heads(self) -> tuple[HeadCount, ...]:
        """Every count a tensor-parallel group splits, block by block (model/heads.py)."""
        return head_counts(self)

    def heads_fit(self, tp: int) -> bool:
        """Whether every head-sharded block (attention's query and KV heads, gated DeltaNet's key and value
        heads, Mamba-2's heads and groups) splits over a TP group of ``tp`` chips (model/heads.py)."""
        return all(h.fits(tp) for h in self.tp_heads)

    def check_heads(self, tp: int) -> None:
        """Raise InvalidConfigError naming the first block whose heads do not split over ``tp`` chips and the
        tp degrees that fit every block (``heads_fit``): the one check training and serving call."""
        why = heads_error(self.tp_heads, tp)
        if why is not None:
            raise InvalidConfigError(why)

    @property
    def tp_kv_heads(self) -> int | None:
        """The KV heads the k and v projections and the KV cache divide over a tensor-parallel group by
        (sharding/tensor.kv_shards); None when the cache holds no heads to split (MLA's latent: replicated)."""
        return None if self.mla is not None else self.n_kv_heads

    def layer_attention(self, index: int) -> str:
        return self.attention_pattern[index % len(self.attention_pattern)]

    def layer_ffn(self, index: int) -> str:
        """The feed-forward block of layer ``index`` (FFN_KINDS)."""
        dense_first = self.moe is not None and index < self.moe.first_dense_layers
        if self.ffn_pattern:
            kind = self.ffn_pattern[index % len(self.ffn_pattern)]
            return "dense" if kind == "moe" and dense_first else kind
        return "moe" if self.moe is not None and not dense_first else "dense"

    def layer_is_moe(self, index: int) -> bool:
        return self.layer_ffn(index) == "moe"

    def layer_window(self, index: int) -> int:
        """Keys a query of layer ``index`` may attend to at most (0: unlimited); a chunked layer's
        query sees at most its chunk."""
        kind = self.layer_attention(index)
        return self.sliding_window if kind == "local" else self.attention_chunk if kind == "chunked" else 0

    def with_name(self, name: str, source: str | None = None) -> TransformerConfig:
        return dataclasses.replace(self, name=name, source=self.source if source is None else source)
