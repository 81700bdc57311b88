"""Routed experts under load imbalance: the busiest expert and the busiest expert-parallel chip of
a step, not the average (uniform routing: each of T tokens picks top_k of the E experts).

A step's grouped expert matmuls end when their busiest part ends. Two maxima matter:

- the busiest expert's rows: E experts, each receiving Binomial(T, k / E) rows; the mean over the
  experts touched is T k / touched(T), the busiest holds the maximum of the E draws;
- the busiest chip under expert parallelism (ep chips, E / ep experts each): the experts it must
  read, the maximum over ep chips of Binomial(E / ep, q), q = 1 - (1 - k / E)^T the chance that
  an expert is touched, against the mean touched(T) / ep.

The maximum of n independent draws is taken at its median: the smallest x with
P(max <= x) = (1 - P(X > x))^n >= 1/2, i.e. P(X > x) <= 1 - 2^(-1/n) (independence is exact for
the chips' experts only approximately, as the draws share the T tokens). Small counts are where it
matters: 8 tokens of DeepSeek-V3 (E 256, k 8) touch ~58 experts, 1.1 rows each on average but 2 on
the busiest; over 8 chips the busiest reads the weights of ~11 of them where the mean is 7.2.
"""

from __future__ import annotations

import math
from functools import lru_cache

from rooftop.model.blocks import MoEConfig


@lru_cache(maxsize=4096)
def busiest_of(draws: int, trials: int, p: float) -> int:
    """Median of the maximum of ``draws`` independent Binomial(``trials``, ``p``) variables: the
    smallest x with P(X > x) <= 1 - 2^(-1 / draws), the tail summed from the probabilities in log space
    (exact for any trials; the terms beyond 1e-18 of the largest are left out)."""
    if trials <= 0 or p <= 0 or draws <= 0:
        return 0
    if p >= 1:
        return trials
    lo = max(0, math.floor(trials * p) - 1)
    logs: list[float] = []
    peak = -math.inf  # the largest term so far (a running maximum: the loop stays linear in its length)
    head, log_p, log_q = math.lgamma(trials + 1), math.log(p), math.log1p(-p)
    for i in range(lo, trials + 1):
        logs.append(head - math.lgamma(i + 1) - math.lgamma(trials - i + 1) + i * log_p + (trials - i) * log_q)
        peak = max(peak, logs[-1])
        if i > trials * p and logs[-1] < peak - 41.5:  # e^-41.5 ~ 1e-18
            break
    pmf = [math.exp(v) for v in logs]
    tail = 0.0
    tails = []
    for v in reversed(pmf):  # tails[j] = P(X > lo + len - 1 - j ... ) built from the top
        tails.append(tail)
        tail += v
    tails.reverse()  # tails[j] = P(X > lo + j)
    bound = -math.expm1(-math.log(2) / draws)  # 1 - 2^(-1/draws)
    for j, t in enumerate(tails):
        if t <= bound:
            return lo + j
    return lo + len(tails)


def mean_rows(moe: MoEConfig, tokens: float) -> float:
    """Rows of a touched expert on average: T k / touched(T)."""
    touched = moe.touched(tokens)
    return tokens * moe.top_k / touched if touched > 0 else 0.0


def busiest_rows(moe: MoEConfig, tokens: float) -> int:
    """Rows of the busiest expert: the maximum of E draws of Binomial(T, k / E)."""
    return busiest_of(moe.n_experts, max(0, round(tokens)), moe.top_k / moe.n_experts)


def busiest_chip_experts(moe: MoEConfig, tokens: float, ep: int) -> float:
    """Experts the busiest of ``ep`` chips reads (E / ep each): the maximum of ep draws of
    Binomial(E / ep, q), at least the mean touched(T) / ep and at most E / ep."""
    per_chip = moe.n_experts // ep
    q = moe.touched(tokens) / moe.n_experts
    return min(per_chip, max(moe.touched(tokens) / ep, busiest_of(ep, per_chip, q)))
