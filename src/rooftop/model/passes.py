"""The whole model's ops, pass by pass, assembled from the per-layer ops of transformer.py.

- ``forward_costs(cfg, workload, dtypes, name) -> CostTree``: one forward pass,
  ``<name>/{embedding, layers/<group>/..., final_norm, unembedding}`` (and the loss when training);
  each group's Cost is already multiplied by its layer count.
- ``model_costs(cfg, workload, dtypes, remat) -> CostTree``: the whole model. For prefill and
  decode: ``model/{embedding, layers/<group>/..., final_norm, unembedding}``. For train:
  ``model/{forward, backward, recompute}``, each with that structure (backward = 2 x forward;
  recompute per remat policy, activations.REMAT_POLICIES).
- ``train_leaves(tree)``: (phase, layer group, leaf) of every op of a train tree.

The conventions and sources of every formula are those of transformer.py; the input-embedding lookup
is a gather (0 FLOPs), the loss a log-softmax over the vocabulary.
"""

from __future__ import annotations

from collections.abc import Iterator

from rooftop.cost.cost import CostTree
from rooftop.cost.op import explicit
from rooftop.dtypes import dtype_bytes
from rooftop.model.activations import remat_policy
from rooftop.model.config import TransformerConfig
from rooftop.model.eager import loss_upcast_bytes
from rooftop.model.layers import layer_groups
from rooftop.model.params import Part
from rooftop.model.transformer import layer_costs, leaf, op_context
from rooftop.model.workload import Dtypes, Workload

__all__ = ["TRAIN_PHASES", "forward_costs", "model_costs", "train_leaves"]

LOSS_FLOPS_PER_LOGIT = 5.0  # log-softmax over the vocabulary


def _renamed(tree: CostTree, name: str) -> CostTree:
    return CostTree(name, tree.cost, tree.children)


def forward_costs(cfg: TransformerConfig, workload: Workload, dtypes: Dtypes, name: str) -> CostTree:
    """The forward pass of the whole model, a tree named ``name``: embedding, layers by group, final norm,
    unembedding (and the loss when training)."""
    c = op_context(cfg, workload, dtypes)
    w_bytes, a_bytes = dtype_bytes(dtypes.weights), dtype_bytes(dtypes.activations)
    # the lookup reads one row of the table per token (weights) and writes it out (activations)
    rows = c.tokens * cfg.d_model
    lookup = explicit(0.0, rows * w_bytes, dtypes.weights, kind="weights")
    kids = [leaf("embedding", lookup + explicit(0.0, rows * a_bytes, dtypes.activations, kind="activations"))]
    if cfg.positions == "learned":
        kids.append(leaf("positions", c.vec(c.tokens * cfg.d_model, 1.0, 2)))
    groups = [_renamed(layer_costs(cfg, workload, dtypes, g).scaled(g.count), g.name) for g in layer_groups(cfg)]
    kids += [CostTree.node("layers", groups), leaf("final_norm", c.norm(cfg.d_model))]
    head_rows = ("B", "T") if workload.phase == "train" else ("B",)  # inference needs only the last logits
    kids.append(leaf("unembedding", c.proj(Part("unembedding", ("D",), ("V",)), head_rows)))
    if workload.phase == "train":
        kids.append(leaf("loss", c.vec(c.tokens * cfg.vocab_size, LOSS_FLOPS_PER_LOGIT)))
        if workload.loss_fp32:  # the logits cast to fp32 before the loss (model/eager.loss_upcast_bytes)
            upcast = c.tokens * cfg.vocab_size * loss_upcast_bytes(dtype_bytes(c.dt.activations))
            kids.append(leaf("loss_upcast", explicit(0.0, upcast, c.dt.activations, "vector", "activations")))
    return CostTree.node(name, kids)


def _select(tree: CostTree, categories: frozenset[str], matmuls: list[int] | None = None) -> CostTree:
    """The leaves of ``tree`` whose tag's category is in ``categories`` (same structure); with ``matmuls`` (a
    running count of the weight matmuls met, in forward order), also every second weight matmul."""
    if not tree.children:
        keep = tree.tag is not None and tree.tag.category in categories
        if matmuls is not None and tree.tag is not None and tree.tag.category == "matmul":
            matmuls[0] += 1
            keep = keep or matmuls[0] % 2 == 0
        return tree if keep else CostTree(tree.name, tag=tree.tag)
    return CostTree.node(tree.name, [_select(ch, categories, matmuls) for ch in tree.children])


def model_costs(
    cfg: TransformerConfig, workload: Workload, dtypes: Dtypes | None = None, remat: str = "none"
) -> CostTree:
    """Every op of the model for ``workload`` (see the module docstring for the tree).
    Train: ``forward``; ``backward`` = 2 x forward (the input- and weight-gradient matmuls,
    Kaplan 2020 section 2.1); ``recompute`` = the forward ops of every layer that the remat
    policy runs again (activations.REMAT_POLICIES: none, selective, selective-op, dots, full)."""
    dtypes = dtypes or Dtypes()
    if workload.phase != "train":
        return forward_costs(cfg, workload, dtypes, "model")
    policy = remat_policy(remat)
    fwd = forward_costs(cfg, workload, dtypes, "forward")
    layers = next(ch for ch in fwd.children if ch.name == "layers")
    if policy.alternate_matmuls:  # the count restarts with each layer (each group's one layer)
        layers = CostTree.node(layers.name, [_select(g, policy.recompute, [0]) for g in layers.children])
    recompute = _renamed(layers if policy.alternate_matmuls else _select(layers, policy.recompute), "recompute")
    return CostTree.node("model", [fwd, _renamed(fwd.scaled(2.0), "backward"), recompute])


TRAIN_PHASES = ("forward", "backward", "recompute")


def train_leaves(tree: CostTree) -> Iterator[tuple[int, str | None, CostTree]]:
    """(phase, layer group, leaf) of every op of a train ``model_costs`` tree: phase indexes
    TRAIN_PHASES; the group is the LayerGroup name of a layer's op, None outside the layers."""
    for phase, branch in enumerate(tree.children):
        # forward and backward: model/{embedding, layers/<group>/..., final_norm, ...}; recompute: <group>/...
        for top in (branch,) if phase == 2 else branch.children:
            if not top.children:
                yield phase, None, top
            for group in top.children:
                for _, op in group.leaves():
                    yield phase, group.name, op
