"""MoE training: the expert all-to-all hidden behind attention and shared-expert compute (ep_overlap),
node-limited routing (--max-nodes-per-token), FP8 GEMMs (--compute-dtype)."""

from __future__ import annotations

import pytest

from rooftop.cost.efficiency import default_efficiency
from rooftop.cost.figures import CollectiveFigures
from rooftop.hardware.catalog import get_chip
from rooftop.hardware.topology import parse_topology
from rooftop.model.catalog import get_model
from rooftop.model.workload import Dtypes
from rooftop.plan.train.comm import CommPricer, node_limited_factor
from rooftop.plan.train.layout import Parallelism
from rooftop.plan.train.step import TrainingSetup, evaluate, layout_mesh
from tests.conftest import run_cli

H100 = get_chip("h100")
PAR = Parallelism(dp=128, pp=16, ep=64, microbatches=31, remat="full", zero_stage=1)


def _step(**changes: object):
    eff = default_efficiency("training")
    overlap = changes.pop("ep_overlap", None)
    if overlap is not None:
        eff = eff.replace(ep_overlap=overlap)  # type: ignore[arg-type]
    setup = TrainingSetup(
        get_model("deepseek-v3"),
        H100,
        parse_topology(H100, "256x8"),
        4096,
        4096,
        eff,
        **changes,  # type: ignore[arg-type]
    )
    return setup, evaluate(setup, PAR, CommPricer(layout_mesh(setup.topology, PAR), H100, eff.network))


def test_node_limited_factor_by_hand() -> None:
    # ep=64 over 8-GPU nodes spans 8 nodes; top-8 routing falls on 8 (1 - (7/8)^8) = 5.25 distinct nodes
    # on average; with at most 4 nodes per token, 4 copies of a token cross the fabric instead of 8.
    setup, _ = _step()
    mesh = layout_mesh(setup.topology, PAR)
    cfg = setup.cfg
    assert node_limited_factor(4, mesh, cfg) == pytest.approx(4 / 8)
    assert node_limited_factor(6, mesh, cfg) == pytest.approx(8 * (1 - (7 / 8) ** 8) / 8)
    assert node_limited_factor(0, mesh, cfg) == 1.0
    inside = Parallelism(dp=128, pp=16, ep=8, microbatches=31, remat="full")
    assert node_limited_factor(4, layout_mesh(setup.topology, inside), cfg) == 1.0  # one node: nothing crosses


def test_a_node_limit_that_cannot_bind_changes_nothing() -> None:
    """Was: --max-nodes-per-token 8 (ep=64 spans 8 nodes, top-8 routing: no token can reach more than 8
    nodes) cut the expert all-to-all to 5.25 / 8 of its bytes (de-duplicated per node) though nothing is
    limited. A limit binds only below min(top_k, nodes); tightening it never lengthens the step."""
    setup, free = _step()
    mesh = layout_mesh(setup.topology, PAR)
    assert [node_limited_factor(m, mesh, setup.cfg) for m in (8, 9, 64)] == [1.0, 1.0, 1.0]
    for m in (8, 9):
        _, limited = _step(max_nodes_per_token=m)
        assert limited.step_time_s == free.step_time_s and limited.breakdown == free.breakdown
    factors = [node_limited_factor(m, mesh, setup.cfg) for m in range(1, 10)]
    assert factors == sorted(factors) and factors[6] == pytest.approx(8 * (1 - (7 / 8) ** 8) / 8)


def test_overlap_and_node_limit_only_ever_shorten_the_step() -> None:
    _, exposed = _step(ep_overlap=0.0)
    _, overlapped = _step()
    _, limited = _step(max_nodes_per_token=4)
    assert exposed.breakdown["expert_parallel"] > overlapped.breakdown["expert_parallel"] > 0
    assert limited.breakdown["expert_parallel"] < overlapped.breakdown["expert_parallel"]
    assert exposed.step_time_s > overlapped.step_time_s > limited.step_time_s
    # the compute itself is the same: only what hides the all-to-all changed
    assert exposed.compute_s == pytest.approx(overlapped.compute_s)


def test_fp8_gemms_halve_the_weight_matmuls_on_h100() -> None:
    """FP8 GEMMs run at 2x the bf16 peak on an H100 (1979 vs 989.5 TFLOP/s dense): the compute of a dense
    model's step with --compute-dtype fp8 is between half and all of the bf16 one (attention and the
    vector work stay in bf16), while model FLOPs and the MFU's bf16 denominator stay."""
    cfg = get_model("llama-3-8b")
    eff = default_efficiency("training").replace(matrix_shape=0.0)
    par = Parallelism(dp=8, microbatches=4, remat="none")
    out = {}
    for dt in (Dtypes(), Dtypes(matmul="fp8")):
        setup = TrainingSetup(cfg, H100, parse_topology(H100, "1x8"), 32, 4096, eff, dtypes=dt)
        out[dt.matmul] = evaluate(setup, par, CommPricer(layout_mesh(setup.topology, par), H100, eff.network))
    bf16, fp8 = out[""], out["fp8"]
    assert 0.5 * bf16.compute_s < fp8.compute_s < 0.75 * bf16.compute_s
    assert fp8.model_flops_per_step == bf16.model_flops_per_step and fp8.peak_flops_per_s == bf16.peak_flops_per_s


def test_cli_flags_and_their_errors() -> None:
    code, out, _ = run_cli(
        "train", "deepseek-v3", "--chip", "h100", "--chips", "2048", "--batch-tokens", "16M", "--seq-len", "4096",
        "--fix", "dp=128,pp=16,ep=64,tp=1", "--max-nodes-per-token", "4", "--compute-dtype", "fp8", "--json",
    )  # fmt: skip
    assert code == 0
    import json

    data = json.loads(out)
    assert data["max_nodes_per_token"] == 4 and data["compute_dtype"] == "fp8"
    code, _, err = run_cli(
        "train", "llama-3-8b", "--chip", "a100", "--chips", "8", "--batch-tokens", "1M", "--seq-len", "4096",
        "--compute-dtype", "fp8",
    )  # fmt: skip
    assert code == 2 and "a100's matrix unit has no fp8 peak" in err and err.count("\n") == 1
    code, _, err = run_cli(
        "train", "llama-3-8b", "--chip", "h100", "--chips", "8", "--batch-tokens", "1M", "--seq-len", "4096",
        "--max-nodes-per-token", "4",
    )  # fmt: skip
    assert code == 2 and "dense" in err


def test_fp8_moves_the_tokens_to_the_experts_in_fp8_and_back_in_bf16() -> None:
    """DeepSeek-V3 report, section 3.3.2: the dispatch (and backward, the gradient before the down projections)
    in FP8, the combine both ways in BF16. A microbatch of 2 sequences (32 a replica in 31 microbatches, the last
    padded) of 4096 tokens on a chip (tp = 1, no node limit) sends 8192 x 8 experts x 7168 elements to the
    experts at 1 byte and back at 2, per MoE layer and pass."""
    from rooftop.plan.train.breakdown import step_breakdown

    routed = 2 * 4096 * 8 * 7168
    for dtypes, to_experts in ((Dtypes(), 2 * routed), (Dtypes(matmul="fp8"), routed)):
        setup, _ = _step(dtypes=dtypes)
        _, parts = step_breakdown(setup, PAR, CommPricer(layout_mesh(setup.topology, PAR), H100, 0.8))
        (ep,) = (p for p in parts if p.name == "expert_parallel")
        sizes = {t.figures.bytes for t in ep.terms if isinstance(t.figures, CollectiveFigures)}
        assert sizes == {to_experts, 2 * routed}


def test_fp8_matmul_inputs_are_kept_in_fp8() -> None:
    """Llama 3 8B, no remat, fused attention: of what a layer keeps per token, the matmuls' inputs (attention
    norm 4096, attention values 32 x 128, MLP norm 4096, SwiGLU output 14336) drop from 2 bytes to 1 with FP8
    GEMMs; under full remat only the layer input is kept, and nothing changes."""
    from rooftop.model.activations import activation_bytes_per_token_layer

    cfg = get_model("llama-3-8b")
    bf16 = activation_bytes_per_token_layer(cfg, 4096, "none", "bf16", flash=True)
    fp8 = activation_bytes_per_token_layer(cfg, 4096, "none", "bf16", flash=True, matmul_dtype="fp8")
    assert bf16 - fp8 == 4096 + 32 * 128 + 4096 + 14336
    full = activation_bytes_per_token_layer(cfg, 4096, "full", "bf16", flash=True, matmul_dtype="fp8")
    assert full == activation_bytes_per_token_layer(cfg, 4096, "full", "bf16", flash=True) == 2 * 4096
