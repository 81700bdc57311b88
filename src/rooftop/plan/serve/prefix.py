"""Prefix caching: a prompt whose first ``prefix_len`` tokens (a shared system prompt, the earlier
turns of a chat) hit the engine's prefix cache is prefilled without them: only the other
prompt_len - prefix_len tokens go through the weights, attending to all prompt_len keys (their KV
is read from the cache; its blocks are still held). Priced by plan/serve/phase.py (``prefill`` with
``cached_len``, a prefill Workload of the new tokens at kv_len = prompt_len); a fraction
``hit_rate`` of the requests hit, so a request's expected prefill is
hit_rate x hit + (1 - hit_rate) x miss. The work saved on a hit is a prefill of the prefix alone:
its tokens through the weights and its prefix_len (prefix_len + 1) / 2 causal pairs."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rooftop.errors import InvalidConfigError, shown
from rooftop.hardware.topology import make_mesh
from rooftop.plan.serve.phase import PhaseTime, prefill

if TYPE_CHECKING:
    from rooftop.plan.serve.layout import ServingLayout
    from rooftop.plan.serve.sweep import ServingRequest


@dataclass(frozen=True)
class PrefixCache:
    """One prompt's prefill on one replica, missing (``miss``) and hitting (``hit``) the cache."""

    prefix_len: int
    hit_rate: float
    miss: PhaseTime
    hit: PhaseTime

    @property
    def expected_prefill_s(self) -> float:
        return self.hit_rate * self.hit.time_s + (1 - self.hit_rate) * self.miss.time_s

    @property
    def expected_flops(self) -> float:
        return self.hit_rate * self.hit.flops + (1 - self.hit_rate) * self.miss.flops

    @property
    def saved_fraction(self) -> float:
        """Share of a request's prefill time the cache saves on average."""
        return 1 - self.expected_prefill_s / self.miss.time_s


def check_prefix(prompt_len: int, prefix_len: int, hit_rate: float) -> None:
    if not 1 <= prefix_len < prompt_len:
        raise InvalidConfigError(
            f"prefix-len={prefix_len} must be at least 1 and below the prompt's {prompt_len} tokens "
            "(the last prompt token is always computed: it makes the first output token)"
        )
    if not (0 <= hit_rate <= 1) or math.isnan(hit_rate):
        raise InvalidConfigError(f"prefix-hit-rate={shown(hit_rate)} must be between 0 and 1")


def prefix_cache(req: ServingRequest, layout: ServingLayout, prefix_len: int, hit_rate: float) -> PrefixCache:
    """One prompt of ``req`` on one replica of ``layout`` (module docstring)."""
    check_prefix(req.prompt_len, prefix_len, hit_rate)
    mesh = make_mesh(req.topology, layout.mesh_axes())
    args = (req.cfg, req.chip, mesh, layout, 1, req.prompt_len, req.dtypes, req.eff)
    miss, hit = prefill(*args, algorithm=req.algorithm), prefill(*args, prefix_len, req.algorithm)
    return PrefixCache(prefix_len, hit_rate, miss, hit)
