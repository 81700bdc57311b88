"""The sub-configurations of a model's block kinds, each validated at construction: routed experts
(``MoEConfig``), multi-head latent attention (``MLAConfig``), linear attention (``LinearAttentionConfig``:
gated DeltaNet) and state-space layers (``SSMConfig``: Mamba, Mamba-2). ``TransformerConfig``
(model/config.py) holds one of each its layers use.
"""

from __future__ import annotations

from dataclasses import dataclass

from rooftop.errors import InvalidConfigError, shown
from rooftop.model.limits import MAX_EXPERTS, MAX_LAYERS, MAX_WIDTH, check_positive, flags

#: FLOPs of the gated delta rule per token and element of one value head's dk x dv state: decay S (1), read
#: k^T S (2), write the rank-one beta (v - k^T S) k^T (2), read q^T S (2) (Yang, Kautz & Hatamizadeh 2024,
#: "Gated Delta Networks", eq. 10). The chunked form computes the same terms as matmuls.
DELTA_RULE_FLOPS = 7.0
#: FLOPs of the selective scan per token and state element (a channel's d_state): decay h (1), add
#: dt B x (2), C h into the output (2), and the sum (1) (Gu & Dao 2023, section 3.3; Mamba-2's SSD computes
#: the same recurrence in chunks, Dao & Gu 2024 section 6).
SCAN_FLOPS = 6.0
#: a causal depthwise convolution: 2 FLOPs a tap (multiply, add), then SiLU (4)
CONV_TAP_FLOPS, CONV_SILU_FLOPS = 2.0, 4.0


def conv_flops_per_element(kernel: int, silu: bool = True) -> float:
    """FLOPs per output element of a causal depthwise conv of ``kernel`` taps (then SiLU when ``silu``)."""
    return CONV_TAP_FLOPS * kernel + (CONV_SILU_FLOPS if silu else 0.0)


@dataclass(frozen=True)
class MoEConfig:
    """Mixture of experts in the MLP: ``n_experts`` routed experts of hidden width
    ``d_ff_expert``, ``top_k`` per token, ``n_shared_experts`` always active (DeepSeekMoE),
    the first ``first_dense_layers`` layers with a dense MLP of the model's ``d_ff``; shared
    experts of width ``d_ff_shared`` (0: ``d_ff_expert``), scaled by a sigmoid gate of one weight
    vector when ``shared_gate`` (Qwen2-MoE, Qwen3-Next)."""

    n_experts: int
    top_k: int
    d_ff_expert: int
    n_shared_experts: int = 0
    first_dense_layers: int = 0
    router_bias: bool = False
    d_ff_shared: int = 0
    shared_gate: bool = False

    def __post_init__(self) -> None:
        if not self.d_ff_shared:
            object.__setattr__(self, "d_ff_shared", self.d_ff_expert)
        check_positive(
            "moe",
            n_experts=self.n_experts,
            top_k=self.top_k,
            d_ff_expert=self.d_ff_expert,
            d_ff_shared=self.d_ff_shared,
        )
        if self.top_k > self.n_experts:
            raise InvalidConfigError(f"moe: top_k={self.top_k} exceeds n_experts={self.n_experts}")
        for name, hi in (("n_shared_experts", MAX_EXPERTS), ("first_dense_layers", MAX_LAYERS)):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= hi:
                raise InvalidConfigError(f"moe: {name}={shown(value)} must be a whole number in [0, {hi:,}]")
        flags("moe", self, ("router_bias", "shared_gate"))

    def touched(self, tokens: float) -> float:
        """Expected distinct routed experts that ``tokens`` tokens touch under uniform routing, each
        token picking ``top_k`` of the ``n_experts``: E (1 - (1 - k/E)^tokens)."""
        untouched: float = (1.0 - self.top_k / self.n_experts) ** tokens
        return self.n_experts * (1.0 - untouched)


@dataclass(frozen=True)
class MLAConfig:
    """Multi-head latent attention (DeepSeek-V2, Liu et al. 2024, section 2.1): queries
    through a ``q_lora_rank`` bottleneck (0: a plain projection), keys and values from a
    ``kv_lora_rank`` latent plus one shared rotary key of ``qk_rope_head_dim``; the cache
    holds only that latent and rotary key per token per layer."""

    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int
    q_lora_rank: int = 0

    def __post_init__(self) -> None:
        check_positive(
            "mla",
            kv_lora_rank=self.kv_lora_rank,
            qk_nope_head_dim=self.qk_nope_head_dim,
            qk_rope_head_dim=self.qk_rope_head_dim,
            v_head_dim=self.v_head_dim,
        )
        q = self.q_lora_rank
        if not isinstance(q, int) or isinstance(q, bool) or not 0 <= q <= MAX_WIDTH:
            raise InvalidConfigError(
                f"mla: q_lora_rank={shown(q)} must be a whole number in [0, {MAX_WIDTH:,}] (0: no query compression)"
            )


@dataclass(frozen=True)
class LinearAttentionConfig:
    """Gated DeltaNet linear attention (Yang, Kautz & Hatamizadeh 2024, "Gated Delta Networks";
    Qwen3-Next's ``linear_attention`` layers): ``n_key_heads`` query/key heads of ``key_head_dim``,
    ``n_value_heads`` value heads of ``value_head_dim``, a depthwise causal convolution of
    ``conv_kernel`` taps over q, k and v. Each value head keeps a ``key_head_dim x value_head_dim``
    state, so a sequence's state does not grow with its length."""

    n_key_heads: int
    n_value_heads: int
    key_head_dim: int
    value_head_dim: int
    conv_kernel: int = 4

    def __post_init__(self) -> None:
        check_positive(
            "linear",
            n_key_heads=self.n_key_heads,
            n_value_heads=self.n_value_heads,
            key_head_dim=self.key_head_dim,
            value_head_dim=self.value_head_dim,
            conv_kernel=self.conv_kernel,
        )

    @property
    def key_dim(self) -> int:
        return self.n_key_heads * self.key_head_dim

    @property
    def value_dim(self) -> int:
        return self.n_value_heads * self.value_head_dim

    @property
    def conv_dim(self) -> int:
        """Channels of the convolution: q, k and v."""
        return 2 * self.key_dim + self.value_dim

    @property
    def state_elements(self) -> int:
        """Recurrent state of one sequence: a dk x dv matrix per value head."""
        return self.n_value_heads * self.key_head_dim * self.value_head_dim

    @property
    def scan_flops_per_token(self) -> float:
        """FLOPs of the gated delta rule for one token: ``DELTA_RULE_FLOPS`` per state element."""
        return DELTA_RULE_FLOPS * self.state_elements


SSM_VERSIONS = (1, 2)


@dataclass(frozen=True)
class SSMConfig:
    """A selective state-space layer. ``version`` 1: Mamba (Gu & Dao 2023; Jamba's layers): ``d_inner``
    channels each with a ``d_state`` state, input-dependent dt through a ``dt_rank`` bottleneck.
    ``version`` 2: Mamba-2 (Dao & Gu 2024, SSD; Nemotron-H): ``n_heads`` heads of ``d_inner / n_heads``
    channels sharing a scalar decay, B and C of ``d_state`` in ``n_groups`` groups, a gated RMSNorm
    before the output projection. Both convolve their input causally over ``conv_kernel`` taps. The
    state of a sequence (``state_elements``, plus ``conv_kernel - 1`` inputs per conv channel) does
    not grow with its length."""

    d_inner: int
    d_state: int
    version: int = 2
    n_heads: int = 1
    n_groups: int = 1
    conv_kernel: int = 4
    dt_rank: int = 0
    conv_bias: bool = True
    proj_bias: bool = False
    bc_norms: bool = False  # Jamba: RMSNorms over dt, B and C
    gated_norm: bool = True  # Mamba-2's gated RMSNorm before out_proj (Falcon-H1's mamba_rms_norm: the gate alone)

    def __post_init__(self) -> None:
        check_positive(
            "ssm",
            d_inner=self.d_inner,
            d_state=self.d_state,
            n_heads=self.n_heads,
            n_groups=self.n_groups,
            conv_kernel=self.conv_kernel,
        )
        if self.version not in SSM_VERSIONS:
            raise InvalidConfigError(f"ssm: version={shown(self.version)} must be 1 (Mamba) or 2 (Mamba-2)")
        if self.version == 1:
            check_positive("ssm", dt_rank=self.dt_rank)
        elif self.d_inner % self.n_heads or self.n_heads % self.n_groups:
            raise InvalidConfigError(
                f"ssm: n_heads={self.n_heads} must divide d_inner={self.d_inner} and be a multiple of"
                f" n_groups={self.n_groups}"
            )
        flags("ssm", self, ("conv_bias", "proj_bias", "bc_norms", "gated_norm"))

    @property
    def conv_dim(self) -> int:
        """Channels of the convolution: x (Mamba), or x, B and C (Mamba-2)."""
        return self.d_inner + (2 * self.n_groups * self.d_state if self.version == 2 else 0)

    @property
    def state_elements(self) -> int:
        """SSM state of one sequence: d_state per channel."""
        return self.d_inner * self.d_state

    @property
    def scan_flops_per_token(self) -> float:
        """FLOPs of the selective scan for one token: ``SCAN_FLOPS`` per state element."""
        return SCAN_FLOPS * self.state_elements
