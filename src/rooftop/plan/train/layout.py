"""Parallelism: validated degrees of each strategy, and their mesh axes.

Degrees multiply to the chip count: ``dp * fsdp * pp * cp * tp = chips``. Expert
parallelism reuses the data axes (``ep`` divides ``dp * fsdp``), as in GShard / DeepSpeed-MoE
/ Megatron-Core, so it adds no factor. Axes are laid on the topology outermost first in the
order dp, pp, fsdp, cp, tp: tensor parallelism innermost (the NVLink domain on GPUs, one
torus axis on TPUs), data parallelism outermost (DCN between TPU slices, InfiniBand on GPUs).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from functools import lru_cache

from rooftop.errors import InvalidConfigError, shown
from rooftop.model.activations import REMAT_POLICIES
from rooftop.model.config import TransformerConfig
from rooftop.units import divisors, plural

AXIS_ORDER = ("dp", "pp", "fsdp", "cp", "tp")
ZERO_STAGES = (0, 1, 2)
OFFLOADS = ("none", "optimizer", "params")
SCHEDULES = ("1f1b", "interleaved")


class Label(str):
    """A layout's label ("dp=8 tp=8 mb=4 remat=none"): a string, read as ``par.label`` like the JSON's
    ``parallelism.label`` key, that can also be called, ``par.label()``, as the method of rooftop 0.1 was."""

    __slots__ = ()

    def __call__(self) -> str:
        return str(self)


@dataclass(frozen=True)
class Parallelism:
    """One training layout.

    ``fsdp``: ZeRO-3 degree (parameters, gradients and optimizer state sharded over it).
    ``zero_stage``: what the plain ``dp`` axis shards (0 nothing, 1 optimizer state, 2 + gradients,
    3 + parameters); stage 3 over dp is what fsdp means, so ``zero_stage`` applies to dp only.
    ``microbatches``: gradient-accumulation steps per replica (also the pipeline's microbatches).
    ``virtual_stages``: interleaved pipeline chunks per stage (Narayanan 2021).
    ``sequence_parallel``: Megatron SP in the norm/dropout regions (Korthikanti 2022).
    ``pipeline_balance``: the pipeline split counts the ops outside the layers (the output head and loss
    on the last stage): the last stage takes fewer layers so that no stage runs longer than it must
    (Llama 3, Dubey 2024, section 3.3.2; Megatron-Core's ``account_for_loss_in_pipeline_split``). Off:
    every stage holds up to ceil(L / pp) layers and the last runs the head on top (Megatron-LM 2021).
    ``fsdp_reshard``: with fsdp > 1, a layer's weights are sharded again after its forward and gathered
    again for its backward (PyTorch FSDP's FULL_SHARD / ``reshard_after_forward=True``, DeepSpeed ZeRO-3,
    XLA's FSDP): two gathers and one gradient reduce-scatter a layer per microbatch, and HBM holds the
    shard plus two gathered layers. Off, they stay gathered for the whole step: one gather a layer per
    step (the first microbatch's forward), the gradients accumulated whole over the microbatches and
    reduce-scattered once (the last microbatch's backward); HBM holds the stage's weights whole, and its
    gradients too when there are several microbatches (fsdp times the shard each: PyTorch's
    SHARD_GRAD_OP / ``reshard_after_forward=False`` with ``no_sync`` accumulation; Llama 3, Dubey 2024
    section 3.3.2: "we do not reshard after forward computation").
    """

    dp: int = 1
    fsdp: int = 1
    tp: int = 1
    pp: int = 1
    ep: int = 1
    cp: int = 1
    microbatches: int = 1
    remat: str = "none"
    zero_stage: int = 0
    offload: str = "none"
    virtual_stages: int = 1
    sequence_parallel: bool = True
    pipeline_balance: bool = False
    fsdp_reshard: bool = True

    def __post_init__(self) -> None:
        for name in ("dp", "fsdp", "tp", "pp", "ep", "cp", "microbatches", "virtual_stages"):
            v = getattr(self, name)
            if not isinstance(v, int) or v < 1:
                raise InvalidConfigError(f"parallelism {name}={shown(v)} must be a positive integer")
        if self.remat not in REMAT_POLICIES:
            raise InvalidConfigError(f"remat={shown(self.remat)} is not a policy (valid: {', '.join(REMAT_POLICIES)})")
        if self.zero_stage not in ZERO_STAGES:
            hint = "; ZeRO-3 shards the parameters too: that is fsdp (use fsdp=N)" if self.zero_stage == 3 else ""
            raise InvalidConfigError(f"zero_stage={self.zero_stage} applies to dp (valid: 0, 1, 2){hint}")
        if self.offload not in OFFLOADS:
            raise InvalidConfigError(f"offload={shown(self.offload)} (valid: {', '.join(OFFLOADS)})")
        if self.virtual_stages > 1 and self.pp == 1:
            raise InvalidConfigError("virtual_stages > 1 needs pipeline parallelism (pp > 1)")

    @property
    def chips(self) -> int:
        return self.dp * self.fsdp * self.pp * self.cp * self.tp

    def with_choices(self, remat: str, zero_stage: int, offload: str) -> Parallelism:
        """This layout with other remat, ZeRO and offload choices, each already validated on a
        layout of the same degrees (what a search does): no dataclasses.replace, no re-validation."""
        out = object.__new__(Parallelism)
        out.__dict__.update(self.__dict__, remat=remat, zero_stage=zero_stage, offload=offload)
        return out

    @property
    def data_degree(self) -> int:
        """Model replicas that see different data: dp x fsdp."""
        return self.dp * self.fsdp

    @property
    def schedule(self) -> str:
        return "interleaved" if self.virtual_stages > 1 else "1f1b"

    def mesh_axes(self) -> dict[str, int]:
        """Named mesh axes outermost first; size-1 axes are left out."""
        sizes = {"dp": self.dp, "pp": self.pp, "fsdp": self.fsdp, "cp": self.cp, "tp": self.tp}
        return {k: v for k, v in sizes.items() if v > 1} or {"dp": 1}

    @property
    def label(self) -> Label:
        """The layout in words: the degrees above 1, the microbatches, then the choices (``Label``)."""
        parts = [f"{k}={getattr(self, k)}" for k in ("dp", "fsdp", "tp", "pp", "ep", "cp") if getattr(self, k) > 1]
        parts.append(f"mb={self.microbatches}")
        if self.virtual_stages > 1:
            parts.append(f"v={self.virtual_stages}")
        if self.zero_stage:
            parts.append(f"zero{self.zero_stage}")
        parts.append(f"remat={self.remat}")
        if self.offload != "none":
            parts.append(f"offload={self.offload}")
        return Label(" ".join(parts))

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def validate(par: Parallelism, cfg: TransformerConfig, chips: int, global_batch: int, seq_len: int) -> None:
    """Raise InvalidConfigError naming the first rule ``par`` breaks for this model and batch."""
    if par.chips != chips:
        raise InvalidConfigError(
            f"dp*fsdp*tp*pp*cp = {par.dp}*{par.fsdp}*{par.tp}*{par.pp}*{par.cp} = {par.chips}, "
            f"not the {plural(chips, 'chip')}"
        )
    cfg.check_heads(par.tp)
    stages, room = par.pp * par.virtual_stages, max_chunks(cfg.n_layers, par.pp, par.pipeline_balance)
    if stages > room:  # uneven stages are allowed: stage_split says which sets the pace
        raise InvalidConfigError(
            f"pp x virtual_stages={stages} exceeds "
            + (f"n_layers + 2={room}: every chunk needs a layer, or the embedding or the head"
               if par.pipeline_balance else f"n_layers={room}: every stage needs at least one layer")
        )  # fmt: skip
    if par.pipeline_balance and not balance_fits(cfg.n_layers, par.pp, par.virtual_stages):
        raise InvalidConfigError(
            f"pipeline_balance with virtual_stages={par.virtual_stages} needs n_layers + 2 = {cfg.n_layers + 2} "
            f"(the embedding and the head a layer each) to split evenly into pp x virtual_stages = {stages} chunks"
        )
    _check_div("cp", par.cp, "seq_len", seq_len)
    if par.cp > 1 and (seq_len // par.cp) % 2:
        raise InvalidConfigError(
            f"cp={par.cp} leaves an odd chunk of {seq_len // par.cp} tokens (ring attention "
            "splits each chunk in two halves to balance causal work)"
        )
    if par.ep > 1:
        if cfg.moe is None:
            raise InvalidConfigError(f"ep={par.ep} needs a mixture-of-experts model; {cfg.name} is dense")
        _check_div("ep", par.ep, "n_experts", cfg.moe.n_experts)
        _check_div("ep", par.ep, "dp*fsdp", par.data_degree)
    if global_batch < par.data_degree:
        raise InvalidConfigError(
            f"dp*fsdp={par.data_degree} replicas exceed the global batch of {plural(global_batch, 'sequence')}: "
            "some replicas would get no data (use tensor, pipeline or context parallelism for the rest)"
        )
    per_replica = replica_batch(global_batch, par)
    if par.microbatches > per_replica:
        raise InvalidConfigError(
            f"{plural(per_replica, 'sequence')} per replica cannot fill {par.microbatches} microbatches (at most "
            f"{per_replica})"
        )
    if par.pp > 1 and par.microbatches < par.pp:
        raise InvalidConfigError(
            f"pp={par.pp} needs at least {par.pp} microbatches to fill the pipeline, got {par.microbatches}"
        )
    if par.virtual_stages > 1 and par.pp == 1:
        raise InvalidConfigError(f"virtual_stages={par.virtual_stages} interleaves pipeline stages: it needs pp > 1")
    if par.virtual_stages > 1 and par.microbatches % par.pp:
        raise InvalidConfigError(
            f"the interleaved schedule (virtual_stages={par.virtual_stages}) sends microbatches round the {par.pp} "
            f"stages in groups of pp: microbatches={par.microbatches} must be a multiple of pp={par.pp}"
        )


def max_chunks(n_layers: int, pp: int, balance: bool) -> int:
    """The most pipeline chunks (pp x virtual stages) ``n_layers`` layers fill: one layer each, and with a
    balanced split (``pipeline_balance``) a chunk each for the embedding and for the head and loss alone
    (Llama 3 section 3.3.2: 126 layers over 16 stages, the first chunk only the embedding, the last only
    the head)."""
    return n_layers + 2 if balance and pp > 1 else n_layers


@dataclass(frozen=True)
class StageSplit:
    """How a layout's layers fall on its pipeline stages: ``last`` on the last stage, which also runs the ops
    outside the layers (embedding, head, loss: counted there, as the embedding's cost is small), and ``most``
    the most on any other stage."""

    last: int
    most: int

    def pace(self, layer_s: float, outside_s: float) -> tuple[int, float]:
        """(layers, 1 or 0: whether it runs the ops outside the layers) of the stage that takes longest, from
        a layer's time and the outside ops' time on one microbatch."""
        if self.last * layer_s + outside_s >= self.most * layer_s:
            return self.last, 1.0
        return self.most, 0.0

    @property
    def held(self) -> int:
        """The most layers any stage holds (memory)."""
        return max(self.last, self.most)


def balance_fits(n_layers: int, pp: int, v: int) -> bool:
    """Whether a balanced split interleaves ``v`` ways: the embedding and the head count as a layer each and
    the n_layers + 2 slots fill the pp x v chunks evenly (Llama 3: 128 slots, 8 chunks of one on 16 stages)."""
    return v == 1 or (n_layers + 2) % (pp * v) == 0


def stage_split(n_layers: int, par: Parallelism, head_layers: float) -> StageSplit:
    """The stages' layers under ``par`` (``head_layers``: the outside ops' work in layers of average work).
    Even split: up to ceil(L / pp) layers a stage, the last one's counted in full. Balanced
    (``pipeline_balance``), one chunk a stage: the last stage takes the k layers that minimize
    max(k + head_layers, ceil((L - k) / (pp - 1))), the most work any stage then has, the larger k on a
    tie; interleaved: (L + 2) / pp slots a stage (balance_fits), the last stage's head in one of them."""
    return _stage_split(n_layers, par.pp, par.virtual_stages if par.pipeline_balance else 0, head_layers)


@lru_cache(maxsize=4096)
def _stage_split(n_layers: int, pp: int, balanced_v: int, head_layers: float) -> StageSplit:
    """stage_split by its figures (``balanced_v``: the virtual stages of a balanced split, 0 for an even one):
    a search asks it for every layout."""
    if pp == 1:
        return StageSplit(n_layers, 0)
    even = -(-n_layers // pp)
    if not balanced_v:
        return StageSplit(even, even)
    if balanced_v > 1:
        slots = (n_layers + 2) // pp
        return StageSplit(slots - 1, slots)
    k = min(range(even + 1), key=lambda k: (max(k + head_layers, -(-(n_layers - k) // (pp - 1))), -k))
    return StageSplit(k, -(-(n_layers - k) // (pp - 1)))


def microbatch_size(global_batch: int, par: Parallelism) -> int:
    """Sequences per microbatch: ceil(per-replica batch / microbatches); when they do not divide,
    the last microbatch is padded (its idle share is part of the step time)."""
    return -(-replica_batch(global_batch, par) // par.microbatches)


def replica_batch(global_batch: int, par: Parallelism) -> int:
    """Sequences per replica: ceil(global batch / (dp x fsdp)). When the batch does not split
    evenly the fullest replica sets the pace and the others idle part of the step."""
    return -(-global_batch // par.data_degree)


def _check_div(what: str, degree: int, of: str, value: int) -> None:
    if value % degree:
        raise InvalidConfigError(f"{what}={degree} does not divide {of}={value}; valid: {_valid(value, degree)}")


def _valid(value: int, around: int) -> str:
    ds = [d for d in divisors(value) if d <= max(around * 4, 8)]
    return ", ".join(map(str, ds))
