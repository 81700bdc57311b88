"""Results in a notebook: a one-line repr, HTML, to_dict() (what the command's --json writes) and to_frame()."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

import rooftop
from rooftop.cost.efficiency import default_efficiency
from rooftop.cost.roofline import Estimate
from rooftop.errors import InvalidConfigError
from rooftop.plan.train.layout import Parallelism
from tests.conftest import run_cli

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "h100"
H100 = rooftop.get_chip("h100")


@cache
def _train():
    setup = rooftop.TrainingSetup(
        rooftop.get_model("llama-3-8b"), H100, rooftop.parse_topology(H100, "8x8"), 256, 4096,
        default_efficiency("training"),
    )  # fmt: skip
    return rooftop.plan_training(setup)


@cache
def _serve():
    req = rooftop.ServingRequest(rooftop.get_model("llama-3-8b"), H100, rooftop.parse_topology(H100, "8"), 1024, 256)
    return rooftop.plan_serving(req)


@cache
def _hlo():
    with gzip.open(FIXTURES / "decoder.hlo.txt.gz", "rt") as f:
        return rooftop.analyze_hlo(rooftop.parse_hlo(f.read()), H100)


@cache
def _profile():
    return rooftop.profile_report(FIXTURES / "decoder_torch.json.gz", H100)


def _estimate() -> Estimate:
    sizes = {"B": 64, "D": 8192, "F": 8192}
    cost = rooftop.matmul(rooftop.Operand(("B", "D")), rooftop.Operand(("D", "F")), rooftop.Operand(("B", "F")), sizes)
    return rooftop.roofline(cost, H100)


def _results() -> list[object]:
    train = _train()
    return [_estimate(), train, train.search, train.ranked[0], _serve(), _serve().points[0], _hlo(), _profile()]


@pytest.mark.parametrize("index", range(8))
def test_repr_is_one_short_line(index: int) -> None:
    result = _results()[index]
    text = repr(result)
    assert "\n" not in text and len(text) < 300, text
    assert text.startswith(f"<{type(result).__name__}: ") and text.endswith(">")


def test_repr_states_the_figures() -> None:
    """Estimate: 64 x 8192 x 8192 bf16 moves 2 x (64*8192 + 8192*8192 + 64*8192) bytes = 136 MB on 3.35 TB/s."""
    seconds = 2 * (64 * 8192 + 8192 * 8192 + 64 * 8192) / 3.35e12
    assert f"{seconds * 1e6:.3g} us" in repr(_estimate()) and "memory-bound" in repr(_estimate())
    best = _train().ranked[0]
    assert best.parallelism.label in repr(_train()) and f"MFU {best.mfu:.1%}" in repr(_train())
    assert repr(_train().search).startswith(f"<SearchResult: {len(_train().ranked)} fitting layouts of ")


def test_to_dict_is_what_train_json_writes() -> None:
    code, out, _ = run_cli(
        "train", "llama-3-8b", "--chip", "h100", "--topology", "8x8", "--batch-tokens", str(256 * 4096),
        "--seq-len", "4096", "--json",
    )  # fmt: skip
    assert code == 0
    assert _train().to_dict() == json.loads(out)


def test_to_dict_is_what_serve_hlo_and_profile_json_write(tmp_path: Path) -> None:
    code, out, _ = run_cli(
        "serve", "llama-3-8b", "--chip", "h100", "--topology", "8", "--prompt-len", "1024", "--gen-len", "256", "--json"
    )
    assert code == 0 and _serve().to_dict() == json.loads(out)
    hlo = tmp_path / "decoder.hlo"
    with gzip.open(FIXTURES / "decoder.hlo.txt.gz", "rt") as f:
        hlo.write_text(f.read())
    code, out, _ = run_cli("hlo", str(hlo), "--chip", "h100", "--json")
    assert code == 0 and _hlo().to_dict() == json.loads(out)
    code, out, _ = run_cli("profile", str(FIXTURES / "decoder_torch.json.gz"), "--chip", "h100", "--json")
    assert code == 0
    assert _profile().to_dict() == json.loads(out)


def test_to_dict_of_an_estimate_and_of_a_search() -> None:
    d = _estimate().to_dict()
    assert d["bound"] == "memory" and d["flops"] == 2 * 64 * 8192 * 8192 and d["schema_version"] == 1
    assert [t["name"] for t in d["terms"]] == [t.name for t in _estimate().terms]
    search = _train().search.to_dict()
    assert search["evaluated"] == _train().search.evaluated
    assert [c["parallelism"]["label"] for c in search["candidates"]] == [r.parallelism.label for r in _train().ranked]


def test_to_frame_has_a_row_per_item_and_the_json_values() -> None:
    pytest.importorskip("pandas")
    plan = _train()
    frame = plan.to_frame()
    assert len(frame) == len(plan.ranked)
    assert list(frame["parallelism.label"]) == [r.parallelism.label for r in plan.ranked]
    assert list(frame["step_time_s"]) == [r.step_time_s for r in plan.ranked]
    assert list(frame["memory_per_chip_bytes.total"]) == [r.memory_per_chip_bytes for r in plan.ranked]
    serve = _serve().to_frame()
    assert len(serve) == len(_serve().points) and "tokens_per_s_per_chip" in serve.columns
    assert "breakdown.time_s" in serve.columns  # nested keys dotted
    assert len(_hlo().to_frame()) == len(_hlo().ops) and len(_profile().to_frame()) == len(_profile().ops)
    est = _estimate().to_frame()
    assert list(est["name"]) == [t.name for t in _estimate().terms]


def test_to_frame_without_pandas_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas raises ImportError
    with pytest.raises(InvalidConfigError, match=r"to_frame\(\) needs pandas: pip install pandas"):
        _estimate().to_frame()


def test_html_escapes_names_and_lists_rows() -> None:
    est = Estimate("<script>alert(1)</script>", 1.0, 1.0, 1.0, 2.0, 0.0, 1.0)
    page = est._repr_html_()
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    page = _train()._repr_html_()
    assert page.count("<tr>") == 1 + len(_train().ranked)  # the header and one row per layout
    assert _hlo()._repr_html_().count("<tr>") == 1 + 10 and "the first 10 shown" in _hlo()._repr_html_()


def test_label_is_a_string_and_still_a_method() -> None:
    par = Parallelism(dp=2, tp=4, microbatches=2)
    assert par.label == "dp=2 tp=4 mb=2 remat=none" == par.label()
    assert json.dumps(par.label) == '"dp=2 tp=4 mb=2 remat=none"'


def test_charts_are_figures() -> None:
    from matplotlib.figure import Figure

    figures = [
        rooftop.roofline_figure(H100, [("matmul", _estimate(), "bf16", "matrix")]),
        rooftop.train_figure(_train().ranked[0]),
        rooftop.serve_figure(_serve()),
        rooftop.hlo_figure(_hlo()),
        rooftop.profile_figure(_profile(), H100),
    ]
    assert all(isinstance(f, Figure) and f.axes for f in figures)


def test_results_do_not_load_report_until_shown() -> None:
    """The result types take their notebook methods from rooftop.display; report/ is imported when one is called."""
    code = (
        "import sys, rooftop.cost.roofline, rooftop.plan.train.plan, rooftop.plan.serve.sweep, "
        "rooftop.analysis.compare, rooftop.analysis.hlo.analyze, rooftop.analysis.profile\n"
        "assert not [m for m in sys.modules if m.startswith('rooftop.report')], sorted(sys.modules)\n"
        "from rooftop.cost.roofline import Estimate\n"
        "repr(Estimate('h100', 1.0, 1.0, 1.0, 2.0, 0.0, 1.0))\n"
        "assert 'rooftop.report.notebook' in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True, env={"PYTHONPATH": str(Path(rooftop.__file__).parents[1])})


def test_a_comparison_shows_itself() -> None:
    """``rooftop compare``'s result in a notebook: a one-line repr naming the fastest entry, the JSON the
    command writes (``compare_payload``), a table row per chip or slice."""
    from rooftop.hardware.catalog import get_chip
    from rooftop.hardware.topology import parse_topology
    from rooftop.model.catalog import get_model
    from rooftop.plan.compare import compare_serving
    from rooftop.plan.serve.sweep import ServingRequest
    from rooftop.report.compare import compare_payload

    cfg = get_model("llama-3-8b")
    requests = [
        ServingRequest(cfg, get_chip(c), parse_topology(get_chip(c), t), 1024, 256)
        for c, t in (("h100", "8"), ("tpu-v5e", "2x2"))
    ]
    result = compare_serving(requests)
    text = repr(result)
    assert "\n" not in text and len(text) < 300 and "fastest" in text
    fastest = min((e for e in result.entries if e.step_time_s), key=lambda e: e.step_time_s or 0.0)
    assert fastest.chip in text
    assert result.to_dict() == json.loads(json.dumps(compare_payload(result)))
    html = result._repr_html_()
    assert html.count("<tr>") >= 1 + len(result.entries) and "tpu-v5e" in html


def test_views_are_registered_by_type() -> None:
    """The registry is keyed by the class itself, not its dotted name: a result class defined anywhere (here, in a
    test module) is shown once a view is registered for it, and its subclasses take the nearest base's view."""
    from dataclasses import dataclass

    from rooftop.display import Displayed, register_view
    from rooftop.report.notebook import View

    @dataclass(frozen=True, repr=False)
    class Moved(Displayed):
        seconds: float

    class Sub(Moved):
        pass

    register_view(Moved, lambda r: View("Moved", f"{r.seconds * 1000:g} ms", {"s": r.seconds}, [], "row", []))
    assert repr(Moved(0.25)) == "<Moved: 250 ms>"
    assert repr(Sub(0.5)) == "<Moved: 500 ms>" and Sub(0.5).to_dict()["s"] == 0.5
