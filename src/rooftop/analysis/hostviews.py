"""Across hosts: who is slow, who waits, and for how long (from the per-host parts of analysis/hosts.py).

Times of different hosts are put on one clock by each profile's start time (its Task Environment's
``profile_start_time``; a note says when a host lacks it, and the views then take the clocks as aligned).

- Steps per host: each host's own step time (its step markers, or its main module's k-th execution), the
  slowest host, and the straggler: the host the others waited for longest at the step's collectives.
- Collective waits: the k-th execution of a collective on every device that runs it is one meeting (its
  participants: those devices; the replica groups are not told apart); the last to arrive sets it off, so
  each participant waits ``last start - its start``. Per collective: its meetings, the mean and largest
  skew (last start - first start), the summed wait of the participants, and the host most often last.
  A host's *lateness* at a meeting is its last device's start less the first start of all, counted in
  the step of the smallest step number its devices give.
- Op spread: per op run on several hosts, the host totals' min, median and max, with the host of the max.
- Straggler ranking: the hosts by summed lateness, with the steps in which each was the straggler.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rooftop.analysis.exact import total
from rooftop.analysis.hostpart import HostPart, clock_offsets
from rooftop.analysis.trace.events import natural_key
from rooftop.reason_codes import ReasonCode
from rooftop.reasons import Note, Reason


@dataclass(frozen=True)
class HostStep:
    """One step on every host: each host's step time, the slowest, the lateness of each host at the step's
    collectives and the straggler (the latest; None without collectives in the step)."""

    index: int
    time_s: dict[str, float]
    slowest: str
    late_s: dict[str, float]
    straggler: str | None


@dataclass(frozen=True)
class CollectiveWait:
    name: str
    module: str | None
    meetings: int
    participants: int
    mean_skew_s: float
    max_skew_s: float
    wait_s: float
    last_host: str


@dataclass(frozen=True)
class OpSpread:
    name: str
    module: str | None
    hosts: int
    min_s: float
    median_s: float
    max_s: float
    max_host: str


@dataclass(frozen=True)
class Straggler:
    host: str
    late_s: float
    straggler_steps: int
    step_time_s: float


@dataclass(frozen=True)
class HostViews:
    steps: tuple[HostStep, ...]
    collectives: tuple[CollectiveWait, ...]
    spread: tuple[OpSpread, ...]
    stragglers: tuple[Straggler, ...]
    notes: tuple[Note, ...]


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def host_views(parts: Sequence[HostPart]) -> HostViews:
    offsets, aligned = clock_offsets(parts)
    notes: list[Note] = [] if aligned else [Reason.of(ReasonCode.HOSTS_CLOCKS_ASSUMED)]
    late: dict[int, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    collectives = _collective_waits(parts, offsets, late)
    steps = _host_steps(parts, late)
    totals: dict[str, float] = defaultdict(float)
    for per_step in late.values():
        for host, s in per_step.items():
            totals[host] += s
    counts = Counter(s.straggler for s in steps if s.straggler is not None)
    step_time = {p.host: math.fsum(s.end_s - s.start_s for s in p.steps) for p in parts}
    stragglers = sorted(
        (Straggler(p.host, totals.get(p.host, 0.0), counts.get(p.host, 0), step_time[p.host]) for p in parts),
        key=lambda s: (-s.late_s, -s.straggler_steps, natural_key(s.host)),
    )
    return HostViews(tuple(steps), tuple(collectives), tuple(_spread(parts)), tuple(stragglers), tuple(notes))


def _host_steps(parts: Sequence[HostPart], late: dict[int, dict[str, float]]) -> list[HostStep]:
    times: dict[int, dict[str, float]] = defaultdict(dict)
    for p in parts:
        for s in p.steps:
            times[s.index][p.host] = s.end_s - s.start_s
    out = []
    for index in sorted(times):
        per_host = times[index]
        slowest = max(per_host, key=lambda h: (per_host[h], h))
        lateness = dict(late.get(index, {}))
        straggler = max(lateness, key=lambda h: (lateness[h], h)) if lateness else None
        out.append(HostStep(index, per_host, slowest, lateness, straggler))
    return out


def _collective_waits(
    parts: Sequence[HostPart], offsets: dict[str, float], late: dict[int, dict[str, float]]
) -> list[CollectiveWait]:
    # keys and devices in an order of their own (not the dicts' insertion order, which may follow string
    # hashing upstream): the lateness sums below then add up alike under any PYTHONHASHSEED
    keys = sorted({k for p in parts for k in p.collectives}, key=repr)
    out = []
    for key in keys:
        runs = [
            (p.host, r)
            for p in parts
            for _, r in sorted(p.collectives.get(key, {}).items(), key=lambda kv: natural_key(kv[0]))
        ]
        hosts = list(dict.fromkeys(h for h, _ in runs))
        if len(hosts) < 2:
            continue
        meetings = max(len(r.start_s) for _, r in runs)
        # one row per device, one column per meeting (NaN: the device ran it fewer times), on one clock
        starts = np.full((len(runs), meetings), np.nan)
        steps = np.full((len(runs), meetings), -1, np.int64)
        for row, (h, r) in enumerate(runs):
            starts[row, : len(r.start_s)] = r.start_s + offsets[h]
            steps[row, : len(r.step)] = r.step
        first, last = np.nanmin(starts, axis=0), np.nanmax(starts, axis=0)
        waits = last - starts
        by_host = np.full((len(hosts), meetings), np.nan)  # each host's last device
        for row, (h, _) in enumerate(runs):
            k = hosts.index(h)
            by_host[k] = np.fmax(by_host[k], starts[row])
        latest = np.where(np.isnan(by_host), -np.inf, by_host).argmax(axis=0)  # the first host of a tie
        step = np.where(steps >= 0, steps, np.iinfo(np.int64).max).min(axis=0)  # the first step number given
        numbered = step < np.iinfo(np.int64).max
        for k, h in enumerate(hosts):
            here = numbered & ~np.isnan(by_host[k])
            numbers, where = np.unique(step[here], return_inverse=True)
            sums = np.bincount(where, weights=(by_host[k] - first)[here], minlength=len(numbers))
            for number, lateness in zip(numbers.tolist(), sums.tolist(), strict=True):
                late[number][h] += lateness
        last_hosts = Counter(hosts[k] for k in latest.tolist())
        skews = (last - first).tolist()
        participants = int(np.max(np.sum(~np.isnan(starts), axis=0)))
        most = max(last_hosts, key=lambda h: (last_hosts[h], h))
        out.append(CollectiveWait(key[2], key[0], meetings, participants, math.fsum(skews) / meetings, max(skews),
                                  math.fsum(waits[~np.isnan(waits)].tolist()), most))  # fmt: skip
    out.sort(key=lambda c: (-c.wait_s, c.name))
    return out


def _spread(parts: Sequence[HostPart]) -> list[OpSpread]:
    per_op: dict[tuple[Any, ...], dict[str, float]] = defaultdict(dict[str, Any])
    for p in parts:
        for key, op in p.ops.items():
            per_op[key][p.host] = total(op.busy)
    out = []
    for key, by_host in per_op.items():
        if len(by_host) < 2:
            continue
        values = list(by_host.values())
        top = max(by_host, key=lambda h: (by_host[h], h))
        out.append(OpSpread(key[2], key[0], len(by_host), min(values), _median(values), by_host[top], top))
    out.sort(key=lambda o: (-(o.max_s - o.min_s), o.name))
    return out
