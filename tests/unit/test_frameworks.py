"""Training frameworks (plan/train/framework.py, catalog/frameworks/training.toml): each loads with its
sources, its mechanisms price as documented, and the CLI names the one used."""

from __future__ import annotations

import dataclasses
import json

import pytest

from rooftop.cost.efficiency import default_efficiency
from rooftop.cost.figures import ContentionFigures
from rooftop.cost.roofline import figures_of
from rooftop.errors import UnknownNameError
from rooftop.hardware.catalog import get_chip
from rooftop.hardware.topology import parse_topology
from rooftop.model.catalog import get_model
from rooftop.model.params import params_total
from rooftop.model.passes import forward_costs
from rooftop.model.workload import Dtypes, Workload
from rooftop.plan.train.framework import default_framework, framework_names, get_framework
from rooftop.plan.train.layout import Parallelism
from rooftop.plan.train.plan import plan_training
from rooftop.plan.train.step import TrainingSetup, evaluate, layout_mesh
from tests.conftest import run_cli

H100, A100, V5P = get_chip("h100"), get_chip("a100"), get_chip("tpu-v5p")


def test_every_framework_loads_with_a_source_per_figure() -> None:
    assert set(framework_names()) == {"megatron", "megatron-2021", "pytorch-fsdp1", "pytorch-fsdp2", "deepspeed", "xla"}
    for name in framework_names():
        fw = get_framework(name)
        assert {"library", "launch_s", "prefetch", "dp_overlap", "attention", "grad_clip"} <= set(fw.sources)
        assert all(fw.sources.values())
    assert default_framework(H100).name == "megatron" and default_framework(V5P).name == "xla"
    assert get_framework("megatron").algorithm is not None and get_framework("xla").algorithm is None
    with pytest.raises(UnknownNameError, match="did you mean deepspeed"):
        get_framework("deepspeedx")


def _step(framework: str, chip=H100, model: str = "llama-3-8b", par: Parallelism | None = None, seq: int = 8192,
          fused: bool | None = True, **changes: object):  # fmt: skip
    """``fused``: elementwise ops compiled (default, so stacks compare on the mechanism under test), None: the
    framework's; ``changes``: fields of the framework replaced (to compare stacks on one mechanism)."""
    fw = dataclasses.replace(get_framework(framework), **changes)  # type: ignore[arg-type]
    setup = TrainingSetup(
        get_model(model), chip, parse_topology(chip, "1x8"), 16, seq, fw.efficiency(default_efficiency("training")),
        framework=fw, fused_elementwise=fused,
    )  # fmt: skip
    par = par or Parallelism(fsdp=8, microbatches=2, remat="full")
    return setup, evaluate(setup, par, setup.pricer(layout_mesh(setup.topology, par)))


def test_flash_attention_2_caps_the_attention_core_on_h100() -> None:
    """FlashAttention-2 sustains 35% of an H100's datasheet peak (FlashAttention-3 paper), under the other
    matmuls' matrix x 0.803: the attention core runs at 0.35 / (matrix x 0.803) of their rate, so the step of a
    FlashAttention-2 stack is slower than the same step with FlashAttention-3 (75%: no cap), and on an A100
    (72% against matrix x 0.869, 0.72 with matrix 0.83) the cap does not bind (FSDP2's other kernel terms, the
    K,V copies and the fp32 loss, off so that the stacks differ in the attention kernel only)."""
    _, fa2 = _step("pytorch-fsdp2")
    _, fa3 = _step("megatron")
    assert fa2.compute_s > 1.05 * fa3.compute_s
    _setup, a100_fa2 = _step("pytorch-fsdp2", A100, expand_kv=False, loss_fp32=False)
    _, a100_fa3 = _step("megatron", A100)
    assert a100_fa2.compute_s == pytest.approx(a100_fa3.compute_s)
    from rooftop.plan.train.step import profile_for

    scale = profile_for(_step("pytorch-fsdp2")[0], "full").core_scale
    assert scale == pytest.approx(0.35 / (default_efficiency("training").matrix * 0.803))


def test_fsdp2_copies_each_gathered_layer_out_on_the_compute_stream() -> None:
    """FSDP2 copies every all-gather's output into the parameters' unsharded tensors on the compute stream, a
    read and a write of each gathered byte (gather_copy 2): at fsdp=8, resharded, each of 2 microbatches gathers
    all P parameters twice (forward, backward) in bf16, so the step's fsdp part grows by 2 x 2 x (2 x P x 2)
    bytes over HBM at its efficiency, never hidden; FSDP1 gathers into its flat parameter (no copy)."""
    setup, copied = _step("pytorch-fsdp2")
    _, plain = _step("pytorch-fsdp2", gather_copy=0.0)
    p = params_total(get_model("llama-3-8b"))
    copy_bytes = 2 * 2 * (2 * p * 2)
    extra = copy_bytes / (H100.hbm_bytes_per_s * setup.efficiency.hbm)
    assert copied.breakdown["fsdp"] - plain.breakdown["fsdp"] == pytest.approx(extra)
    assert get_framework("pytorch-fsdp1").gather_copy == 0


def test_foreach_adamw_passes_over_the_state() -> None:
    """torchtitan's AdamW runs foreach (torch's _multi_tensor_adamw, one kernel per operation): 4 u + 14 s + 2 g
    bytes a parameter against the fused pass's g + 2 u + 4 s, here 50 more (u = s = 4 for the fp32 master and
    moments, g = 2 for bf16 gradients); at fsdp=8 each chip updates P / 8 parameters, memory-bound."""
    setup, foreach = _step("pytorch-fsdp2")
    _, fused = _step("pytorch-fsdp2", foreach_optimizer=False)
    p = params_total(get_model("llama-3-8b"))
    extra = p / 8 * (2 * 4 + 10 * 4 + 2) / (H100.hbm_bytes_per_s * setup.efficiency.hbm)
    assert foreach.breakdown["optimizer"] - fused.breakdown["optimizer"] == pytest.approx(extra)
    assert not get_framework("megatron").foreach_optimizer


def _leaf_bytes(name: str, model: str, **work: bool) -> float:
    cfg = get_model(model)
    tree = forward_costs(cfg, Workload("train", 2, 4096, **work), Dtypes(), "forward")
    return sum(leaf.cost.hbm_bytes for path, leaf in tree.leaves() if path.endswith("/" + name))


def test_expanded_kv_and_fp32_loss_bytes() -> None:
    """torchtitan's repeat_kv: per token and layer, read the 8 KV heads' K and V, write 32 heads' worth, and the
    attention kernel then reads 32 - 8 more heads of each: 2 x 128 x (8 + 32 + 24) x 2 bytes (Llama 3 8B: 32
    layers, head dim 128); none for a model whose KV heads are its query heads (Llama 2 7B). The fp32 loss: per
    logit, the cast reads 2 and writes 4, the log-softmax reads and writes 4 where the fused op counts 2 and 2:
    12 - 2 bytes beyond it, over 2 x 4096 tokens x 128,256 logits."""
    tokens = 2 * 4096
    assert _leaf_bytes("kv_expand", "llama-3-8b", expand_kv=True) == pytest.approx(
        32 * tokens * 2 * 128 * (8 + 32 + 24) * 2
    )
    assert _leaf_bytes("kv_expand", "llama-3-8b") == 0
    assert _leaf_bytes("kv_expand", "llama-2-7b", expand_kv=True) == 0
    assert _leaf_bytes("loss_upcast", "llama-3-8b", loss_fp32=True) == pytest.approx(tokens * 128256 * (12 - 2))
    assert get_framework("pytorch-fsdp2").expand_kv and not get_framework("megatron").expand_kv


def test_era_terms_megatron_2021() -> None:
    """Megatron-LM 2021: the gradient all-reduce is not hidden (dp_overlap 0), each pipeline send/receive
    waits 20 us for the host, and the optimizer step clips (one read of the bf16 gradients for the norm,
    one read and one write for the scaling: 3 x 2 bytes more per parameter than Adam's 28)."""
    fw = get_framework("megatron-2021")
    assert fw.dp_overlap == 0.0 and fw.p2p_sync_s == pytest.approx(2e-5) and fw.grad_clip
    assert not fw.fused_attention and fw.dropout
    par = Parallelism(dp=2, pp=4, microbatches=8)
    setup, old = _step("megatron-2021", A100, "llama-2-7b", par, 2048)
    _, new = _step("megatron", A100, "llama-2-7b", par, 2048)
    assert old.breakdown["pipeline_p2p"] - new.breakdown["pipeline_p2p"] == pytest.approx(8 * 2 * 1 * 2e-5)
    assert old.breakdown["data_parallel"] > new.breakdown["data_parallel"]
    plan = plan_training(setup, {"dp": 2, "pp": 4, "microbatches": 8, "remat": "none", "grad_clip": False}, top=1)
    clipped = plan_training(setup, {"dp": 2, "pp": 4, "microbatches": 8, "remat": "none"}, top=1)
    opt = {
        p: next(x for x in plan_.parts[0] if x.name == "optimizer").time_s
        for p, plan_ in (("off", plan), ("on", clipped))
    }
    assert opt["on"] / opt["off"] == pytest.approx((28 + 3 * 2) / 28)
    assert sum(p.time_s for p in clipped.parts[0]) == pytest.approx(clipped.ranked[0].step_time_s)


def test_cli_names_the_framework() -> None:
    base = ["train", "llama-3-8b", "--chip", "h100", "--chips", "16", "--batch-tokens", "1M", "--seq-len", "4096"]
    code, out, _ = run_cli(*base, "--framework", "pytorch-fsdp2", "--json", "--top", "1")
    assert code == 0 and json.loads(out)["framework"] == "pytorch-fsdp2"
    code, out, _ = run_cli(*base, "--json", "--top", "1")
    assert code == 0 and json.loads(out)["framework"] == "megatron"
    code, _, err = run_cli(*base, "--framework", "torch")
    assert code == 2 and "unknown framework 'torch'" in err and "\n" not in err.strip()


def test_hidden_nccl_collectives_take_compute() -> None:
    """An NCCL collective hidden behind compute runs as kernels on the SMs that compute uses, costing
    ``overlap_cost`` seconds of compute per hidden second (catalog: 0.6, fitted): at fsdp=8 over NVLink with 2
    microbatches, every layer's gathers and reduce-scatter are hidden (the layer's compute is longer), so the
    fsdp part grows by overlap_cost x the hidden seconds the ledger records per microbatch x 2, nothing else
    moves, and the breakdown names the term; a TPU's collectives (XLA, DMA engines) take none."""
    from rooftop.plan.train.breakdown import step_breakdown
    from rooftop.plan.train.comm import Ledger
    from rooftop.plan.train.step import profile_for, step_parts

    setup, slowed = _step("pytorch-fsdp1", overlap_cost=0.5)
    _, free = _step("pytorch-fsdp1", overlap_cost=0.0)
    par = Parallelism(fsdp=8, microbatches=2, remat="full")
    ledger = Ledger()
    pricer = setup.pricer(layout_mesh(setup.topology, par))
    step_parts(setup, par, pricer, profile_for(setup, "full"), ledger)
    hidden = ledger.hidden["fsdp"]  # per microbatch, less the pass's first gather and last reduce-scatter
    assert hidden > 0 and ledger.contended["fsdp"] == pytest.approx(hidden)
    assert slowed.breakdown["fsdp"] - free.breakdown["fsdp"] == pytest.approx(0.5 * hidden * 2)
    assert {k: v for k, v in slowed.breakdown.items() if k != "fsdp"} == {
        k: v for k, v in free.breakdown.items() if k != "fsdp"
    }
    parts = {p.name: p for p in step_breakdown(setup, par, pricer)[1]}
    (term,) = (t for t in parts["fsdp"].terms if t.rule == "contention")
    assert term.seconds == pytest.approx(0.5 * hidden * 2) and figures_of(term, ContentionFigures).overlap_cost == 0.5
    assert get_framework("pytorch-fsdp1").overlap_cost == 0.6 and get_framework("xla").overlap_cost == 0.0
