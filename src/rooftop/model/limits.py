"""The bounds every size of a model or workload is checked against (model/config.py, model/blocks.py,
model/workload.py, the CLI's flags): far above every published model, and small enough that every
count stays an exact float and every loop or divisor list stays short.
"""

from __future__ import annotations

from rooftop.errors import InvalidConfigError, shown

#: largest value of each size a model may have: far above every published model, and small
#: enough that every count stays an exact float and every loop or divisor list stays short
MAX_LAYERS = 1 << 20
#: most entries of an attention pattern (Gemma repeats 2 or 6; a per-layer list has n_layers): every
#: per-layer question is answered from the pattern, so its length is what the work grows with
MAX_PATTERN = 4096
MAX_HEADS = 1 << 20
MAX_WIDTH = 1 << 28  # d_model, d_ff, head_dim, expert widths, MLA ranks
MAX_VOCAB = 1 << 32
MAX_TOKENS = 1 << 40  # max_seq_len, sliding_window, a workload's batch and lengths
MAX_EXPERTS = 1 << 20
_LIMITS = {
    "n_layers": MAX_LAYERS,
    "n_heads": MAX_HEADS,
    "n_kv_heads": MAX_HEADS,
    "vocab_size": MAX_VOCAB,
    "max_seq_len": MAX_TOKENS,
    "batch": MAX_TOKENS,
    "seq_len": MAX_TOKENS,
    "kv_len": MAX_TOKENS,
    "n_experts": MAX_EXPERTS,
    "top_k": MAX_EXPERTS,
}


def check_positive(owner: str, **values: int) -> None:
    """Each value a whole number in [1, its limit] (``_LIMITS``, else MAX_WIDTH)."""
    for key, value in values.items():
        hi = _LIMITS.get(key, MAX_WIDTH)
        if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= hi:
            raise InvalidConfigError(f"{owner}: {key}={shown(value)} must be a whole number in [1, {hi:,}]")


def flags(owner: str, obj: object, names: tuple[str, ...]) -> None:
    for name in names:
        value = getattr(obj, name)
        if not isinstance(value, bool):
            raise InvalidConfigError(f"{owner}: {name}={shown(value)} must be true or false")
