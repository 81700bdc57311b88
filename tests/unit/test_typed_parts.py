"""The typed parts of a training result (plan/train/parts.py, model/memory.TrainingBytes): each record's
fields are the Literal its key type names, in the order the JSON reports them, and they add up as the step's
and the chip's totals."""

from __future__ import annotations

from dataclasses import FrozenInstanceError, fields
from typing import get_args

import pytest

from rooftop.cost.efficiency import default_efficiency
from rooftop.hardware.catalog import get_chip
from rooftop.hardware.topology import parse_topology
from rooftop.model import memory as mem
from rooftop.model.catalog import get_model
from rooftop.model.params import params_total
from rooftop.plan.train.layout import Parallelism, microbatch_size
from rooftop.plan.train.memory import memory_per_chip
from rooftop.plan.train.parts import MemoryPartName, MemoryParts, StepBreakdown, StepPartName
from rooftop.plan.train.step import PARTS, TrainingSetup, evaluate, layout_mesh, profile_for


@pytest.mark.parametrize(
    ("record", "names"),
    [
        (StepBreakdown, StepPartName),
        (MemoryParts, MemoryPartName),
        (mem.TrainingBytes, mem.TrainingPartName),
        (mem.TrainingMemory, mem.TrainingMemoryName),
    ],
)
def test_fields_are_the_key_type(record: type, names: object) -> None:
    assert tuple(f.name for f in fields(record)) == get_args(names)


def _step() -> tuple[TrainingSetup, Parallelism]:
    chip = get_chip("h100")
    setup = TrainingSetup(get_model("llama-3-8b"), chip, parse_topology(chip, "2x8"), 32, 4096,
                          default_efficiency("training"))  # fmt: skip
    return setup, Parallelism(fsdp=4, tp=2, pp=2, microbatches=4, remat="full")


def test_step_parts_in_order_and_adding_up() -> None:
    setup, par = _step()
    r = evaluate(setup, par, setup.pricer(layout_mesh(setup.topology, par)))
    assert tuple(r.breakdown.as_dict()) == PARTS
    assert r.breakdown.total == r.step_time_s  # the same sum, in the same order
    assert r.breakdown["pipeline_bubble"] == r.breakdown.pipeline_bubble > 0  # pp=2
    assert r.compute_s == r.breakdown.compute_forward + r.breakdown.compute_backward + r.breakdown.compute_recompute
    # the memory parts are memory_per_chip's figures, by name and in order
    plain = memory_per_chip(setup, par, profile_for(setup, par.remat), microbatch_size(32, par))
    assert r.memory.as_dict() == plain and tuple(r.memory.as_dict()) == tuple(plain)
    assert r.memory_per_chip_bytes == sum(plain.values())
    with pytest.raises(FrozenInstanceError):
        r.breakdown.fsdp = 0.0  # type: ignore[misc]


def test_training_state_scaled() -> None:
    cfg = get_model("llama-3-8b")
    n = params_total(cfg)
    state = mem.training_state_bytes(cfg)
    assert state == mem.TrainingBytes(2 * n, 2 * n, 4 * n, 8 * n)
    assert state.total == (2 + 2 + 4 + 8) * n
