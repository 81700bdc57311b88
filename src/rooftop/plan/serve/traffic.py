"""What feeds the scheduler of a continuously batching replica (plan/serve/scheduler.py): the
traffic (``Traffic``: a request rate or a number of clients, the lengths, the policy and its token
budget, the prefix cache's share) and the engine's KV block pool as the scheduler admits against it
(``Paging``). Traffic is checked at construction."""

from __future__ import annotations

import math
from dataclasses import dataclass

from rooftop.errors import InvalidConfigError, shown

SCHEDULERS = ("chunked", "prefill-first")
#: vLLM V1's default max_num_batched_tokens for its API server on GPUs with at least 70 GiB, and
#: SGLang's default chunked_prefill_size on large GPUs
DEFAULT_TOKEN_BUDGET = 8192
#: most steps a chunked prefill may split one prompt into
MAX_CHUNKS = 256
#: most clients of a closed loop (each simulated: 4 requests per client at least)
MAX_CONCURRENCY = 1 << 14


@dataclass(frozen=True)
class Traffic:
    """What feeds one serving deployment: a request rate over the slice (``requests_per_s``) or a
    number of clients each with one request in flight (``concurrency``), the lengths, the policy."""

    prompt_len: int
    gen_len: int
    requests_per_s: float | None = None
    concurrency: int | None = None
    scheduler: str = "chunked"
    token_budget: int = DEFAULT_TOKEN_BUDGET
    prefix_len: int = 0  # prompt tokens a request finds in the engine's prefix cache when it hits (serve/prefix.py)
    prefix_hit_rate: float = 0.0  # share of requests that hit: every 1 / rate-th, evenly (``scheduler._Sim._admit``)

    def __post_init__(self) -> None:
        if (self.requests_per_s is None) == (self.concurrency is None):
            raise InvalidConfigError("continuous batching needs a request rate or a concurrency (one of the two)")
        if self.requests_per_s is not None and not (0 < self.requests_per_s < math.inf):
            raise InvalidConfigError(f"requests-per-s={shown(self.requests_per_s)} must be a finite number > 0")
        if self.concurrency is not None and isinstance(self.concurrency, int) and self.concurrency > MAX_CONCURRENCY:
            raise InvalidConfigError(f"concurrency={self.concurrency} is above the {MAX_CONCURRENCY} simulated")
        for name in ("concurrency", "token_budget", "prompt_len", "gen_len"):
            v = getattr(self, name)
            if v is not None and (not isinstance(v, int) or v < 1):
                raise InvalidConfigError(f"{name.replace('_', '-')}={shown(v)} must be a positive integer")
        if self.prefix_len and not (0 < self.prefix_len < self.prompt_len and 0 <= self.prefix_hit_rate <= 1):
            raise InvalidConfigError(
                f"prefix-len={shown(self.prefix_len)} must be below the {self.prompt_len}-token prompt and "
                f"prefix-hit-rate={shown(self.prefix_hit_rate)} from 0 to 1"
            )
        if self.scheduler not in SCHEDULERS:
            raise InvalidConfigError(f"scheduler {shown(self.scheduler)} is not one of {', '.join(SCHEDULERS)}")
        if self.scheduler == "chunked" and self.chunks > MAX_CHUNKS:
            raise InvalidConfigError(
                f"token-budget={self.token_budget} splits a {self.prompt_len}-token prompt into {self.chunks} steps, "
                f"more than {MAX_CHUNKS}; use a budget of at least {math.ceil(self.prompt_len / MAX_CHUNKS)}"
            )

    @property
    def computed_prompt_len(self) -> float:
        """Prompt tokens a request prefills on average: a hit skips the cached prefix."""
        return self.prompt_len - self.prefix_hit_rate * self.prefix_len

    @property
    def chunks(self) -> int:
        """Steps a prompt's prefill takes on an idle replica (1 for prefill-first)."""
        return 1 if self.scheduler == "prefill-first" else math.ceil(self.prompt_len / self.token_budget)


@dataclass(frozen=True)
class Paging:
    """The engine's KV block pool as the scheduler sees it (plan/serve/paging.py): ``blocks`` of
    ``block_tokens`` positions; a request is admitted when the blocks of its prompt (chunk) are free
    beyond ``reserve_fraction`` x the output still to come of the running requests and of itself
    (0: vLLM, 1: TensorRT-LLM's no-evict policy); a decoding sequence takes one more block each time
    its length crosses a multiple of ``block_tokens``; when the pool cannot give it, the newest
    running request is preempted (``preemption``: "recompute": its blocks freed, its prompt and
    output so far prefilled again later; "swap": its blocks copied to host and back, costing
    ``swap_s_per_block`` each way per block; "none": never, the reservation guarantees the blocks)."""

    blocks: int
    block_tokens: int
    reserve_fraction: float = 0.0
    preemption: str = "recompute"
    swap_s_per_block: float = 0.0
