"""Per-token summaries of a model's cost trees (model/transformer.py): matrix-unit FLOPs per token of a
forward pass, a training step (with a remat policy's recompute), attention alone, a prefill and a decode
step: the "model FLOPs" convention (vector-unit FLOPs are excluded, as in 6N; they have their own figure).
"""

from __future__ import annotations

from rooftop.cost.cost import Cost, CostTree, total
from rooftop.model.config import TransformerConfig
from rooftop.model.passes import forward_costs, model_costs
from rooftop.model.workload import Dtypes, Workload


def matrix_flops(tree: CostTree) -> float:
    """FLOPs on the matrix unit (the "model FLOPs" of MFU)."""
    return sum(v for (unit, _), v in tree.cost.flops_by.items() if unit == "matrix")


def _leaves(tree: CostTree, names: tuple[str, ...]) -> Cost:
    return total(t.cost for _, t in tree.walk() if not t.children and t.name in names)


def _train_forward(cfg: TransformerConfig, seq_len: int, causal: bool) -> CostTree:
    return forward_costs(cfg, Workload("train", 1, seq_len, causal=causal), Dtypes(), "forward")


def flops_per_token_forward(cfg: TransformerConfig, seq_len: int, causal: bool = True) -> float:
    """Matrix FLOPs of a forward pass per token over sequences of ``seq_len``:
    2 x params_matmul_active + attention_flops_per_token."""
    return matrix_flops(_train_forward(cfg, seq_len, causal)) / seq_len


def vector_flops_per_token_forward(cfg: TransformerConfig, seq_len: int, causal: bool = True) -> float:
    """Vector-unit FLOPs (norms, rope, softmax, activations, residuals, loss) per token, forward."""
    tree = _train_forward(cfg, seq_len, causal)
    return (tree.cost.flops - matrix_flops(tree)) / seq_len


def flops_per_token_train(cfg: TransformerConfig, seq_len: int, remat: str = "none", causal: bool = True) -> float:
    """Matrix FLOPs of a training step per token: 3 x forward (6N + 3 x attention) plus the
    remat policy's recompute (full: + one forward of the layers)."""
    return matrix_flops(model_costs(cfg, Workload("train", 1, seq_len, causal=causal), remat=remat)) / seq_len


def recompute_flops_per_token(cfg: TransformerConfig, seq_len: int, remat: str) -> float:
    """Matrix FLOPs per token that the remat policy adds (forward ops run again)."""
    tree = model_costs(cfg, Workload("train", 1, seq_len), remat=remat)
    return matrix_flops(next(ch for ch in tree.children if ch.name == "recompute")) / seq_len


def attention_flops_per_token(cfg: TransformerConfig, seq_len: int, causal: bool = True) -> float:
    """Forward QK^T + AV FLOPs per token over a sequence of ``seq_len`` (all layers):
    sum over layers of 2 N (H_qk + H_v) x attended_pairs / seq_len; causal global layers
    give 2 N (H_qk + H_v) (T + 1) / 2 each."""
    return _leaves(_train_forward(cfg, seq_len, causal), ("scores", "values")).flops / seq_len


def prefill_flops(cfg: TransformerConfig, prompt_len: int, batch: int = 1) -> float:
    """Matrix FLOPs to prefill ``batch`` prompts of ``prompt_len`` (logits of the last token only)."""
    return matrix_flops(model_costs(cfg, Workload("prefill", batch, prompt_len)))


def decode_flops_per_token(cfg: TransformerConfig, context_len: int) -> float:
    """Matrix FLOPs to generate one token attending to ``context_len`` keys (itself included)."""
    return matrix_flops(model_costs(cfg, Workload("decode", 1, 1, context_len)))
