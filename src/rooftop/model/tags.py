"""The tag of every op (and weight) model/ makes: what kind of op it is and how it divides over a
tensor-parallel group (cost.OpTag). Written once, here, next to the names model/ gives its ops;
transformer.py puts the tags on the cost tree and memory.py on the parameter tree, and planners
read the tags there, never these names. sharding/tensor.py turns a split into per-chip fractions.
"""

from __future__ import annotations

from rooftop.cost.cost import OpTag, Split

#: Every op model/ makes, with its tag (cost.OpTag): (category, how it divides over a TP group).
#: The categories are what a remat policy recomputes (activations.REMAT_POLICIES); sharding/tensor.py
#: turns a split into per-chip fractions. Planners read the tags on the tree, never these names.
OP_TAGS: dict[str, OpTag] = {
    **dict.fromkeys(
        ("q", "q_b", "kv_b", "q_absorb", "v_up", "gate", "up", "unembedding"), OpTag("matmul", Split.TENSOR)
    ),
    # linear attention and state-space layers: their input projections split by heads (channels) over
    # the TP group as a column-parallel matmul, the output projection row-parallel (Megatron-LM's Mamba)
    **dict.fromkeys(("q_gate", "in_qkvz", "in_ba", "in_proj", "dt_proj"), OpTag("matmul", Split.TENSOR)),
    **dict.fromkeys(("o", "down", "x_proj", "ssm_o"), OpTag("matmul", Split.TENSOR, row_parallel=True)),
    "shared_gate": OpTag("matmul", Split.REPLICATED),
    # the recurrence (gated delta rule, selective scan) over each head's state: attention-like work
    # that divides by heads; its state is the per-sequence cache of these layers
    "scan": OpTag("attention", Split.HEADS),
    **dict.fromkeys(("conv", "decay", "out_norm", "ssm_gate", "ssm_params"), OpTag("elementwise", Split.HEADS)),
    **dict.fromkeys(("k", "v"), OpTag("matmul", Split.KV_HEADS)),
    **dict.fromkeys(("q_a", "kv_a", "router"), OpTag("matmul", Split.REPLICATED)),
    # a FlashAttention backward recomputes the scores and softmax it did not store: 5 matmuls against
    # the forward's 2 (2.5x; Dao 2023, FlashAttention-2, section 3.1)
    **dict.fromkeys(("scores", "softmax"), OpTag("attention", Split.ATTENTION, flash_recompute=True)),
    "values": OpTag("attention", Split.ATTENTION),
    "kv_cache_write": OpTag("io", Split.ATTENTION),
    **dict.fromkeys(("rope", "act", "q_norm", "k_norm"), OpTag("elementwise", Split.HEADS)),
    "kv_expand": OpTag("elementwise", Split.HEADS),
    "loss_upcast": OpTag("elementwise", Split.TOKENS),
    **dict.fromkeys(("q_a_norm", "kv_a_norm", "routing"), OpTag("elementwise", Split.REPLICATED)),
    **dict.fromkeys(("norm", "post_norm", "residual", "combine", "final_norm"), OpTag("elementwise", Split.TOKENS)),
    # the cross-entropy over the vocabulary-parallel head's logits: each rank its vocabulary shard (Megatron's
    # vocab_parallel_cross_entropy; Shoeybi et al. 2019, section 3), whether or not the norms split by tokens
    "loss": OpTag("elementwise", Split.HEADS),
    # the eager kernels' traffic beyond the fused op (model/eager.py), divided as the op they shadow
    **dict.fromkeys(("norm_unfused", "post_norm_unfused"), OpTag("elementwise", Split.TOKENS, unfused=True)),
    **dict.fromkeys(("rope_unfused", "act_unfused"), OpTag("elementwise", Split.HEADS, unfused=True)),
    "embedding": OpTag("lookup", Split.VOCAB),
    "positions": OpTag("elementwise", Split.VOCAB),
}
#: The op category of each leaf name (OP_TAGS' categories).
OP_CATEGORY: dict[str, str] = {name: tag.category for name, tag in OP_TAGS.items()}
