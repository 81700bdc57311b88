"""The ops of a CUDA/HIP graph, read from the trace an engine records while it captures the graph.

A kernel replayed from a graph (``cudaGraphLaunch`` / ``hipGraphLaunch``) has no launching op in the
profile: the ops ran once, at capture. Engines can profile the capture (vLLM and SGLang write a
``capture_traces/`` folder, or a ``*capture*`` trace, beside the profile); in it each kernel launch
(``cudaLaunchKernel`` and kin, whose args name the ``kernel``) sits inside the op that made it, with that
op's Input Dims. Launches are listed in capture order; the k-th replayed kernel of a name in one graph
launch is the k-th captured launch of that name (:func:`Capture.match`).

Only the capture's launch events and shaped ``cpu_op`` spans are read; nothing in the file is executed."""

from __future__ import annotations

import json
import math
import stat
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from rooftop.analysis.torch.launches import innermost
from rooftop.analysis.torch.nested import spans_inside, with_expert_tensors
from rooftop.analysis.trace.chrome_read import open_text
from rooftop.analysis.trace.events import EventTable
from rooftop.analysis.trace.files import stat_mode
from rooftop.analysis.trace.ops import Executions, column_codes, first_codes, floats
from rooftop.errors import InvalidConfigError

_LAUNCH_CATS = ("cuda_runtime", "cuda_driver")
#: the largest capture trace read (its JSON text): a capture profiles one pass of each captured graph
MAX_CAPTURE_CHARS = 2 << 30
#: how a capture trace is found beside a profile: a folder of them, or a file naming itself so
CAPTURE_DIR = "capture_traces"


@dataclass(frozen=True)
class Captured:
    """One captured launch: the kernel's name and the op that launched it (its name and its args), or
    no op (``op`` "")."""

    kernel: str
    op: str
    args: Mapping[str, Any]
    op_id: int = -1  # the op's span, the same for every kernel it launched (-1: no op)


@dataclass(frozen=True)
class Capture:
    """The captured launches of a capture trace, per kernel name in capture order, and its source."""

    source: str
    by_kernel: Mapping[str, Sequence[Captured]]
    launches: int

    def match(self, names: Sequence[str]) -> list[int]:
        """For the kernels of one graph replay (names in the order they ran), the index of each one's
        captured launch among those of its name (-1 when the capture has fewer of that name)."""
        seen: dict[str, int] = defaultdict(int)
        out = []
        for name in names:
            k = seen[name]
            seen[name] = k + 1
            out.append(k if k < len(self.by_kernel.get(name, ())) else -1)
        return out


def capture_files(profile: str | Path) -> list[Path]:
    """Capture traces beside ``profile``: the JSON files of a ``capture_traces`` folder next to it, else
    the JSON files next to it whose name says ``capture``."""
    p = Path(profile)
    folder = p.parent / CAPTURE_DIR if not p.is_dir() else p / CAPTURE_DIR
    here = p.parent if not p.is_dir() else p
    found = traces_in(folder)
    return found or [f for f in traces_in(here) if "capture" in f.name.lower() and f != p]


def traces_in(folder: Path) -> list[Path]:
    """The JSON trace files of a folder, by name (none when it is not a readable folder)."""
    mode = stat_mode(folder)
    if mode is None or not stat.S_ISDIR(mode):
        return []
    try:
        return sorted(f for f in folder.iterdir() if f.name.lower().endswith((".json", ".json.gz")) and f.is_file())
    except OSError:
        return []


def read_capture(path: str | Path) -> Capture:
    """The captured launches of one capture trace (module docstring)."""
    p = Path(path)
    try:
        raw, text, _ = open_text(p)
    except InvalidConfigError as exc:
        raise InvalidConfigError(f"capture trace: {exc}") from exc
    try:
        with raw, text:
            body = text.read(MAX_CAPTURE_CHARS + 1)
    except (OSError, EOFError, UnicodeDecodeError, ValueError) as exc:
        raise InvalidConfigError(f"capture trace {p}: cannot read it ({exc})") from exc
    if len(body) > MAX_CAPTURE_CHARS:
        raise InvalidConfigError(f"capture trace {p}: over {MAX_CAPTURE_CHARS:,} characters")
    try:
        doc = json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise InvalidConfigError(f"capture trace {p}: not JSON ({exc})") from exc
    events = doc.get("traceEvents") if isinstance(doc, dict) else doc
    if not isinstance(events, list):
        raise InvalidConfigError(f"capture trace {p}: no traceEvents array")
    return _captured(str(p), [e for e in events if isinstance(e, dict) and e.get("ph") == "X"])


def _number(value: Any) -> float | None:
    """A finite time of an event (an int of 400 digits, as JSON allows, or a NaN is no time)."""
    if value.__class__ is float:
        return value if math.isfinite(value) else None
    if value.__class__ is int and abs(value) < 1 << 62:
        return float(value)
    return None


def _captured(source: str, events: list[dict[str, Any]]) -> Capture:
    ops: dict[Any, list[tuple[float, float, str, Mapping[str, Any]]]] = defaultdict(list)
    launches: list[tuple[float, Any, str]] = []
    for e in events:
        ts, dur, args = _number(e.get("ts")), _number(e.get("dur")), e.get("args")
        if ts is None or dur is None or not isinstance(args, dict):
            continue
        thread = (str(e.get("pid")), str(e.get("tid")))
        if e.get("cat") == "cpu_op" and "Input Dims" in args:
            ops[thread].append((ts, -dur, str(e.get("name", "")), args))
        elif e.get("cat") in _LAUNCH_CATS and isinstance(args.get("kernel"), str):
            launches.append((ts, thread, args["kernel"]))
    launches.sort(key=lambda x: x[0])
    owner: list[tuple[str, Mapping[str, Any], int]] = [("", {}, -1)] * len(launches)
    base = 0
    for thread, spans in ops.items():
        spans.sort(key=lambda s: (s[0], s[1]))
        mine = [i for i, (_, t, _) in enumerate(launches) if t == thread]
        if not mine:
            base += len(spans)
            continue
        starts = np.array([s[0] for s in spans])
        ends = starts - np.array([s[1] for s in spans])
        found = innermost(starts, ends, np.array([launches[i][0] for i in mine]))
        nested: dict[int, Mapping[str, Any]] = {}
        for i, f in zip(mine, found.tolist(), strict=True):
            if f >= 0:
                if f not in nested:
                    nested[f] = with_expert_tensors(spans[f][2], spans[f][3], partial(spans_inside, spans, ends, f))
                owner[i] = (spans[f][2], nested[f], base + f)
        base += len(spans)
    by_kernel: dict[str, list[Captured]] = defaultdict(list)
    for (_, _, kernel), (op, args, op_id) in zip(launches, owner, strict=True):
        by_kernel[kernel].append(Captured(kernel, op, args, op_id))
    return Capture(source, dict(by_kernel), len(launches))


def attribute(
    names: Sequence[str], starts: np.ndarray, graph: np.ndarray, capture: Capture
) -> tuple[np.ndarray, list[Captured]]:
    """For replayed kernels (their names, start times and graph-launch rows), the execution each belongs
    to (an index into the returned list of captured ops: one per graph launch and captured op; -1 when the
    capture has no op for it)."""
    out = np.full(len(names), -1, np.int64)
    ops: list[Captured] = []
    index: dict[tuple[int, int], int] = {}
    order = np.lexsort((starts, graph))
    bounds = np.flatnonzero(np.diff(graph[order])) + 1
    for part in np.split(order, bounds):
        if not len(part):
            continue
        launch = int(graph[part[0]])
        mine = [names[i] for i in part.tolist()]
        for i, name, k in zip(part.tolist(), mine, capture.match(mine), strict=True):
            if k < 0:
                continue
            c = capture.by_kernel[name][k]
            if c.op_id < 0:
                continue
            at = index.setdefault((launch, c.op_id), len(ops))
            if at == len(ops):
                ops.append(c)
            out[i] = at
    return out, ops


def replay_executions(
    ev: EventTable, rows: np.ndarray, graph: np.ndarray, capture: Capture
) -> tuple[Executions, list[Captured], np.ndarray]:
    """The executions of replayed kernels (``rows``, launched by the graph launches at ``graph``) that the
    capture attributes: one per (graph launch, captured op) on a device, spanning its kernels; the captured
    op of each; and which ``rows`` were attributed (a mask)."""
    names = ev.column("name")
    start, dur = floats(ev.column("start_s")), floats(ev.column("duration_s"))
    device, devices = column_codes(ev, "device")
    run, ops = attribute([names[r] for r in rows.tolist()], start[rows], graph, capture)
    hit = run >= 0
    mine, run = rows[hit], run[hit]
    key, first = first_codes(run * max(len(devices), 1) + device[mine])
    events = np.bincount(key, minlength=len(first))
    begin = np.full(len(first), np.inf)
    end = np.full(len(first), -np.inf)
    np.minimum.at(begin, key, start[mine])
    np.maximum.at(end, key, start[mine] + dur[mine])
    busy = np.bincount(key, weights=dur[mine], minlength=len(first))
    first_rows = mine[first]
    execs = Executions(ev, first_rows, (begin, end, busy), events, (device[first_rows], devices))
    return execs, [ops[int(r)] for r in run[first].tolist()], hit
