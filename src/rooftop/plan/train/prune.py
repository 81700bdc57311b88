"""Which candidate layouts a training search (plan/train/search.py) may skip: the bounds of plan/train/bound.py
and plan/train/netbound.py applied to its rows, in the order it visits them.

Every row's step is at least its ``reach``: the roofline of its ops alone (bound.step_lower_bounds) plus the
least its communication takes whatever its mesh (netbound.network_floor). The rows are visited by reach, lowest
first, and the visit stops at the first whose reach exceeds the top-th fastest fitting step found. Once a row's
mesh is built, its own collectives are priced (``Pruning.priced_out``: tensor-parallel, ring-attention, FSDP and
expert collectives per layer, the pipeline's sends, the data-parallel reduction), and the first row priced on a mesh
sets the mesh's floor, which drops its later rows in arrays before anything is built (``Pruning.visits``). Each
skip compares a lower bound of the row's step with the top-th step found, which only falls: no skipped row
could rank.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from rooftop.plan.train.bound import (
    cp_bound_s,
    dp_bound_s,
    ep_bound_s,
    fsdp_bound_s,
    least_held_layers,
    mesh_rows,
    pipeline_bound_s,
    step_lower_bounds,
    tp_bound_s,
)
from rooftop.plan.train.comm import CommPricer
from rooftop.plan.train.layout import Parallelism, microbatch_size
from rooftop.plan.train.netbound import network_floor
from rooftop.plan.train.profile import ModelProfile

if TYPE_CHECKING:
    from rooftop.plan.train.step import TrainingSetup

#: candidate rows checked against their meshes' floors at once (Pruning.visits)
_CHUNK = 128
#: a bound is compared at 1 - MARGIN of itself, so that rounding never skips a layout whose step equals it
MARGIN = 1e-9


@dataclass
class Pruning:
    """The bounds of a search's candidate rows (candidates.ROW_FIELDS) and the floors of their meshes found so far;
    ``kth``: the ``top`` fastest fitting steps found, as the search keeps them (a max-heap of negated steps)."""

    setup: TrainingSetup
    prof: ModelProfile  # the profile of the first remat policy tried (its layers and parameters)
    bounds: np.ndarray  # per row: the roofline of its ops alone (bound.step_lower_bounds)
    per_layer: np.ndarray  # per row: the layers its pacing stage runs per step at the least
    reach: np.ndarray  # per row: bounds + netbound.network_floor
    mesh_of: list[int]  # per row: its mesh
    fewest: list[int]  # per mesh: the fewest layers the fullest stage of any of its rows holds
    holds: list[int]  # per row: the layers its fullest stage holds
    kth: list[float]
    top: int
    floors: list[tuple[float, float] | None] = field(default_factory=list)
    floor: np.ndarray = field(default_factory=lambda: np.zeros((0, 2)))
    memo: dict[tuple[object, ...], float] = field(default_factory=dict)

    @staticmethod
    def of(
        setup: TrainingSetup,
        table: np.ndarray,
        profiles: Sequence[ModelProfile],
        prof: ModelProfile,
        fsdp_reshard: bool,
        kth: list[float],
        top: int,
    ) -> Pruning:
        """The bounds of the rows of ``table`` under the remat policies' ``profiles`` (``prof`` the first's)."""
        bounds, per_layer = step_lower_bounds(table, setup.global_batch, profiles, setup.optimizer_s_per_param)
        meshes = mesh_rows(table)
        mesh_of, fewest, holds = least_held_layers(table, prof, meshes)
        reach = bounds + network_floor(table, setup, prof, per_layer, holds, fsdp_reshard, meshes)
        out = Pruning(
            setup, prof, bounds, per_layer, reach, mesh_of.tolist(), fewest.tolist(), holds.tolist(), kth, top
        )
        out.floors = [None] * len(fewest)  # per mesh: its floor (comm_floor) once a row of it is priced
        out.floor = np.zeros((len(fewest), 2))  # the floors as an array, 0 where not yet known
        return out

    def full(self) -> bool:
        return len(self.kth) == self.top

    def beyond(self, index: int) -> bool:
        """Whether the row and every later one (by reach) exceed the top-th step found."""
        return self.full() and bool(self.reach[index] * (1 - MARGIN) > -self.kth[0])

    def visits(self) -> Iterator[int]:
        """The rows by reach, lowest first, that may rank, a chunk at a time: once ``top`` steps are found, a row
        whose ops' bound plus its mesh's floor (per layer and microbatch, and per step; 0 until a row of it is
        priced) exceeds the top-th step found is dropped, in arrays; it stops where the reach alone exceeds it.
        The floors only rise and the top-th step found only falls, so the search would skip each dropped row."""
        order = np.argsort(self.reach, kind="stable")
        mesh_of = np.array(self.mesh_of)
        for start in range(0, len(order), _CHUNK):
            chunk = order[start : start + _CHUNK]
            if self.full():
                if self.reach[chunk[0]] * (1 - MARGIN) > -self.kth[0]:
                    return
                mesh = mesh_of[chunk]
                floored = self.bounds[chunk] + self.per_layer[chunk] * self.floor[mesh, 0] + self.floor[mesh, 1]
                chunk = chunk[np.maximum(floored, self.reach[chunk]) * (1 - MARGIN) <= -self.kth[0]]
            yield from chunk.tolist()

    def floored_out(self, index: int) -> bool:
        """Whether the row's ops' bound and its mesh's floor, once known, exceed the top-th step found."""
        known = self.floors[self.mesh_of[index]]
        if known is None or not self.full():
            return False
        return bool((self.bounds[index] + self.per_layer[index] * known[0] + known[1]) * (1 - MARGIN) > -self.kth[0])

    def priced_out(self, index: int, base: Parallelism, pricer: CommPricer) -> bool:
        """Whether the row's ops' bound plus the collectives its mesh leaves unhidden (``comm_bounds``) and its
        pipeline's sends exceed the top-th step found; the first row priced on a mesh sets its floor."""
        if not self.full():
            return False
        per, dp_s = self.comm_bounds(base, pricer)
        mesh = self.mesh_of[index]
        if self.floors[mesh] is None:  # the row's own reduction when it holds the fewest layers
            own = self.holds[index] == self.fewest[mesh]
            self.floors[mesh] = self.comm_floor(base, pricer, self.fewest[mesh], dp_s, own)
            self.floor[mesh] = self.floors[mesh]
        more = self.per_layer[index] * per + pipeline_bound_s(self.setup, base, pricer) + dp_s
        return bool((self.bounds[index] + more) * (1 - MARGIN) > -self.kth[0])

    def comm_bounds(self, base: Parallelism, pricer: CommPricer) -> tuple[float, float]:
        """(per layer and microbatch, per step): the least the layout's tensor-parallel, FSDP and expert
        collectives and its data-parallel reduction add (bound.py), each memoized per mesh and what else it
        depends on (the microbatch size; whether FSDP reshards, its traffic spread over the microbatches when
        not; the pipeline's split)."""
        setup, pid, memo = self.setup, id(pricer), self.memo
        b = microbatch_size(setup.global_batch, base)
        tp_key, fsdp_key = (pid, "tp", b), (pid, "fsdp", base.fsdp_reshard)
        dp_key = (pid, "dp", base.virtual_stages, base.pipeline_balance)
        if tp_key not in memo:  # with the ring-attention shifts and expert all-to-alls: the same (mesh, b)
            tp = tp_bound_s(setup, base, pricer) + cp_bound_s(setup, base, pricer)
            memo[tp_key] = tp + ep_bound_s(setup, base, pricer, self.prof)
        spread = 1.0 if base.fsdp_reshard else float(base.microbatches)  # kept gathered: once over the microbatches
        if fsdp_key not in memo:
            memo[fsdp_key] = fsdp_bound_s(setup, base, pricer, self.prof) * spread
        if dp_key not in memo:
            memo[dp_key] = dp_bound_s(setup, base, pricer, self.prof)
        return memo[tp_key] + memo[fsdp_key] / spread, memo[dp_key]

    def comm_floor(
        self, base: Parallelism, pricer: CommPricer, held_layers: int, dp_s: float, own: bool
    ) -> tuple[float, float]:
        """(per layer and microbatch, per step): what comm_bounds gives at the least for every row of the
        layout's mesh: the FSDP traffic when it reshards (per microbatch; kept gathered, it is spread over the
        microbatches: 0 here) and the data-parallel reduction of a stage of ``held_layers``, the fewest any of
        the mesh's rows hold (bound.least_held_layers). The tensor-parallel and expert collectives and the
        pipeline's sends, which depend on the microbatches, are left out (all at least 0). ``dp_s``: the
        layout's own reduction (comm_bounds), that of ``held_layers`` when it holds that many (``own``)."""
        fsdp = self.memo[(id(pricer), "fsdp", True)] if base.fsdp_reshard else 0.0
        return fsdp, dp_s if own else dp_bound_s(self.setup, base, pricer, self.prof, held_layers)
