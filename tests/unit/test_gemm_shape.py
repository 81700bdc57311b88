"""The matmul shape model (cost/gemm.py): hand-derived efficiencies, its use in the roofline and the
training planner, and its properties."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rooftop.cost.cost import Gemm
from rooftop.cost.efficiency import IDEAL, Efficiency, default_efficiency
from rooftop.cost.figures import FlopsFigures
from rooftop.cost.gemm import shape_efficiency, shape_efficiency_array, tile_model
from rooftop.cost.op import Operand, matmul
from rooftop.cost.roofline import figures_of, roofline
from rooftop.errors import InvalidConfigError
from rooftop.hardware.catalog import get_chip

H100 = get_chip("h100")
NO_EPILOGUE = {"peak_flops_per_s": 0.0, "hbm_bytes_per_s": 0.0}


def test_h100_figures_come_from_the_data_file() -> None:
    model = tile_model(H100)
    assert model is not None and model.kind == "gpu"
    assert model.units == 132 and (128, 256) in model.tiles and model.k_step == 64 and model.k_fill_steps == 2


def test_wave_quantization_by_hand() -> None:
    # 2048 x 3072 output, K = 768 on 132 SMs, no epilogue:
    # 128x128 tiles: 16 x 24 = 384 tiles -> 3 waves of 132 (396 slots); K' = 768 + 2 x 64 = 896
    #   -> 384 x 768 / (396 x 896) = 0.8312
    # 128x256: 16 x 12 = 192 tiles -> 2 waves (264) -> 192 x 768 / (264 x 896) = 0.6234
    # 256x128: 8 x 24 = 192 -> the same; split-K is not allowed (768 / 2 < 512)
    model = tile_model(H100)
    assert model is not None
    got = float(shape_efficiency_array(model, 2048, 3072, 768, **NO_EPILOGUE))
    assert got == pytest.approx((384 * 768) / (396 * 896))


def test_tile_quantization_and_split_k_by_hand() -> None:
    # 128 x 128 output, K = 8192: one tile leaves 131 of 132 SMs idle; split-K 32 (slices of K 256, the
    # least MIN_SPLIT_K allows) makes 32 tiles in one wave -> 128 x 128 x 8192 / (132 x 128 x 128 x (256 + 128))
    model = tile_model(H100)
    assert model is not None
    got = float(shape_efficiency_array(model, 128, 128, 8192, **NO_EPILOGUE))
    assert got == pytest.approx(8192 / (132 * (256 + 128)))


def test_few_rows_run_a_skinny_tile() -> None:
    # a decode step's 8 rows x 4096 x 4096 runs 16-row tiles (mma.m16n8k16), not 128-row ones; the best:
    # 16 x 128 tiles, 32 of them, split-K 4 (slices of K 1024) -> 128 tiles in one wave:
    # 8 x 4096 x 4096 / (132 x 16 x 128 x (1024 + 128)); a 128-row tile would waste 15/16 more
    model = tile_model(H100)
    assert model is not None
    got = float(shape_efficiency_array(model, 8, 4096, 4096, **NO_EPILOGUE))
    assert got == pytest.approx(8 * 4096 * 4096 / (132 * 16 * 128 * (1024 + 128)))


def test_epilogue_by_hand() -> None:
    # 8192^3 with the epilogue: best tile 128x256, 64 x 32 = 2048 tiles -> 16 waves (2112 slots),
    # K' = 8192 + 128; per tile math = 2 x 128 x 256 x 8320 / (989.5e12 / 132) s, the write
    # 128 x 256 x 2 B / (3.35e12 / 132) B/s
    model = tile_model(H100)
    assert model is not None
    math_s = 2 * 128 * 256 * 8320 / (989.5e12 / 132)
    write_s = 128 * 256 * 2 / (3.35e12 / 132)
    want = 2048 * 8192 / (2112 * 8320) * math_s / (math_s + write_s)
    assert shape_efficiency(H100, Gemm(8192, 8192, 8192)) == pytest.approx(want)


def test_tpu_pads_to_the_mxu() -> None:
    # v5e MXU 128: K = 100 pads to 128; M = 2048 on the MXU side (pads to 2048), N = 100 streamed rows
    # pad to 104 (8 sublanes) -> 2048 x 100 x 100 / (2048 x 104 x 128)
    assert shape_efficiency(get_chip("tpu-v5e"), Gemm(2048, 100, 100)) == pytest.approx(100 * 100 / (104 * 128))
    # v6e's 256-wide MXU wastes more on the same shape: K 100 -> 256
    assert shape_efficiency(get_chip("tpu-v6e"), Gemm(2048, 100, 100)) == pytest.approx(100 * 100 / (104 * 256))
    assert shape_efficiency(get_chip("tpu-v5p"), Gemm(4096, 4096, 4096)) == 1.0


def test_chip_without_a_model_is_unchanged() -> None:
    custom = dataclasses.replace(H100, name="my-gpu", internals=None)  # a chip file without [internals]
    assert tile_model(custom) is None and shape_efficiency(custom, Gemm(100, 100, 100)) is None


def test_matmul_cost_carries_its_shape_and_sums_drop_it() -> None:
    sizes = {"B": 4, "S": 512, "D": 1024, "F": 4096}
    c = matmul(Operand(("B", "S", "D")), Operand(("D", "F")), Operand(("B", "S", "F")), sizes)
    assert c.gemm == Gemm(4 * 512, 4096, 1024, 1, 2)
    heads = {"H": 8, "S": 512, "T": 512, "D": 64}
    scores = matmul(Operand(("H", "S", "D")), Operand(("H", "T", "D")), Operand(("H", "S", "T")), heads)
    assert scores.gemm == Gemm(512, 512, 64, 8, 2)
    assert (c + c).gemm is None and (3 * c).gemm == c.gemm


def test_roofline_divides_the_matmul_term_only_when_switched_on() -> None:
    sizes = {"M": 2048, "K": 768, "N": 3072}
    c = matmul(Operand(("M", "K")), Operand(("K", "N")), Operand(("M", "N")), sizes)
    plain = roofline(c, H100, efficiency=IDEAL)
    shaped = roofline(c, H100, efficiency=IDEAL.replace(matrix_shape=1))
    se = shape_efficiency(H100, c.gemm)
    assert se is not None and se < 1
    assert shaped.compute_s == pytest.approx(plain.compute_s / se)
    term = next(t for t in shaped.terms if t.kind == "compute")
    figures = figures_of(term, FlopsFigures)
    assert figures.shape_efficiency == se and figures.gemm == "2048x768 @ 768x3072" and figures.shape_applied


def test_switch_is_zero_or_one() -> None:
    with pytest.raises(InvalidConfigError, match="matrix_shape"):
        Efficiency(matrix_shape=0.5)
    assert default_efficiency("training").matrix_shape == 1 and IDEAL.matrix_shape == 0


dims = st.integers(1, 40_000)


@settings(max_examples=300, deadline=None)
@given(dims, dims, dims, st.integers(1, 64), st.sampled_from(["h100", "a100", "b200", "tpu-v5e", "tpu-v6e"]))
def test_efficiency_is_in_0_1(m: int, n: int, k: int, batch: int, chip: str) -> None:
    se = shape_efficiency(get_chip(chip), Gemm(m, n, k, batch))
    assert se is not None and 0 < se <= 1


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 64), st.integers(1, 64), st.integers(1, 64), st.sampled_from(["h100", "a100", "tpu-v5p"]))
def test_monotone_over_whole_tiles_and_waves(a: int, b: int, c: int, chip: str) -> None:
    """Past a tile or a wave the efficiency drops (a sawtooth, as the measured H100 sweep shows:
    4,224 -> 4,352 rows fall from 0.68 to 0.59 of peak). Over sizes that fill whole tiles and whole
    waves (multiples of 256 x units on GPUs, of the MXU on TPUs) a larger dim is never less efficient."""
    ch = get_chip(chip)
    model = tile_model(ch)
    assert model is not None
    step = 256 * model.units if model.kind == "gpu" else model.mxu
    base = Gemm(a * step, b * step, c * step)
    for grown in (Gemm(2 * a * step, b * step, c * step), Gemm(a * step, 2 * b * step, c * step),
                  Gemm(a * step, b * step, 2 * c * step)):  # fmt: skip
        assert shape_efficiency(ch, grown) >= shape_efficiency(ch, base) - 1e-12


@settings(max_examples=100, deadline=None)
@given(dims, dims, dims, st.floats(1e12, 1e13))
def test_more_hbm_bandwidth_is_never_less_efficient(m: int, n: int, k: int, hbm: float) -> None:
    model = tile_model(H100)
    assert model is not None
    slow = shape_efficiency_array(model, m, n, k, 1.0, 2.0, 989.5e12, hbm)
    fast = shape_efficiency_array(model, m, n, k, 1.0, 2.0, 989.5e12, 2 * hbm)
    assert float(fast) >= float(slow) - 1e-12


def test_training_planner_prices_small_tp_shards_slower() -> None:
    """Megatron's TP shards of a small model waste more of the matrix unit than a large GEMM: the
    compute of the 18.4B model at tp=8 (768-wide o projection shards) is slower with the shape model
    than at the plain matrix efficiency, and the same layout on a TPU v4 barely changes."""
    from rooftop.hardware.topology import parse_topology
    from rooftop.model.catalog import get_model
    from rooftop.plan.train.comm import CommPricer
    from rooftop.plan.train.layout import Parallelism
    from rooftop.plan.train.step import TrainingSetup, evaluate, layout_mesh

    cfg = get_model("llama-3-8b")
    par = Parallelism(dp=1, tp=8, microbatches=8, remat="full")
    times = {}
    for chip_name, topo in (("a100", "1x8"), ("tpu-v4", "2x2x2")):
        chip = get_chip(chip_name)
        for on in (0.0, 1.0):
            eff = default_efficiency("training").replace(matrix_shape=on)
            setup = TrainingSetup(cfg, chip, parse_topology(chip, topo), 8, 2048, eff)
            res = evaluate(setup, par, CommPricer(layout_mesh(setup.topology, par), chip, eff.network))
            times[(chip_name, on)] = res.compute_s
    assert times[("a100", 1.0)] > 1.05 * times[("a100", 0.0)]
    assert times[("tpu-v4", 1.0)] == pytest.approx(times[("tpu-v4", 0.0)], rel=0.02)


def test_hlo_dot_and_fused_dot_carry_their_shape() -> None:
    """A dot (and a fusion around one, as XLA:GPU's Triton GEMM fusions) reports the shape efficiency of
    its [2048,768] x [768,3072] product; the roofline itself is not divided by it (informational)."""
    from rooftop.analysis.hlo.analyze import analyze
    from rooftop.analysis.hlo.parse import parse_hlo
    from rooftop.report.hlo import op_dict

    text = """HloModule m
%fused (a: bf16[2048,768], b: bf16[768,3072]) -> bf16[2048,3072] {
  %a = bf16[2048,768] parameter(0)
  %b = bf16[768,3072] parameter(1)
  ROOT %d = bf16[2048,3072] dot(%a, %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
ENTRY %e {
  %p0 = bf16[2048,768] parameter(0)
  %p1 = bf16[768,3072] parameter(1)
  %dot = bf16[2048,3072] dot(%p0, %p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT %f = bf16[2048,3072] fusion(%p0, %p1), kind=kCustom, calls=%fused
}
"""
    result = analyze(parse_hlo(text), H100)
    want = shape_efficiency(H100, Gemm(2048, 3072, 768))
    rows = {t.op.name: op_dict(t) for t in result.ops}
    assert rows["dot"]["shape_efficiency"] == pytest.approx(want)
    assert rows["f"]["shape_efficiency"] == pytest.approx(want)
    plain = 2 * 2048 * 768 * 3072 / 989.5e12
    assert rows["dot"]["compute_s"] == pytest.approx(plain)


def test_a_split_matmuls_activation_bytes_follow_its_shape() -> None:
    """An MLP up projection (k = D = 8192 in, n = F = 28672 out) at tp=32 reads its input whole and writes
    1/32 of its output: (8192 + 28672/32) / (8192 + 28672); the down projection the reverse; without a shape
    the old average (1 + 1/32) / 2."""
    from rooftop.cost.cost import OpTag, Split
    from rooftop.sharding.tensor import share

    up, down = Gemm(128, 28672, 8192), Gemm(128, 8192, 28672)
    col, row = OpTag("matmul", Split.TENSOR), OpTag("matmul", Split.TENSOR, row_parallel=True)
    assert share(col, 32, 8, gemm=up).act == pytest.approx((8192 + 28672 / 32) / (8192 + 28672))
    assert share(row, 32, 8, gemm=down).act == pytest.approx((28672 / 32 + 8192) / (8192 + 28672))
    assert share(col, 32, 8).act == pytest.approx((1 + 1 / 32) / 2)


@pytest.mark.parametrize("chip", ["h100", "tpu-v5e"])
def test_serving_shape_factor_is_each_matmuls_own_efficiency(chip: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """plan/serve/shapes.matmul_shape_factor works each distinct matmul shape out once (together with the
    other new ones of the step) and keeps it: the factor is still matrix FLOPs / sum(FLOPs / shape_efficiency)
    with each matmul's own efficiency, the same to the last bit whether the shapes are new, met before,
    or the table overflowed and was cleared."""
    from rooftop.cost.cost import Cost
    from rooftop.plan.serve import shapes

    ch = get_chip(chip)
    gemms = ((Gemm(7, 4096, 4096), 2.0e9), (Gemm(300, 14336, 4096, 8.0), 5.0e9), (Gemm(7, 4096, 4096), 1.0e9),
             (Gemm(33.5, 1024, 4096, 1.0, 4.0), 3.0e9))  # fmt: skip
    matmuls = Cost({("matrix", "bf16"): 12.0e9})
    by_hand = 12.0e9 / (sum(f / shape_efficiency(ch, g) for g, f in gemms) + (12.0e9 - 11.0e9))
    monkeypatch.setattr(shapes, "_KNOWN", {})
    first = shapes.matmul_shape_factor(gemms, matmuls, ch, default_efficiency("serving"))
    again = shapes.matmul_shape_factor(gemms, matmuls, ch, default_efficiency("serving"))
    monkeypatch.setattr(shapes, "_KNOWN_MAX", 2)  # every call clears the table and starts over
    cleared = shapes.matmul_shape_factor(gemms, matmuls, ch, default_efficiency("serving"))
    assert first == again == cleared == by_hand
    assert shapes.matmul_shape_factor(gemms, matmuls, ch, IDEAL) is None
