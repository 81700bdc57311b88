"""`rooftop serve` with a load: the headline (``chosen``) answers under that load, as the
continuous batching section does, never a static point the load would not allow."""

from __future__ import annotations

import json

from tests.conftest import run_cli

README = (
    "serve llama-3-70b --chip h100 --chips 16 --prompt-len 2048 --gen-len 256 --requests-per-s 20 "
    "--max-step-latency 50ms --weight-dtype fp8 --json"
).split()


def _json(argv: list[str]) -> dict:
    code, out, err = run_cli(*argv)
    assert code == 0, err
    return json.loads(out)


def test_the_readme_headline_agrees_with_the_load_section() -> None:
    """At 20 requests/s no layout keeps TPOT under 50 ms (the static sweep's tp=2 x8 at batch 111
    runs 38.1 ms a step, but not under this load): the headline says so instead of choosing it."""
    d = _json(README)
    cb = d["continuous_batching"]
    live = [s for s in cb["layouts"] if not s["saturated"]]
    assert live and all(s["tpot_s"] > 0.050 for s in live)  # none meets the target under the load
    assert cb["chosen"] is None and d["chosen"] is None
    assert d["chosen_reason"].startswith("under the load")
    assert any(n.startswith("without the load, the static sweep would choose") for n in d["notes"])


def test_the_headline_point_is_the_loaded_layout_at_its_running_batch() -> None:
    """The README's 8-GPU command at 8 requests/s: tp=4 x2 under the load, shown at the batch that
    holds its 44 running sequences."""
    d = _json(
        "serve llama-3-70b --chip h100 --chips 8 --prompt-len 2048 --gen-len 256 --weight-dtype fp8 "
        "--requests-per-s 8 --json".split()
    )
    cb = d["continuous_batching"]
    chosen = cb["layouts"][cb["chosen"]]
    point = d["points"][d["chosen"]]
    assert point["parallelism"] == chosen["parallelism"]
    assert point["batch"] >= chosen["decode_batch"]  # the smallest swept batch holding the running batch
    same = [p["batch"] for p in d["points"] if p["parallelism"] == chosen["parallelism"]]
    smaller = [b for b in same if b < point["batch"]]
    assert all(b < chosen["decode_batch"] for b in smaller)
    assert "TPOT" in d["chosen_reason"] and "under 8 requests/s" in d["chosen_reason"]
