"""Serving layouts and where things live on their chips: the tensor/pipeline/expert layout of a
served model, how each op of the model's cost tree divides over a TP group, and the weights and
KV cache each chip stores (plan/serve/phase.py prices and times the steps with these rules).

Sharding: each op and weight divides over the TP group as its tag says (model/tags.py, the rule in
sharding/tensor.py): tensor-parallel matmuls / tp (Megatron), k and v projections and the KV cache /
min(tp, K) (KV heads are replicated once tp > K; MLA's latent cache is replicated on every chip),
attention FLOPs / tp (query heads); norms, residuals, the router and MLA's down-projections are
replicated. Layers / pp per pipeline stage; routed experts spread over ep chips of the TP group, each
split over the remaining tp / ep. Two layouts split the cache further:

- ``kv_batch`` (the KV cache sharded over the batch, "How to Scale Your Model" Part 7, "Sharding the
  KV cache"): once the KV heads are split min(tp, K) ways, the cache of the TP group is split over the
  sequences of the batch the remaining kv_batch = tp / min(tp, K) ways, KV[2, B_Z, S, K_Y, H], so no
  chip keeps a copy. Weights and matmuls stay as under tp; the attention core of each chip runs over
  its own sequences and its own KV heads (FLOPs / tp as before). Cost: two all-to-alls per attention
  layer over the kv_batch chips (queries from head sharding to batch sharding, the attention output
  back), priced in plan/serve/phase.py.
- ``attn_dp`` (attention data parallelism with expert parallelism, as DeepSeek-V3's serving and
  SGLang's DP attention run it): the attention block of each of attn_dp ranks (tp / attn_dp chips each)
  runs over its own batch / attn_dp requests, its weights replicated attn_dp times and split over the
  rank's tp / attn_dp chips, its cache (MLA's latent too) only for its own requests; the MLP and the
  experts (over ep) stay tensor/expert-parallel over the whole TP group, fed by an all-gather of the
  ranks' tokens and answered by a reduce-scatter (plan/serve/phase.py).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass

from rooftop.cost.cost import Gemm, OpTag, Split
from rooftop.cost.efficiency import Efficiency
from rooftop.dtypes import dtype_bytes
from rooftop.errors import InvalidConfigError, shown
from rooftop.hardware.chip import Chip
from rooftop.model.config import TransformerConfig
from rooftop.model.memory import kv_cache_bytes
from rooftop.model.params import param_tree
from rooftop.model.workload import Dtypes
from rooftop.plan.fix import FIX, PinSpec, parse_pins, pinned_text
from rooftop.reasons import OptionError
from rooftop.sharding import tensor
from rooftop.units import divisors

#: the op groups a serving step times one roofline each (``op_group``)
GROUPS = ("matmul", "attention", "elementwise")


#: the degrees of a layout, in the order they are written
DEGREES = ("tp", "ep", "pp", "replicas", "kv_batch", "attn_dp")


@dataclass(frozen=True)
class ServingLayout:
    """``replicas`` copies of the model, each on ``tp x pp`` chips; ``ep`` (MoE) divides tp;
    ``kv_batch`` (the cache split over the batch) and ``attn_dp`` (attention data-parallel ranks)
    divide tp too, and at most one of them is above 1 (module docstring).

    How the engine keeps and reads the cache (not degrees: ``as_dict`` and ``label`` leave them out):
    ``static_cache_len`` > 0 is a fixed-shape cache of that many positions per decode slot, stored
    whole and read whole by every decode step whatever the sequence's context (an engine compiled
    for static shapes: jetstream-pytorch as of 2024-03 keeps cache_k[batch, heads, max_cache_len,
    head_dim] and runs decode attention as one einsum over all of it, masked; 0: each sequence's own
    context, as paged or ragged kernels read it); ``kv_reads_per_query_head`` marks a decode
    attention kernel that reads a KV head once per query head of its group instead of once for the
    group (query_head_reads)."""

    tp: int = 1
    ep: int = 1
    pp: int = 1
    replicas: int = 1
    kv_batch: int = 1
    attn_dp: int = 1
    static_cache_len: int = 0
    kv_reads_per_query_head: bool = False

    def __post_init__(self) -> None:
        cache_len = self.static_cache_len
        if not isinstance(cache_len, int) or isinstance(cache_len, bool) or cache_len < 0:
            raise InvalidConfigError(
                f"serving layout static_cache_len={shown(self.static_cache_len)} must be 0 (each sequence's own "
                "context) or a positive number of cache positions"
            )
        for name in DEGREES:
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise InvalidConfigError(f"serving layout {name}={shown(v)} must be a positive integer")
        for name in ("ep", "kv_batch", "attn_dp"):
            if self.tp % getattr(self, name):
                raise InvalidConfigError(
                    f"{name}={getattr(self, name)} must divide tp={self.tp} (a split of the TP group)"
                )
        if self.kv_batch > 1 and self.attn_dp > 1:
            raise InvalidConfigError(
                f"kv_batch={self.kv_batch} and attn_dp={self.attn_dp}: attention data parallelism already splits "
                "the cache over requests; use one of them"
            )

    @property
    def attention_tp(self) -> int:
        """Chips one attention rank spreads its heads over: tp / attn_dp."""
        return self.tp // self.attn_dp

    @property
    def batch_unit(self) -> int:
        """Sequences per replica come in multiples of this: pp microbatches, each split evenly over the
        attention ranks or the kv_batch shards."""
        return self.pp * self.attn_dp * self.kv_batch

    @property
    def tp_axes(self) -> tuple[str, ...]:
        """The mesh axes the TP group lies on (``mesh_axes``): the outer split, if any, then "tp"."""
        return tuple(a for a in ("attn_dp", "kv_batch", "tp") if a in self.mesh_axes())

    @property
    def chips_per_replica(self) -> int:
        return self.tp * self.pp

    @property
    def chips(self) -> int:
        return self.tp * self.pp * self.replicas

    def as_dict(self) -> dict[str, int]:
        return {k: getattr(self, k) for k in DEGREES}

    def label(self) -> str:
        more = [f"{k}={getattr(self, k)}" for k in ("ep", "pp", "kv_batch", "attn_dp") if getattr(self, k) > 1]
        return " ".join([f"tp={self.tp}", *more, f"x{self.replicas}"])

    def mesh_axes(self) -> dict[str, int]:
        """Named mesh axes, outermost first: replicas (DCN / fabric side), pp, the TP group (innermost:
        NVLink, ICI). A TP group split by attn_dp or kv_batch lies on two axes, that split outside and
        "tp" (the rest: one attention rank, or the KV-head shards) inside."""
        split = {"attn_dp": self.attn_dp, "kv_batch": self.kv_batch}
        sizes = {"replicas": self.replicas, "pp": self.pp, **split, "tp": self.tp // max(split.values())}
        return {k: v for k, v in sizes.items() if v > 1} or {"replicas": 1}


def _divides(what: str, degree: int, of: str, value: int) -> None:
    if value % degree:
        valid = ", ".join(str(d) for d in divisors(value) if d <= max(degree * 4, 8))
        raise InvalidConfigError(f"{what}={degree} does not divide {of}={value}; valid: {valid}")


def check_tp(cfg: TransformerConfig, tp: int) -> None:
    """Every head-sharded block splits over tp (model/heads.py: query and KV heads, gated DeltaNet's and
    Mamba-2's heads)."""
    cfg.check_heads(tp)


def check_pp(cfg: TransformerConfig, pp: int) -> None:
    _divides("pp", pp, "n_layers", cfg.n_layers)


def check_ep(cfg: TransformerConfig, ep: int) -> None:
    if ep == 1:
        return
    if cfg.moe is None:
        raise InvalidConfigError(f"ep={ep} needs a mixture-of-experts model; {cfg.name} is dense")
    _divides("ep", ep, "n_experts", cfg.moe.n_experts)


def check_kv_batch(cfg: TransformerConfig, tp: int, kv_batch: int) -> None:
    """The cache splits over the batch only the ways the KV heads leave: kv_batch divides tp / min(tp, K)."""
    left = tp // kv_shards(cfg, tp)
    if left % kv_batch:
        valid = ", ".join(str(d) for d in divisors(left))
        raise InvalidConfigError(
            f"kv_batch={kv_batch} does not divide the {left} ways tp={tp} leaves once the cache is split over "
            f"{kv_shards(cfg, tp)} KV heads; valid: {valid}"
        )


def validate_layout(cfg: TransformerConfig, layout: ServingLayout) -> None:
    """Raise InvalidConfigError naming the first rule ``layout`` breaks for ``cfg``: the heads rules
    apply to one attention rank's tp / attn_dp chips."""
    check_tp(cfg, layout.attention_tp)
    check_pp(cfg, layout.pp)
    check_ep(cfg, layout.ep)
    check_kv_batch(cfg, layout.tp, layout.kv_batch)


# ---------------------------------------------------------------- pinned degrees (--fix)

#: what ``rooftop serve --fix`` may pin: the degrees of a replica (the replicas fill the slice)
FIX_SPEC = PinSpec(counts=("tp", "pp", "ep", "attn_dp", "kv_batch"), example="tp=8,pp=2")


def parse_fix(text: str | None) -> dict[str, int]:
    """ "tp=16,pp=2" -> {"tp": 16, "pp": 2}: the convention of plan/fix.py (one-line errors)."""
    return {k: int(v) for k, v in parse_pins(text, FIX_SPEC).items()}  # type: ignore[call-overload]


def _listed(values: list[int], most: int = 16) -> str:
    shown_ = ", ".join(map(str, values[:most]))
    return shown_ + (f", ... ({len(values)} in all)" if len(values) > most else "")


def check_pins(cfg: TransformerConfig, chips: int, pins: Mapping[str, int]) -> None:
    """Raise InvalidConfigError naming the first rule the pinned degrees break on their own (before
    any layout is built): a known name and a positive degree each, the model's rules for each pinned
    degree (heads, layers, experts), ep dividing a pinned tp, then tp x pp dividing the chips."""
    text = pinned_text(pins)
    for k, v in pins.items():
        if k not in FIX_SPEC.counts:
            raise InvalidConfigError(f"cannot pin {shown(k)} (valid: {', '.join(FIX_SPEC.counts)})")
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise InvalidConfigError(f"pinned {k}={shown(v)} must be a positive integer")
    try:
        for name, check in (("pp", check_pp), ("ep", check_ep)):
            if name in pins:
                check(cfg, pins[name])
        if "tp" in pins:
            one = {k: pins.get(k, 1) for k in ("ep", "attn_dp", "kv_batch")}
            layout = ServingLayout(tp=pins["tp"], ep=one["ep"], attn_dp=one["attn_dp"], kv_batch=one["kv_batch"])
            check_tp(cfg, layout.attention_tp)
            check_kv_batch(cfg, layout.tp, layout.kv_batch)
        elif pins.get("attn_dp", 1) > 1 and pins.get("kv_batch", 1) > 1:
            ServingLayout(tp=pins["attn_dp"] * pins["kv_batch"], attn_dp=pins["attn_dp"], kv_batch=pins["kv_batch"])
    except InvalidConfigError as exc:
        raise OptionError(FIX, f" {text}: {exc}") from None
    splits = {k: pins[k] for k in ("ep", "attn_dp", "kv_batch") if k in pins}
    step = math.lcm(*splits.values()) if splits else 1
    if "tp" not in pins and chips % step:
        what = ", ".join(f"{k}={v}" for k, v in splits.items())
        raise OptionError(
            FIX, f" {text}: tp must be a multiple of {what}, and no such tp divides the slice's {chips} chips"
        )
    replica = pins.get("tp", 1) * pins.get("pp", 1)
    if chips % replica:
        what = " x ".join(f"{k}={pins[k]}" for k in ("tp", "pp") if k in pins)
        what += f" = {replica}" if "tp" in pins and "pp" in pins else ""
        raise OptionError(
            FIX,
            f" {text}: {what} chips per replica do not divide the slice's {chips} chips; "
            f"valid chips per replica: {_listed(divisors(chips))}",
        )


def kv_shards(cfg: TransformerConfig, tp: int) -> int:
    """Chips the KV cache is split over by heads within a TP group: min(tp, K); MLA's latent: 1 (replicated)."""
    return tensor.kv_shards(tp, cfg.tp_kv_heads)


def kv_split(cfg: TransformerConfig, layout: ServingLayout) -> int:
    """Ways one replica's cache is split per pipeline stage: over the KV heads of an attention rank
    (min(tp / attn_dp, K); MLA's latent: 1), times the batch shards (kv_batch) or the attention ranks
    each holding only its own requests (attn_dp)."""
    return kv_shards(cfg, layout.attention_tp) * layout.kv_batch * layout.attn_dp


def share(
    tag: OpTag, cfg: TransformerConfig, tp: int, sequence_parallel: bool = False, gemm: Gemm | None = None
) -> tensor.Share:
    """How an op tagged ``tag`` divides over a TP group of ``cfg`` (sharding/tensor.py); with
    ``sequence_parallel`` (prefill) the norms and residuals split over the prompt's tokens; a matmul's
    ``gemm`` shape makes its activation share exact."""
    return tensor.share(tag, tp, cfg.tp_kv_heads, sequence_parallel, gemm)


def layout_share(
    tag: OpTag,
    cfg: TransformerConfig,
    layout: ServingLayout,
    sequence_parallel: bool = False,
    busiest: float | None = None,
    gemm: Gemm | None = None,
) -> tensor.Share:
    """How an op tagged ``tag`` divides over one chip of ``layout``'s TP group: ``share`` over tp,
    except that an attention-block op under attn_dp is ``share`` over one rank's tp / attn_dp chips
    for the rank's requests (FLOPs, cache and activations x ``busiest``, the busiest rank's fraction
    of the batch, 1 / attn_dp by default; weights replicated over the ranks), and the attention core
    under kv_batch reads the cache of the busiest shard's sequences (``busiest``, 1 / kv_batch by
    default) of its KV heads."""
    if tag.attention_block and layout.attn_dp > 1:
        s, f = share(tag, cfg, layout.attention_tp, sequence_parallel, gemm), busiest or 1 / layout.attn_dp
        return tensor.Share(s.flops * f, s.weights, s.kv * f, s.act * f)
    s = share(tag, cfg, layout.tp, sequence_parallel, gemm)
    if layout.kv_batch > 1 and tag.split == Split.ATTENTION:
        return dataclasses.replace(s, kv=s.kv * (busiest or 1 / layout.kv_batch))
    return s


def query_head_reads(cfg: TransformerConfig, layout: ServingLayout) -> float:
    """How many times a decode step reads each chip's KV cache: 1 for a kernel that reads a KV head
    once for its whole group of query heads (FlashDecoding, TensorRT-LLM's XQA, vLLM's paged
    attention), the chip's query heads per KV head it holds when the kernel reads it once per query
    head (``layout.kv_reads_per_query_head``: TensorRT-LLM's masked multi-head attention, one thread
    block per query head): (N / tp) / (K / min(tp, K)). A cache without heads (MLA's latent): 1."""
    k, tp = cfg.tp_kv_heads, layout.attention_tp
    if not layout.kv_reads_per_query_head or k is None:
        return 1.0
    return (cfg.n_heads / tp) / (k / min(tp, k))


def busiest_fraction(layout: ServingLayout, batch: int) -> float:
    """The fraction of a batch of ``batch`` sequences on the busiest attention rank or kv_batch shard:
    ceil(batch / ways) / batch (one prompt runs on one rank)."""
    ways = layout.attn_dp * layout.kv_batch
    return -(-batch // ways) / batch


def op_group(tag: OpTag) -> str:
    """The GROUPS entry an op is timed in: weight matmuls, the attention core and the cache
    writes, everything else (elementwise ops and lookups)."""
    if tag.category == "matmul":
        return "matmul"
    return "attention" if tag.category in ("attention", "io") else "elementwise"


# ---------------------------------------------------------------- memory


def weights_per_chip_bytes(cfg: TransformerConfig, layout: ServingLayout, weight_dtype: str) -> float:
    """Stored weights on the busiest chip: each parameter / its TP share (``share``), layers / pp;
    with pp > 1 the first or last stage also holds the embedding or the output head (the
    tables: lookups and matmuls outside the layers)."""
    layers = outside = 0.0
    edge = []
    tree = param_tree(cfg)
    for top in tree.children:
        for leaf in top.leaves():
            assert leaf.tag is not None  # param_tree tags every leaf
            b = leaf.params * layout_share(leaf.tag, cfg, layout).weights * dtype_bytes(weight_dtype)
            if top.children:  # the layers
                layers += b
            elif leaf.tag.category in ("lookup", "matmul"):
                edge.append(b)
            else:
                outside += b
    ends = max(edge, default=0.0) if layout.pp > 1 else sum(edge)
    return layers / layout.pp + ends + outside


def kv_cache_per_chip_bytes(
    cfg: TransformerConfig, layout: ServingLayout, batch: int, context_len: int, kv_dtype: str
) -> float:
    """KV cache of ``batch`` sequences at ``context_len`` on one chip: / (``kv_split`` x pp); a
    fixed-shape cache (``layout.static_cache_len``) holds that many positions per sequence whatever
    its context."""
    positions = layout.static_cache_len or context_len
    return kv_cache_bytes(cfg, batch, positions, kv_dtype) / (kv_split(cfg, layout) * layout.pp)


@dataclass(frozen=True)
class ChipMemory:
    weights_bytes: float
    kv_cache_bytes: float
    capacity_bytes: float
    usable_bytes: float

    @property
    def total_bytes(self) -> float:
        return self.weights_bytes + self.kv_cache_bytes

    @property
    def fits(self) -> bool:
        return self.total_bytes <= self.usable_bytes


def chip_memory(
    cfg: TransformerConfig,
    chip: Chip,
    layout: ServingLayout,
    batch: int,
    context_len: int,
    dtypes: Dtypes,
    eff: Efficiency,
) -> ChipMemory:
    return ChipMemory(
        weights_per_chip_bytes(cfg, layout, dtypes.weights),
        kv_cache_per_chip_bytes(cfg, layout, batch, context_len, dtypes.kv_cache),
        chip.hbm_capacity_bytes,
        chip.hbm_capacity_bytes * eff.usable_hbm_fraction,
    )


def max_batch(
    cfg: TransformerConfig,
    chip: Chip,
    layout: ServingLayout,
    context_len: int,
    dtypes: Dtypes,
    eff: Efficiency,
) -> int:
    """Largest batch per replica (a multiple of ``layout.batch_unit``: pp, times attn_dp or kv_batch)
    whose cache at ``context_len`` fits beside the weights in the usable HBM; 0 when not even one
    unit fits."""
    mem = chip_memory(cfg, chip, layout, 1, context_len, dtypes, eff)
    free = mem.usable_bytes - mem.weights_bytes
    if free <= 0 or mem.kv_cache_bytes <= 0:
        return 0
    b = int(free // mem.kv_cache_bytes)
    return b - b % layout.batch_unit
