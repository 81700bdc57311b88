"""Elementwise ops run eagerly: one kernel per PyTorch op, each reading and writing HBM.

The layer's ops in model/transformer.py price each elementwise op (a norm, the rotary embedding, the
gated activation) as ONE kernel that reads its inputs and writes its output once, as a compiler fuses
them (torch.compile's Inductor, XLA, hand-fused kernels of Megatron / Transformer Engine). A stack that
runs the model's PyTorch code eagerly launches one kernel per op instead, and each kernel reads its
operands from HBM and writes its result back. ``Workload(fused=False)`` adds, beside each such op, a
companion op (``<op>_unfused``, tagged ``unfused``) carrying the eager kernels' bytes beyond the fused
op's: memory traffic only (the FLOPs are the fused op's), in the op's category, so the backward pass
(2 x forward) and a remat policy's recompute price it as they price the op.

Kernels per element, as torchtitan writes its Llama (pytorch/torchtitan at 9dec370ad26b, the commit its
benchmarks/llama3_h100_202412_torchtitan.md names; files torchtitan/models/norms.py and
torchtitan/models/llama/model.py). ``a`` is the activation dtype's bytes, fp32 is 4 bytes:

- RMSNorm (``RMSNorm.forward``: ``self._norm(x.float()).type_as(x) * self.weight`` with
  ``_norm(x) = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)``): ``float`` (read a, write 4),
  ``pow`` (read 4, write 4), ``mean`` (read 4; writes one value a row), ``add`` eps and ``rsqrt`` (one
  value a row: no traffic per element), ``mul`` by the rsqrt (read 4, write 4), ``type_as`` (read 4,
  write a), ``mul`` by the weight (read a, write a): 8 kernels, 4a + 28 bytes an element against the fused
  op's 2a. A LayerNorm runs as one native kernel (``F.layer_norm``) eagerly too: nothing added.
- Rotary embedding (``apply_rotary_emb``, on q and on k): ``float`` (read a, write 4), the complex
  multiply by ``freqs_cis`` (read 8, write 8 per pair, i.e. 4 and 4 an element; ``view_as_complex`` /
  ``view_as_real`` / ``flatten`` are views), ``type_as`` (read 4, write a): 3 kernels a tensor, 2a + 16
  bytes an element against the fused 2a.
- Gated activation (``FeedForward.forward``: ``F.silu(self.w1(x)) * self.w3(x)``): the activation
  (read a, write a) and the multiply (read 2a, write a): 2 kernels, 5a bytes an element against the
  fused 3a. An ungated activation is one kernel either way: nothing added.
- Residual adds are one kernel either way (read 2a, write a), as the layer already prices them.

What a compiled graph also fuses and is not counted here (so the term is a lower bound of eager's
extra traffic): a residual add into the next norm. Copies a compiled graph makes too are the stack's, priced
whatever the compile setting: ``repeat_kv``'s (``kv_expand_bytes``) and the fp32 loss (``loss_upcast_bytes``),
each switched by the framework (plan/train/framework.py); the attention output's ``transpose(1, 2).contiguous()``
is not counted (the flash kernel's output is laid out sequence-major already).
"""

from __future__ import annotations

from rooftop.model.config import TransformerConfig

FP32_BYTES = 4.0


def unfused_norm(cfg: TransformerConfig, act_bytes: float) -> tuple[int, float]:
    """(kernels, extra bytes per normalised element) of one eager norm of ``cfg``'s kind (module docstring)."""
    if cfg.norm != "rmsnorm":  # a LayerNorm: one native kernel
        return 1, 0.0
    eager = (act_bytes + FP32_BYTES) + 2 * FP32_BYTES + FP32_BYTES + 2 * FP32_BYTES + (FP32_BYTES + act_bytes)
    eager += 2 * act_bytes
    return 8, eager - 2 * act_bytes


def unfused_rope(act_bytes: float) -> tuple[int, float]:
    """(kernels per rotated tensor, extra bytes per rotated element) of eager rotary embedding."""
    eager = (act_bytes + FP32_BYTES) + 2 * FP32_BYTES + (FP32_BYTES + act_bytes)
    return 3, eager - 2 * act_bytes


def unfused_act(cfg: TransformerConfig, act_bytes: float) -> tuple[int, float]:
    """(kernels, extra bytes per hidden element) of ``cfg``'s eager MLP activation."""
    if not cfg.mlp_kind.gated:
        return 1, 0.0
    return 2, (2 * act_bytes + 3 * act_bytes) - 3 * act_bytes


def unfused_kernels_per_layer(cfg: TransformerConfig) -> int:
    """Elementwise kernels one dense layer's forward launches eagerly: two norms, rotary on q and k (if
    rotary), the activation, two residual adds."""
    rope = 2 * unfused_rope(2.0)[0] if cfg.positions == "rotary" else 0
    return 2 * unfused_norm(cfg, 2.0)[0] + rope + unfused_act(cfg, 2.0)[0] + 2


def kv_expand_bytes(cfg: TransformerConfig, act_bytes: float) -> float:
    """HBM bytes per token and layer of copying a grouped-query layer's K and V out to every query head before
    an attention kernel that needs one K,V head per query head (``Workload.expand_kv``; torchtitan's Llama at
    9dec370ad26b, torchtitan/models/llama/model.py: ``repeat_kv`` = unsqueeze, expand, reshape, a copy, before
    F.scaled_dot_product_attention): the copy reads the KV heads and writes the query heads' worth, and the
    kernel then reads the expanded K and V, N - K heads more than the attention core counts:
    2 H (K + N + (N - K)) a. Its backward (2 x forward) stands for the kernel's full-size dK, dV and their sum
    back to the KV heads. 0 without grouping (K = N). Compiled or eager alike (a graph materialises it too)."""
    n, k = cfg.n_heads, cfg.n_kv_heads
    return 2 * cfg.head_dim * (k + n + (n - k)) * act_bytes if k < n else 0.0


def loss_upcast_bytes(act_bytes: float) -> float:
    """HBM bytes per logit of casting the logits to fp32 before the cross-entropy, which then runs on the fp32
    copy (``Workload.loss_fp32``; torchtitan at 9dec370ad26b, train.py: ``cross_entropy(pred.flatten(0,
    1).float(), ...)``, outside the compiled blocks): the cast reads a and writes 4, the log-softmax reads and
    writes 4 where the fused ``loss`` op counts a each way: 12 - a beyond it (its backward, 2 x forward, the
    gradient's fp32 passes and the cast back)."""
    return 3 * FP32_BYTES - act_bytes
