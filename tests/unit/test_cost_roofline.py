"""Op rules and the roofline, with expected values written as arithmetic."""

import pytest

from rooftop.cost.cost import Comm, Cost, CostTree
from rooftop.cost.efficiency import Efficiency
from rooftop.cost.op import Operand, elementwise, explicit, matmul, reduction
from rooftop.cost.roofline import roofline
from rooftop.errors import InvalidConfigError, UnknownNameError
from rooftop.hardware.catalog import get_chip
from rooftop.report.formulas import term_formula

V5E_BF16 = 197e12
V5E_HBM = 819e9


def test_matmul_flops_and_bytes() -> None:
    sizes = {"B": 4096, "D": 8192, "F": 8192}
    c = matmul(Operand(("B", "D")), Operand(("D", "F")), Operand(("B", "F")), sizes)
    assert c.flops == 2 * 4096 * 8192 * 8192
    assert c.hbm_bytes == 2 * (4096 * 8192 + 8192 * 8192 + 4096 * 8192)
    assert dict(c.flops_by) == {("matrix", "bf16"): 2 * 4096 * 8192 * 8192}


def test_matmul_batch_dims() -> None:
    sizes = {"H": 8, "T": 128, "K": 64, "S": 256}
    c = matmul(Operand(("H", "T", "K")), Operand(("H", "S", "K")), Operand(("H", "T", "S")), sizes)
    assert c.flops == 2 * 8 * 128 * 64 * 256


def test_mixed_dtype_reads_int8_weights_and_computes_bf16() -> None:
    sizes = {"B": 16, "D": 1024, "F": 4096}
    c = matmul(Operand(("B", "D"), "bf16"), Operand(("D", "F"), "int8"), Operand(("B", "F"), "bf16"), sizes)
    assert c.hbm_bytes == 2 * 16 * 1024 + 1 * 1024 * 4096 + 2 * 16 * 4096
    assert list(c.flops_by) == [("matrix", "bf16")]


def test_roofline_compute_bound_matmul_on_v5e() -> None:
    chip = get_chip("tpu-v5e")
    sizes = {"B": 4096, "D": 8192, "F": 8192}
    est = roofline(matmul(Operand(("B", "D")), Operand(("D", "F")), Operand(("B", "F")), sizes), chip)
    assert est.compute_s == pytest.approx(2 * 4096 * 8192 * 8192 / V5E_BF16)
    assert est.memory_s == pytest.approx(2 * (4096 * 8192 + 8192 * 8192 + 4096 * 8192) / V5E_HBM)
    assert est.bound == "compute"
    assert est.lower_bound_s == est.compute_s
    assert est.upper_bound_s == pytest.approx(est.compute_s + est.memory_s)


def test_roofline_memory_bound_small_batch() -> None:
    chip = get_chip("tpu-v5e")
    sizes = {"B": 8, "D": 8192, "F": 8192}
    est = roofline(matmul(Operand(("B", "D")), Operand(("D", "F")), Operand(("B", "F")), sizes), chip)
    assert est.bound == "memory"
    assert est.arithmetic_intensity < est.critical_intensity


def test_elementwise_and_reduction_use_vector_unit() -> None:
    e = elementwise(1000, "fp32", flops_per_element=2, inputs=2, outputs=1)
    assert dict(e.flops_by) == {("vector", "fp32"): 1000 * 2}
    assert e.hbm_bytes == 1000 * 3 * 4
    r = reduction(1024, 8, "bf16")
    assert r.flops == 1024
    assert r.hbm_bytes == (1024 + 8) * 2


def test_cost_algebra() -> None:
    a = explicit(10, 100)
    b = explicit(5, 7, unit="vector")
    assert (a + b).flops == 15
    assert (a + b).hbm_bytes == 107
    assert (3 * a).flops == 30
    assert a + Cost() == a
    assert sum([a, b]) == a + b
    c = Cost().with_comm(Comm("all-gather", ("X",), 1024))
    assert (2 * c).comms[0].count == 2


def test_cost_tree_sums_children() -> None:
    t = CostTree.node("layer", [CostTree("qkv", explicit(6, 1)), CostTree("mlp", explicit(4, 2))])
    assert t.cost.flops == 10
    assert [p for p, _ in t.walk()] == ["layer", "layer/qkv", "layer/mlp"]


def test_efficiency_slows_down_and_is_validated() -> None:
    chip = get_chip("h100")
    cost = explicit(1e15, 1e9)
    ideal = roofline(cost, chip)
    real = roofline(cost, chip, efficiency=Efficiency(matrix=0.5))
    assert real.compute_s == pytest.approx(2 * ideal.compute_s)
    with pytest.raises(InvalidConfigError, match="efficiency matrix=1.5"):
        Efficiency(matrix=1.5)


def test_negative_and_unknown_inputs_raise() -> None:
    with pytest.raises(InvalidConfigError):
        explicit(-1, 0)
    with pytest.raises(UnknownNameError, match="did you mean"):
        explicit(1, 1, dtype="bf61")
    with pytest.raises(InvalidConfigError, match="no size given for dim 'F'"):
        matmul(Operand(("B", "D")), Operand(("D", "F")), Operand(("B", "F")), {"B": 1, "D": 2})


def test_comms_without_mesh_is_an_error() -> None:
    chip = get_chip("tpu-v5e")
    with pytest.raises(InvalidConfigError, match="give a topology"):
        roofline(Cost().with_comm(Comm("all-reduce", ("X",), 10)), chip)


def test_every_term_names_its_figures() -> None:
    est = roofline(explicit(1e12, 1e9), get_chip("tpu-v5e"))
    formulas = " ".join(term_formula(t) for t in est.terms)
    assert "tpu-v5e" in formulas and "197 TFLOP/s" in formulas and "819 GB/s" in formulas


def test_critical_intensity_of_a_vector_only_cost_is_the_vector_units() -> None:
    """An elementwise op's ridge point is the vector unit's peak over HBM bandwidth (v5p bf16 vector
    14e12 / 2.765e12), not the matrix unit's (459e12 / 2.765e12 = 166)."""
    chip = get_chip("tpu-v5p")
    est = roofline(elementwise(1e9, "bf16", 1.0), chip)
    assert est.critical_intensity == pytest.approx(chip.vector_flops_per_s["bf16"] / chip.hbm_bytes_per_s)
    assert est.critical_intensity < 10 < chip.critical_intensity("bf16")
