"""Hardening of what rooftop writes and renders (issue 15): names from input files are literal
text in tables, lines and charts; plots and chip files are written atomically with a normal
file's permissions; every bad path or argument is one line and exit 2, checked before work."""

from __future__ import annotations

import io
import json
import os
import stat
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from rooftop.errors import InvalidConfigError
from tests.conftest import run_cli

CATALOG = Path(__file__).resolve().parents[2] / "src" / "rooftop" / "catalog" / "chips"
MATMUL = ["matmul", "A[B,D]@W[D,F]", "--dims", "B=64,D=64,F=64", "--chip", "h100"]
ROOFLINE = ["roofline", "--chip", "h100", "--flops", "1e12", "--bytes", "1e9"]


@pytest.fixture
def umask_022() -> Iterator[None]:
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def one_line_error(code: int, out: str, err: str, *words: str) -> None:
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and "internal error" not in err and "Traceback" not in err
    for w in words:
        assert w in err, err


def strays(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(".rooftop"))


def chip_named(tmp_path: Path, name: str, field: str = "name") -> Path:
    """The h100 chip file with ``field`` (name or description) replaced by ``name``."""
    text = (CATALOG / "h100.toml").read_text()
    lines = [f"{field} = {json.dumps(name)}" if line.startswith(f"{field} = ") else line for line in text.splitlines()]
    path = tmp_path / "odd.toml"
    path.write_text("\n".join(lines) + "\n")
    assert tomllib.loads(path.read_text())[field] == name
    return path


# ---------------------------------------------------------------- names from inputs are literal text


def test_instruction_named_like_a_closing_tag_is_shown_as_is(tmp_path: Path) -> None:
    """Was: MarkupError "closing tag '[/x]' ... doesn't match any open tag", internal error, exit 1."""
    hlo = tmp_path / "m.hlo.txt"
    hlo.write_text(
        "HloModule m[/x]\n\nENTRY %e {\n  %p = f32[64,64] parameter(0)\n  %q = f32[64,64] parameter(1)\n"
        "  ROOT %mul[/x] = f32[64,64] multiply(f32[64,64] %p, f32[64,64] %q)\n}\n"
    )
    code, out, err = run_cli("hlo", str(hlo), "--chip", "h100")
    assert code == 0, err
    assert "mul[/x]" in out and "m[/x] on h100" in out


def kineto(tmp_path: Path, kernel: str) -> Path:
    events = [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#3", "pid": 9, "tid": 9, "ts": 0, "dur": 300},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 9, "tid": 9, "ts": 10, "dur": 3,
         "args": {"correlation": 5}},
        {"ph": "X", "cat": "kernel", "name": kernel, "pid": 0, "tid": 7, "ts": 150, "dur": 40,
         "args": {"device": 0, "stream": 7, "correlation": 5}},
    ]  # fmt: skip
    path = tmp_path / "rank0.pt.trace.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    return path


def test_kernel_named_like_a_closing_tag_is_shown_as_is(tmp_path: Path) -> None:
    """Was: MarkupError on the profile table, internal error, exit 1."""
    code, out, err = run_cli("profile", str(kineto(tmp_path, "[/bold]")), "--chip", "h100")
    assert code == 0, err
    assert "[/bold]" in out


def test_markup_in_a_chip_name_is_not_styled(tmp_path: Path) -> None:
    """Was: a chip called ``[red on white blink]ALERT[/]`` rendered as blinking text."""
    from rich.console import Console

    from rooftop.hardware.catalog import load_chip_file
    from rooftop.report.chips import render_chip

    name = "[red on white blink]ALERT[/]"
    chip = load_chip_file(chip_named(tmp_path, name))
    buf = io.StringIO()
    render_chip(Console(file=buf, width=200, force_terminal=True, color_system="truecolor"), chip)
    text = buf.getvalue()
    assert "\x1b[5m" not in text and "blink" in text and "ALERT[/]" in text  # shown, not obeyed
    code, out, err = run_cli("chips", str(chip_named(tmp_path, name)))
    assert code == 0, err
    assert name in out


def test_escape_sequences_and_emoji_codes_from_inputs_are_written_out(tmp_path: Path) -> None:
    from rich.console import Console

    from rooftop.report.table import say, table

    texts = []
    for terminal in (True, False):
        buf = io.StringIO()
        console = Console(file=buf, width=200, force_terminal=terminal)
        console.print(table("t \x1b[2J", ["a", "b"], [("\x1b[5mBLINK", ":thumbs_up:"), ("a\rb\u202ec", "x\ud800y")]))
        say(console, "note: \x1b]0;title\x07 :smile:")
        texts.append(buf.getvalue())
    assert not any(code in texts[0] for code in ("\x1b[5m", "\x1b[2J", "\x1b]0", "\r", "\u202e", "\ud800"))
    text = texts[1]
    for shown in ("\\x1b[5mBLINK", ":thumbs_up:", "a\\rb\\u202ec", "x\\ud800y", "\\x1b]0;title\\x07", ":smile:"):
        assert shown in text
    code, out, err = run_cli("chips", str(chip_named(tmp_path, "desc \x1b[31mred :smile:", "description")))
    assert code == 0, err
    assert "\x1b" not in out and "desc \\x1b[31mred :smile:" in out


def test_long_names_render_quickly(tmp_path: Path) -> None:
    """Was: rich folded a 20,000-character name in 11 s (quadratic); a megabyte-long one hung."""
    from rich.console import Console

    from rooftop.report.table import MAX_TEXT, say, table

    buf = io.StringIO()
    console = Console(file=buf, width=140)
    t0 = time.perf_counter()
    console.print(table("x" * 10**6, ["a"], [("y" * 10**6,)]))
    say(console, "note: " + "z" * 10**6)
    say(console, "note: " + "w " * 10**6)
    assert time.perf_counter() - t0 < 3
    assert "(1000000 characters)" in buf.getvalue() and len(buf.getvalue()) < 10 * MAX_TEXT


def test_a_name_with_dollars_is_drawn_literally(tmp_path: Path) -> None:
    """Matplotlib mathtext would parse ``$\\frac{$`` and fail; names are drawn as they are."""
    png = tmp_path / "r.png"
    chip = chip_named(tmp_path, "$\\frac{$ x_1 $")
    code, _, err = run_cli(*ROOFLINE[:2], str(chip), *ROOFLINE[3:], "--plot", str(png))
    assert code == 0, err
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert strays(tmp_path) == []


# ---------------------------------------------------------------- plots


def test_bare_extension_plot_is_an_error_and_leaves_nothing(tmp_path: Path) -> None:
    """Was: ``--plot .svg`` wrote a 0-byte .svg and left .rooftop-plot-XXXX.png beside it."""
    code, out, err = run_cli(*MATMUL, "--plot", str(tmp_path / ".svg"))
    one_line_error(code, out, err, "/.svg'", "no name before its extension", "roofline.svg")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name,magic", [("r.svg", b"<?xml"), ("R.PDF", b"%PDF"), ("r.png", b"\x89PNG")])
def test_plot_is_written_in_the_format_of_its_extension_with_a_normal_mode(
    tmp_path: Path, umask_022: None, name: str, magic: bytes
) -> None:
    """Was: plots written with mode 0600 (mkstemp's)."""
    path = tmp_path / name
    code, _, err = run_cli(*ROOFLINE, "--plot", str(path))
    assert code == 0, err
    assert path.read_bytes().startswith(magic) and path.stat().st_size > 1000
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert strays(tmp_path) == []


def test_replacing_a_plot_keeps_its_mode(tmp_path: Path) -> None:
    path = tmp_path / "r.png"
    path.write_bytes(b"old")
    path.chmod(0o640)
    code, _, err = run_cli(*ROOFLINE, "--plot", str(path))
    assert code == 0, err
    assert stat.S_IMODE(path.stat().st_mode) == 0o640 and path.read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize(
    "plot,words",
    [
        ("r.txt", ["must end in .png, .svg, .pdf"]),
        ("r", ["must end in .png, .svg, .pdf"]),
        ("folder.png", ["is a folder"]),
        ("missing/r.png", ["does not exist"]),
        ("afile/r.png", ["is not a folder"]),
        ("r\0.png", ["NUL character"]),
        ("r\ud800.png", ["cannot be a file name here"]),
    ],
)
def test_bad_plot_paths_are_one_line(tmp_path: Path, plot: str, words: list[str]) -> None:
    (tmp_path / "folder.png").mkdir()
    (tmp_path / "afile").write_text("x")
    for argv in (ROOFLINE, MATMUL):
        code, out, err = run_cli(*argv, "--plot", str(tmp_path / plot))
        one_line_error(code, out, err, *words)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile", "folder.png"]


def test_empty_plot_path_is_rejected_by_the_writer() -> None:
    from rooftop.report.plot import check_plot_path

    for path in ("", "  "):
        with pytest.raises(InvalidConfigError, match="--plot is empty: give a file name ending in .png"):
            check_plot_path(path)


def test_empty_plot_flag_is_an_error() -> None:
    code, out, err = run_cli(*ROOFLINE, "--plot", "")
    one_line_error(code, out, err, "--plot is empty")


def test_failed_save_leaves_no_file_and_no_figure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Was: a failed save left the figure open in pyplot (and the temporary file)."""
    import matplotlib.pyplot as plt
    from matplotlib.figure import Figure

    def boom(self: Figure, *a: object, **k: object) -> None:
        raise ValueError("Image size of 99999999x1 pixels is too large")

    monkeypatch.setattr(Figure, "savefig", boom)
    before = plt.get_fignums()
    code, out, err = run_cli(*ROOFLINE, "--plot", str(tmp_path / "r.png"))
    one_line_error(code, out, err, "cannot draw plot", "too large")
    assert list(tmp_path.iterdir()) == [] and plt.get_fignums() == before


@pytest.mark.parametrize("command", ["serve", "train"])
def test_serve_and_train_charts_check_the_path_first(tmp_path: Path, command: str) -> None:
    from rooftop.report import serve_chart, train

    path = str(tmp_path / "x.gif")
    with pytest.raises(InvalidConfigError, match="must end in"):  # rejected before the plan is read
        serve_chart.plot_serve(path, None) if command == "serve" else train.plot_train(None, path)


# ---------------------------------------------------------------- calibrate


def calibration():
    from rooftop.jaxlink.calibrate import Calibration, Measurement

    return Calibration(
        device_kind='cpu "x"\\\x01',
        platform="cpu",
        devices=1,
        jax_version="0",
        date="2025-01-01",
        matrix={"bf16": Measurement("bf16", 1e12, "m")},
        vector=Measurement("fp32", 1e11, "v"),
        hbm=Measurement("hbm", 1e11, "h"),
        memory_bytes=1e9,
    )


def test_chip_file_is_written_through_mkstemp_not_a_predictable_name(tmp_path: Path, umask_022: None) -> None:
    """Was: ``{out}.tmp-{pid}`` opened with open("w"): a link planted at that name was followed."""
    from rooftop.jaxlink.calibrate import chip_toml
    from rooftop.report.calibrate import write_chip_file

    victim = tmp_path / "victim"
    victim.write_text("precious")
    out = tmp_path / "mychip.toml"
    os.symlink(victim, f"{out}.tmp-{os.getpid()}")
    write_chip_file(chip_toml(calibration(), 'my "chip" \\ 1'), str(out))
    assert victim.read_text() == "precious"
    assert tomllib.loads(out.read_text())["name"] == 'my "chip" \\ 1'
    assert stat.S_IMODE(out.stat().st_mode) == 0o644
    assert strays(tmp_path) == []


@pytest.mark.parametrize(
    "argv,words",
    [
        (["--name", ""], ["--name is empty"]),
        (["--name", "a\nb"], ["chip name 'a\\nb'", "no control characters"]),
        (["--name", "x" * 500], ["chip name", "(502 characters)"]),
        (["--out", ""], ["--out is empty"]),
        (["--out", "DIR/chip.json"], ["must end in .toml"]),
        (["--out", "DIR/no/chip.toml"], ["cannot write chip file", "does not exist"]),
        (["--out", "DIR"], ["is a folder"]),
        (["--repeats", "0"], ["--repeats '0' must be in [1, 100]"]),
        (["--repeats", "1" + "0" * 25], ["--repeats", "must be in [1, 100]"]),
        (["--repeats", "²"], ["--repeats '²' is not an integer"]),
        (["--repeats", "٥"], ["is not an integer"]),
    ],
)
def test_calibrate_checks_every_argument_before_measuring(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, argv: list[str], words: list[str]
) -> None:
    """Was: a bad --name or --out was rejected only after a minute of measuring."""
    import rooftop.jaxlink.calibrate as cal

    def measured(**_: object) -> None:
        raise AssertionError("measured before checking the arguments")

    monkeypatch.setattr(cal, "calibrate", measured)
    argv = [a.replace("DIR", str(tmp_path)) for a in argv]
    code, out, err = run_cli("calibrate", *argv)
    one_line_error(code, out, err, *words)
    assert list(tmp_path.iterdir()) == []


def test_chip_names_and_strings_are_valid_toml() -> None:
    from rooftop.hardware.catalog import chip_from_dict
    from rooftop.jaxlink.calibrate import check_chip_name, chip_toml

    for name in ('q"uote', "back\\slash", "[/bold]", "é²", "a b"):
        chip = chip_from_dict(tomllib.loads(chip_toml(calibration(), name)))
        assert chip.name == name and 'cpu "x"\\\x01' in chip.description
    for bad in ("", "   ", "a\tb", "\x1b[5m", "x\ud800", "x" * 101):
        with pytest.raises(InvalidConfigError, match="chip name"):
            check_chip_name(bad)


# ---------------------------------------------------------------- tables and JSON of odd but valid programs


def test_padded_instruction_run_zero_times(tmp_path: Path) -> None:
    """Was: ZeroDivisionError (padded bytes / 0 bytes) in the hlo table, internal error, exit 1."""
    shape = "f32[3,3]{1,0:T(8,128)}"
    tup = f"(s32[], {shape})"
    hlo = tmp_path / "w.hlo.txt"
    hlo.write_text(
        f"HloModule w\n\n%body (p: {tup}) -> {tup} {{\n  %p = {tup} parameter(0)\n"
        f"  %i = s32[] get-tuple-element({tup} %p), index=0\n  %x = {shape} get-tuple-element({tup} %p), index=1\n"
        f"  %y = {shape} multiply({shape} %x, {shape} %x)\n  ROOT %t = {tup} tuple(s32[] %i, {shape} %y)\n}}\n\n"
        f"%cond (p: {tup}) -> pred[] {{\n  %p = {tup} parameter(0)\n  ROOT %c = pred[] constant(false)\n}}\n\n"
        f"ENTRY %e {{\n  %a = {tup} parameter(0)\n  ROOT %w = {tup} while({tup} %a), condition=%cond, body=%body, "
        'backend_config={"known_trip_count":{"n":"0"}}\n}\n'
    )
    code, out, err = run_cli("hlo", str(hlo), "--chip", "tpu-v5e")
    assert code == 0, err
    assert "-> f32[8,128] x0" in out


def test_json_of_numpy_values_and_huge_integers() -> None:
    import numpy as np

    from rooftop.report.serialize import to_json

    d = json.loads(to_json({"a": np.int64(3), "b": np.float32("nan"), "c": np.array([1.5, np.inf]), "d": 10**5000}))
    assert d == {"schema_version": 1, "a": 3, "b": None, "c": [1.5, None], "d": None}


def test_a_closed_stdout_pipe_is_exit_141_and_silent(tmp_path: Path) -> None:
    """Was: `rooftop hlo big.hlo | head -1` exited 1 (rich's own handling of the closed pipe)."""
    import gzip
    import subprocess
    import sys

    hlo = tmp_path / "decoder.hlo"
    hlo.write_bytes(gzip.decompress((Path(__file__).parents[1] / "fixtures/h100/decoder.hlo.txt.gz").read_bytes()))
    cmd = [sys.executable, "-m", "rooftop.cli.main", "hlo", str(hlo), "--chip", "h100", "--top", "2000"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader goes away before the table is written (the interpreter takes a second to start)
    err = proc.stderr.read()
    assert proc.wait(timeout=60) == 141 and err == b""
