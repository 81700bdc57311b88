"""Plans from a goal (plan/goal/), valid slices (hardware/slices.py), prices, power and energy."""

from __future__ import annotations

import json
import math

import pytest

from rooftop.hardware.catalog import get_chip, load_chips
from rooftop.hardware.slices import replica_counts, valid_slices
from rooftop.units import SECONDS_PER_HOUR
from tests.conftest import run_cli

TRAIN_GOAL = ("train", "llama-3-70b", "--chip", "tpu-v5p", "--batch-tokens", "4M", "--seq-len", "4096",
              "--tokens", "15T")  # fmt: skip
SERVE_GOAL = ("serve", "llama-3-70b", "--chip", "h100", "--prompt-len", "2048", "--gen-len", "256",
              "--requests-per-s", "50", "--max-ttft", "2s", "--max-step-latency", "30ms")  # fmt: skip


def _json(*argv: str) -> dict:
    code, out, err = run_cli(*argv, "--json")
    assert code == 0, err
    return json.loads(out)


def test_every_chip_has_a_sourced_price_with_its_date_and_a_sourced_power() -> None:
    for chip in load_chips():
        assert chip.price_usd_per_hour is not None and chip.price_usd_per_hour > 0, chip.name
        assert chip.sources["price.usd_per_chip_hour"].source.strip(), chip.name
        assert chip.price_as_of[:2] == "20" and len(chip.price_as_of) in (7, 10), chip.name
        assert chip.power_w is not None and 50 <= chip.power_w <= 5000, chip.name
        assert chip.sources["power.watts"].source.strip(), chip.name


def test_train_goal_smallest_slice_meets_30_days_and_the_next_smaller_misses() -> None:
    d = _json(*TRAIN_GOAL, "--max-days", "30")
    goal = d["goal"]
    assert goal["met"] and goal["days"] <= 30 and goal["cost_usd"] > 0 and goal["layout"]
    assert d["topology"] == goal["topology"] and d["train_time_s"] / 86_400 == pytest.approx(goal["days"])
    # dollars = days x 24 x chips x the catalog's v5p price
    assert goal["cost_usd"] == pytest.approx(goal["days"] * 24 * goal["chips"] * 4.20)
    # the next smaller valid slice, planned on its own as `rooftop train --topology` plans it, misses 30 days
    options = valid_slices(get_chip("tpu-v5p"))
    below = options[[o.spec for o in options].index(goal["topology"]) - 1]
    assert goal["next_smaller"]["topology"] == below.spec
    code, out, err = run_cli(*TRAIN_GOAL, "--topology", below.spec, "--json")
    assert code != 0 or json.loads(out)["train_time_s"] / 86_400 > 30, err


def test_train_goal_needs_tokens_and_a_goal() -> None:
    code, _, err = run_cli("train", "llama-3-8b", "--chip", "h100", "--batch-tokens", "1M", "--seq-len", "4096",
                           "--max-days", "3")  # fmt: skip
    assert code == 2 and "--tokens" in err
    code, _, err = run_cli("train", "llama-3-8b", "--chip", "h100", "--batch-tokens", "1M", "--seq-len", "4096")
    assert code == 2 and "--max-days" in err


def _fixed_run(argv: tuple[str, ...], goal: dict, chips: int) -> dict:
    """`rooftop serve ... --chips N --fix LAYOUT` under the goal's load: the goal's layout there."""
    fix = ",".join(f"{k}={v}" for k, v in goal["layout"].items() if k != "replicas")
    d = _json(*argv, "--chips", str(chips), "--fix", fix)
    want = {**goal["layout"], "replicas": chips // goal["chips_per_replica"]}
    return next(x for x in d["continuous_batching"]["layouts"] if x["parallelism"] == want)


def test_serve_goal_fewest_chips_and_one_replica_fewer_misses() -> None:
    d = _json(*SERVE_GOAL)
    goal = d["goal"]
    assert goal["met"] and goal["chips"] == goal["replicas"] * goal["chips_per_replica"]
    assert goal["ttft_s"] <= 2.0 and goal["tpot_s"] <= 0.030
    # the engine's TTFT stages (tokenization, queue, prefill, detokenization ...) sum to the goal's TTFT
    assert d["engine"] == "generic" and math.isclose(sum(x["time_s"] for x in goal["ttft_stages"]), goal["ttft_s"])
    # the same chips and layout, planned as `rooftop serve --chips N --fix LAYOUT` under the same load: the same
    # paged-KV pool, admission, step table and simulation, so the same figures, meeting the targets
    same = _fixed_run(SERVE_GOAL, goal, goal["chips"])
    assert not same["saturated"] and same["tpot_s"] <= 0.030 and same["ttft_s"] <= 2.0
    for key in ("tpot_s", "ttft_s", "queue_s", "capacity_requests_per_s", "tokens_per_s"):
        assert same[key] == pytest.approx(goal[key], rel=1e-9), key
    # one replica fewer, planned the same way: saturated or over a target, as the goal says
    fewer = _fixed_run(SERVE_GOAL, goal, goal["chips"] - goal["chips_per_replica"])
    assert fewer["saturated"] or fewer["tpot_s"] > 0.030 or fewer["ttft_s"] > 2.0
    assert goal["one_replica_fewer"]["meets"] is False
    assert (fewer["tpot_s"], fewer["ttft_s"]) == pytest.approx(
        (goal["one_replica_fewer"]["tpot_s"], goal["one_replica_fewer"]["ttft_s"]), rel=1e-9
    )
    # dollars an hour = chips x the catalog's h100 price; per million tokens = that / (tokens/s x 3600 / 1e6)
    assert goal["cost_usd_per_hour"] == pytest.approx(goal["chips"] * 2.99)
    per_m = goal["cost_usd_per_hour"] / (goal["tokens_per_s"] * SECONDS_PER_HOUR / 1e6)
    assert goal["usd_per_million_output_tokens"] == pytest.approx(per_m)


def test_serve_goal_counts_fill_whole_nodes_and_the_next_valid_count_misses() -> None:
    # on B200s (8-GPU NVLink domains) past one node the chips fill whole nodes: replicas of tp=4 go 8 / 4 = 2 at a
    # time, of tp=2 4 at a time; the answer is such a count and the next smaller valid count misses
    argv = (SERVE_GOAL[0], SERVE_GOAL[1], "--chip", "b200", *SERVE_GOAL[4:])
    goal = _json(*argv)["goal"]
    valid = {o.chips for o in valid_slices(get_chip("b200"))}
    assert goal["met"] and all(x["chips"] in valid for x in goal["layouts"])
    assert goal["chips"] % 8 == 0 and goal["replica_step"] == 8 // goal["chips_per_replica"] > 1
    fewer = goal["one_replica_fewer"]
    assert fewer["replicas"] == goal["replicas"] - goal["replica_step"] and not fewer["meets"]
    below = _fixed_run(argv, goal, fewer["chips"])  # planned as `rooftop serve --chips N --fix LAYOUT`: misses
    assert below["saturated"] or below["tpot_s"] > 0.030 or below["ttft_s"] > 2.0


def test_replica_counts_fill_nodes_and_slices() -> None:
    # (free, step): 1..free replicas, then multiples of step
    h100, gb200 = get_chip("h100"), get_chip("gb200")
    assert replica_counts(h100, 2) == (3, 4)  # 2, 4, 6 GPUs below a node; then 8 / 2 = 4 replicas per node
    assert replica_counts(h100, 8) == (0, 1) and replica_counts(h100, 16) == (0, 1)
    assert replica_counts(h100, 3) == (2, 8)  # 3 and 6 GPUs; then lcm(3, 8) = 24 GPUs = 8 replicas
    assert replica_counts(gb200, 8) == (8, 9)  # a 72-GPU NVL72 domain holds 9 replicas of 8
    # TPUs: each replica on its own slice when its chips form one (v5e: 1x2, 2x2, 2x4 ...)
    assert replica_counts(get_chip("tpu-v5e"), 2) == (0, 1) and replica_counts(get_chip("tpu-v5p"), 8) == (0, 1)


def test_serve_goal_runs_the_given_engine() -> None:
    # --engine reaches the goal's pricing: SGLang's KV pool, per-step times and TTFT stages (its overlap
    # scheduler's extra step), the same figures as `rooftop serve --chips N --fix LAYOUT --engine sglang`
    argv = ("serve", "llama-3-8b", "--chip", "h100", "--prompt-len", "512", "--gen-len", "128", "--requests-per-s",
            "100", "--max-ttft", "500ms", "--max-step-latency", "20ms", "--engine", "sglang")  # fmt: skip
    d = _json(*argv)
    goal = d["goal"]
    assert d["engine"] == "sglang" and goal["met"]
    assert "catalog/efficiency/engines.toml [sglang]" in {x["source"] for x in goal["ttft_stages"]}
    same = _fixed_run(argv, goal, goal["chips"])
    assert (same["tpot_s"], same["ttft_s"]) == pytest.approx((goal["tpot_s"], goal["ttft_s"]), rel=1e-9)


def test_valid_slices_by_chip() -> None:
    h100 = [o.chips for o in valid_slices(get_chip("h100"))]
    assert h100[:10] == [1, 2, 3, 4, 5, 6, 7, 8, 16, 24] and all(n % 8 == 0 for n in h100[8:])
    v5p = {o.spec: o.chips for o in valid_slices(get_chip("tpu-v5p"))}
    assert v5p["16x20x28"] == 16 * 20 * 28 and v5p["2*16x20x28"] == 2 * 16 * 20 * 28
    v5e = [o.chips for o in valid_slices(get_chip("tpu-v5e")) if "*" not in o.spec]
    assert v5e == [1, 2, 4, 8, 16, 32, 64, 128, 256]  # powers of two per dim, at most 16x16
    # past a slice: k equal slices of at least a quarter pod over DCN (3 x 8x8 = 192 chips)
    assert {o.spec: o.chips for o in valid_slices(get_chip("tpu-v5e"))}["3*8x8"] == 3 * 64


def test_an_invalid_count_lists_the_valid_slices() -> None:
    code, _, err = run_cli("train", "llama-3-8b", "--chip", "tpu-7x", "--chips", "8192", "--batch-tokens", "4M",
                           "--seq-len", "4096")  # fmt: skip
    assert code == 2 and "nearest valid slices" in err and "16x24x24 (9,216)" in err and "2*16x16x16 (8,192)" in err


def test_energy_and_price_override() -> None:
    d = _json("train", "llama-3-8b", "--chip", "h100", "--chips", "64", "--batch-tokens", "1M", "--seq-len", "4096",
              "--tokens", "1T", "--price", "h100=2.0,tpu-v5p=1")  # fmt: skip
    e = d["energy"]
    assert d["price_usd_per_chip_hour"] == 2.0 and d["cost_usd"] == pytest.approx(d["chip_hours"] * 2.0)
    assert e["kwh"] == pytest.approx(d["chip_hours"] * 700 / 1000)  # chip-hours x 700 W
    assert e["kwh_per_million_tokens"] == pytest.approx(e["kwh"] / 1e6)  # 1T tokens = 1e6 millions
    s = _json("serve", "llama-3-8b", "--chip", "h100", "--chips", "8", "--prompt-len", "512", "--gen-len", "128")
    point = s["points"][s["chosen"]]
    per_m = 8 * 700 / point["tokens_per_s"] * 1e6 / 3.6e6  # J per token x a million, in kWh
    assert math.isclose(s["energy"]["kwh_per_million_tokens"], per_m, rel_tol=1e-9)
    code, _, err = run_cli("train", "llama-3-8b", "--chip", "h100", "--chips", "8", "--batch-tokens", "1M",
                           "--seq-len", "4096", "--price", "h100")  # fmt: skip
    assert code == 2 and "CHIP=USD_PER_HOUR" in err
    code, _, err = run_cli("train", "llama-3-8b", "--chip", "h100", "--chips", "8", "--batch-tokens", "1M",
                           "--seq-len", "4096", "--price", "h1000=3")  # fmt: skip
    assert code == 2 and "h1000" in err


@pytest.mark.slow
def test_compare_with_a_goal_ranks_each_chips_answer_by_dollars() -> None:
    job = ("--batch-tokens", "1M", "--seq-len", "4096", "--tokens", "100G", "--max-days", "7")
    d = _json("compare", "llama-3-8b", "--chips-list", "h100,tpu-v5e,b200", *job)
    entries = d["entries"]
    assert d["settings"]["rank_by"].startswith("cost_usd")
    costs = [e["cost_usd"] for e in entries]
    assert costs == sorted(costs) and len(entries) == 3 and all(e["train_time_s"] <= 7 * 86_400 for e in entries)
    e = next(e for e in entries if e["chip"] == "tpu-v5e")  # the answer `rooftop train` gives that chip alone
    alone = _json("train", "llama-3-8b", "--chip", "tpu-v5e", *job, "--top", "1")["goal"]
    assert (e["topology"], e["chips"]) == (alone["topology"], alone["chips"])
    assert e["train_time_s"] / 86_400 == pytest.approx(alone["days"])
    s = _json("compare", "llama-3-8b", "--chips-list", "h100,b200", "--prompt-len", "512", "--gen-len", "128",
              "--requests-per-s", "100", "--max-step-latency", "20ms")  # fmt: skip
    per_hour = [e["usd_per_hour"] for e in s["entries"]]
    assert per_hour == sorted(per_hour)
    for e in s["entries"]:
        assert e["usd_per_hour"] == pytest.approx(e["chips"] * {"h100": 2.99, "b200": 4.99}[e["chip"]])
        assert e["step_time_s"] <= 0.020


def test_an_invalid_shape_lists_the_valid_slices_nearest_in_chips() -> None:
    code, _, err = run_cli("train", "llama-3-8b", "--chip", "tpu-v5p", "--topology", "16x16x32", "--batch-tokens",
                           "4M", "--seq-len", "4096")  # fmt: skip
    # 16 x 16 x 32 = 8192 chips: no v5p slice has that shape; two 16x16x16 slices over DCN have that count
    assert code == 2 and "larger than the pod" in err and "2*16x16x16 (8,192)" in err and "16x20x28 (8,960)" in err
