"""The pictures of ``rooftop profile --plot`` and ``rooftop hlo --plot``: the ops on the chip's roofline
and the time per op beside it, drawn from the real H100 profile of tests/fixtures/h100 (and the
third-party profiles when ../shared is present). The figure's artists are checked against the report
they were drawn from; the files against their format's signature."""

from __future__ import annotations

import dataclasses
import gzip
import math
from pathlib import Path
from typing import Any

import pytest

from rooftop.errors import InvalidConfigError
from rooftop.hardware.catalog import get_chip
from tests.conftest import run_cli

H100 = Path(__file__).parents[1] / "fixtures" / "h100"
MAGIC = {".png": b"\x89PNG\r\n\x1a\n", ".svg": b"<?xml", ".pdf": b"%PDF-"}


@pytest.fixture(scope="module")
def fixture_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("h100")
    files = {}
    for name in ("decoder.xplane.pb", "decoder.hlo.txt"):
        files[name] = out / name
        files[name].write_bytes(gzip.decompress((H100 / f"{name}.gz").read_bytes()))
    return files


@pytest.fixture(scope="module")
def report(fixture_files: dict[str, Path]) -> Any:
    pytest.importorskip("jax")  # the XPlane reader
    from rooftop.analysis.profile import profile_report

    return profile_report(str(fixture_files["decoder.xplane.pb"]), get_chip("h100"), None, None, None, None)


@pytest.fixture(scope="module")
def analysis(fixture_files: dict[str, Path]) -> Any:
    from rooftop.analysis.hlo.analyze import analyze
    from rooftop.analysis.hlo.parse import parse_hlo_file

    return analyze(parse_hlo_file(str(fixture_files["decoder.hlo.txt"])), get_chip("h100"))


def artist(fig: Any, gid: str) -> Any:
    found = [a for ax in fig.axes for a in ax.get_children() if a.get_gid() == gid]
    assert len(found) == 1, (gid, found)
    return found[0]


def patches(fig: Any, gid: str) -> list[Any]:
    """The bars drawn with ``gid``, in the order they were given (the first on top)."""
    return [a for ax in fig.axes for a in ax.get_children() if a.get_gid() == gid]


def texts(fig: Any) -> list[str]:
    return [t.get_text() for ax in fig.axes for t in ax.texts] + [t.get_text() for t in fig.texts]


def is_collective(o: Any) -> bool:
    from rooftop.analysis.intervals import is_collective as collective_opcode

    return o.mesh_axes is not None or bool(o.collective) or collective_opcode(o.opcode or "")


def on_roofline(o: Any) -> bool:
    """An op with FLOPs and bytes, timed and priced, that is not a collective: the picture places it."""
    priced = o.verdict not in ("unknown cost", "overlapped transfer", "no modelled cost")
    return bool(o.flops and o.bytes and o.measured_s > 0 and priced and not is_collective(o))


# ---------------------------------------------------------------- rooftop profile --plot


def test_profile_figure_places_every_op_with_flops_and_bytes(report: Any) -> None:
    from rooftop.report.profile import profile_figure

    fig = profile_figure(report, get_chip("h100"))
    placed = [o for o in report.ops if on_roofline(o)]
    points = artist(fig, "ops").get_offsets()
    assert len(points) == len(placed) > 200
    expected = sorted((o.flops / o.bytes, o.flops / o.measured_s) for o in placed)
    for (x, y), (ex, ey) in zip(sorted(map(tuple, points)), expected, strict=True):
        assert x == pytest.approx(ex) and y == pytest.approx(ey)
    sizes = artist(fig, "ops").get_sizes()
    assert max(sizes) == pytest.approx(900)  # the longest op; the others in proportion to their time
    movers = [o for o in report.ops if not o.flops and o.bytes and o.verdict == "near roofline"]
    assert len(artist(fig, "strip").get_offsets()) == len(movers) == 28  # the ops without FLOPs


def test_profile_figure_has_the_ridges_ceilings_labels_title_and_bars(report: Any) -> None:
    from rooftop.report.profile import profile_figure, ranked_ops

    chip = get_chip("h100")
    fig = profile_figure(report, chip, top=12)
    ridge = artist(fig, "ridge matrix bf16/fp16")  # the gemms ran at the bf16 (= fp16) tensor-core peak
    assert list(ridge.get_xdata()) == pytest.approx([9.895e14 / 3.35e12] * 2)
    assert max(ridge.get_ydata()) == pytest.approx(9.895e14)
    assert max(artist(fig, "ceiling matrix bf16/fp16").get_ydata()) == pytest.approx(9.895e14)
    assert list(artist(fig, "ridge vector bf16").get_xdata()) == pytest.approx([1.338e14 / 3.35e12] * 2)
    labels = [a.get_text() for a in fig.axes[0].texts if a.get_text().split(" ")[0] in {o.name for o in report.ops}]
    top = ranked_ops(report)[0][0]
    assert top.name == "fusion.272" and any(t.startswith("fusion.272 +3 here\n38% of roofline") for t in labels)
    assert 4 <= len(labels) <= 8
    title = fig.get_suptitle()
    assert "decoder.xplane.pb on h100" in title and "100% of the measured op time" in title
    widths = patches(fig, "bars base"), patches(fig, "bars extra")
    assert len(widths[0]) == len(widths[1]) == 12
    ranked = [o for o in ranked_ops(report)[0] if o.lost_s > 0][:12]
    for base, extra, o in zip(*widths, ranked, strict=True):  # drawn in ms: measured = roofline + lost
        assert (base.get_width() + extra.get_width()) * 1e-3 == pytest.approx(o.total_s)
        assert extra.get_width() * 1e-3 == pytest.approx(o.lost_s)
    names = [t.get_text() for t in fig.axes[2].get_yticklabels()]
    assert "fusion.272\nlayer3/attention/convert_element_type" in names


def test_profile_plot_is_written_and_leaves_no_figure(fixture_files: dict[str, Path], tmp_path: Path) -> None:
    """The CLI writes the picture (the other formats: test_names_are_drawn_as_literal_text); the figure is
    never pyplot's."""
    import matplotlib.pyplot as plt

    before, path = plt.get_fignums(), tmp_path / "ops.png"
    code, out, err = run_cli("profile", str(fixture_files["decoder.xplane.pb"]), "--chip", "h100", "--plot", str(path))
    assert code == 0, err
    assert path.read_bytes().startswith(MAGIC[".png"]) and path.stat().st_size > 10_000
    assert f"plot written to {path}" in out and "fusion.272" in out  # the table as well
    assert plt.get_fignums() == before and [p.name for p in tmp_path.iterdir()] == ["ops.png"]


def test_names_are_drawn_as_literal_text(report: Any, tmp_path: Path) -> None:
    """A ``$`` in an op's name is a dollar sign, not mathtext (``$\\frac{$`` would not parse)."""
    from rooftop.report.plot import save
    from rooftop.report.profile import profile_figure

    odd = "fusion$\\frac{$x_1$"
    ops = tuple(dataclasses.replace(o, name=odd + o.name) if i < 3 else o for i, o in enumerate(report.ops))
    fig = profile_figure(dataclasses.replace(report, ops=ops, source="/tmp/a$b$.pb"), get_chip("h100"))
    drawn = [t for ax in fig.axes for t in [*ax.texts, *ax.get_yticklabels()] if odd in t.get_text()]
    assert drawn and all(not t.get_parse_math() and not t.get_usetex() for t in drawn)
    for ext in MAGIC:
        save(fig, str(tmp_path / f"odd{ext}"))
        assert (tmp_path / f"odd{ext}").read_bytes().startswith(MAGIC[ext])


def test_a_trace_without_hlo_is_drawn_with_its_measured_times(report: Any) -> None:
    from rooftop.report.profile import UNKNOWN, profile_figure

    unknown = tuple(dataclasses.replace(o, verdict=UNKNOWN, flops=None, bytes=None, lower_bound_s=None, efficiency=None,
                                        lost_s=0.0) for o in report.ops)  # fmt: skip
    fig = profile_figure(dataclasses.replace(report, ops=unknown), get_chip("h100"), top=3)
    assert not [a for ax in fig.axes for a in ax.get_children() if a.get_gid() == "ops"]
    words = " ".join(texts(fig)) + " ".join(ax.get_title() for ax in fig.axes)
    assert "no op with FLOPs and bytes to place" in words and "no op has a roofline" in words
    assert "255 ops of unknown cost (100% of the op time)" in words
    assert "the picture places 0% of the measured op time" in fig.get_suptitle()
    longest = sorted(report.ops, key=lambda o: -o.total_s)[0]
    assert patches(fig, "bars base")[0].get_width() * 1e-3 == pytest.approx(longest.total_s)


# ---------------------------------------------------------------- rooftop hlo --plot


def test_hlo_figure_puts_each_instruction_on_the_roofline(analysis: Any) -> None:
    from rooftop.report.hlo import hlo_figure

    chip = analysis.chip
    fig = hlo_figure(analysis, top=10, source="/x/decoder.hlo.txt")
    placed = [t for t in analysis.ops if t.estimate.flops > 0 and t.estimate.hbm_bytes > 0 and not t.op.cost.unknown
              and not t.op.cost.collectives and t.estimate.lower_bound_s > 0]  # fmt: skip
    points = artist(fig, "ops").get_offsets()
    assert len(points) == len(placed) == 227
    top = max(chip.matrix_flops_per_s.values())
    for x, y in points:  # predicted: on the roofline by construction (under the top ceiling, on the slope)
        assert y <= min(top, x * chip.hbm_bytes_per_s) * (1 + 1e-9)
    memory = [(t.estimate.flops / t.estimate.hbm_bytes) * chip.hbm_bytes_per_s for t in placed
              if t.estimate.bound == "memory"]  # fmt: skip
    assert sorted(y for _, y in points if any(math.isclose(y, m) for m in memory)) == pytest.approx(sorted(memory))
    assert list(artist(fig, "ridge matrix bf16").get_xdata()) == pytest.approx([9.895e14 / 3.35e12] * 2)
    assert "decoder.hlo.txt (jit_train_step) on h100" in fig.get_suptitle()
    assert "97% of the predicted time on the roofline" in fig.get_suptitle()
    labels = " ".join(t.get_text() for t in fig.axes[0].texts)
    assert "fusion.272 +3 here\n9% of the predicted time in 4" in labels  # its share, as the points lie on the roof
    assert len(patches(fig, "bars base")) == 10
    assert "28 instructions without FLOPs (3% of the predicted time" in " ".join(texts(fig))


def test_hlo_plot_is_written_with_the_scopes_of_the_instructions(
    fixture_files: dict[str, Path], tmp_path: Path
) -> None:
    import matplotlib.pyplot as plt

    before, path = plt.get_fignums(), tmp_path / "hlo.pdf"
    code, out, err = run_cli("hlo", str(fixture_files["decoder.hlo.txt"]), "--chip", "h100", "--plot", str(path),
                             "--json")  # fmt: skip
    assert code == 0, err
    assert path.read_bytes().startswith(MAGIC[".pdf"]) and path.stat().st_size > 10_000
    assert out.startswith("{") and plt.get_fignums() == before
    from rooftop.analysis.hlo.parse import parse_hlo_file
    from rooftop.report.hlo import hlo_chart, op_names

    analysis_ = parse_hlo_file(str(fixture_files["decoder.hlo.txt"]))
    names = op_names(analysis_)
    assert names["fusion.272"].endswith("transpose(jvp(layer3/attention))/convert_element_type")
    from rooftop.analysis.hlo.analyze import analyze

    chart = hlo_chart(analyze(analysis_, get_chip("h100")), 3, "", names)
    assert [(b.name, b.detail) for b in chart.bars] == [
        ("fusion.272", "layer3/attention/convert_element_type"),
        ("fusion.271", "layer2/attention/convert_element_type"),
        ("fusion.270", "layer1/attention/convert_element_type"),
    ]


# ---------------------------------------------------------------- bad paths: one line, nothing written


@pytest.mark.parametrize(
    "plot,words",
    [
        ("ops.txt", ["must end in .png, .svg, .pdf"]),
        ("ops.jpg", ["must end in .png, .svg, .pdf"]),
        ("missing/ops.png", ["does not exist"]),
        ("folder.png", ["is a folder"]),
        (".png", ["no name before its extension"]),
    ],
)
@pytest.mark.parametrize("command", ["profile", "hlo"])
def test_bad_plot_paths_are_one_line_and_write_nothing(
    fixture_files: dict[str, Path], tmp_path: Path, command: str, plot: str, words: list[str]
) -> None:
    (tmp_path / "folder.png").mkdir()
    source = fixture_files["decoder.xplane.pb" if command == "profile" else "decoder.hlo.txt"]
    code, out, err = run_cli(command, str(source), "--chip", "h100", "--plot", str(tmp_path / plot))
    assert code == 2 and out == "", err
    assert len(err.strip().splitlines()) == 1 and f"rooftop {command}: error:" in err
    assert all(w in err for w in words), err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["folder.png"]


def test_the_writers_check_the_path_before_drawing(tmp_path: Path) -> None:
    from rooftop.report.hlo import plot_hlo
    from rooftop.report.profile import plot_profile

    with pytest.raises(InvalidConfigError, match="must end in"):
        plot_profile(None, get_chip("h100"), str(tmp_path / "x.gif"))
    with pytest.raises(InvalidConfigError, match="must end in"):
        plot_hlo(None, str(tmp_path / "x.gif"))
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------- a JAX profile made here (CPU, 8 devices)


def test_collectives_are_left_off_the_roofline_and_kept_in_the_bars() -> None:
    jax = pytest.importorskip("jax")
    if len(jax.devices()) < 8:
        pytest.skip("needs 8 devices")
    from rooftop.jaxlink import analyze
    from rooftop.report.profile import profile_chart, profile_figure
    from tests.conftest import worked_example

    step, args = worked_example("naive")
    report = analyze(step, *args, chip="h100", steps=1, mesh="data=4,model=2")
    chip = get_chip("h100")
    chart = profile_chart(report, chip, top=20)
    collectives = {o.name for o in report.ops if o.mesh_axes}
    assert collectives and not collectives & {m.name for m in (*chart.marks, *chart.strip)}
    assert collectives <= {b.name for b in chart.bars}  # on a CPU they are most of the time lost
    assert f"{len(collectives)} collectives (" in " ".join(chart.caption)
    fig = profile_figure(report, chip, top=20)
    assert len(artist(fig, "ops").get_offsets()) == sum(1 for o in report.ops if on_roofline(o)) > 10


# ---------------------------------------------------------------- third-party profiles


def test_tpu_offload_copies_on_the_strip_against_the_host_link(third_party: Path) -> None:
    pytest.importorskip("jax")
    from rooftop.analysis.profile import profile_report
    from rooftop.report.profile import profile_figure

    chip = get_chip("tpu-v6e")
    trace = third_party / "xplane" / "xprof_tpu_v6e_inference_2.xplane.pb"
    fig = profile_figure(profile_report(str(trace), chip, None, None, None, None), chip)
    assert len(artist(fig, "ops").get_offsets()) == 3 and len(artist(fig, "strip").get_offsets()) == 5
    assert artist(fig, "bandwidth host link 32 GB/s").get_xdata()[0] == pytest.approx(chip.host_bytes_per_s)
    words = " ".join(texts(fig))
    assert "1 collective (<1% of the op time: network time, in the bars)" in words
    assert "2 overlapped transfers" in words and ">99% of the measured op time" in fig.get_suptitle()
