"""The pieces every chart shares (report/plot.py): log axes labelled in plain text, and the chip's
compute ceilings, one line per peak."""

from __future__ import annotations

from pathlib import Path

from rooftop.hardware.catalog import get_chip


def test_log_axes_are_labelled_in_plain_text(tmp_path: Path) -> None:
    """Was: every log axis of rooftop's charts read ``$\\mathdefault{10^{15}}$``: matplotlib labels log
    ticks in mathtext, which the literal-text settings print as written."""
    from rooftop.report.plot import figure, plain_number, save

    with figure() as (fig, ax):
        ax.plot([1e-2, 1e4], [1e9, 1e15])
        ax.set_xscale("log")
        ax.set_yscale("log")
        save(fig, str(tmp_path / "log.png"))
        labels = [t.get_text() for t in [*ax.get_xticklabels(), *ax.get_yticklabels()] if t.get_text()]
    assert "1e15" in labels and "0.01" in labels and "100" in labels
    assert not any("$" in t or "mathdefault" in t for t in labels)
    assert [plain_number(v) for v in (1e-5, 2e-4, 0.001, 0.5, 300, 10_000, 1e5, 3e15)] == [
        "1e-5", "2e-4", "0.001", "0.5", "300", "10000", "1e5", "3e15"]  # fmt: skip


def test_ceilings_share_a_line_per_peak() -> None:
    from rooftop.report.plot import ceilings

    h100, a100 = get_chip("h100"), get_chip("a100")
    assert ceilings(h100) == [("matrix fp8/int8", 1.979e15), ("matrix bf16/fp16", 9.895e14), ("matrix fp32", 4.945e14),
                              ("vector fp16/bf16", 1.338e14), ("matrix fp64", 6.7e13)]  # fmt: skip
    assert ceilings(h100, [("matrix", "bf16"), ("vector", "bf16")]) == [("matrix bf16", 9.895e14),
                                                                        ("vector bf16", 1.338e14)]  # fmt: skip
    # a dtype the chip lacks is drawn at the rate it runs at (fp8 on an A100 runs as bf16), once
    assert ceilings(a100, [("matrix", "fp8"), ("matrix", "bf16")]) == [("matrix bf16", 3.12e14)]
