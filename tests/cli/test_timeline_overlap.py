"""Every ``--timeline`` output read as a trace viewer reads it: Perfetto turns ``ts`` and ``dur`` (microseconds)
into integer nanoseconds each on its own (llround(x * 1000)) and drops a complete event that overlaps the one
before it on its track without nesting in it. No slice of hlo, serve, train or profile timelines may be lost."""

from __future__ import annotations

import gzip
import json
import math
from collections import defaultdict
from pathlib import Path

import pytest

from tests.conftest import run_cli

FIXTURES = Path(__file__).parent.parent / "fixtures" / "h100"


def _ns(us: float) -> int:
    """Perfetto's JSON importer: std::llround(value * 1000.0) (halves away from zero)."""
    x = us * 1000.0
    return math.floor(x + 0.5) if x >= 0 else -math.floor(-x + 0.5)


def dropped_slices(path: Path) -> list[tuple[str, int, int]]:
    """The complete events a viewer would drop: on one thread, a slice that starts inside an open one and
    ends after it (slices must nest or follow one another, in whole nanoseconds)."""
    by: dict[tuple[int, int], list[tuple[int, int, str]]] = defaultdict(list)
    for e in json.loads(path.read_text())["traceEvents"]:
        if e["ph"] == "X":
            start = _ns(e["ts"])
            by[(e["pid"], e["tid"])].append((start, start + _ns(e["dur"]), e["name"]))
    dropped = []
    for spans in by.values():
        open_ends: list[int] = []
        for start, end, name in sorted(spans, key=lambda x: (x[0], -x[1])):
            while open_ends and open_ends[-1] <= start:
                open_ends.pop()
            if open_ends and end > open_ends[-1]:
                dropped.append((name, start, end))
                continue
            open_ends.append(end)
    return dropped


def _xplane(tmp_path: Path) -> list[str]:
    xplane = tmp_path / "decoder.xplane.pb"
    xplane.write_bytes(gzip.decompress((FIXTURES / "decoder_no_graphs.xplane.pb.gz").read_bytes()))
    return ["profile", str(xplane), "--chip", "h100"]


def _hlo(tmp_path: Path) -> list[str]:
    hlo = tmp_path / "decoder.hlo.txt"
    hlo.write_bytes(gzip.decompress((FIXTURES / "decoder_no_graphs.hlo.txt.gz").read_bytes()))
    return ["hlo", str(hlo), "--chip", "h100"]


COMMANDS = {
    "hlo": _hlo,
    "serve": lambda _: [
        "serve",
        "llama-3-8b",
        "--chip",
        "h100",
        "--chips",
        "8",
        "--prompt-len",
        "1024",
        "--gen-len",
        "256",
        "--batch",
        "8",
    ],
    "train": lambda _: [
        "train",
        "llama-3-8b",
        "--chip",
        "h100",
        "--chips",
        "32",
        "--batch-tokens",
        "256Ki",
        "--seq-len",
        "4096",
        "--fix",
        "pp=4",
        "--top",
        "1",
    ],
    "profile-torch": lambda _: ["profile", str(FIXTURES / "decoder_torch.json.gz"), "--chip", "h100"],
    "profile-xplane": _xplane,
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_no_slice_of_a_timeline_overlaps_another_on_its_track(tmp_path: Path, command: str) -> None:
    path = tmp_path / "t.json"
    code, _out, err = run_cli(*COMMANDS[command](tmp_path), "--json", "--timeline", str(path))
    assert code == 0, err
    events = [e for e in json.loads(path.read_text())["traceEvents"] if e["ph"] == "X"]
    assert len(events) > 20
    assert all(e[k] == _ns(e[k]) / 1000 for e in events for k in ("ts", "dur"))  # whole nanoseconds
    assert dropped_slices(path) == []
