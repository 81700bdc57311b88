"""`rooftop serve --requests-per-s R | --concurrency N [--scheduler S --token-budget T]`: the
continuous batching keys of the JSON contract, saturation said as such, the static batch unchanged
without traffic, and bad input as one line with exit code 2."""

from __future__ import annotations

import json

import pytest

from rooftop.cli import serve as cli_serve
from rooftop.plan.serve import traffic
from tests.conftest import run_cli

BASE = (
    "serve",
    "llama-2-70b",
    "--chip",
    "h100",
    "--chips",
    "8",
    "--prompt-len",
    "2048",
    "--gen-len",
    "256",
    "--weight-dtype",
    "fp8",
    "--fix",
    "tp=8",
)
#: the issue's keys, at the top (the chosen layout) and in every layout
ISSUE_KEYS = {"tpot_s", "ttft_s", "ttft_idle_s", "prefill_tokens_per_step", "queue_s"}


def _json(*argv: str) -> dict:
    code, out, err = run_cli(*BASE, *argv, "--json")
    assert code == 0, err
    return json.loads(out)


def test_rate_gives_tpot_ttft_under_load_and_queueing() -> None:
    cb = _json("--requests-per-s", "5")["continuous_batching"]
    assert ISSUE_KEYS <= set(cb) and ISSUE_KEYS <= set(cb["layouts"][0])
    assert cb["method"] == "simulation" and "fluid balance" in cb["method_note"]
    assert (cb["scheduler"], cb["token_budget"], cb["requests_per_s"]) == ("chunked", 8192, 5.0)
    assert not cb["saturated"] and cb["chosen"] == 0
    assert cb["ttft_s"] > cb["ttft_idle_s"] > 0 and cb["queue_s"] >= 0
    assert cb["ttft_s"] >= cb["queue_s"]
    assert cb["tpot_s"] > 0 and cb["prefill_tokens_per_step"] > 0
    lay = cb["layouts"][0]
    assert lay["requests_per_s"] == pytest.approx(5.0, rel=0.05)
    assert lay["tokens_per_s"] == pytest.approx(5.0 * 256, rel=0.05)


def test_beyond_saturation_no_number_is_printed() -> None:
    cb = _json("--requests-per-s", "1000")["continuous_batching"]
    assert cb["saturated"] and cb["chosen"] is None
    assert all(cb[k] is None for k in ISSUE_KEYS)
    lay = cb["layouts"][0]
    assert lay["saturated"] and lay["ttft_s"] is None and lay["tpot_s"] is None
    assert "queue grows without bound" in lay["reason"] and lay["capacity_requests_per_s"] < 1000
    code, out, _ = run_cli(*BASE, "--requests-per-s", "1000")
    assert code == 0 and "saturated: queue grows without bound" in out


def test_concurrency_and_prefill_first() -> None:
    cb = _json("--concurrency", "32", "--scheduler", "prefill-first", "--token-budget", "4096")["continuous_batching"]
    assert (cb["scheduler"], cb["token_budget"], cb["concurrency"], cb["requests_per_s"]) == (
        "prefill-first",
        4096,
        32,
        None,
    )
    lay = cb["layouts"][0]
    # Little's law over a request's life in the closed loop: 32 = rate x (TTFT + 255 x TPOT)
    assert 32 == pytest.approx(lay["requests_per_s"] * (lay["ttft_s"] + 255 * lay["tpot_s"]), rel=0.03)


def test_static_batch_stays_the_default() -> None:
    payload = _json()
    assert "continuous_batching" not in payload and payload["points"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--scheduler", "chunked"), "--scheduler and --token-budget need --requests-per-s or --concurrency"),
        (("--concurrency", "4", "--requests-per-s", "2"), "not both"),
        (("--concurrency", "0"), "--concurrency"),
        (("--concurrency", "4", "--token-budget", "0"), "--token-budget"),
        (("--concurrency", "99999"), "above the 16384 simulated"),
    ],
)
def test_bad_traffic_is_one_line_exit_2(argv: tuple[str, ...], message: str) -> None:
    code, out, err = run_cli(*BASE, *argv)
    assert code == 2 and out == ""
    assert message in err and err.count("\n") == 1


def test_cli_constants_match_the_planner() -> None:
    assert cli_serve.SCHEDULERS == traffic.SCHEDULERS
    assert cli_serve.DEFAULT_TOKEN_BUDGET == traffic.DEFAULT_TOKEN_BUDGET
