"""Gathers and their gradients priced from their recorded shapes (analysis/torch/gathers.py): bytes are
what each must move at the least, written out here by hand; int64 indices count 4 bytes (rooftop has no
64-bit integer type)."""

from __future__ import annotations

from rooftop.report.reasons import note_text
from tests.unit.test_torch_ops import BF16, price

LONG = "long int"


def test_embedding_reads_and_writes_one_row_per_index() -> None:
    p = price("aten::embedding", [[50257, 768], [2, 6]], [BF16, LONG])
    assert p.cost.flops == 0
    assert p.cost.hbm_bytes == 2 * (2 * 6 * 768) * 2 + 2 * 6 * 4  # rows read and written, indices read


def test_index_select_cuts_the_selected_dim() -> None:
    rows = price("aten::index_select", [[1024, 2], [], [6]], ["float", "Scalar", LONG], ["", "0", ""])
    assert rows.cost.hbm_bytes == 2 * (6 * 2) * 4 + 6 * 4
    cols = price("aten::index_select", [[4, 10], [], [3]], ["float", "Scalar", LONG], ["", "-1", ""])
    assert cols.cost.hbm_bytes == 2 * (4 * 3) * 4 + 3 * 4
    bad = price("aten::index_select", [[4, 10], [], [3]], ["float", "Scalar", LONG], ["", "2", ""])
    assert bad.cost is None and "is not a dim of a rank-2 tensor" in note_text(bad.what)


def test_gather_output_has_the_index_shape() -> None:
    p = price("aten::gather", [[8, 100], [], [8, 5]], ["float", "Scalar", LONG], ["", "1", ""])
    assert p.cost.hbm_bytes == 2 * (8 * 5) * 4 + 8 * 5 * 4


def test_embedding_gradient_writes_the_dense_table() -> None:
    dims = [[2, 6, 768], [2, 6], [], [], []]
    p = price("aten::embedding_dense_backward", dims, ["float", LONG, "Scalar", "Scalar", "Scalar"],
              ["", "", "50257", "-1", "False"])  # fmt: skip
    assert p.cost.flops == 2 * 6 * 768  # one add per gradient element
    assert p.cost.hbm_bytes == 50257 * 768 * 4 + 2 * 6 * 768 * 4 + 2 * 6 * 4


def test_nll_loss_reads_one_logit_per_row_and_its_gradient_writes_them_all() -> None:
    n, c = 10, 50257
    fwd = price("aten::nll_loss_forward", [[n, c], [n], [], [], []], ["float", LONG, "", "Scalar", "Scalar"],
                ["", "", "", "1", "-100"])  # fmt: skip
    assert fwd.cost.flops == n
    assert fwd.cost.hbm_bytes == (n + 1 + 1) * 4 + n * 4  # picked logits, mean loss, total weight; targets
    none = price("aten::nll_loss_forward", [[n, c], [n], [], [], []], ["float", LONG, "", "Scalar", "Scalar"],
                 ["", "", "", "0", "-100"])  # fmt: skip
    assert none.cost.hbm_bytes == (n + n + 1) * 4 + n * 4  # one loss per row
    bwd = price("aten::nll_loss_backward", [[], [n, c], [n], [], [], [], []],
                ["float", "float", LONG, "", "Scalar", "Scalar", "float"])  # fmt: skip
    assert bwd.cost.flops == n and bwd.cost.hbm_bytes == n * c * 4 + n * 4 + 4
