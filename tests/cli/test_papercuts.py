"""What the tables and lines print, read as a user reads them: each test names the output it fixed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rooftop.cli.common import DEFAULT_WIDTH, table_width
from tests.conftest import run_cli

SERVE_H100 = "serve llama-3-70b --chip h100 --chips 16 --prompt-len 2048 --gen-len 256".split()
SERVE_V5E = "serve llama-3-70b --chip tpu-v5e --topology 4x4 --prompt-len 2048 --gen-len 512".split()
# v=1, mb=16: a layout whose bound is the pipeline bubble
TRAIN_PP = (
    "train llama-3.1-405b --chip h100 --chips 16384 --batch-tokens 16M --seq-len 8192 --fix tp=8,pp=16,v=1,mb=16"
).split()


def ok(*argv: str) -> str:
    code, out, err = run_cli(*argv)
    assert code == 0, err
    return out


def flat(text: str) -> str:
    """Table text with its line breaks and padding folded to single blanks."""
    return " ".join(text.split())


def strings(obj: object) -> list[str]:
    """Every string in a JSON document (its text, not its numbers)."""
    if isinstance(obj, str):
        return [obj]
    if isinstance(obj, dict):
        return [s for v in obj.values() for s in strings(v)]
    if isinstance(obj, list):
        return [s for v in obj for s in strings(v)]
    return []


# ---------------------------------------------------------------- rooftop roofline --unit vector


def test_roofline_vector_unit_has_the_vector_ridge_point() -> None:
    """Was: 166 FLOP/B, the matrix unit's 4.59e14 / 2.765e12, for an op on tpu-v5p's vector unit."""
    argv = ("roofline", "--chip", "tpu-v5p", "--flops", "1e12", "--bytes", "4GiB", "--unit", "vector")
    d = json.loads(ok(*argv, "--json"))
    assert d["critical_intensity"] == pytest.approx(1.4e13 / 2.765e12)
    assert "critical intensity │ 5.063 FLOP/B" in flat(ok(*argv))
    matrix = json.loads(ok(*argv[:-1], "matrix", "--json"))
    assert matrix["critical_intensity"] == pytest.approx(4.59e14 / 2.765e12)


# ---------------------------------------------------------------- numbers: no exponents, rates with prefixes


def test_no_exponent_notation_in_tables_and_formulas() -> None:
    """Was: "Training on 1.5e+13 tokens", "1e+03 MiB per device" in the FSDP formulas, and the serving
    critical batch "peak 9.895e+14 FLOP/s ... (2 x 3.35e+12 B/s)"."""
    out = ok("train", "llama-3-70b", "--chip", "tpu-v5p", "--topology", "16x20x28", "--batch-tokens", "4M",
             "--seq-len", "4096", "--tokens", "15T")  # fmt: skip
    assert "Training on 15 T tokens" in out and "e+" not in out
    formulas = " ".join(strings(json.loads(ok(*TRAIN_PP, "--json"))))
    assert "1002 MiB per device over fsdp" in formulas and "e+" not in formulas
    serve = json.loads(ok(*SERVE_H100, "--json"))
    assert serve["critical_batch"]["formula"] == (
        "h100 bf16 peak 989.5 TFLOP/s x 2 bytes per weight / (2 x 3.35 TB/s) = 295.4"
    )


def test_chip_figures_print_with_units() -> None:
    """Was: a "value (SI)" column of 9.895e+14, 8.59e+10, 2.5e+10, 2e-06."""
    out = flat(ok("chips", "h100"))
    figures = {"matrix_flops_per_s.bf16": "989.5 TFLOP/s", "memory.hbm_bytes": "80 GiB", "links.bytes_per_s": "25 GB/s",
               "links.hop_latency_s": "2 us", "price.usd_per_chip_hour": "$2.99"}  # fmt: skip
    for key, value in figures.items():
        assert f"{key} │ {value}" in out, key
    assert "e+" not in out and "e-0" not in out


# ---------------------------------------------------------------- one chip, not "1 chips"


def test_one_chip_is_singular() -> None:
    """Was: "smallest slice that holds the model and one sequence: 1 chips" and "FSDP over all 1 chips"."""
    out = flat(ok(*SERVE_H100, "--weight-dtype", "fp8"))
    assert "one sequence: 1 chip: weights" in out and "1 chips" not in out
    train = flat(
        ok("train", "llama-3-8b", "--chip", "h100", "--chips", "1", "--batch-tokens", "64k", "--seq-len", "4096")
    )
    assert "FSDP over all 1 chip " in train and "1 chips" not in train


def test_one_microbatch_and_one_device_are_singular() -> None:
    """Was: "over 1 microbatch(es)" in the step's formulas and "(1 devices)" for a collective over one chip."""
    d = json.loads(ok("train", "llama-3-8b", "--chip", "h100", "--chips", "8", "--batch-tokens", "64k",
                      "--seq-len", "4096", "--fix", "mb=1", "--json"))  # fmt: skip
    text = json.dumps(d["best"])
    assert "over 1 microbatch)" in text and "(es)" not in text
    argv = ("collective", "all-gather", "--chip", "h100", "--topology", "8", "--mesh", "x=1,y=8", "--axes", "x",
            "--bytes", "1MiB")  # fmt: skip
    assert "(1 device): nothing moves" in ok(*argv)


# ---------------------------------------------------------------- words, not keys, in tables


def test_tables_show_words_and_the_json_keeps_keys() -> None:
    """Was: "memory_capacity" in serve's layouts table, "pipeline_bubble" as a bound in train's,
    "final_norm" in model's parameters."""
    serve = ok(*SERVE_V5E)
    assert "memory capacity" in serve and "memory_capacity" not in serve
    assert json.loads(ok(*SERVE_V5E, "--json"))["layouts"][-1]["limit"] == "memory_capacity"
    train = ok(*TRAIN_PP)
    assert "pipeline bubble" in train and "_" not in train.split("step time of the best layout")[0]
    best = json.loads(ok(*TRAIN_PP, "--json"))["candidates"]
    assert any(c["bound"] == "pipeline_bubble" for c in best)
    model = ok("model", "llama-3-70b")
    assert "final norm" in model and "final_norm" not in model


# ---------------------------------------------------------------- rooftop serve's # column


def test_serve_rows_are_numbered_in_display_order() -> None:
    """Was: the sweep's internal indices (4, 5, ..., *10); the JSON keeps them in "chosen" and "frontier"."""
    out = ok(*SERVE_V5E)
    numbers = [line.split("│")[1].strip() for line in out.splitlines() if line.startswith("│ ") and "tp=" in line]
    numbers = numbers[: numbers.index(next(n for n in numbers if n.startswith("*"))) + 1]
    assert numbers == [str(i) for i in range(1, len(numbers))] + [f"*{len(numbers)}"]
    d = json.loads(ok(*SERVE_V5E, "--json"))
    assert d["chosen"] == max(d["frontier"]) and d["chosen"] >= len(numbers)


# ---------------------------------------------------------------- rooftop hlo: COLUMNS and long shapes


def test_table_width_honours_columns() -> None:
    assert table_width(None, terminal=False) == DEFAULT_WIDTH == 140
    assert table_width(None, terminal=True) is None  # rich measures the terminal
    assert table_width("100", terminal=False) == table_width(" 100 ", terminal=True) == 100
    for junk in ("", "abc", "0", "5", "-80", "1e3", "99999999999", "١٠٠"):
        assert table_width(junk, terminal=False) == DEFAULT_WIDTH, junk


def multi_output_hlo(path: Path, outputs: int = 12) -> Path:
    """A module whose one fusion returns a tuple of ``outputs`` arrays."""
    tup = "(" + ", ".join(["f32[1024,1024]{1,0}"] * outputs) + ")"
    body = "\n".join(
        f"  %e.{i} = f32[1024,1024]{{1,0}} exponential(f32[1024,1024]{{1,0}} %param_0)" for i in range(outputs)
    )
    names = ", ".join(f"%e.{i}" for i in range(outputs))
    path.write_text(
        f"HloModule multi_output\n\n%fused (param_0: f32[1024,1024]) -> {tup} {{\n"
        f"  %param_0 = f32[1024,1024]{{1,0}} parameter(0)\n{body}\n  ROOT %t = {tup} tuple({names})\n}}\n\n"
        f"ENTRY %main (p: f32[1024,1024]) -> {tup} {{\n  %p = f32[1024,1024]{{1,0}} parameter(0)\n"
        f"  ROOT %fusion = {tup} fusion(f32[1024,1024]{{1,0}} %p), kind=kLoop, calls=%fused\n}}\n"
    )
    return path


def test_hlo_table_shortens_a_tuple_shape_and_fits_columns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Was: the 12-array tuple written whole (260 characters) in a table 140 wide whatever COLUMNS said."""
    hlo = str(multi_output_hlo(tmp_path / "m.hlo.txt"))
    out = ok("hlo", hlo, "--chip", "h100")
    assert "(f32[1024,1024]{1,0}, +11 more)" in out
    assert max(len(line) for line in out.splitlines()) <= DEFAULT_WIDTH
    shape = json.loads(ok("hlo", hlo, "--chip", "h100", "--json"))["instructions"][0]["shape"]
    assert shape == "(" + ", ".join(["f32[1024,1024]{1,0}"] * 12) + ")"  # the JSON keeps it whole
    monkeypatch.setenv("COLUMNS", "100")
    narrow = ok("hlo", hlo, "--chip", "h100")
    assert max(len(line) for line in narrow.splitlines()) == 100
    monkeypatch.setenv("COLUMNS", "200")
    assert max(len(line) for line in ok("chips").splitlines()) < 200  # a width, not a padding


def test_short_shapes() -> None:
    from rooftop.report.hlo import short_shape

    assert short_shape("(bf16[8192,6144]{1,0}, s8[33554432]{0})", 30) == "(bf16[8192,6144]{1,0}, +1 more)"
    assert short_shape("(bf16[8192,6144]{1,0}, s8[33554432]{0})", 40) == "(bf16[8192,6144]{1,0}, s8[33554432]{0})"
    assert short_shape("((f32[2], f32[3]), s32[])", 10) == "((f32[2], f32[3]), +1 more)"
    tiled = "bf16[32,32,4096]{2,1,0:T(8,128)(2,1)S(1)}"
    assert short_shape(tiled, 24) == tiled  # an array keeps its layout: its tiles explain the padding
    long = "f32[" + ",".join(["1024"] * 30) + "]{0}"
    assert len(short_shape(long, 24)) == 80 and short_shape(long, 24).endswith("...")


# ---------------------------------------------------------------- rooftop profile without HLO


def jax_trace_without_hlo(path: Path) -> Path:
    """A JAX Chrome trace of four ops on one TPU, three runs each, with no HLO to price them."""
    meta = [
        {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "/device:TPU:0"}},
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 2, "args": {"name": "XLA Ops"}},
    ]
    events, ts = [], 0
    for name, dur in (("add.1", 5), ("zeta_fusion.9", 400), ("copy.3", 50), ("convolution.2", 200)):
        for _ in range(3):
            args = {"hlo_module": "jit_step", "hlo_op": name}
            events.append({"ph": "X", "name": name, "pid": 1, "tid": 2, "ts": ts, "dur": dur, "args": args})
            ts += dur + 1
    path.write_text(json.dumps({"traceEvents": meta + events}))
    return path


def test_profile_without_hlo_ranks_by_measured_time(tmp_path: Path) -> None:
    """Was: every op 0 s lost, so listed alphabetically (add.1 first, the 400 us op last)."""
    out = ok("profile", str(jax_trace_without_hlo(tmp_path / "t.trace.json")), "--chip", "tpu-v5p")
    assert "ranked by measured time (no op has a roofline)" in flat(out)
    lines = [line for line in out.splitlines() if line.startswith("│") and "unknown cost" in line]
    assert [line.split("│")[1].strip() for line in lines] == ["zeta_fusion.9", "convolution.2", "copy.3", "add.1"]
    assert all(line.split("│")[8].strip() == "?" for line in lines)
