"""Published training runs of PyTorch FSDP stacks, transcribed for benchmarks/accuracy_training.py.

Two sources, each row as published with every setting the source states (nothing tuned here):

- llm-foundry: mosaicml/llm-foundry, scripts/train/benchmarking/README.md, "MPT Training
  Benchmarks", at commit 495218376830947dce625efabc4d86be7c47cc45 (2024-04-22; the tables were
  produced with Composer's PyTorch FSDP, FlashAttention, ``limit_all_gathers``). MPT models
  (mosaicml/llm-foundry scripts/train/yamls/pretrain/mpt-*.yaml): LayerNorm without bias, no
  biases anywhere, GELU MLP of 4 d, vocabulary 50368, tied embeddings; the benchmark's parameter
  counts grow with the sequence length by seq x d_model (learned positions). MFU there is
  (6 N + 12 L d s) tokens/s / (GPUs x peak) with N the table's NumParams, peak 312 TFLOP/s (A100)
  and 989 TFLOP/s (H100) bf16; "Activation Checkpointing" True is full recomputation; "Sharding
  Strategy" FULL_SHARD reshards after the forward, SHARD_GRAD_OP does not; "MP Mode" DEFAULT
  (amp_bf16) reduces gradients in fp32, PURE in bf16. Tables: "H100 80GB BF16 (Large Scale, >=
  128 GPUs)", "H100 80GB BF16", "A100 80GB with 1600 Gbps node-node interconnect (RoCE)" (200 Gb/s
  per GPU, the DGX A100's HDR figure). Rows chosen: every large-scale H100 row of the 70B to 1B
  models at 128 and 512 GPUs (and the 70B's 256), and the 2048-token rows of the smaller tables.
- torchtitan: pytorch/torchtitan, benchmarks/llama3_h100_202412_torchtitan.md (torchtitan 9dec370,
  torch 1963fc8, 2024-12-26) and benchmarks/asyncTP_llama3_h100_2025-06_torchtitan.md (torchtitan
  820504e, 2025-06-13): Llama 3.1 on Grand Teton hosts, 8 H100 per host (96 GB HBM2e at 2.4 TB/s,
  500 W power limit: the page says its peak lies between the SXM's and the NVL's), 400 Gb/s RDMA per
  GPU; FSDP2; tokens per second per GPU. Only the bf16 rows (no Float8): Table 1 and Table 3 (FSDP,
  selective activation checkpointing, local batch 2, with and without torch.compile) and the async-TP
  page's vanilla-TP bf16 rows (torch.compile; 8B: FSDP 8 x TP 8 on 64 GPUs, per-op selective AC, local
  batch 12; 70B: FSDP 32 x TP 8 on 256 GPUs, full AC, local batch 16). The published utilization of a
  throughput row is taken under this project's FLOP count (model flops per token x tokens/s / peak),
  so the error is the throughput's. The chip: catalog/chips/h100-hbm2e.toml (both pages' "Hardware").
  Gradients are reduce-scattered in fp32: torchtitan's --training.mixed_precision_reduce is "float32", its only
  choice, at both commits (torchtitan/config_manager.py), FSDP2's MixedPrecisionPolicy reduce_dtype.
  "Selective" activation checkpointing is the per-op policy (remat "selective-op"): the async-TP page's
  commands pass --activation_checkpoint.selective_ac_option="op", and the 2024-12 tables ran the
  llama3_8b.toml preset, whose [activation_checkpoint] is mode 'selective', selective_ac_option 'op'
  (pytorch/torchtitan train_configs/llama3_8b.toml at 0011fb905e9561a51af0f265e35d989f7448b1d8).
"""

from __future__ import annotations

from dataclasses import dataclass

LLM_FOUNDRY_SOURCE = "llm-foundry MPT benchmarks (495218376, 2024-04)"
TORCHTITAN_SOURCE = "torchtitan Llama 3.1 H100 (2024-12, 2025-06)"

#: MPT sizes: d_model, n_heads, n_layers (mosaicml/llm-foundry scripts/train/yamls/pretrain/mpt-*.yaml)
MPT = {
    "70b": (8192, 64, 80),
    "30b": (7168, 56, 48),
    "13b": (5120, 40, 40),
    "7b": (4096, 32, 32),
    "3b": (2560, 20, 32),
    "1b": (2048, 16, 24),
    "760m": (1536, 12, 24),
}


@dataclass(frozen=True)
class FoundryRow:
    """One row of an llm-foundry table, as published."""

    table: str  # "h100-large", "h100", "a100-80gb"
    model: str
    seq: int
    gpus: int
    mfu: float  # percent, as published
    micro_batch: int
    grad_accum: int
    global_batch: int  # sequences
    precision_mode: str  # "DEFAULT" (fp32 gradient reduction) or "PURE" (bf16)
    sharding: str  # "FULL_SHARD" or "SHARD_GRAD_OP"
    checkpointing: bool
    num_params: int

    @property
    def chip(self) -> str:
        return "a100" if self.table.startswith("a100") else "h100"


def _rows(table: str, text: str) -> list[FoundryRow]:
    """Model | SeqLen | GPUs | MFU | MicroBatch | GradAccum | GlobalBatch | MP Mode | Sharding | AC | NumParams"""
    out = []
    for line in text.strip().splitlines():
        m, s, g, mfu, mb, ga, gb, mp, sh, ac, n = (c.strip() for c in line.split("|"))
        out.append(
            FoundryRow(table, m, int(s), int(g), float(mfu), int(mb), int(ga), int(gb), mp, sh, ac == "True", int(n))
        )
    return out


LLM_FOUNDRY = [
    *_rows(
        "h100-large",
        """
70b | 2048 | 512 | 41.25 | 8 | 1 | 4096 | DEFAULT | FULL_SHARD | True | 64862437376
70b | 2048 | 256 | 42.42 | 8 | 1 | 2048 | DEFAULT | FULL_SHARD | True | 64862437376
70b | 2048 | 128 | 43.36 | 8 | 1 | 1024 | DEFAULT | FULL_SHARD | True | 64862437376
30b | 2048 | 512 | 40.27 | 8 | 1 | 4096 | DEFAULT | FULL_SHARD | True | 29975214080
30b | 2048 | 128 | 41.85 | 8 | 1 | 1024 | DEFAULT | FULL_SHARD | True | 29975214080
13b | 2048 | 512 | 41.12 | 16 | 1 | 8192 | DEFAULT | FULL_SHARD | True | 12853954560
13b | 2048 | 128 | 42.18 | 16 | 1 | 2048 | DEFAULT | FULL_SHARD | True | 12853954560
7b | 2048 | 512 | 42.2 | 6 | 1 | 3072 | DEFAULT | FULL_SHARD | False | 6658859008
7b | 2048 | 128 | 45.71 | 6 | 1 | 768 | DEFAULT | FULL_SHARD | False | 6658859008
3b | 2048 | 512 | 39.24 | 8 | 1 | 4096 | DEFAULT | SHARD_GRAD_OP | False | 2651837440
3b | 2048 | 128 | 42.43 | 8 | 1 | 1024 | DEFAULT | SHARD_GRAD_OP | False | 2651837440
1b | 2048 | 512 | 36.65 | 12 | 1 | 6144 | DEFAULT | SHARD_GRAD_OP | False | 1315950592
1b | 2048 | 128 | 40.6 | 12 | 1 | 1536 | DEFAULT | SHARD_GRAD_OP | False | 1315950592
""",
    ),
    *_rows(
        "h100",
        """
70b | 2048 | 64 | 42.57 | 8 | 4 | 2048 | DEFAULT | FULL_SHARD | True | 64862437376
70b | 2048 | 32 | 36.15 | 2 | 16 | 1024 | DEFAULT | FULL_SHARD | True | 64862437376
30b | 2048 | 32 | 43.92 | 14 | 3 | 1344 | DEFAULT | FULL_SHARD | True | 29975214080
30b | 2048 | 8 | 38.11 | 3 | 21 | 504 | DEFAULT | FULL_SHARD | True | 29975214080
13b | 2048 | 64 | 39.86 | 2 | 1 | 128 | DEFAULT | FULL_SHARD | False | 12853954560
13b | 2048 | 8 | 39.79 | 2 | 1 | 16 | DEFAULT | FULL_SHARD | False | 12853954560
7b | 2048 | 8 | 46.44 | 6 | 1 | 48 | DEFAULT | FULL_SHARD | False | 6658859008
3b | 2048 | 64 | 40.8 | 6 | 3 | 1152 | DEFAULT | FULL_SHARD | False | 2651837440
1b | 2048 | 8 | 41.82 | 14 | 1 | 112 | DEFAULT | FULL_SHARD | False | 1315950592
""",
    ),
    *_rows(
        "a100-80gb",
        """
70b | 2048 | 64 | 53.33 | 8 | 4 | 2048 | PURE | FULL_SHARD | True | 64862437376
70b | 2048 | 32 | 48.56 | 2 | 16 | 1024 | PURE | FULL_SHARD | True | 64862437376
30b | 2048 | 8 | 55.3 | 3 | 21 | 504 | DEFAULT | FULL_SHARD | True | 29975214080
13b | 2048 | 8 | 59.57 | 2 | 3 | 48 | DEFAULT | FULL_SHARD | False | 12853954560
7b | 2048 | 8 | 64.23 | 6 | 2 | 96 | DEFAULT | FULL_SHARD | False | 6658859008
3b | 2048 | 8 | 62.11 | 10 | 2 | 160 | DEFAULT | FULL_SHARD | False | 2651837440
1b | 2048 | 8 | 59.86 | 14 | 4 | 448 | DEFAULT | FULL_SHARD | False | 1315950592
760m | 2048 | 8 | 56.85 | 24 | 2 | 384 | DEFAULT | FULL_SHARD | False | 760470528
""",
    ),
]


@dataclass(frozen=True)
class TitanRow:
    """One bf16 row of torchtitan's published benchmarks, as published."""

    model: str  # catalog name
    gpus: int
    fsdp: int
    tp: int
    local_batch: int  # sequences per data-parallel rank (fsdp) per step
    seq: int
    remat: str  # "selective-op" (torchtitan's per-op selective) or "full" activation checkpointing
    compiled: bool  # torch.compile (fused elementwise kernels)
    tokens_per_s_per_gpu: float
    table: str


TORCHTITAN = [
    TitanRow("llama-3.1-8b", 8, 8, 1, 2, 8192, "selective-op", False, 5762, "2024-12 Table 1, FSDP"),
    TitanRow("llama-3.1-8b", 8, 8, 1, 2, 8192, "selective-op", True, 6667, "2024-12 Table 1, FSDP + torch.compile"),
    TitanRow("llama-3.1-8b", 128, 128, 1, 2, 8192, "selective-op", False, 5605, "2024-12 Table 3, FSDP"),
    TitanRow("llama-3.1-8b", 128, 128, 1, 2, 8192, "selective-op", True, 6514, "2024-12 Table 3, FSDP + torch.compile"),
    TitanRow("llama-3.1-8b", 64, 8, 8, 12, 8192, "selective-op", True, 4378, "2025-06 async TP, 8B vanilla TP bf16"),
    TitanRow("llama-3.1-70b", 256, 32, 8, 16, 8192, "full", True, 597.3, "2025-06 async TP page, 70B vanilla TP bf16"),
]


NEMO_SOURCE = "NeMo 24.07 performance summary (H100, FP8)"


@dataclass(frozen=True)
class NemoRow:
    """One pre-training row of NVIDIA NeMo's performance summary (NVIDIA/NeMo
    docs/source/performance/performance_summary.md, commit 070a0bb168d405d653b9734c0017cf5078e77c0d; container
    NeMo 24.07, DGX-H100, FP8): Megatron-Core with the distributed optimizer, as published. DP = GPUs / (TP x PP
    x CP); the microbatches per replica are GBS / (DP x MBS)."""

    model: str  # catalog name
    gpus: int
    global_batch: int
    micro_batch: int
    seq: int
    tp: int
    pp: int
    cp: int
    vp: int
    tokens_per_s_per_gpu: float


NEMO = [
    NemoRow("gpt-3-175b", 128, 256, 1, 2048, 4, 8, 1, 6, 726),
    NemoRow("gpt-3-175b", 512, 2048, 2, 2048, 4, 8, 1, 6, 782),
    NemoRow("llama-2-7b", 8, 128, 1, 4096, 1, 1, 1, 1, 16847),
    NemoRow("llama-2-13b", 16, 128, 1, 4096, 1, 4, 1, 10, 8646),
    NemoRow("llama-2-70b", 64, 128, 1, 4096, 4, 4, 1, 20, 1707),
    NemoRow("llama-3-8b", 8, 128, 1, 8192, 1, 1, 2, 1, 12036),
    NemoRow("llama-3-70b", 64, 128, 1, 8192, 4, 4, 2, 5, 1533),
]
