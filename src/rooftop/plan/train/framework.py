"""Training frameworks: how a stack runs its collectives and kernels, as data (catalog/frameworks/training.toml).

A ``Framework`` says, for the training step (plan/train/step.py and comm.py):

- ``algorithm``: how its collective library runs all-gather, reduce-scatter and all-reduce, a value
  passed to cost/collectives.py (NCCL: one flat ring over the whole group, its steps' latency added to
  the bandwidth term; XLA on TPU: the staged, hierarchical rules);
- ``launch_s``: the host's launch and synchronisation cost of each FSDP / ZeRO-3 collective (its hooks,
  stream waits), which delays the collective like latency;
- ``gather_copy``: HBM bytes the stack moves on the compute stream per parameter byte it all-gathers
  (FSDP2 copies each gather's output buffer into the parameters' unsharded tensors: a read and a write, 2;
  FSDP1 gathers straight into its flat parameter, 0); never hidden behind compute (its own term of ``fsdp``);
- ``prefetch``: layers whose gathers are issued ahead; 0 means none, so no gather hides behind compute;
- ``dp_overlap``: the share of the data-parallel gradient reduction hidden behind the backward (0 for
  stacks that reduce after it);
- ``attention``: the share of the datasheet matrix peak its fused attention kernel sustains, per chip
  (FlashAttention-2 on Hopper: 35%), capping the attention core below the matmuls' rate;
- ``grad_clip``: the optimizer step also computes the gradients' global norm and scales them (one read
  of the gradients, then a read and a write);
- ``p2p_sync_s``: a host synchronisation per pipeline send/receive (older synchronous p2p);
- ``p2p_overlap``: under the interleaved schedule (virtual stages), each send/receive is issued before the next
  model chunk's forward or backward and waited for after it, so it hides behind that chunk's compute (absent:
  no overlap);
- ``fused_attention``, ``dropout``: the era's defaults for the job's ``--fix flash`` and ``--fix dropout``
  (Megatron-LM 2021: unfused attention, dropout 0.1);
- ``expand_kv``: the stack's attention call needs one K,V head per query head, so a grouped-query layer
  copies K and V out to every query head first (model/transformer._kv_expand, a memory-bound op of the layer);
- ``loss_fp32``: the logits are cast to fp32 before a separate cross-entropy kernel (model/transformer._loss_upcast);
- ``foreach_optimizer``: Adam runs as PyTorch's foreach AdamW, one kernel per operation over all tensors
  (plan/train/step.foreach_adam_extra_bytes), not one fused pass;
- ``overlap_cost``: seconds of compute lost per second of a collective hidden behind it: its library runs
  collectives as kernels on the same streaming multiprocessors and HBM as the compute (NCCL: a thread block
  per channel), so the compute it overlaps runs slower (its own term of each communication part);
- ``fused_elementwise``: the default for the job's ``--fix compile``: whether norms, rotary embedding and
  the gated activation run as fused kernels (a compiler, or the stack's hand-fused kernels) or eagerly, one
  kernel per PyTorch op (model/eager.py; the extra traffic is its own term of the compute parts).

Each of these is a term of the step's breakdown: the collectives' ring latency and launch cost in their
parts, the attention ceiling in the compute parts, clipping in ``optimizer``, the host sync in
``pipeline_p2p``, the data-parallel reduction left unhidden in ``data_parallel``. ``--fix grad_clip=0|1``
switches clipping on its own.

The default is the common framework of the chip's kind (the file's ``[defaults]``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from types import MappingProxyType
from typing import Any

from rooftop.catalog.io import builtin_toml
from rooftop.cost.algorithms import Algorithm
from rooftop.cost.efficiency import Efficiency
from rooftop.errors import InvalidConfigError, UnknownNameError
from rooftop.hardware.chip import Chip

WHERE = "catalog/frameworks/training.toml"


@dataclass(frozen=True)
class Framework:
    """One training stack's collective algorithm, launch costs, overlap rules and kernels (module docstring)."""

    name: str
    description: str
    era: int
    algorithm: Algorithm | None  # None: cost/collectives.py's hierarchical rules
    launch_s: float
    prefetch: int
    dp_overlap: float
    attention: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    grad_clip: bool = False
    p2p_sync_s: float = 0.0
    p2p_overlap: bool = False  # interleaved schedule: each send/receive overlaps the next chunk's compute
    fused_attention: bool = True  # the job's default for ``--fix flash``
    dropout: bool = False  # the job's default for ``--fix dropout``
    fused_elementwise: bool = True  # the job's default for ``--fix compile``
    gather_copy: float = 0.0  # HBM bytes on the compute stream per all-gathered parameter byte
    expand_kv: bool = False  # grouped K, V copied out to every query head before the attention kernel
    loss_fp32: bool = False  # the logits cast to fp32 before a separate cross-entropy kernel
    foreach_optimizer: bool = False  # Adam as PyTorch's foreach AdamW (one kernel per operation)
    overlap_cost: float = 0.0  # compute seconds lost per second of collective hidden behind it (its library's)
    sources: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}), compare=False)

    def __hash__(self) -> int:  # the mappings are read-only views; the name and figures identify it
        figures = (self.launch_s, self.prefetch, self.dp_overlap, self.p2p_sync_s, self.p2p_overlap)
        kernels = (self.gather_copy, self.expand_kv, self.loss_fp32, self.foreach_optimizer, self.overlap_cost)
        return hash((self.name, self.algorithm, *figures, *kernels))

    def attention_cap(self, chip: Chip) -> float:
        """The share of ``chip``'s datasheet matrix peak the attention kernel sustains (0: no cap)."""
        return self.attention.get(chip.name, 0.0)

    def efficiency(self, eff: Efficiency) -> Efficiency:
        """``eff`` with this framework's overlap rules: its data-parallel overlap, and no FSDP overlap
        without prefetch."""
        return eff.replace(dp_overlap=self.dp_overlap, fsdp_overlap=eff.fsdp_overlap if self.prefetch else 0.0)


def _value(table: Mapping[str, Any], key: str, where: str) -> Any:
    node = table.get(key)
    if not isinstance(node, Mapping) or "value" not in node or not node.get("source"):
        raise InvalidConfigError(f'{where}: {key} must be a table {{value = ..., source = "..."}}')
    return node["value"]


@lru_cache(maxsize=1)
def _data() -> dict[str, Any]:
    return builtin_toml("frameworks", "training.toml")


def framework_names() -> tuple[str, ...]:
    return tuple(_data()["frameworks"])


@lru_cache(maxsize=32)
def get_framework(name: str) -> Framework:
    """The framework ``name`` of catalog/frameworks/training.toml (UnknownNameError lists the choices)."""
    data = _data()
    table = data["frameworks"].get(name)
    if table is None:
        raise UnknownNameError("framework", name, framework_names())
    where = f"{WHERE} [frameworks.{name}]"
    lib_name = str(_value(table, "library", where))
    lib = data["libraries"][lib_name]
    lib_where = f"{WHERE} [libraries.{lib_name}]"
    algo_name = str(_value(lib, "algorithm", lib_where))
    algorithm = None
    if algo_name != "hierarchical":
        algorithm = Algorithm(
            algo_name,
            float(_value(lib, "base_s", lib_where)),
            float(_value(lib, "intra_step_s", lib_where)),
            float(_value(lib, "inter_step_s", lib_where)),
        )
    kernel = str(_value(table, "attention", where))
    caps = {chip: float(_value(data["kernels"][kernel], chip, WHERE)) for chip in data["kernels"].get(kernel, {})}
    return Framework(
        name,
        str(table.get("description", "")),
        int(table.get("era", 0)),
        algorithm,
        float(_value(table, "launch_s", where)),
        int(_value(table, "prefetch", where)),
        float(_value(table, "dp_overlap", where)),
        MappingProxyType(caps),
        bool(_value(table, "grad_clip", where)),
        float(_value(table, "p2p_sync_s", where)),
        bool(_value(table, "p2p_overlap", where)) if "p2p_overlap" in table else False,
        bool(_value(table, "fused_attention", where)),
        bool(_value(table, "dropout", where)),
        bool(_value(table, "fused_elementwise", where)) if "fused_elementwise" in table else True,
        float(_value(table, "gather_copy", where)) if "gather_copy" in table else 0.0,
        bool(_value(table, "expand_kv", where)) if "expand_kv" in table else False,
        bool(_value(table, "loss_fp32", where)) if "loss_fp32" in table else False,
        bool(_value(table, "foreach_optimizer", where)) if "foreach_optimizer" in table else False,
        float(_value(lib, "overlap_cost", lib_where)) if "overlap_cost" in lib else 0.0,
        MappingProxyType({k: str(v["source"]) for k, v in table.items() if isinstance(v, Mapping)}),
    )


def default_framework(chip: Chip) -> Framework:
    """The common framework of ``chip``'s kind (GPU: Megatron-Core; TPU: XLA); other kinds: XLA's rules."""
    defaults = _data()["defaults"]
    name = str(_value(defaults, chip.kind, WHERE)) if chip.kind in defaults else "xla"
    return get_framework(name)


def _algorithm(name: str, table: Mapping[str, Any], where: str) -> Algorithm:
    figures = (_value(table, f, where) for f in ("base_s", "intra_step_s", "inter_step_s"))
    return Algorithm(name, *(float(x) for x in figures))


def catalog_algorithm(name: str) -> Algorithm:
    """The collective algorithm ``name`` (cost/algorithms.py) with the latency figures of the first library
    of catalog/frameworks/training.toml that runs it (``ring``: NCCL's), else of its ``[algorithms.NAME]``
    table (``tree``, ``bidirectional-ring``); without one, no figures of its own (the staged rules take
    each group's hop latency). An unknown name raises with the choices."""
    for lib_name, lib in _data()["libraries"].items():
        where = f"{WHERE} [libraries.{lib_name}]"
        if str(_value(lib, "algorithm", where)) == name and "base_s" in lib:
            return _algorithm(name, lib, where)
    table = _data().get("algorithms", {}).get(name)
    if table is not None:
        return _algorithm(name, table, f"{WHERE} [algorithms.{name}]")
    return Algorithm(name)
