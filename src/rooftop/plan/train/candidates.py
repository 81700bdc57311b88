"""The candidate layouts of a training search (plan/train/search.py), as rows of integers.

Enumeration (deterministic, in a fixed order): tensor degree tp (divides the chips, and every
head-sharded block splits over it: model/heads.py), context degree cp (2 from 4K-token
sequences, up to 32 from 16K, or as pinned), pipeline degree pp (at least two layers
per stage), the rest split between fsdp and dp (dp x fsdp may not exceed the batch in
sequences), expert degree ep for MoE models (divides n_experts and the data axes),
microbatch counts (every divisor of the per-replica batch, the powers of two and pp, from pp to
16 x pp: :func:`microbatch_options`), interleaved virtual stages (1, the counts that split the layers
evenly, 2 and 4: :func:`interleave_options`); a pinned count is honoured when the rules allow it.
A candidate is a row (``Row``, fields ``ROW_FIELDS``); the search builds a Parallelism (``row_layout``) only
for the rows it visits, and its bounds read the rows as one array (``row_table``).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Sequence
from functools import lru_cache

import numpy as np

from rooftop.plan.train.layout import Parallelism, balance_fits
from rooftop.plan.train.step import TrainingSetup
from rooftop.units import divisors

#: the most microbatches the search tries per pipeline stage: past it the bubble is under (pp-1)/(16 pp + pp-1)
MAX_MICROBATCHES_PER_STAGE = 16
#: the most virtual stages (interleaved chunks per device) the search tries
MAX_VIRTUAL_STAGES = 8


def microbatch_options(per_replica: int, pp: int) -> list[int]:
    """Microbatch counts the search tries for a replica of ``per_replica`` sequences and ``pp`` stages: every
    count that divides the batch (no padding), the powers of two (the last microbatch padded) and pp itself,
    from pp up to MAX_MICROBATCHES_PER_STAGE x pp (pp = 1: up to the batch)."""
    top = per_replica if pp == 1 else min(per_replica, MAX_MICROBATCHES_PER_STAGE * pp)
    powers = (1 << i for i in range(top.bit_length()))
    return sorted({m for m in (*divisors(per_replica), *powers, pp) if pp <= m <= top})


def interleave_options(n_layers: int, pp: int, balance: bool = False) -> list[int]:
    """Virtual stages per device the search tries: 1, and with pp > 1 every v up to MAX_VIRTUAL_STAGES that
    divides the layers per stage evenly, plus 2 and 4 where each chunk keeps at least 2 layers. A balanced
    split (``balance``) adds the v that its n_layers + 2 slots fill evenly (layout.balance_fits): 126
    layers on 16 stages interleave 8 ways (Llama 3 405B)."""
    if pp == 1:
        return [1]
    even = {v for v in range(2, MAX_VIRTUAL_STAGES + 1) if n_layers % (pp * v) == 0}
    if balance:
        even |= {v for v in range(2, MAX_VIRTUAL_STAGES + 1) if balance_fits(n_layers, pp, v)}
    return sorted({1, *even, *(v for v in (2, 4) if n_layers >= 2 * pp * v)})


@lru_cache(maxsize=4096)
def _microbatch_options(per_replica: int, pp: int) -> tuple[int, ...]:
    return tuple(microbatch_options(per_replica, pp))


@lru_cache(maxsize=4096)
def _interleave_options(n_layers: int, pp: int, balance: bool) -> tuple[int, ...]:
    return tuple(interleave_options(n_layers, pp, balance))


def _pick(options: list[int], fix: dict[str, object], key: str) -> list[int]:
    if key in fix:
        return [int(fix[key])] if int(fix[key]) in options else []  # type: ignore[call-overload]
    return options


def _tp_options(setup: TrainingSetup, chips: int) -> list[int]:
    cfg = setup.cfg
    out = []
    for tp in divisors(chips):
        if tp > 64 or not cfg.heads_fit(tp):  # every head-sharded block splits over it (model/heads.py)
            continue
        out.append(tp)
    return out


#: a candidate layout as a row: (dp, fsdp, tp, pp, ep, cp, microbatches, virtual_stages, pipeline_balance)
Row = tuple[int, int, int, int, int, int, int, int, bool]
ROW_FIELDS = ("dp", "fsdp", "tp", "pp", "ep", "cp", "microbatches", "virtual_stages", "pipeline_balance")


def candidate_layouts(setup: TrainingSetup, fix: dict[str, object]) -> Iterator[Parallelism]:
    """Every layout whose degrees are valid for the model, batch and chip count."""
    template = layout_template(fix)
    return (row_layout(row, template) for row in candidate_rows(setup, fix))


def layout_template(fix: dict[str, object]) -> dict[str, object]:
    """The fields every candidate of a search shares (the rest come from its row)."""
    base = Parallelism(
        sequence_parallel=bool(fix.get("sequence_parallel", True)), fsdp_reshard=bool(fix.get("fsdp_reshard", True))
    )
    return dict(base.__dict__)


def row_layout(row: Row, template: dict[str, object]) -> Parallelism:
    """The Parallelism of a candidate row. The rows hold positive degrees and virtual stages only with pp > 1
    (what Parallelism checks), so it is built without checking again, as Parallelism.with_choices is."""
    out = object.__new__(Parallelism)
    out.__dict__.update(template, **dict(zip(ROW_FIELDS, row, strict=True)), zero_stage=1 if row[0] > 1 else 0)
    return out


def candidate_rows(setup: TrainingSetup, fix: dict[str, object]) -> Iterator[Row]:
    """Every candidate row (the enumeration of the module docstring, in its order)."""
    cfg, chips, batch = setup.cfg, setup.chips, setup.global_batch
    longest = 32 if setup.seq_len >= 16384 else 2 if setup.seq_len >= 4096 else 1  # chunks of >= 2K tokens
    cps = [c for c in (1, 2, 4, 8, 16, 32) if c <= longest and setup.seq_len % (2 * c) == 0]
    combos: dict[tuple[int, int], list[tuple[int, int, bool]]] = {}  # _schedules by (replica batch, pp)
    for tp in _pick(_tp_options(setup, chips), fix, "tp"):
        for cp in _pick([c for c in cps if (chips // tp) % c == 0], fix, "cp"):
            rest = chips // (tp * cp)
            pps = [p for p in divisors(rest) if p == 1 or cfg.n_layers >= 2 * p]
            for pp in _pick(pps, fix, "pp"):
                data = rest // pp
                if data > batch:
                    continue
                for fsdp in _pick(divisors(data), fix, "fsdp"):
                    dp = data // fsdp
                    if "dp" in fix and fix["dp"] != dp:
                        continue
                    yield from _inner(setup, fix, dp, fsdp, tp, pp, cp, combos)


def _inner(
    setup: TrainingSetup,
    fix: dict[str, object],
    dp: int,
    fsdp: int,
    tp: int,
    pp: int,
    cp: int,
    combos: dict[tuple[int, int], list[tuple[int, int, bool]]],
) -> Iterator[Row]:
    cfg = setup.cfg
    eps = [1]
    if cfg.moe is not None:
        eps = [e for e in divisors(math.gcd(cfg.moe.n_experts, dp * fsdp)) if fsdp % e == 0 or dp % e == 0]
    per_replica = -(-setup.global_batch // (dp * fsdp))  # layout.replica_batch
    found = combos.get((per_replica, pp))
    if found is None:
        found = combos[(per_replica, pp)] = _schedules(setup, fix, per_replica, pp)
    for ep in _pick(eps, fix, "ep"):
        for m, v, balanced in found:
            yield (dp, fsdp, tp, pp, ep, cp, m, v, balanced)


def _schedules(setup: TrainingSetup, fix: dict[str, object], per_replica: int, pp: int) -> list[tuple[int, int, bool]]:
    """(microbatches, virtual stages, pipeline balance) of the candidates of a replica of ``per_replica``
    sequences on ``pp`` stages: the same for every layout of a search that has those two (``candidate_rows``
    keeps them)."""
    cfg = setup.cfg
    mbs: Sequence[int] = _microbatch_options(per_replica, pp)
    balance = bool(fix.get("pipeline_balance", True))
    vs: Sequence[int] = _interleave_options(cfg.n_layers, pp, balance)
    if fix.get("pipeline_balance"):  # pinned on: only the interleavings it splits evenly
        vs = [v for v in vs if balance_fits(cfg.n_layers, pp, v)]
    if "microbatches" in fix:  # a pinned count is honoured when the rules allow it (layout.validate says which)
        pinned = int(fix["microbatches"])  # type: ignore[call-overload]
        mbs = [pinned] if max(pp, 1) <= pinned <= per_replica else []
    if "virtual_stages" in fix:
        chunks = int(fix["virtual_stages"])  # type: ignore[call-overload]
        fits = pp * chunks <= cfg.n_layers or (balance and balance_fits(cfg.n_layers, pp, chunks))
        vs = [chunks] if chunks == 1 or (pp > 1 and 1 < chunks and fits) else []
    # pinned on, it stays on (validate names a v it cannot split); else where it splits evenly
    balanced = {v: balance and pp > 1 and ("pipeline_balance" in fix or balance_fits(cfg.n_layers, pp, v)) for v in vs}
    return [(m, v, balanced[v]) for m in mbs for v in vs if not (v > 1 and m % pp)]


def row_table(rows: list[Row]) -> np.ndarray:
    """The candidate rows as an int64 array of ROW_FIELDS columns (read as one flat run: np.array reads each
    tuple on its own, half again as long)."""
    flat = np.fromiter(itertools.chain.from_iterable(rows), dtype=np.int64, count=len(ROW_FIELDS) * len(rows))
    return flat.reshape(len(rows), len(ROW_FIELDS))
