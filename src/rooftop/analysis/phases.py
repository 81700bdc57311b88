"""Serving traces split into prefill and decode by the engine's own step annotations.

Serving engines mark each scheduler step with an annotation whose name says what the step runs:

- SGLang: ``step[EXTEND bs=15 toks=15360]`` (its ForwardMode: EXTEND is a prefill, DECODE a decode step,
  MIXED both; ``bs`` the requests, ``toks`` the tokens of the step);
- ``execute_<tokens>_context_<n>(...)_generation_<m>(...)``: a step of ``n`` requests in their context
  (prefill) phase and ``m`` generating (decode): prefill when ``m`` is 0, decode when ``n`` is 0, else mixed;
- otherwise a name holding the word ``prefill`` or ``decode`` (any case).

In a PyTorch (Kineto) trace only the program's own annotations (``user_annotation``) are read: Python
frames and aten ops named ``is_decode`` or ``mha_batch_prefill`` mark no step.

Each device kernel (or copy) takes the phase of the innermost such annotation that holds its launch (the
runtime event of its correlation; its own start when no launch is recorded); per phase, the kernels, their
time, the span from its first kernel's start to its last one's end, the steps and their tokens (an
annotation inside another of the same phase that also launched kernels, as SGLang's ``step[EXTEND ...]``
inside an ``execute_...`` one, is the same step: counted once, by the outer one). Kernels no annotation
holds are counted apart.

Values only: report/idle.py writes the words.
"""

from __future__ import annotations

import bisect
import re
from collections import defaultdict
from dataclasses import dataclass, field

from rooftop.analysis.idle import kernels_of
from rooftop.analysis.trace.events import Trace
from rooftop.reason_codes import ReasonCode
from rooftop.reasons import Note, Reason

PHASES = ("prefill", "decode", "mixed")
_SGLANG = re.compile(r"\bstep\[(?P<mode>[A-Z_]+)(?:\s+bs=(?P<bs>[0-9]+))?(?:\s+toks=(?P<toks>[0-9]+))?")
_SGLANG_MODES = {"EXTEND": "prefill", "PREFILL": "prefill", "DECODE": "decode", "MIXED": "mixed"}
_EXECUTE = re.compile(r"^execute_(?P<toks>[0-9]+)_context_(?P<ctx>[0-9]+)\b.*_generation_(?P<gen>[0-9]+)")
#: Kineto categories of annotations a program (the engine) makes; Python frames and aten ops are not steps
_ANNOTATION_CATS = ("user_annotation", "gpu_user_annotation")
_WORD = re.compile(r"(?<![A-Za-z])(prefill|decode)(?![A-Za-z])", re.IGNORECASE)


@dataclass(frozen=True)
class Annotation:
    """An engine step annotation: its phase, window, and the requests and tokens it names (None: not said)."""

    name: str
    phase: str
    start_s: float
    end_s: float
    requests: int | None = None
    tokens: int | None = None


@dataclass(frozen=True)
class PhaseTotals:
    phase: str
    steps: int
    requests: int | None
    tokens: int | None
    kernels: int
    kernel_s: float
    span_s: float


@dataclass(frozen=True)
class PhaseReport:
    """The annotations found and the totals per phase; kernels outside every annotation apart."""

    source: str
    annotations: tuple[Annotation, ...]
    phases: tuple[PhaseTotals, ...]
    unassigned_kernels: int
    unassigned_s: float
    notes: tuple[Note, ...] = field(default=())


def annotation_phase(name: str) -> tuple[str, int | None, int | None] | None:
    """(phase, requests, tokens) an annotation's name says, or None (module docstring)."""
    m = _SGLANG.search(name)
    if m and m.group("mode") in _SGLANG_MODES:
        bs, toks = m.group("bs"), m.group("toks")
        return _SGLANG_MODES[m.group("mode")], int(bs) if bs else None, int(toks) if toks else None
    m = _EXECUTE.match(name)
    if m:
        ctx, gen = int(m.group("ctx")), int(m.group("gen"))
        if ctx or gen:
            phase = "prefill" if not gen else "decode" if not ctx else "mixed"
            return phase, ctx + gen, int(m.group("toks"))
    words = {w.lower() for w in _WORD.findall(name)}
    if len(words) == 1:
        return next(iter(words)), None, None
    return ("mixed", None, None) if words else None


def annotations_of(trace: Trace) -> list[Annotation]:
    """The engine step annotations of a trace (host events whose name says a phase), by start."""
    ev = trace.events
    out = []
    for kind, name, start, dur, args in zip(ev.column("kind"), ev.column("name"), ev.column("start_s"),
                                            ev.column("duration_s"), ev.column("args"), strict=True):  # fmt: skip
        if kind in ("kernel", "memcpy") or dur <= 0 or not name or len(name) > 4096:
            continue
        if args and args.get("cat") not in (None, *_ANNOTATION_CATS):  # a Python frame or an op: not a step mark
            continue
        said = annotation_phase(name)
        if said is not None:
            out.append(Annotation(name, said[0], start, start + dur, said[1], said[2]))
    out.sort(key=lambda a: (a.start_s, -a.end_s))
    return out


def _innermost(annotations: list[Annotation], starts: list[float], t: float) -> Annotation | None:
    """The shortest annotation holding time ``t``."""
    best = None
    for a in annotations[: bisect.bisect_right(starts, t)]:
        if a.end_s >= t and (best is None or a.end_s - a.start_s < best.end_s - best.start_s):
            best = a
    return best


def _total(values: list[int | None]) -> int | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def phase_report(trace: Trace) -> PhaseReport:
    """Kernels by the phase of the step that launched them (module docstring)."""
    annotations = annotations_of(trace)
    starts = [a.start_s for a in annotations]
    kernels: dict[str, list[tuple[float, float]]] = defaultdict(list)
    steps: dict[str, set[int]] = defaultdict(set)
    loose, loose_s = 0, 0.0
    for k in kernels_of(trace) if annotations else ():
        owner = _innermost(annotations, starts, k.launch_s if k.launch_s is not None else k.start_s)
        if owner is None:
            loose, loose_s = loose + 1, loose_s + (k.end_s - k.start_s)
            continue
        kernels[owner.phase].append((k.start_s, k.end_s))
        steps[owner.phase].add(id(owner))
    totals = []
    for phase in PHASES:
        owners = [a for a in annotations if a.phase == phase and id(a) in steps[phase]]
        mine = [
            a for a in owners if not any(b is not a and b.start_s <= a.start_s and a.end_s <= b.end_s for b in owners)
        ]  # a step annotated twice (nested) counts once
        ks = kernels.get(phase, [])
        if not ks:
            continue
        req = [a.requests for a in mine]
        toks = [a.tokens for a in mine]
        totals.append(PhaseTotals(phase, len(mine), _total(req), _total(toks), len(ks), sum(e - s for s, e in ks),
                                  max(e for _, e in ks) - min(s for s, _ in ks)))  # fmt: skip
    notes: list[Note] = [] if annotations else [Reason.of(ReasonCode.PHASES_NO_ANNOTATION)]
    return PhaseReport(trace.source, tuple(annotations), tuple(totals), loose, loose_s, tuple(notes))
