"""TTFT stage by stage (plan/serve/ttft.py): request handling and tokenization, the step under
way, the queue, the prefill steps, the overlap scheduler's extra step, detokenization; idle and
under load, each stage with its formula."""

from __future__ import annotations

import pytest

from rooftop.plan.serve.batching import idle_ttft, steady_state
from rooftop.plan.serve.paging import get_engine
from rooftop.plan.serve.traffic import Traffic


def toy_step(n: float, c: float) -> float:
    return 0.010 + 50e-6 * n + max(0.0, 10e-6 * (n + c) - 0.002)


@pytest.mark.parametrize("engine", ["vllm", "trtllm"])
def test_idle_ttft_is_its_stages(engine: str) -> None:
    """An idle replica: 1 ms of request handling, 512 x 0.08 us of tokenization, the prompt's one
    step, one more decode step with an overlap scheduler (TensorRT-LLM), 140 us to detokenize."""
    t = Traffic(512, 48, requests_per_s=1.0, token_budget=1024)
    e = get_engine(engine)
    s = steady_state(toy_step, t, 256, engine=e)
    names = [x.name for x in s.ttft_idle_stages]
    assert names[0] == "request handling and tokenization" and names[-1] == "detokenization and streaming"
    extra = toy_step(1, 0) if engine == "trtllm" else 0.0
    expected = 1e-3 + 512 * 8e-8 + idle_ttft(toy_step, t) + extra + 1.4e-4
    assert s.ttft_idle_s == pytest.approx(expected)
    assert sum(x.seconds for x in s.ttft_stages) == pytest.approx(s.ttft_s)
    assert s.ttft_s is not None and s.ttft_s >= s.ttft_idle_s


def test_loaded_stages_split_the_queue_at_the_step_under_way() -> None:
    """Poisson arrivals land inside steps: the step under way is part of the queue, never more."""
    t = Traffic(512, 48, requests_per_s=20.0, token_budget=1024)
    s = steady_state(toy_step, t, 256, engine=get_engine("generic"))
    stages = {x.name: x.seconds for x in s.ttft_stages}
    assert 0 < stages["the scheduler step under way"] <= s.queue_s
    assert stages["the scheduler step under way"] + stages["queued behind other requests"] == pytest.approx(s.queue_s)
    assert stages["prefill steps"] >= idle_ttft(toy_step, t) * (1 - 1e-9)
