"""The typed parts of a training step's result (plan/train/step.StepResult): its seconds by part
(``StepBreakdown``, the parts of plan/train/breakdown.py) and its bytes per chip by kind (``MemoryParts``,
plan/train/memory.memory_per_chip). Each is a frozen record of floats (rooftop/parts.py) keyed by a Literal of
its part names, so a misspelt part fails at type-check time; ``as_dict`` gives the JSON form (report/train.py).
The search's inner loop keeps plain numbers (dicts of the same keys) and builds these for the layouts it
returns.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from rooftop.parts import Parts

StepPartName = Literal[
    "compute_forward",
    "compute_backward",
    "compute_recompute",
    "tensor_parallel",
    "context_parallel",
    "fsdp",
    "expert_parallel",
    "pipeline_p2p",
    "pipeline_bubble",
    "data_parallel",
    "optimizer",
    "offload",
]

MemoryPartName = Literal["weights", "gradients", "optimizer", "activations", "logits", "buffers"]


@dataclass(frozen=True, slots=True)
class StepBreakdown(Parts[StepPartName]):
    """Seconds of one optimizer step by part, in the order they are reported (step.PARTS); they add up to the
    step time: the compute phases' ops, the exposed communication of each parallelism, the pipeline's sends
    and bubble, the optimizer update and the host-link offload."""

    compute_forward: float
    compute_backward: float
    compute_recompute: float
    tensor_parallel: float
    context_parallel: float
    fsdp: float
    expert_parallel: float
    pipeline_p2p: float
    pipeline_bubble: float
    data_parallel: float
    optimizer: float
    offload: float


@dataclass(frozen=True, slots=True)
class MemoryParts(Parts[MemoryPartName]):
    """Bytes one chip holds by kind (memory.memory_per_chip): weights, gradients, master copy and optimizer
    state (``optimizer``), activations in flight, one microbatch's logits, the FSDP gather buffers."""

    weights: float
    gradients: float
    optimizer: float
    activations: float
    logits: float
    buffers: float
