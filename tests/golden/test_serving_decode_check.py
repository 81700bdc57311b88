"""benchmarks/serving_decode_check.py, the script behind benchmarks/results/h200-2026-11-26 and
h100-2026-11-27, dry-run on the CPU (tiny shapes): it measures, and its summary asks ``rooftop serve`` for
the same step with the cache read whole and keeps the step's device part (the step less its scheduling)."""

from __future__ import annotations

import csv
import importlib.util
import json
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "serving_decode_check.py"


@pytest.mark.jax
def test_dry_run_then_summary(tmp_path: Path) -> None:
    pytest.importorskip("jax")
    spec = importlib.util.spec_from_file_location("serving_decode_check", SCRIPT)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.main([str(tmp_path), "--quick", "--batches", "1,2", "--steps", "2", "--profile-batch", "2"]) == 0
    data = json.loads((tmp_path / "decode.json").read_text())
    assert [r["batch"] for r in data["rows"]] == [1, 2]
    assert all(r["pipelined_s"] > 0 and r["dispatch_s"] > 0 and r["cache_len"] == 2048 for r in data["rows"])
    assert (tmp_path / "decode.xplane.pb").stat().st_size > 0 and (tmp_path / "decode.hlo.txt").exists()
    rows = mod.summarize(tmp_path, "h200")
    from tests.conftest import run_cli

    argv = ["llama-3-8b", "--chip", "h200", "--chips", "1", "--fix", "tp=1", "--batch", "2", "--prompt-len", "2047"]
    code, out, err = run_cli("serve", *argv, "--gen-len", "2", "--static-cache-len", "2048", "--json")
    assert code == 0, err
    plan = json.loads(out)
    step = plan["points"][plan["chosen"]]["breakdown"]
    assert rows[1]["rooftop_device_s"] == pytest.approx(step["time_s"] - step["scheduling_s"], rel=1e-12)
    assert rows[1]["bandwidth_floor_s"] == step["bandwidth_roofline_s"] < rows[1]["rooftop_device_s"]
    # the cache is read whole, 2 sequences x 2,048 positions, and the new token's K and V written: x 32 layers
    # x 8 KV heads x 128 x (K, V) x 2 bytes
    assert step["kv_cache_bytes"] == 2 * (2048 + 1) * 32 * 8 * 128 * 2 * 2
    with (tmp_path / "decode_vs_rooftop.csv").open() as fh:
        assert [r["batch"] for r in csv.DictReader(fh)] == ["1", "2"]
