"""Time to first token as engines produce it: every stage between a request's arrival and its
first token streamed back, each a term with its formula and source (catalog/efficiency/engines.toml
for the engine's figures; plan/serve/scheduler.py for the queue and the prefill steps).

    request    = request_s + tokenize_s_per_token x P   the API server parses and tokenizes the prompt
    step       = the scheduler step under way at arrival  a request joins at the next step: for Poisson
                 arrivals the mean residual of the step they land in, sum d^2 / (2 sum d) over the steps,
                 times scheduler_steps when the engine runs decode steps in blocks (vLLM V0's
                 --num-scheduler-steps: a request waits for the block under way)
    queue      = the wait behind other requests          the simulation's queue beyond that residual
    prefill    = the steps that take its prompt          chunked prefill: shared with the running decodes
    returned   = return_steps x a decode step            an overlap scheduler reads a step's tokens while
                 the next step runs, so the first token leaves one step later (TensorRT-LLM, SGLang)
    streamed   = detokenize_s                            the token detokenized and sent

Idle: no queue and no step under way, the prompt's chunks one after another, a step of one
sequence for ``returned``. Loaded: the simulation's figures, a mean decode step (TPOT) for
``returned``.
"""

from __future__ import annotations

from dataclasses import dataclass

from rooftop.plan.serve.paging import Engine


@dataclass(frozen=True)
class Stage:
    """One stage of TTFT: seconds, its formula with the figures in it, and where the figures come from."""

    name: str
    seconds: float
    formula: str
    source: str


def ttft_stages(
    engine: Engine, prompt_len: int, prefill_s: float, step_s: float, queue_s: float = 0.0, residual_s: float = 0.0
) -> tuple[Stage, ...]:
    """The stages of one request's TTFT (module docstring): ``prefill_s`` from the start of its
    first prefill step to the end of its last, ``step_s`` the decode step an overlap scheduler
    adds, ``queue_s`` its wait before its first prefill step of which ``residual_s`` is the step
    under way at its arrival."""
    e = engine
    src = f"catalog/efficiency/engines.toml [{e.name}]"
    residual = min(residual_s, queue_s) * e.scheduler_steps  # a block of scheduler_steps steps under way
    return (
        Stage(
            "request handling and tokenization",
            e.request_s + e.tokenize_s_per_token * prompt_len,
            f"request_s {e.request_s:g} s + {prompt_len} tokens x {e.tokenize_s_per_token:g} s",
            src,
        ),
        Stage(
            "the scheduler step under way",
            residual,
            f"scheduler_steps {e.scheduler_steps} x sum d^2 / (2 sum d) over the steps",
            "the simulation",
        ),
        Stage(
            "queued behind other requests",
            queue_s - min(residual_s, queue_s),
            "queue - the step under way",
            "the simulation",
        ),
        Stage("prefill steps", prefill_s, "its prompt's steps, shared with the running decodes", "the simulation"),
        Stage(
            "first token returned",
            e.return_steps * step_s,
            f"return_steps {e.return_steps} x a decode step {step_s:.4g} s",
            src,
        ),
        Stage("detokenization and streaming", e.detokenize_s, f"detokenize_s {e.detokenize_s:g} s", src),
    )


def total(stages: tuple[Stage, ...]) -> float:
    return sum(s.seconds for s in stages)
