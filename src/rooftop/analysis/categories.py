"""What an op is part of, from its name: its named scopes (the JAX name stack), its phase (forward,
backward) and its category (communication, attention, mlp, optimizer, loss or other), for the profile's
per-category totals and charts. Shared by the XLA and PyTorch paths (analysis/compare.py,
analysis/torch/kineto.py) and the reports that group by scope."""

from __future__ import annotations

import re

from rooftop.analysis.intervals import is_collective

#: category -> words of a named scope (or, failing any scope, of the whole name) that put an op in it
CATEGORIES = (
    ("attention", ("attention", "attn", "softmax", "flash", "fmha", "scaled_dot_product", "mha_", "mha::")),
    ("mlp", ("mlp", "ffn", "feed_forward", "feedforward", "w_in", "w_out", "gate_proj", "up_proj", "down_proj")),
    ("optimizer", ("optimizer", "adam", "sgd", "update")),
    ("loss", ("loss", "cross_entropy", "logits")),
)


_TRANSFORM = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\(|\)")  # jit( jvp( transpose( remat( ... and their closing )


def scopes_of(op_name: str) -> list[str]:
    """The named scopes of a JAX op_name, innermost first, transforms unwrapped and the primitive dropped:
    ``jit(step)/transpose(jvp(layer0/attention))/dot_general`` -> [attention, layer0, step]."""
    parts = [p for p in _TRANSFORM.sub("", op_name).split("/") if p]
    return parts[-2::-1]


def phase_of(op_name: str) -> str:
    """ "backward" for ops JAX made by transposing (``transpose(...)`` in the op_name), "forward" for the
    linearized forward pass (``jvp(...)``), "" otherwise (inference, optimizer, or no op_name)."""
    return "backward" if "transpose(" in op_name else "forward" if "jvp(" in op_name else ""


#: words of an op that IS attention whatever scope it sits in (a softmax alone may be anywhere)
_ATTENTION_OPS = ("attention", "attn", "flash", "fmha", "scaled_dot_product", "mha_", "mha::")
_JITTED = re.compile(r"\b(?:p?jit|pmap|xla_pmap|shard_map)\(([^()/]*)\)")  # jit(loss_fn): a function's name


def category_of(op_name: str, opcode: str) -> str:
    """communication for collectives; attention for an op that is attention by what it runs (its opcode or
    primitive: a fused-attention custom call, flash/SDPA kernels); else attention / mlp / optimizer / loss
    from the op's named scopes (JAX name stack), innermost first, and only then from keywords anywhere in
    its name; else other. The name a function was jitted under (``jit(loss_fn)``) is not a scope: every op
    of ``loss_fn`` is not the loss."""
    if is_collective(opcode):
        return "communication"
    primitive = (op_name.rsplit("/", 1)[-1] + " " + opcode).lower()
    if any(w in primitive for w in _ATTENTION_OPS):
        return "attention"
    jitted = set(_JITTED.findall(op_name))
    op_name = _JITTED.sub("", op_name)
    for scope in scopes_of(op_name):
        if scope in jitted:
            continue
        low = scope.lower()
        for cat, words in CATEGORIES:
            if any(w in low for w in words):
                return cat
    low = op_name.lower().replace("update_slice", "")  # a (KV cache) dynamic_update_slice is no optimizer update
    for cat, words in CATEGORIES:
        if any(w in low for w in words):
            return cat
    return "other"
