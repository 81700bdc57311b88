"""Memory per chip of a training layout: how the data axes shard dense and routed-expert state
(``Shards``), the bytes each chip holds by kind (``memory_per_chip``, from ``MemoryTerms`` so that
a search derives every variant of a layout from one set of figures), and what crosses the host
link when state is offloaded (``offload_transfers``, timed by cost/roofline.host_term).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

from rooftop.cost.roofline import host_term
from rooftop.model.memory import TrainingBytes, TrainingPrecision, training_bytes_per_param
from rooftop.plan.train.layout import Parallelism, stage_split
from rooftop.plan.train.profile import ModelProfile, held_params
from rooftop.sharding.tensor import tensor_ways

if TYPE_CHECKING:
    from rooftop.plan.train.step import TrainingSetup


@dataclass(frozen=True)
class Shards:
    """How the data axes shard dense and routed-expert state. Expert parallelism takes its ep
    ranks from fsdp when ep divides fsdp, else from dp (layout_mesh): experts are then
    ZeRO-sharded only over the rest of that axis, and their gathers and gradient reductions
    run only over the rest too (each ep rank holds different experts)."""

    dense_fsdp: int
    expert_fsdp: int
    dense_dp: int
    expert_dp: int
    dense_fsdp_axes: tuple[str, ...]
    dense_dp_axes: tuple[str, ...]

    @staticmethod
    def of(par: Parallelism) -> Shards:
        in_fsdp = par.ep > 1 and par.fsdp % par.ep == 0
        in_dp = par.ep > 1 and not in_fsdp
        return Shards(
            par.fsdp,
            par.fsdp // par.ep if in_fsdp else par.fsdp,
            par.dp,
            par.dp // par.ep if in_dp else par.dp,
            ("fsdp", "ep") if in_fsdp else ("fsdp",),
            ("dp", "ep") if in_dp else ("dp",),
        )

    def params(self, prof: ModelProfile, par: Parallelism, over_dp: bool = False) -> float:
        """Parameters one chip holds: dense over tp x pp x fsdp, routed experts over tp x pp x ep
        x the rest of fsdp; ``over_dp`` also shards over dp (ZeRO-1/2 state)."""
        dense, expert = params_per_chip(prof, par)
        return dense / (self.dense_fsdp * (self.dense_dp if over_dp else 1)) + expert / (
            self.expert_fsdp * (self.expert_dp if over_dp else 1)
        )


def params_per_chip(prof: ModelProfile, par: Parallelism, held_layers: int | None = None) -> tuple[float, float]:
    """(dense, routed-expert) parameters per chip of the fullest pipeline stage, before
    FSDP/ZeRO sharding: the most layers a stage holds (layout.stage_split; ``held_layers`` when given) plus the
    embedding and head (the first and last stages hold them; counting both is the conservative choice), over tp
    as each weight's tag says (profile.held_params: the k and v projections over the KV heads, norms and routers
    whole); routed experts over tp x ep."""
    held_layers = stage_split(prof.n_layers, par, prof.head_layers).held if held_layers is None else held_layers
    share = held_layers / prof.n_layers
    held = held_params(prof, par.tp)
    return held.dense * share + held.edge, prof.params_expert * share / (par.tp * par.ep)


def offload_transfers(
    setup: TrainingSetup, par: Parallelism, opt_params: float, params_shard: float, m: int
) -> list[tuple[str, float]]:
    """(what, bytes) crossing the host link per step: the optimizer state and master copy out and back
    (ZeRO-Offload, Ren 2021), and with offload=params the weights in per microbatch forward and backward."""
    if par.offload == "none":
        return []
    state = _state_bytes(setup.precision)
    out = [
        (
            "optimizer state and master weights, to the host and back",
            2 * opt_params * (state.master + state.optimizer),
        )
    ]
    if par.offload == "params":
        out.append(("weights streamed in per microbatch, forward and backward", 2 * m * params_shard * state.weights))
    return out


def offload_s(setup: TrainingSetup, par: Parallelism, opt_params: float, params_shard: float, m: int) -> float:
    transfers = offload_transfers(setup, par, opt_params, params_shard, m)
    if not transfers:
        return 0.0
    return host_term(sum(nbytes for _, nbytes in transfers), setup.chip).seconds


@lru_cache(maxsize=16)
def _state_bytes(precision: TrainingPrecision) -> TrainingBytes:
    return training_bytes_per_param(precision)


def memory_per_chip(setup: TrainingSetup, par: Parallelism, prof: ModelProfile, b: int) -> dict[str, float]:
    """Bytes per chip: weights (sharded over fsdp, offloaded with offload=params), gradients
    (over fsdp, and dp at ZeRO-2), master copy and optimizer state (over fsdp, and dp at
    ZeRO-1/2; on the host with offload), activations of the stage's layers for the
    microbatches in flight (1F1B: min(m, pp) on the first stage), fp32 logits of one
    microbatch (vocab-parallel over tp), and the FSDP gather buffers (two layers). Activations divide
    over tp as each kept tensor's split says (``activations_per_chip``)."""
    return MemoryTerms.of(setup, par, prof, b).breakdown(activations_per_chip(par, prof), par.zero_stage, par.offload)


def activations_per_chip(par: Parallelism, prof: ModelProfile) -> float:
    """Activation bytes per token one tensor-parallel rank keeps: each kept tensor's bytes over the ways
    its split divides (sharding/tensor.tensor_ways, the rule training time and serving use): the norm and
    residual tensors whole without sequence parallelism, the k and v outputs over the KV heads, the
    replicated ops' outputs whole, the rest over tp."""
    key = (par.tp, par.sequence_parallel)
    found = prof.kept_memo.get(key)
    if found is None:
        tp, kv, sp = par.tp, prof.cfg.tp_kv_heads, par.sequence_parallel
        found = prof.kept_memo[key] = sum(
            b / tensor_ways(split, tp, kv, sp) for split, b in prof.activation_bytes_by_split
        )
    return found


@dataclass(frozen=True)
class MemoryTerms:
    """memory_per_chip's figures for one layout before its remat policy, ZeRO stage and offload
    are chosen: the search derives every variant of a layout from one of these."""

    state: TrainingBytes  # bytes per parameter
    held: float  # parameters one chip holds (over tp x pp x fsdp; experts over ep)
    working: float  # of them, the weights it holds in the compute dtype (the stage's whole when not resharded)
    held_over_dp: float  # the same also sharded over dp (ZeRO-1/2 state)
    n_layers: int
    stage_layers: int
    tokens_chip: float
    tp: int
    in_flight: int
    logits: float
    buffers: float
    grads_whole: bool = False  # kept gathered over several microbatches: gradients accumulate whole

    @staticmethod
    def of(setup: TrainingSetup, par: Parallelism, prof: ModelProfile, b: int) -> MemoryTerms:
        """From any remat policy's profile: the parameter figures do not depend on it."""
        state = _state_bytes(setup.precision)
        shards = Shards.of(par)
        tokens_chip = b * setup.seq_len / par.cp
        buffers = 0.0
        if par.fsdp > 1 and par.fsdp_reshard:  # gathered layers in flight (kept whole in ``working`` otherwise)
            layers = held_params(prof, par.tp)
            experts = (g.expert_params / (par.tp * par.ep) for g in prof.groups)
            biggest = max(h + e for h, e in zip(layers.layers, experts, strict=True))
            buffers = 2 * max(biggest, layers.edge) * state.weights
        held = shards.params(prof, par)
        return MemoryTerms(
            state,
            held,
            held if par.fsdp_reshard or par.fsdp == 1 else sum(params_per_chip(prof, par)),
            shards.params(prof, par, over_dp=True),
            setup.cfg.n_layers,
            stage_split(setup.cfg.n_layers, par, prof.head_layers).held,
            tokens_chip,
            par.tp,
            min(par.microbatches, par.pp) if par.pp > 1 else 1,
            tokens_chip * prof.logits_bytes_per_token / par.tp,
            buffers,
            not par.fsdp_reshard and par.fsdp > 1 and par.microbatches > 1,
        )

    def breakdown(self, act_bytes_per_token: float, zero_stage: int, offload: str) -> dict[str, float]:
        """Bytes per chip by kind (see memory_per_chip) under a remat policy's activation bytes per token
        one tensor-parallel rank keeps (``activations_per_chip``)."""
        state = self.state
        opt_params = self.held_over_dp if zero_stage >= 1 else self.held
        act = act_bytes_per_token / self.n_layers * self.stage_layers * self.tokens_chip
        return {
            "weights": 0.0 if offload == "params" else self.working * state.weights,
            # kept gathered (fsdp_reshard off) over several microbatches: the stage's gradients accumulate whole
            # until the last microbatch's reduce-scatter (with one, each layer's are reduce-scattered as they come)
            "gradients": (self.working if self.grads_whole else self.held_over_dp if zero_stage >= 2 else self.held)
            * state.grads,
            "optimizer": 0.0 if offload != "none" else opt_params * (state.master + state.optimizer),
            "activations": act * self.in_flight,
            "logits": self.logits,
            "buffers": self.buffers,
        }
