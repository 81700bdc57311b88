"""The training step model against hand-derived formulas (efficiencies at 1)."""

import dataclasses
import math

import pytest

from rooftop.cost.collectives import collective_time
from rooftop.cost.cost import Comm
from rooftop.cost.efficiency import IDEAL
from rooftop.errors import InvalidConfigError
from rooftop.hardware.catalog import get_chip
from rooftop.hardware.topology import parse_topology
from rooftop.model.catalog import get_model
from rooftop.model.params import param_tree
from rooftop.plan.train.comm import CommPricer
from rooftop.plan.train.framework import get_framework
from rooftop.plan.train.layout import Parallelism, validate
from rooftop.plan.train.profile import model_profile
from rooftop.plan.train.step import TrainingSetup, evaluate, layout_mesh

CFG = get_model("llama-2-7b")  # 32 layers, D=4096, 32 heads (MHA), F=11008


def _setup(chip: str, topo: str, batch: int, seq: int = 2048, **eff: float) -> TrainingSetup:
    c = get_chip(chip)
    return TrainingSetup(CFG, c, parse_topology(c, topo), batch, seq, IDEAL.replace(**eff))


def _run(setup: TrainingSetup, par: Parallelism):
    validate(par, setup.cfg, setup.chips, setup.global_batch, setup.seq_len)
    mesh = layout_mesh(setup.topology, par)
    return evaluate(setup, par, CommPricer(mesh, setup.chip, 1.0)), mesh


def test_pure_dp_gradient_all_reduce_is_the_collective_rule() -> None:
    setup = _setup("h100", "4x8", batch=64, dp_overlap=0.0)
    r, mesh = _run(setup, Parallelism(dp=32, zero_stage=1))
    params = param_tree(CFG).params
    expected = collective_time(Comm("all-reduce", ("dp",), params * 2), mesh).time_s  # bf16 gradients
    assert r.breakdown["data_parallel"] == pytest.approx(expected)
    # and the ring all-reduce is ~ 2 x (N-1)/N x bytes over the slowest (fabric) level: 50 GB/s per GPU NIC
    assert expected == pytest.approx(2 * (4 - 1) / 4 * params * 2 / 8 / 50e9, rel=0.35)


def test_pure_tp_collectives_per_layer() -> None:
    setup = _setup("h100", "1x8", batch=8)
    r, mesh = _run(setup, Parallelism(tp=8, microbatches=1))
    act = 8 * 2048 * 4096 * 2  # tokens x D x bf16: the gathered activation of each collective
    one = 2 * collective_time(Comm("all-gather", ("tp",), act), mesh).time_s
    one += 2 * collective_time(Comm("reduce-scatter", ("tp",), act), mesh).time_s
    assert r.breakdown["tensor_parallel"] == pytest.approx(32 * 2 * one)  # 32 layers, forward + backward


def test_selective_op_recompute_gathers_the_tp_inputs_again() -> None:
    """torchtitan's per-op selective checkpointing saves the reduce-scatters' outputs but not the all-gathers'
    (model/activations.py, selective-op): the recompute gathers each region's input again, one all-gather per
    region, 2 per layer, beyond the forward's 2 + 2 and the backward's 2 + 2 collectives; Megatron's selective
    recompute (the attention core, whose inputs are local to each rank) gathers nothing again."""
    setup = _setup("h100", "1x8", batch=8)
    r_op, mesh = _run(setup, Parallelism(tp=8, microbatches=1, remat="selective-op"))
    r_sel, _ = _run(setup, Parallelism(tp=8, microbatches=1, remat="selective"))
    act = 8 * 2048 * 4096 * 2  # tokens x D x bf16
    ag = collective_time(Comm("all-gather", ("tp",), act), mesh).time_s
    rs = collective_time(Comm("reduce-scatter", ("tp",), act), mesh).time_s
    assert r_sel.breakdown["tensor_parallel"] == pytest.approx(32 * 2 * (2 * ag + 2 * rs))
    assert r_op.breakdown["tensor_parallel"] == pytest.approx(32 * (2 * (2 * ag + 2 * rs) + 2 * ag))


def test_parallel_layers_halve_the_tp_collectives() -> None:
    """A parallel layer (PaLM: y = x + Attn(LN x) + MLP(LN x)) gathers its input once for attention and the
    MLP and reduce-scatters their summed output once: 1 + 1 collectives per layer and pass, not 2 + 2."""
    c = get_chip("h100")
    cfg = dataclasses.replace(CFG, parallel_layers=True, norms_per_layer=1)
    setup = TrainingSetup(cfg, c, parse_topology(c, "1x8"), 8, 2048, IDEAL)
    r, mesh = _run(setup, Parallelism(tp=8, microbatches=1))
    act = 8 * 2048 * 4096 * 2  # tokens x D x bf16
    one = collective_time(Comm("all-gather", ("tp",), act), mesh).time_s
    one += collective_time(Comm("reduce-scatter", ("tp",), act), mesh).time_s
    assert r.breakdown["tensor_parallel"] == pytest.approx(32 * 2 * one)  # 32 layers, forward + backward


def test_interleaved_pipeline_sends_hide_behind_a_chunk() -> None:
    """Megatron-Core's interleaved schedule overlaps each send/receive with the next model chunk's compute:
    exposed only where a send outlasts a chunk's forward (or backward). Without the overlap, 2 v sends per
    microbatch, each the stage boundary's activations (tokens x D x bf16) over the pp axis."""
    c = get_chip("h100")
    stack = get_framework("megatron")
    assert stack.p2p_overlap
    par = Parallelism(dp=8, pp=4, microbatches=8, virtual_stages=2, zero_stage=1)
    for overlap in (True, False):
        setup = TrainingSetup(
            CFG, c, parse_topology(c, "4x8"), 64, 2048, IDEAL, framework=dataclasses.replace(stack, p2p_overlap=overlap)
        )
        r, mesh = _run(setup, par)
        send = collective_time(Comm("permute", ("pp",), 1 * 2048 * 4096 * 2), mesh).time_s  # 1 sequence/microbatch
        chunk = r.breakdown["compute_forward"] / 8 / 2  # one microbatch's forward on one of the 2 chunks
        assert 0 < send < chunk  # so every send hides (the backward chunk is longer still)
        assert r.breakdown["pipeline_p2p"] == pytest.approx(0.0 if overlap else 8 * 2 * 2 * send)


def test_pure_fsdp_exposed_gathers_without_overlap() -> None:
    setup = _setup("tpu-v5e", "16x16", batch=256, fsdp_overlap=0.0)
    r, mesh = _run(setup, Parallelism(fsdp=256, microbatches=1))
    prof = model_profile(CFG, 2048, "none", setup.chip, setup.efficiency)
    layer_bytes = prof.groups[0].params * 2
    ag = collective_time(Comm("all-gather", ("fsdp",), layer_bytes), mesh).time_s
    rs = collective_time(Comm("reduce-scatter", ("fsdp",), layer_bytes), mesh).time_s
    edge_bytes = (param_tree(CFG).params - 32 * prof.groups[0].params) * 2  # embedding + head + final norm
    edge = 2 * collective_time(Comm("all-gather", ("fsdp",), edge_bytes), mesh).time_s
    edge += collective_time(Comm("reduce-scatter", ("fsdp",), edge_bytes), mesh).time_s
    assert r.breakdown["fsdp"] == pytest.approx(32 * (2 * ag + rs) + edge)


def test_compute_is_at_least_model_flops_over_peak() -> None:
    setup = _setup("tpu-v5e", "16x16", batch=256)
    r, _ = _run(setup, Parallelism(fsdp=256))
    floor = r.model_flops_per_step / (256 * 197e12)
    assert floor <= r.compute_s <= 1.15 * floor
    assert r.mfu <= 1.0


def test_pipeline_bubble_fraction() -> None:
    setup = _setup("h100", "4x8", batch=64)
    r, _ = _run(setup, Parallelism(dp=8, pp=4, microbatches=8, zero_stage=1))
    per_mb = (r.compute_s + r.breakdown["pipeline_p2p"]) / 8
    assert r.breakdown["pipeline_bubble"] == pytest.approx(per_mb * (4 - 1))
    r2, _ = _run(setup, Parallelism(dp=8, pp=4, microbatches=8, virtual_stages=2, zero_stage=1))
    assert r2.breakdown["pipeline_bubble"] < r.breakdown["pipeline_bubble"]


def test_memory_terms_by_hand() -> None:
    setup = _setup("tpu-v5e", "16x16", batch=256)
    r, _ = _run(setup, Parallelism(fsdp=256, remat="full"))
    params = param_tree(CFG).params
    assert r.memory["weights"] == pytest.approx(params * 2 / 256)
    assert r.memory["gradients"] == pytest.approx(params * 2 / 256)
    assert r.memory["optimizer"] == pytest.approx(params * (4 + 8) / 256)
    # full remat keeps each layer's input: 2 bytes x D per token per layer, 1 sequence per chip
    assert r.memory["activations"] == pytest.approx(32 * 2048 * 4096 * 2, rel=0.01)


def test_zero_and_offload_move_memory() -> None:
    setup = _setup("h100", "1x8", batch=8)
    z1, _ = _run(setup, Parallelism(dp=8, zero_stage=1))
    z2, _ = _run(setup, Parallelism(dp=8, zero_stage=2))
    off, _ = _run(setup, Parallelism(dp=8, zero_stage=1, offload="optimizer"))
    assert z2.memory["gradients"] == pytest.approx(z1.memory["gradients"] / 8)
    assert off.memory["optimizer"] == 0 and off.breakdown["offload"] > 0


@pytest.mark.parametrize(
    ("par", "message"),
    [
        (Parallelism(tp=3, dp=1), r"dp\*fsdp\*tp\*pp\*cp = 1\*1\*3\*1\*1 = 3, not the 256 chips"),
        (Parallelism(tp=64, dp=4), "tp=64 does not divide n_heads=32"),
        (Parallelism(pp=256, dp=1), "pp x virtual_stages=256 exceeds n_layers=32"),
        (Parallelism(dp=256, microbatches=3), "1 sequence per replica cannot fill 3 microbatches"),
        (Parallelism(dp=128, ep=2, pp=2), "needs a mixture-of-experts model"),
    ],
)
def test_invalid_layouts_say_why(par: Parallelism, message: str) -> None:
    with pytest.raises(InvalidConfigError, match=message):
        validate(par, CFG, 256, 256, 2048)


def test_critical_tokens_per_chip_rule() -> None:
    """Pure FSDP hides its traffic only above ~C / (W_bidir x axes) tokens per chip (Part 5)."""
    chip = get_chip("tpu-v5e")
    crit = chip.flops_per_s("bf16") / (2 * chip.link_bytes_per_s * 2)  # 2 ICI axes on a 16x16 slice
    fsdp = Parallelism(fsdp=256, microbatches=1)
    seq = 2048
    lo = _setup("tpu-v5e", "16x16", batch=256, seq=seq)  # 2048 tokens per chip
    assert 2048 > 1.5 * crit
    r_hi, mesh = _run(lo, fsdp)
    prof = model_profile(CFG, seq, "none", lo.chip, lo.efficiency)
    edge_bytes = (param_tree(CFG).params - 32 * prof.groups[0].params) * 2
    edge = 2 * collective_time(Comm("all-gather", ("fsdp",), edge_bytes), mesh).time_s
    edge += collective_time(Comm("reduce-scatter", ("fsdp",), edge_bytes), mesh).time_s
    # every layer's traffic hidden but the pass's first gather and last reduce-scatter (nothing to hide behind)
    layer_bytes = prof.groups[0].params * 2
    fill = collective_time(Comm("all-gather", ("fsdp",), layer_bytes), mesh).time_s
    fill += collective_time(Comm("reduce-scatter", ("fsdp",), layer_bytes), mesh).time_s
    assert r_hi.breakdown["fsdp"] == pytest.approx(edge + fill)  # only the ends exposed
    tiny = _setup("tpu-v5e", "16x16", batch=256, seq=128)  # 128 tokens per chip, far below
    r_lo, _ = _run(tiny, fsdp)
    assert r_lo.breakdown["fsdp"] > 3 * edge  # the layers' gathers are exposed too
    assert math.isfinite(r_lo.step_time_s)


def test_expert_parallel_state_is_not_sharded_twice() -> None:
    """ep ranks hold different experts: with ep carved from fsdp the experts are ZeRO-sharded only
    over fsdp / ep; carved from dp they are whole on each ep rank (ZeRO-0)."""
    cfg = get_model("mixtral-8x7b")
    chip = get_chip("h100")
    setup = TrainingSetup(cfg, chip, parse_topology(chip, "1x8"), 8, 2048, IDEAL)
    tree = param_tree(cfg)
    experts = sum(g.expert_params * g.count for g in model_profile(cfg, 2048, "full", chip, IDEAL).groups)
    dense = tree.params - experts
    in_fsdp, _ = _run(setup, Parallelism(fsdp=8, ep=8, remat="full"))
    assert in_fsdp.memory["weights"] == pytest.approx((dense / 8 + experts / 8) * 2)
    in_dp, _ = _run(setup, Parallelism(dp=8, ep=8, remat="full"))
    assert in_dp.memory["weights"] == pytest.approx((dense + experts / 8) * 2)


def test_context_parallel_ranks_reduce_their_gradients() -> None:
    cfg = get_model("llama-3-8b")
    chip = get_chip("h100")
    setup = TrainingSetup(cfg, chip, parse_topology(chip, "2x8"), 2, 32768, IDEAL.replace(dp_overlap=0.0))
    dp, _ = _run(setup, Parallelism(tp=8, dp=2, zero_stage=1, remat="full"))
    cp, _ = _run(setup, Parallelism(tp=8, cp=2, dp=1, microbatches=2, remat="full"))
    assert cp.breakdown["data_parallel"] > 0
    assert cp.breakdown["data_parallel"] == pytest.approx(dp.breakdown["data_parallel"], rel=0.05)


def test_flash_attention_keeps_no_probabilities() -> None:
    flash = _setup("h100", "1x8", batch=8)
    unfused = TrainingSetup(CFG, flash.chip, flash.topology, 8, 2048, IDEAL, flash_attention=False)
    par = Parallelism(dp=8, zero_stage=1)
    a, _ = _run(flash, par)
    b, _ = _run(unfused, par)
    # unfused keeps N x T bf16 probabilities per token per layer; flash 2 N (fp32 logsumexp)
    assert b.memory["activations"] - a.memory["activations"] == pytest.approx(32 * 2048 * (32 * 2048 - 2 * 32) * 2)


def test_pipeline_stage_holds_its_layers_and_the_edges() -> None:
    cfg = get_model("llama-3.1-405b")
    chip = get_chip("h100")
    setup = TrainingSetup(cfg, chip, parse_topology(chip, "16x8"), 64, 4096, IDEAL)
    r, _ = _run(setup, Parallelism(tp=8, pp=16, dp=1, microbatches=64, remat="full"))
    prof = model_profile(cfg, 4096, "full", chip, IDEAL)
    layer = prof.groups[0].params
    # every weight over tp = 8 but the norms, which each rank keeps whole (two per layer, and the final one)
    norms = math.ceil(126 / 16) * 2 * 16384 + 16384
    held = (math.ceil(126 / 16) * layer + prof.edge_params - norms) / 8 + norms
    assert r.memory["weights"] == pytest.approx(held * 2)


def test_zero_3_over_dp_points_to_fsdp() -> None:
    with pytest.raises(InvalidConfigError, match="that is fsdp"):
        Parallelism(dp=8, zero_stage=3)
