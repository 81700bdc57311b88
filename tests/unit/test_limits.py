"""rooftop limits: each threshold against its value derived by hand from the catalog figures.

Figures used (catalog/chips): TPU v5p C = 4.59e14 FLOP/s bf16, 1e11 B/s per ICI link each way (the book's
9e10), 95 GiB HBM; H100 C = 9.895e14, NVLink 18 x 2.5e10 = 4.5e11 B/s per GPU, 5e10 B/s NIC per GPU,
80 GiB. Every efficiency is 1. A wrapped ring of an axis gathers at 2 x link per chip, so k whole
rings give W = 2 x 1e11 x k (the book's W_ici x n_axes) and an all-gather of V over N chips takes
(N-1)/N x V / W (cost/collectives.py).
"""

from __future__ import annotations

import dataclasses
import math

import pytest

from rooftop.cli.flags import error_line
from rooftop.cost.efficiency import IDEAL
from rooftop.errors import InvalidConfigError
from rooftop.hardware.catalog import get_chip
from rooftop.hardware.topology import parse_topology
from rooftop.model.catalog import get_model
from rooftop.model.params import params_total
from rooftop.plan.limit_values import JobLimits
from rooftop.plan.limits import fsdp_tp_split, job_limits, whole_sequences
from rooftop.report.limits import formulas, limits_payload

V5P, H100 = get_chip("tpu-v5p"), get_chip("h100")
LLAMA70, MIXTRAL = get_model("llama-3-70b"), get_model("mixtral-8x7b")
C_V5P, LINK_V5P = 4.59e14, 1e11
C_H100, NVLINK, NIC = 9.895e14, 18 * 2.5e10, 5e10
F_LLAMA = 28672


def _v5p(topo: str = "16x20x28", batch: int | None = 4_000_000, seq: int | None = 4096, **kw: object) -> JobLimits:
    return job_limits(LLAMA70, V5P, parse_topology(V5P, topo), batch, seq, **kw)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def done_when() -> JobLimits:
    """rooftop limits llama-3-70b --chip tpu-v5p --topology 16x20x28 --batch-tokens 4M --seq-len 4096."""
    return _v5p()


def test_done_when_fsdp_critical_tokens_is_765(done_when: JobLimits) -> None:
    lim = done_when.limit("fsdp_critical_tokens_per_chip", "X+Y+Z")
    n = 16 * 20 * 28
    assert lim.book_value == pytest.approx(4.59e14 / (2 * 1e11 * 3))  # 765: the book's 2550 / 3 with 1e11 links
    assert lim.book_value == pytest.approx(765)
    assert lim.value == pytest.approx((n - 1) / n * C_V5P / (2 * LINK_V5P * 3), rel=1e-9)  # 764.9
    assert lim.value == pytest.approx(2550 / 3 * 9e10 / 1e11, rel=1e-3)  # the book's 850 scaled to the catalog link
    formula, book = formulas(lim, done_when)
    assert "C / W = 459 TFLOP/s / 600 GB/s = 765" in book and "3 wrapped rings x 2 x 100 GB/s" in book
    assert "t x C / (6 P)" in formula and "= 764.9" in formula
    assert dict(lim.figures)["W"] == 3 * 2 * LINK_V5P and dict(lim.figures)["C"] == C_V5P
    per_chip = 977 * 4096 / n  # 4M tokens = 976.6 sequences of 4096, rounded as rooftop train rounds
    assert done_when.tokens_per_chip == pytest.approx(per_chip) and lim.job == pytest.approx(per_chip)
    assert lim.met is False  # 446.6 tokens per chip: pure FSDP cannot hide its gathers on the whole pod


@pytest.mark.parametrize(
    ("axes", "chips", "rings"),
    [("X", 16, 1), ("Y", 20, 1), ("Z", 28, 1), ("Y+Z", 20 * 28, 2), ("X+Y+Z", 16 * 20 * 28, 3)],
)
def test_dp_and_fsdp_critical_tokens_per_axis(done_when: JobLimits, axes: str, chips: int, rings: int) -> None:
    expected = (chips - 1) / chips * C_V5P / (2 * LINK_V5P * rings)  # (N-1)/N x C / (W_bidir x n_axes)
    for name in ("dp_critical_tokens_per_chip", "fsdp_critical_tokens_per_chip"):
        lim = done_when.limit(name, axes)
        assert lim.value == pytest.approx(expected, rel=1e-9)
        assert lim.book_value == pytest.approx(C_V5P / (2 * LINK_V5P * rings))  # 2295 / n_axes


def test_tp_max_degree_per_axis(done_when: JobLimits) -> None:
    """Y <= 1 + F W / C in bf16 (the (Y-1)/Y of a ring gather); the book's Y < F W / C."""
    for axes, rings, chips in (("X", 1, 16), ("Y+Z", 2, 560), ("X+Y+Z", 3, 8960)):
        lim = done_when.limit("tp_max_degree", axes)
        assert lim.book_value == pytest.approx(F_LLAMA * 2 * LINK_V5P * rings / C_V5P)  # 12.49 per axis
        assert lim.value == pytest.approx(1 + F_LLAMA * 2 * LINK_V5P * rings / C_V5P)
        assert lim.job == chips and lim.met is (chips <= lim.value)
    assert 28672 / 2550 == pytest.approx(11.24, abs=0.01)  # the book's ~11 per axis with its 9e10 links


def test_largest_tp_laid_on_the_pod(done_when: JobLimits) -> None:
    """tp=8 next to fsdp=1120 takes the inner 2 of the 20-dim and the inner 4 of the 28-dim: two lines
    (no wraparound on part of a dim) of W = 1e11 each. An all-gather over both: the worst chip receives
    7 of 8 shards over 2W, 7/8 x V / (2W) (the 4-line alone needs 3/4 x V / (2W)). Compute-bound:
    (AG + RS) x 2 bytes x Y x C / (4 F) <= 1. tp=16 (inner 4 of both) gathers 15/16 x V / (2W)."""
    lim = done_when.limit("tp_largest_degree")
    per_byte_8 = 7 / 8 / (2 * LINK_V5P)
    assert lim.value == 8
    assert lim.figure("ratio") == pytest.approx(2 * per_byte_8 * 2 * 8 * C_V5P / (4 * F_LLAMA))  # 0.56
    per_byte_16 = 15 / 16 / (2 * LINK_V5P)
    assert lim.figure("next_degree") == 16
    assert lim.figure("next_ratio") == pytest.approx(2 * per_byte_16 * 2 * 16 * C_V5P / (4 * F_LLAMA))  # 1.20


def test_fsdp_tp_split_reproduces_the_books_example() -> None:
    """Part 5: TPU v5p 4x4x4, F = 32768, B = 48000, alpha = C / W = 2550, M_X = 2, M_Y = 1: "X = 31.7
    ... Y = 2.01", and "BS per device ... around 396" (2 x 2550^2 / F)."""
    s = fsdp_tp_split(48_000, 64, 32_768, 32_768, 2550 / 2, 2550 / 1)
    assert s.x_high == pytest.approx(31.7, abs=0.05)
    assert 64 / s.x_high == pytest.approx(2.02, abs=0.01)
    assert s.min_tokens_per_chip == pytest.approx(2 * 2550**2 / 32_768)  # 396.8
    assert s.x_opt == pytest.approx(math.sqrt(2550 * 64 * 48_000 / (1275 * 32_768)))
    assert s.x_opt == pytest.approx(math.sqrt(s.x_low * s.x_high))  # the roots' mean
    assert s.ratio_at_opt == pytest.approx(s.x_opt * 1275 / 48_000 + 64 * 2550 / (s.x_opt * 32_768))
    assert fsdp_tp_split(48_000, 64 * 8, 32_768, 32_768, 1275, 2550).x_low is None  # 94 tokens per chip: < 396


def test_fsdp_tp_split_of_the_job(done_when: JobLimits) -> None:
    """TP on the innermost dim (Z, one ring: W_Y = 2e11), FSDP on X+Y (two rings: W_X = 4e11); bf16 so
    alpha = C / W: alpha_X = 1147.5, alpha_Y = 2295 (the book's M_X = 2, M_Y = 1)."""
    ax, ay, n, b = C_V5P / 4e11, C_V5P / 2e11, 8960, 977 * 4096
    low = done_when.limit("fsdp_tp_min_tokens_per_chip", "X+Y x Z")
    assert low.value == pytest.approx(4 * ax * ay / F_LLAMA)  # 367.4 = 2 x 2295^2 / F
    assert low.book_value == pytest.approx(2 * (C_V5P / 2e11) ** 2 / F_LLAMA)
    assert low.met is True  # 446.6 tokens per chip: some split is compute-bound
    opt = done_when.limit("fsdp_tp_optimal_fsdp", "X+Y x Z")
    assert opt.value == pytest.approx(math.sqrt(ay * n * b / (ax * F_LLAMA)))  # 1581
    disc = math.sqrt((b * F_LLAMA) ** 2 - 4 * ax * F_LLAMA * ay * n * b)
    assert opt.book_value == pytest.approx((b * F_LLAMA + disc) / (2 * ax * F_LLAMA))  # the larger root, 2478
    assert opt.figure("X_low") == pytest.approx((b * F_LLAMA - disc) / (2 * ax * F_LLAMA))
    best = done_when.limit("fsdp_tp_best_split")
    assert (best.figure("fsdp"), best.figure("tp")) == (560, 16)  # tp=8 would need 1120 > 977 replicas
    d, w = LLAMA70.d_model, LINK_V5P
    # fsdp=560 takes all of X (ring of 16, 2W), the outer 5 of Y and the outer 7 of Z (rings of neighbours 4 chips
    # apart: 4 such rings share each link, 2W / 4 each): 3W inbound, 559 of 560 shards -> 559/560 / (3W) per byte
    t_fsdp = 559 / 560 / (3 * w) * 2 * d * F_LLAMA * 2 / 16  # W_in and W_out, bf16, sharded over tp=16
    # tp=16 takes the inner 4 of Y and of Z: two lines of W, 15 of 16 shards over 2W, an all-gather and a reduce-scatter
    t_tp = 2 * 15 / 16 / (2 * w) * b * d * 2 / 560
    t_math = 4 * b * d * F_LLAMA / (n * C_V5P)
    assert best.figure("t_fsdp_s") == pytest.approx(t_fsdp)
    assert best.figure("t_tp_s") == pytest.approx(t_tp)
    assert best.figure("t_math_s") == pytest.approx(t_math)
    assert best.figure("ratio") == pytest.approx((t_fsdp + t_tp) / t_math) and best.met is False  # 1.41


def test_memory_limits() -> None:
    """Training state: 2 + 2 + 4 + 8 = 16 bytes per parameter (bf16 weights and gradients, fp32 master
    and Adam moments); served weights 2 bytes (bf16) or 1 (int8); over 95 GiB per v5p chip."""
    lim = _v5p(batch=None, seq=None)
    p = params_total(LLAMA70)
    train, serve = lim.limit("train_min_chips"), lim.limit("serve_min_chips")
    assert train.value == math.ceil(p * 16 / (95 * 2**30)) == 12
    assert serve.value == math.ceil(p * 2 / (95 * 2**30)) == 2
    assert train.met is True and train.job == 8960
    int8 = _v5p("2x2x1", batch=None, seq=None, weight_dtype="int8").limit("serve_min_chips")
    assert int8.value == math.ceil(p * 1 / (95 * 2**30)) == 1
    reserve = _v5p(batch=None, seq=None, efficiency=IDEAL.replace(memory_reserve=0.5)).limit("train_min_chips")
    assert reserve.value == math.ceil(p * 16 / (0.5 * 95 * 2**30)) == 23


def test_gpu_nvlink_and_infiniband_axes() -> None:
    """H100 16x8: FSDP over the NVLink domain is compute-bound above 7/8 x C / (18 x 25 GB/s) = 1924
    (Part 12: "990e12 / 450e9 = 2200" within a node); over 16 NICs alone above 15/16 x C / 50 GB/s;
    over both, staged: the fabric level gathers 15 shards of V/128 per NIC, 15/16 x C / (8 x 50 GB/s),
    Part 12's "B / N > alpha (X-1)/X" across X = 16 nodes of 400 GB/s."""
    lim = job_limits(LLAMA70, H100, parse_topology(H100, "16x8"), 4_194_304, 4096)
    fsdp = {a: lim.limit("fsdp_critical_tokens_per_chip", a) for a in ("nvlink", "fabric", "fabric+nvlink")}
    assert fsdp["nvlink"].value == pytest.approx(7 / 8 * C_H100 / NVLINK)
    assert fsdp["nvlink"].book_value == pytest.approx(C_H100 / NVLINK)  # 2199
    assert fsdp["fabric"].value == pytest.approx(15 / 16 * C_H100 / NIC)
    assert fsdp["fabric+nvlink"].value == pytest.approx(15 / 16 * C_H100 / (8 * NIC))  # 2319
    assert lim.tokens_per_chip == 4_194_304 / 128 and all(x.met for x in fsdp.values())
    assert lim.limit("tp_max_degree", "nvlink").value == pytest.approx(1 + F_LLAMA * NVLINK / C_H100)  # 14.0
    tp = lim.limit("tp_largest_degree")
    assert tp.value == 8  # the NVLink domain: (AG + RS) over a switch of 8 each 7/8 x V / B
    assert tp.figure("ratio") == pytest.approx(2 * 7 / (8 * NVLINK) * 2 * 8 * C_H100 / (4 * F_LLAMA))
    best = lim.limit("fsdp_tp_best_split")
    assert (best.figure("fsdp"), best.figure("tp")) == (128, 1) and best.met  # 32768 tokens per GPU: pure FSDP
    assert lim.limit("train_min_chips").value == math.ceil(params_total(LLAMA70) * 16 / (80 * 2**30))


def test_moe_critical_batch_and_expert_parallelism() -> None:
    """Mixtral 8x7B (E = 8, k = 2): the FSDP threshold x E/k = 4 (Part 12, MoE models). Expert
    parallelism over the NVLink domain: dispatch and combine all-to-alls of each token's k copies,
    (n-1)/n x V / B each, against 4 k D F_e / C per token: ratio 7/8 / B x 2 bytes x C / (2 F_e)."""
    lim = job_limits(MIXTRAL, H100, parse_topology(H100, "16x8"), 4_194_304, 4096)
    for axes in ("nvlink", "fabric", "fabric+nvlink"):
        fsdp = lim.limit("fsdp_critical_tokens_per_chip", axes)
        moe = lim.limit("moe_critical_tokens_per_chip", axes)
        assert moe.value == pytest.approx(fsdp.value * 8 / 2)
        assert moe.book_value == pytest.approx(fsdp.book_value * 4)
    ep = lim.limit("ep_largest_degree")
    assert ep.value == 8  # all 8 experts, one per GPU of the node
    assert ep.figure("ratio") == pytest.approx(7 / 8 / NVLINK * 2 * C_H100 / (2 * 14336))
    assert lim.f_active == 2 * 14336 and lim.f_weights == 8 * 14336
    low = lim.limit("fsdp_tp_min_tokens_per_chip", "fabric x nvlink")
    assert low.value == pytest.approx(4 * (C_H100 / NIC) * (C_H100 / NVLINK) * 8 * 14336 / (2 * 14336) ** 2)
    dense = job_limits(LLAMA70, H100, parse_topology(H100, "16x8"))
    assert not [x for x in dense.limits if x.rule in ("moe", "ep_layout")]


def test_efficiencies_scale_the_thresholds() -> None:
    """Half the matrix peak halves the critical tokens; half the link bandwidth doubles them."""
    base = _v5p("4x4x4").limit("fsdp_critical_tokens_per_chip", "X+Y+Z").value
    slow_math = _v5p("4x4x4", efficiency=IDEAL.replace(matrix=0.5))
    slow_links = _v5p("4x4x4", efficiency=IDEAL.replace(network=0.5))
    assert slow_math.limit("fsdp_critical_tokens_per_chip", "X+Y+Z").value == pytest.approx(base / 2)
    assert slow_links.limit("fsdp_critical_tokens_per_chip", "X+Y+Z").value == pytest.approx(base * 2)
    assert base == pytest.approx(63 / 64 * C_V5P / (2 * LINK_V5P * 3))


def test_book_link_figure_gives_the_books_numbers() -> None:
    """With the book's 9e10 B/s per link: 2550 per axis, 850 over three, Y < F / 2550 per axis."""
    book_chip = dataclasses.replace(V5P, link_bytes_per_s=9e10)
    lim = job_limits(LLAMA70, book_chip, parse_topology(book_chip, "16x20x28"))
    assert lim.limit("fsdp_critical_tokens_per_chip", "X+Y+Z").book_value == pytest.approx(850)
    assert lim.limit("fsdp_critical_tokens_per_chip", "Z").book_value == pytest.approx(2550)
    assert lim.limit("tp_max_degree", "Z").book_value == pytest.approx(F_LLAMA / 2550)


def test_without_a_batch_and_on_one_chip() -> None:
    lim = _v5p(batch=None, seq=None)
    fsdp = lim.limit("fsdp_critical_tokens_per_chip", "X+Y+Z")
    assert lim.tokens_per_chip is None and fsdp.job is None and fsdp.met is None
    assert fsdp.value == pytest.approx(8959 / 8960 * 765)  # the threshold needs no batch
    assert {x.name for x in lim.limits} >= {"tp_largest_degree", "fsdp_tp_min_tokens_per_chip", "train_min_chips"}
    assert not {"fsdp_tp_optimal_fsdp", "fsdp_tp_best_split"} & {x.name for x in lim.limits}
    one = job_limits(LLAMA70, H100, parse_topology(H100, "1"))
    assert one.axis_sets == () and [x.name for x in one.limits] == ["train_min_chips", "serve_min_chips"]
    assert one.limit("train_min_chips").met is False
    payload = limits_payload(one)
    assert payload["axes"] == [] and payload["batch_tokens"] is None


def test_batch_rounds_to_whole_sequences_and_bad_batches_are_refused() -> None:
    assert whole_sequences(4_000_000, 4096) == 977  # as rooftop train rounds 4M tokens of 4096
    assert whole_sequences(None, None) is None
    with pytest.raises(InvalidConfigError, match="needs both batch_tokens and seq_len") as both:
        whole_sequences(4096, None)  # the library names its parameters; the CLI spells them as its flags
    assert error_line(both.value).startswith("a batch needs both --batch-tokens and --seq-len (or neither")
    with pytest.raises(InvalidConfigError, match="less than one sequence") as short:
        whole_sequences(1000, 4096)
    assert error_line(short.value) == (
        "--batch-tokens 1,000 is less than one sequence of --seq-len 4,096: the batch cannot be divided into sequences"
    )


def test_every_limit_has_a_formula_and_a_source() -> None:
    lim = job_limits(MIXTRAL, V5P, parse_topology(V5P, "4x4x4"), 1 << 20, 4096)
    payload = limits_payload(lim)
    rules = {x["rule"] for x in payload["limits"]}
    assert rules == {"dp", "fsdp", "moe", "tp", "tp_layout", "ep_layout", "split_min", "split_opt", "split_best"} | {
        "train_memory",
        "serve_memory",
    }
    for x in payload["limits"]:
        assert x["formula"] and x["source"] and x["figures"], x["name"]
    assert payload["figures"]["link_bytes_per_s"]["value"] == LINK_V5P
    assert "1200 GBps" in payload["figures"]["link_bytes_per_s"]["source"]  # the chip file's own source
