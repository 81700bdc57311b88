"""One training step of a layout laid out in time: what each pipeline stage runs when (values for a
timeline, report/timeline.py writes it as a Chrome trace).

The step is priced as plan/train/step.py prices it (the same ``step_parts``, with a ``Ledger`` that records
each layer's collectives per phase); this module only places those seconds in time:

- per microbatch and layer, a forward (and, under remat, a recompute) and a backward slice of the
  layer's ops (each op max(compute, memory) on the roofline, plan/train/profile.op_roofline), on the
  stage holding the layer; the ops outside the layers (embedding, head, loss) on the last stage;
- each collective of a layer on the lane of its mesh axis, as long as the collective takes, ending when
  its exposed part ends: the hidden part overlaps the layer's compute, the exposed part follows it;
- pipeline sends after each chunk; the microbatches in Megatron's order (1F1B, Narayanan 2021; the
  interleaved schedule with ``virtual_stages`` chunks per stage), each chunk waiting for the one before
  it on the previous stage (forward) or the next (backward); the gaps it leaves are the bubble;
- then the data-parallel all-reduce (the part hidden behind the last backward drawn under it), the
  optimizer update and the offload transfers.

Every chunk of a stage takes one slot (the fullest chunk's time, at least the model's per-microbatch time
/ virtual stages), so with layers spread evenly the step ends at ``StepResult.step_time_s``; where they
are not (groups of unequal layers, interleaving with the head on one chunk) ``model_step_time_s`` and
``step_time_s`` of the schedule differ and both are given.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rooftop.plan.train.comm import Ledger
from rooftop.plan.train.layout import Parallelism, microbatch_size, stage_split
from rooftop.plan.train.profile import op_roofline
from rooftop.plan.train.step import (
    StepParts,
    StepResult,
    TrainingSetup,
    _pp_boundary_bytes,
    layout_mesh,
    profile_for,
    step_parts,
    step_result,
)

#: the lane of each communication part (its mesh axis)
AXIS_OF = {"tensor_parallel": "tp", "context_parallel": "cp", "fsdp": "fsdp", "expert_parallel": "ep"}
#: the collectives of each part, in words
COLLECTIVE_OF = {
    "tensor_parallel": "all-gather + reduce-scatter",
    "context_parallel": "ring permutes",
    "fsdp": "weight all-gather",
    "expert_parallel": "all-to-all",
}
#: slices above which layers of a chunk are drawn as one slice per chunk
MAX_SLICES = 200_000


@dataclass(frozen=True)
class Slice:
    """One thing a stage does: ``lane`` ("compute", "tp", "fsdp", "pp", "dp", "host", "bubble"), its name,
    start and duration (s), its step part (a key of step.PARTS) and numbers to show beside it."""

    stage: int
    lane: str
    name: str
    start_s: float
    dur_s: float
    part: str
    args: dict[str, float | str] = field(default_factory=dict)


@dataclass(frozen=True)
class StepSchedule:
    """A step laid out in time: its slices, the stages, and the step's end in the schedule and in the model."""

    result: StepResult
    slices: tuple[Slice, ...]
    stages: int
    step_time_s: float
    model_step_time_s: float
    layers_per_slice: str  # "layer" (one slice per layer) or "chunk" (one per chunk: too many layers x microbatches)


@dataclass
class _Chunk:
    """One virtual stage's work for one microbatch in one direction: slices relative to its start."""

    # lane, name, at, dur, part, args
    slices: list[tuple[str, str, float, float, str, dict[str, Any]]] = field(default_factory=list)
    end: float = 0.0  # when its compute lane is free

    def run(self, name: str, dur: float, part: str, args: dict[str, Any] | None = None) -> None:
        if dur > 0:
            self.slices.append(("compute", name, self.end, dur, part, args or {}))
            self.end += dur

    def comm(self, comms: dict[str, tuple[float, float]], what: str, begin: float) -> None:
        """The layer's collectives (part -> (seconds, exposed seconds)), each on its axis' lane ending when
        its exposed part does, the exposed parts one after another after the compute (from ``begin``)."""
        for part, (total, exposed) in comms.items():
            if total <= 0:
                continue
            exposed = max(exposed, 0.0)
            start = max(self.end + exposed - total, begin)
            self.slices.append((AXIS_OF[part], f"{what} {COLLECTIVE_OF[part]}", start, self.end + exposed - start,
                                part, {"exposed_s": exposed, "hidden_s": total - exposed}))  # fmt: skip
            self.end += exposed


def _layer_times(setup: TrainingSetup, par: Parallelism) -> tuple[list[str], dict[str, np.ndarray], np.ndarray]:
    """(group of each layer, per group its one layer's seconds per phase (forward, backward, recompute),
    the seconds of the ops outside the layers per phase), for one microbatch on one chip."""
    prof = profile_for(setup, par.remat)
    t = op_roofline(prof, par, microbatch_size(setup.global_batch, par))[0].time_s
    per_group = {
        g.name: np.array([float(t[(prof.group == gi) & (prof.phase == p)].sum()) / g.count for p in range(3)])
        for gi, g in enumerate(prof.groups)
    }
    outside = np.array([float(t[(prof.group < 0) & (prof.phase == p)].sum()) for p in range(3)])
    order = [g.name for g in prof.groups for _ in range(g.count)]
    return order, per_group, outside


def _sizes(n: int, parts: int) -> list[int]:
    """``n`` layers over ``parts`` chunks, as evenly as possible (the first ones one more)."""
    q, r = divmod(n, parts)
    return [q + (j < r) for j in range(parts)]


def _split(n: int, p: int, v: int, last: int, balance: bool = False) -> list[range]:
    """``n`` layers over the ``p`` x ``v`` virtual stages, as evenly as possible; balanced
    (layout.stage_split): with one chunk a stage, the last holds ``last`` of them and the others the rest
    evenly; interleaved, every chunk (n + 2) / (p v) slots, the first one's embedding and the last one's head
    in one slot each."""
    if not balance or p == 1:
        sizes = _sizes(n, p * v)
    elif v == 1:
        sizes = [*_sizes(n - last, p - 1), last]
    else:
        sizes = [(n + 2) // (p * v) - (vs in (0, p * v - 1)) for vs in range(p * v)]
    out, at = [], 0
    for size in sizes:
        out.append(range(at, at + size))
        at += size
    return out


def _order(stage: int, p: int, v: int, m: int) -> list[tuple[bool, int, int]]:
    """The (forward?, chunk, microbatch) a stage runs, in Megatron's order: warm-up forwards, then one
    forward one backward, then the last backwards (interleaved: microbatches in groups of ``p`` per chunk)."""
    total = m * v

    def item(k: int, forward: bool) -> tuple[bool, int, int]:
        in_group = k % (p * v)
        chunk = in_group // p
        return forward, chunk if forward else v - 1 - chunk, (k // (p * v)) * p + in_group % p

    warm = min(total, (p - stage - 1) * 2 + (v - 1) * p if v > 1 else p - stage - 1)
    out = [item(k, True) for k in range(warm)]
    for k in range(total - warm):
        out += [item(warm + k, True), item(k, False)]
    out += [item(k, False) for k in range(total - warm, total)]
    return out


def _simulate(p: int, v: int, m: int, dur: dict[tuple[bool, int], float]) -> dict[tuple[bool, int, int, int], float]:
    """Start of each (forward?, stage, chunk, microbatch): each stage runs its order one at a time, a forward
    after the previous virtual stage's, a backward after the next one's and its own forward."""
    orders = [_order(s, p, v, m) for s in range(p)]
    at, free = [0] * p, [0.0] * p
    done: dict[tuple[bool, int, int, int], float] = {}
    last = p * v - 1
    pending = sum(len(o) for o in orders)
    while pending:
        moved = False
        for s in range(p):
            while at[s] < len(orders[s]):
                fwd, c, mb = orders[s][at[s]]
                vs = c * p + s
                if fwd:
                    dep = None if vs == 0 else (True, (vs - 1) % p, (vs - 1) // p, mb)
                else:
                    dep = None if vs == last else (False, (vs + 1) % p, (vs + 1) // p, mb)
                need = [d for d in (dep, None if fwd else (True, s, c, mb)) if d is not None]
                if any(d not in done for d in need):
                    break
                start = max([free[s], *(done[d] + dur[(d[0], d[2] * p + d[1])] for d in need)])
                done[(fwd, s, c, mb)] = start
                free[s] = start + dur[(fwd, vs)]
                at[s] += 1
                pending -= 1
                moved = True
        if not moved:  # an order that waits on itself: a bug in _order, not an input
            raise RuntimeError("pipeline schedule deadlocked")
    return done


def step_schedule(setup: TrainingSetup, par: Parallelism) -> StepSchedule:
    """The step of ``par`` on ``setup`` laid out in time (module docstring)."""
    pricer = setup.pricer(layout_mesh(setup.topology, par))
    prof = profile_for(setup, par.remat)
    ledger = Ledger()
    parts = step_parts(setup, par, pricer, prof, ledger)
    result = step_result(setup, par, pricer, prof, parts)
    order, per_group, outside = _layer_times(setup, par)
    p, v, m = par.pp, par.virtual_stages, par.microbatches
    blocks = _split(len(order), p, v, stage_split(len(order), par, prof.head_layers).last, par.pipeline_balance)
    coarse = m * len(order) * 6 > MAX_SLICES
    send = pricer.time("permute", ("pp",), _pp_boundary_bytes(setup, par, parts)) if p > 1 else 0.0
    overlap = setup.stack.p2p_overlap and v > 1  # each send runs beside the next chunk (step.step_result)
    chunks = {}
    for vs, block in enumerate(blocks):
        for fwd in (True, False):
            chunks[(fwd, vs)] = _chunk(block, order, per_group, outside, ledger, fwd, vs == p * v - 1, coarse)
            if send and (vs < p * v - 1 if fwd else vs > 0):
                ch = chunks[(fwd, vs)]
                ch.slices.append(("pp", "send activations" if fwd else "send gradients", ch.end, send,
                                  "pipeline_p2p", {}))  # fmt: skip
                ch.end += 0.0 if overlap else send
    dur = _durations(chunks, p, v, sum(parts.per_microbatch.values()) + result.breakdown["pipeline_p2p"] / m)
    starts = _simulate(p, v, m, dur)
    slices = []
    for (fwd, s, c, mbi), start in starts.items():
        for lane, name, at, length, part, args in chunks[(fwd, c * p + s)].slices:
            slices.append(Slice(s, lane, name, start + at, length, part, {**args, "microbatch": mbi}))
    end = max(start + dur[(fwd, c * p + s)] for (fwd, s, c, _), start in starts.items())
    slices += _bubbles(starts, p, dur, end)
    slices += _tail(parts, ledger, p, end)
    total = max(s.start_s + s.dur_s for s in slices)
    return StepSchedule(result, tuple(slices), p, total, result.step_time_s, "chunk" if coarse else "layer")


def _durations(
    chunks: dict[tuple[bool, int], _Chunk], p: int, v: int, model_mb: float
) -> dict[tuple[bool, int], float]:
    """How long each (forward?, virtual stage) chunk holds its stage. With one chunk per stage: the longest
    forward and the longest backward chunk, raised together to the model's pace (a microbatch of the
    fullest stage, the head's ops included) when below it; every chunk then takes the model's time and the
    step ends where the model says. Interleaved: the longest chunks without the head's ops, the head's
    chunk its own work (the model spreads the head over the ``v`` chunks; the schedule does not)."""
    base = [key for key in chunks if v == 1 or key[1] < p * v - 1]
    f = max(chunks[k].end for k in base if k[0])
    b = max(chunks[k].end for k in base if not k[0])
    scale = max(1.0, model_mb / (f + b)) if v == 1 and f + b > 0 else 1.0
    return {key: max(ch.end, (f if key[0] else b) * scale) for key, ch in chunks.items()}


def _chunk(
    block: range,
    order: list[str],
    per_group: dict[str, np.ndarray],
    outside: np.ndarray,
    ledger: Ledger,
    fwd: bool,
    last: bool,
    coarse: bool,
) -> _Chunk:
    """One virtual stage's forward or backward for one microbatch: its layers (in reverse going backward),
    each with its collectives, and on the last virtual stage the ops outside the layers."""
    ch = _Chunk()
    phase = "forward" if fwd else "backward"
    layers = list(block) if fwd else list(reversed(block))
    if coarse and layers:
        groups = [order[i] for i in layers]
        comms: dict[str, tuple[float, float]] = {}
        for g in groups:
            for part, (total, exposed) in ledger.layers.get(g, {}).get(phase, {}).items():
                old = comms.get(part, (0.0, 0.0))
                comms[part] = (old[0] + total, old[1] + max(exposed, 0.0))
        what = f"layers {min(layers)}-{max(layers)}"
        begin = ch.end
        if not fwd:
            ch.run(f"{what} recompute", sum(per_group[g][2] for g in groups), "compute_recompute")
        ch.run(f"{what} {phase}", sum(per_group[g][0 if fwd else 1] for g in groups), f"compute_{phase}")
        ch.comm(comms, what, begin)
        layers = []
    if last and not fwd:
        _edge(ch, outside, ledger, fwd)
    for i in layers:
        g = order[i]
        begin = ch.end
        if not fwd:
            ch.run(f"layer {i} recompute", per_group[g][2], "compute_recompute", {"layer_group": g})
        ch.run(f"layer {i} {phase}", per_group[g][0 if fwd else 1], f"compute_{phase}", {"layer_group": g})
        ch.comm(ledger.layers.get(g, {}).get(phase, {}), f"layer {i}", begin)
    if last and fwd:
        _edge(ch, outside, ledger, fwd)
    return ch


def _edge(ch: _Chunk, outside: np.ndarray, ledger: Ledger, fwd: bool) -> None:
    """The ops outside the layers (embedding, head, loss) and their FSDP gathers (exposed: no layer compute
    beside them)."""
    begin = ch.end
    if fwd:
        ch.run("embedding, head and loss forward", float(outside[0]), "compute_forward")
    else:
        ch.run("embedding, head and loss recompute", float(outside[2]), "compute_recompute")
        ch.run("embedding, head and loss backward", float(outside[1]), "compute_backward")
    forward_s, backward_s = ledger.edge_fsdp
    edge = forward_s if fwd else backward_s
    if edge > 0:
        ch.comm({"fsdp": (edge, edge)}, "embedding and head", begin)


def _bubbles(
    starts: dict[tuple[bool, int, int, int], float], p: int, dur: dict[tuple[bool, int], float], end: float
) -> list[Slice]:
    """The gaps between a stage's chunks before the step's last chunk ends: the pipeline bubble."""
    if p == 1:
        return []
    out = []
    for s in range(p):
        spans = sorted((t, t + dur[(fwd, c * p + st)]) for (fwd, st, c, _), t in starts.items() if st == s)
        at = 0.0
        for a, b in [*spans, (end, end)]:
            if a - at > 1e-12 * end:
                out.append(Slice(s, "bubble", "pipeline bubble", at, a - at, "pipeline_bubble"))
            at = max(at, b)
    return out


def _tail(parts: StepParts, ledger: Ledger, p: int, end: float) -> list[Slice]:
    """Per stage, after the last chunk: the gradient all-reduce (its hidden part under the last backward),
    the optimizer update and the offload transfers."""
    out = []
    hidden = ledger.hidden.get("data_parallel", 0.0)
    exposed = parts.data_parallel
    for s in range(p):
        if hidden + exposed > 0:
            args: dict[str, float | str] = {"exposed_s": exposed, "hidden_s": hidden}
            out.append(Slice(s, "dp", "gradient all-reduce", end - hidden, hidden + exposed, "data_parallel", args))
        if parts.optimizer > 0:
            out.append(Slice(s, "compute", "optimizer update", end + exposed, parts.optimizer, "optimizer"))
        if parts.offload > 0:
            out.append(Slice(s, "host", "offload transfers", end + exposed + parts.optimizer, parts.offload, "offload"))
    return out
