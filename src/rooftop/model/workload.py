"""What a model's ops are priced for: the ``Workload`` (phase, batch, new tokens, keys attended) and the
``Dtypes`` of the weights, activations and KV cache; transformer.py, memory.py and every planner read them."""

from __future__ import annotations

from dataclasses import dataclass

from rooftop.dtypes import canonical_dtype
from rooftop.errors import InvalidConfigError, UnknownNameError
from rooftop.model.limits import check_positive

PHASES = ("train", "prefill", "decode")


@dataclass(frozen=True)
class Dtypes:
    """Element types of the weights, the activations and the KV cache; ``matmul`` the dtype the weight
    matmuls compute in when it is not their inputs' (FP8 training: the projections' GEMMs in fp8, the
    attention core and everything else in the activations' dtype; "" = the inputs' dtype)."""

    weights: str = "bf16"
    activations: str = "bf16"
    kv_cache: str = "bf16"
    matmul: str = ""

    def __post_init__(self) -> None:
        for f in ("weights", "activations", "kv_cache"):
            object.__setattr__(self, f, canonical_dtype(getattr(self, f)))
        if self.matmul:
            object.__setattr__(self, "matmul", canonical_dtype(self.matmul))


@dataclass(frozen=True)
class Workload:
    """What the ops are priced for. ``batch`` sequences of ``seq_len`` new (query) tokens
    each, attending to ``kv_len`` keys (the new tokens included). Phases:

    - ``train``: forward + backward over ``seq_len`` tokens (kv_len = seq_len);
    - ``prefill``: forward over a prompt of ``seq_len`` tokens, writing the KV cache; a
      ``kv_len`` above ``seq_len`` is a chunk after ``kv_len - seq_len`` cached tokens;
    - ``decode``: one new token per sequence (seq_len = 1) at context ``kv_len``.

    ``causal=False`` counts every (query, key) pair, as an unmasked kernel computes them.
    ``flash=False`` prices attention the pre-FlashAttention way: the scores and probabilities
    of every pair go through HBM (see transformer._attention_core). ``dropout=True`` adds
    dropout on the attention probabilities (unfused only) and on both residual branches, as
    GPT-2/3 and Megatron-LM train: read, write, and a one-byte mask per element. ``fused=False``
    runs the elementwise ops eagerly, one kernel per PyTorch op, each through HBM (model/eager.py).
    ``expand_kv=True``: the attention kernel takes K and V with one head per query head, so a grouped-query
    layer copies them out to every query head in HBM first (transformer._gqa_ops). ``loss_fp32=True``: the
    logits are cast to fp32 before a separate cross-entropy kernel (transformer._loss_upcast)."""

    phase: str
    batch: int
    seq_len: int = 1
    kv_len: int = 0
    causal: bool = True
    flash: bool = True
    dropout: bool = False
    fused: bool = True
    expand_kv: bool = False
    loss_fp32: bool = False

    def __post_init__(self) -> None:
        if self.phase not in PHASES:
            raise UnknownNameError("phase", self.phase, PHASES)
        if not self.kv_len:
            if self.phase == "decode":
                raise InvalidConfigError("a decode workload needs kv_len (the context length it attends to)")
            object.__setattr__(self, "kv_len", self.seq_len)
        check_positive("workload", batch=self.batch, seq_len=self.seq_len, kv_len=self.kv_len)
        if self.kv_len < self.seq_len:
            raise InvalidConfigError(
                f"workload: kv_len={self.kv_len} is below seq_len={self.seq_len}; the keys include the new tokens"
            )
        if self.phase == "decode" and self.seq_len != 1:
            raise InvalidConfigError(f"decode workload: seq_len={self.seq_len} must be 1 (one new token)")
        if self.phase == "train" and self.kv_len != self.seq_len:
            raise InvalidConfigError(f"train workload: kv_len={self.kv_len} must equal seq_len={self.seq_len}")

    @property
    def tokens(self) -> int:
        return self.batch * self.seq_len


# ---------------------------------------------------------------- from a TOML table
