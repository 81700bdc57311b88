"""Prefill and decode of a served transformer, priced from the same layer ops as training
(``model/passes.model_costs``), sharded over a serving layout and timed on the roofline
(``cost/roofline.roofline``) plus the fixed costs a bandwidth roofline misses.

Layouts live in plan/serve/layout.py (``ServingLayout``: replicas of tp x pp chips, ep
expert-parallel within the TP group); one chip's share of the ops (``chip_cost``) in
plan/serve/per_chip.py: how an op's FLOPs, weights, cache and activations divide over the TP group
is read from the op's tag (sharding/tensor.py), its bytes by kind from its Cost.

Decode step (one new token for each of ``batch`` sequences at context S), per chip:

    step = sum over op groups (matmul, attention, elementwise) of max(compute, memory)
         + collectives: 2 all-reduces of batch x D activations per layer under TP (1 with parallel
           attention/MLP), each max(bandwidth / network efficiency, hop latency) (cost/collectives.py),
           plus one permute per pipeline stage
         + launch: n_layers x kernels_per_layer x kernel_s, plus, when the step is not a captured
           CUDA graph (more than graph_max_batch tokens), the host's time to issue the kernels
           beyond the device's time of the step: max(0, kernels x kernel_eager_s - device time)
         + scheduling: step_s + step_per_seq_s x sequences of the step
    memory = weights (read once per step per chip) + KV cache as the engine reads it (a fixed-shape
    cache whole; per query head without a GQA kernel: ServingLayout) + activations.

The matmul group is memory-bound below the critical batch ~ F x beta_w / (2 x BW) (F: peak FLOPs/s
of the compute dtype, beta_w: bytes per weight; "How to Scale Your Model" Part 7: decode is
bandwidth-bound below ~240 tokens on v5e in bf16) and the attention group stays memory-bound
(2 FLOPs per cached element per query head of its group). Pipeline stages decode ``pp``
microbatches of batch / pp in flight: per chip the round reads the stage's weights pp times
(W / tp in all), its layers' cache once (KV / pp) and does FLOPs / pp; a token's latency is the
round. Prefill of a prompt runs the stages one after another (no pipelining for one prompt).

Fixed costs (overheads) are what make real decode 2-4x slower than the bandwidth roofline for
70B-class models at TP 4-8: 160 all-reduces of a few KiB are latency-bound, 800 kernels each
cost microseconds, and the runtime spends ~1 ms per step at a few hundred sequences, more with more
(catalog/efficiency/serving.toml, every figure with its source).

A mixed step (``mixed_step``, continuous batching: plan/serve/batching.py) decodes a running batch
and prefills ``c`` prompt tokens in one pass: the decode's per-chip Cost plus c / prompt_len times
the per-chip Cost of one prompt's prefill without its weights (the weights are read once per step),
timed by the same rule.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from rooftop.cost.algorithms import Algorithm
from rooftop.cost.cost import Comm, Cost
from rooftop.cost.efficiency import Efficiency
from rooftop.cost.figures import (
    EagerFigures,
    HiddenFigures,
    LaunchFigures,
    PerSeqFigures,
    PerStepFigures,
    with_routing,
)
from rooftop.cost.roofline import Term, TermKind, collective_term, hbm_rate, roofline
from rooftop.dtypes import dtype_bytes
from rooftop.errors import InvalidConfigError
from rooftop.hardware.chip import Chip
from rooftop.hardware.topology import Mesh
from rooftop.model.config import TransformerConfig
from rooftop.model.workload import Dtypes, Workload
from rooftop.plan.serve.layout import GROUPS, ServingLayout
from rooftop.plan.serve.per_chip import ChipCost, chip_cost
from rooftop.plan.serve.shapes import matmul_shape_factor, mixed_gemms, shaped_estimate


@dataclass(frozen=True)
class PhaseTime:
    """Time of one prefill or decode step on one chip of a replica, and every term of it."""

    phase: str
    batch: int
    tokens: int
    context_len: int
    weights_bytes: float
    kv_cache_bytes: float
    other_bytes: float
    flops: float
    weights_s: float
    kv_cache_s: float
    other_memory_s: float
    compute_s: float
    group_s: dict[str, float]
    group_bound: dict[str, str]
    collective_s: float
    collective_latency_s: float
    collectives: float
    launch_s: float
    scheduling_s: float
    bandwidth_roofline_s: float
    terms: tuple[Term, ...]
    collective_hidden_s: float = 0.0

    @property
    def roofline_s(self) -> float:
        """Sum over op groups of max(compute, memory): the roofline part of the step."""
        return sum(self.group_s.values())

    @property
    def overhead_s(self) -> float:
        return self.collective_exposed_s + self.launch_s + self.scheduling_s

    @property
    def collective_exposed_s(self) -> float:
        """The collectives' time left on the step once ``collective_hidden_s`` runs under its matmuls."""
        return self.collective_s - self.collective_hidden_s

    @property
    def time_s(self) -> float:
        return self.roofline_s + self.overhead_s

    @property
    def bound(self) -> str:
        """What takes most of the step: "compute", "memory", "collective" or "overhead"."""
        compute = sum(t for g, t in self.group_s.items() if self.group_bound[g] == "compute")
        parts = {
            "compute": compute,
            "memory": self.roofline_s - compute,
            "collective": self.collective_exposed_s,
            "overhead": self.launch_s + self.scheduling_s,
        }
        return max(parts, key=lambda k: parts[k])


def tp_comms(cfg: TransformerConfig, layout: ServingLayout, tokens: int, dtypes: Dtypes) -> list[tuple[Comm, int]]:
    """The collectives of the TP group in one pass of ``tokens`` tokens, each with its count per pass.

    - plain tensor parallelism: an all-reduce of the tokens' activations (tokens x D) after
      attention and after the MLP of every layer (one with parallel attention/MLP; Megatron).
    - kv_batch (the cache sharded over the batch, "How to Scale Your Model" Part 7, "Sharding the
      KV cache"): the same all-reduces, plus two all-to-alls per layer over the kv_batch chips, one
      moving the queries from head to batch sharding, one moving the attention output back; each
      chip's buffer is its shard of them, tokens x N x H / tp (values: H_v).
    - attn_dp: the attention all-reduce stays inside each rank (tokens / attn_dp x D over
      tp / attn_dp chips); the MLP is fed by an all-gather of every rank's tokens (tokens x D
      gathered) and answered by a reduce-scatter of the same bytes over the whole TP group (SGLang's
      DP attention; the two together move what the all-reduce did)."""
    if layout.tp == 1:
        return []
    width = cfg.d_model * dtype_bytes(dtypes.activations)
    act, group, n = tokens * width, layout.tp_axes, cfg.n_layers
    per_layer = cfg.tp_regions_per_layer
    if layout.attn_dp > 1:
        out = [
            (Comm("all-gather", group, act, label="attn_dp"), n),
            (Comm("reduce-scatter", group, act, label="attn_dp"), n),
        ]
        if layout.attention_tp > 1 and per_layer > 1:
            out.append((Comm("all-reduce", ("tp",), act / layout.attn_dp, label="tp"), n))
        return out
    out = [(Comm("all-reduce", group, act, label="tp"), per_layer * n)]
    if layout.kv_batch > 1:
        q = tokens * cfg.n_heads * cfg.value_head_dim * dtype_bytes(dtypes.activations) / layout.tp
        out.append((Comm("all-to-all", ("kv_batch",), q, label="kv_batch"), 2 * n))
    return out


def _collectives(
    cfg: TransformerConfig,
    chip: Chip,
    mesh: Mesh,
    layout: ServingLayout,
    tokens: int,
    dtypes: Dtypes,
    eff: Efficiency,
    hops: int,
    algorithm: Algorithm | None = None,
) -> tuple[float, float, float, list[Term]]:
    """(time, latency part, count, terms) of the TP group's collectives (``tp_comms``) and the
    pipeline sends of one pass, run by ``algorithm`` (cost/algorithms.py; None: hierarchical)."""
    items = tp_comms(cfg, layout, tokens, dtypes)
    if layout.pp > 1 and hops:
        act = tokens * cfg.d_model * dtype_bytes(dtypes.activations)
        items.append((Comm("permute", ("pp",), act, label="pp"), hops))
    total = latency = count = 0.0
    terms = []
    for comm, n in items:
        term = collective_term(comm.scaled(n), mesh, chip, eff, f"collective {comm.kind} {comm.label}", algorithm)
        ct = term.collective
        assert ct is not None
        total += term.seconds
        latency += n * min(ct.time_s, ct.latency_time_s)
        count += n
        terms.append(term)
    return total, latency, count, terms


def _group_times(
    cost: ChipCost, chip: Chip, eff: Efficiency
) -> tuple[dict[str, float], dict[str, str], float, list[Term]]:
    """Roofline of each op group: (time, bound, summed compute time, terms)."""
    group_s, group_bound, terms, compute_s = {}, {}, [], 0.0
    shape = matmul_shape_factor(cost.gemms, cost.groups["matmul"], chip, eff)
    for g in GROUPS:
        est = roofline(cost.groups[g], chip, efficiency=eff)
        if g == "matmul" and shape is not None and shape < 1:
            est = shaped_estimate(est, shape)
        group_s[g] = est.lower_bound_s
        group_bound[g] = "compute" if est.compute_s >= est.memory_s else "memory"
        compute_s += est.compute_s
        routed = cost.routing if g == "matmul" else None
        # built directly (a Term's every field), not by dataclasses.replace: half the time in the sweep's loops
        terms += [
            Term(f"{g}: {t.name}", t.seconds, t.kind, with_routing(t.figures, routed), t.collective) for t in est.terms
        ]
    return group_s, group_bound, compute_s, terms


def _phase_time(
    phase: str,
    cost: ChipCost,
    cfg: TransformerConfig,
    chip: Chip,
    mesh: Mesh,
    layout: ServingLayout,
    batch: int,
    tokens: int,
    context_len: int,
    dtypes: Dtypes,
    eff: Efficiency,
    hops: int,
    algorithm: Algorithm | None = None,
) -> PhaseTime:
    group_s, group_bound, compute_s, terms = _group_times(cost, chip, eff)
    coll_s, coll_lat, count, coll_terms = _collectives(cfg, chip, mesh, layout, tokens, dtypes, eff, hops, algorithm)
    hidden = min(coll_s - coll_lat, eff.tp_overlap * group_s["matmul"])
    launch_s, scheduling_s, fixed = _fixed_costs(cfg, eff, batch, tokens, sum(group_s.values()) + coll_s - hidden)
    terms += coll_terms + fixed
    if hidden > 0:
        rule = "min(collectives - their latency, {overlap:g} x the matmul ops' time)"
        figures = HiddenFigures(communication_s=coll_s, cover="the step's matmuls", overlap=eff.tp_overlap, rule=rule)
        terms.append(Term("collectives hidden under the matmuls", -hidden, TermKind.HIDDEN, figures))
    hbm = hbm_rate(chip, eff)  # memory_term's seconds, without its figures
    return PhaseTime(
        phase,
        batch,
        tokens,
        context_len,
        cost.weights_bytes,
        cost.kv_cache_bytes,
        cost.other_bytes,
        cost.flops,
        cost.weights_bytes / hbm,
        cost.kv_cache_bytes / hbm,
        cost.other_bytes / hbm,
        compute_s,
        group_s,
        group_bound,
        coll_s,
        coll_lat,
        count,
        launch_s,
        scheduling_s,
        (cost.weights_bytes + cost.kv_cache_bytes) / hbm_rate(chip),  # at the peak: the floor
        tuple(terms),
        hidden,
    )


def _fixed_costs(
    cfg: TransformerConfig, eff: Efficiency, sequences: int, tokens: int, device_s: float
) -> tuple[float, float, list[Term]]:
    """(launch, scheduling, their terms) of a step of ``sequences`` and ``tokens`` (per microbatch)
    whose op groups and collectives take ``device_s``: the kernels' fixed cost, the host's part
    when the step is no captured graph (``host_launch_s``), and the per-step and per-sequence
    host work."""
    kernels = cfg.n_layers * eff.kernels_per_layer
    launch_s = kernels * eff.kernel_s
    launch = LaunchFigures(layers=cfg.n_layers, kernels_per_layer=eff.kernels_per_layer, kernel_s=eff.kernel_s)
    host = host_launch_s(kernels, tokens, device_s + launch_s, eff)
    scheduling_s = eff.step_s + eff.step_per_seq_s * sequences
    terms = [
        Term("launch", launch_s, TermKind.OVERHEAD, launch),
        Term("scheduling", eff.step_s, TermKind.OVERHEAD, PerStepFigures(step_s=eff.step_s)),
    ]
    if eff.step_per_seq_s:  # grows with the batch: sampling, the scheduler's and the attention metadata's work
        per_seq = PerSeqFigures(step_per_seq_s=eff.step_per_seq_s, sequences=sequences)
        terms.append(Term("per-sequence host work", eff.step_per_seq_s * sequences, TermKind.OVERHEAD, per_seq))
    if host:
        eager = EagerFigures(kernels=kernels, kernel_eager_s=eff.kernel_eager_s, graph_max_batch=eff.graph_max_batch)
        terms.append(Term("host launch", host, TermKind.OVERHEAD, eager))
    return launch_s + host, scheduling_s, terms


def host_launch_s(kernels: float, tokens: int, device_s: float, eff: Efficiency) -> float:
    """Host time to issue a step's kernels one by one beyond the device's time of the step: 0 when
    the step runs as a captured CUDA graph (``tokens <= graph_max_batch``), else
    max(0, kernels x kernel_eager_s - device_s) (an eager step is host-bound when issuing its
    kernels takes longer than running them)."""
    if tokens <= eff.graph_max_batch:
        return 0.0
    return max(0.0, kernels * eff.kernel_eager_s - device_s)


def decode_step(
    cfg: TransformerConfig,
    chip: Chip,
    mesh: Mesh,
    layout: ServingLayout,
    batch: int,
    context_len: int,
    dtypes: Dtypes,
    eff: Efficiency,
    algorithm: Algorithm | None = None,
) -> PhaseTime:
    """One decode step of ``batch`` sequences (per replica) attending to ``context_len`` keys; with
    pp stages, a round of pp microbatches of batch / pp (module docstring). ``algorithm``: how the
    collective library runs the TP group's collectives (default hierarchical), here and below."""
    if batch % layout.pp:
        raise InvalidConfigError(f"batch {batch} does not split into pp={layout.pp} microbatches")
    micro = batch // layout.pp
    cost = chip_cost(cfg, Workload("decode", micro, 1, context_len), dtypes, layout)
    return _phase_time(
        "decode", cost, cfg, chip, mesh, layout, batch, micro, context_len, dtypes, eff, layout.pp, algorithm
    )


def prefill(
    cfg: TransformerConfig,
    chip: Chip,
    mesh: Mesh,
    layout: ServingLayout,
    batch: int,
    prompt_len: int,
    dtypes: Dtypes,
    eff: Efficiency,
    cached_len: int = 0,
    algorithm: Algorithm | None = None,
) -> PhaseTime:
    """Prefill of ``batch`` prompts of ``prompt_len`` tokens on one replica, stages in sequence:
    the time to first token of the batch (quadratic attention included, causal pairs only). With
    ``cached_len``, the first cached_len tokens' KV is already cached (a prefix cache hit): only the
    other prompt_len - cached_len tokens are computed, attending to all prompt_len keys."""
    new = prompt_len - cached_len
    cost = chip_cost(cfg, Workload("prefill", batch, new, prompt_len), dtypes, layout)
    return _phase_time("prefill", cost, cfg, chip, mesh, layout, batch, batch * new, prompt_len, dtypes, eff,
                       layout.pp - 1, algorithm)  # fmt: skip


# ---------------------------------------------------------------- the mixed step of continuous batching


def mixed_step(
    cfg: TransformerConfig,
    chip: Chip,
    mesh: Mesh,
    layout: ServingLayout,
    batch: int,
    context_len: int,
    prefill_tokens: float,
    prompt_len: int,
    dtypes: Dtypes,
    eff: Efficiency,
    algorithm: Algorithm | None = None,
) -> PhaseTime:
    """One step of continuous batching: a decode of ``batch`` running sequences at ``context_len``
    plus ``prefill_tokens`` prompt tokens (chunks of prompts of ``prompt_len``), weights read once.
    The prefill part is prefill_tokens / prompt_len times one prompt's prefill Cost without its
    weights: a prompt prefilled in chunks does the same work in all (causal pairs included), so
    the mean chunk costs its share. With pp stages, each of the pp microbatches carries 1/pp of
    both (a round of the pipeline, as ``decode_step``). ``batch`` 0 is a step of prefill only.
    The routed experts a step reads are those all its tokens touch, decode and prompt together
    (``MoEConfig.touched``). Under attention data parallelism (or a KV cache split over the batch)
    each rank prefills its own prompts: the step's q = prefill_tokens / prompt_len prompts' worth
    spread over the ranks, the busiest holding max(q / ranks, min(q, 1)) (a prompt runs on one
    rank: a chunk of one prompt all on one)."""
    pp = layout.pp
    if batch % pp:
        raise InvalidConfigError(f"batch {batch} does not split into pp={pp} microbatches")
    micro = batch // pp
    share_ = prefill_tokens / (prompt_len * pp)
    ranks = layout.attn_dp * layout.kv_batch
    busiest = max(share_ / ranks, min(share_, 1.0)) / share_ if share_ > 0 and ranks > 1 else None
    tokens_ = micro + prefill_tokens / pp  # one microbatch's tokens, through the same weights
    pre = chip_cost(cfg, Workload("prefill", 1, prompt_len), dtypes, layout, False, tokens_, busiest)
    if micro:
        dec = chip_cost(cfg, Workload("decode", micro, 1, context_len), dtypes, layout, weight_tokens=tokens_)
    else:  # prefill only: the weights, read once, and nothing else
        whole = chip_cost(cfg, Workload("prefill", 1, prompt_len), dtypes, layout, weight_tokens=tokens_)
        one = Workload("prefill", 1, prompt_len)
        bare = pre if busiest is None else chip_cost(cfg, one, dtypes, layout, False, tokens_)
        weights = {g: Cost({}, whole.groups[g].hbm_bytes - bare.groups[g].hbm_bytes) for g in GROUPS}
        dec = ChipCost(weights, whole.weights_bytes, 0.0, 0.0, (), whole.routing)
    groups = {g: dec.groups[g] + share_ * pre.groups[g] for g in GROUPS}
    cost = ChipCost(
        groups,
        dec.weights_bytes,
        dec.kv_cache_bytes + share_ * pre.kv_cache_bytes,
        dec.other_bytes + share_ * pre.other_bytes,
        mixed_gemms(dec.gemms, pre.gemms, share_),
        dec.routing,
    )
    tokens = micro + max(1, round(prefill_tokens / pp)) if prefill_tokens else micro
    sequences = batch + math.ceil(prefill_tokens / prompt_len)
    return _phase_time(
        "mixed", cost, cfg, chip, mesh, layout, sequences, tokens, context_len, dtypes, eff, pp, algorithm
    )
