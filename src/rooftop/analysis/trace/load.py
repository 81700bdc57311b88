"""Profiler traces -> one :class:`~rooftop.analysis.trace.events.Trace`, dispatched on the kind of file.

``load_trace(path)`` reads:

- a JAX profiler log directory (``<logdir>/plugins/profile/<run>/<host>.xplane.pb``, one file per host;
  the newest run unless a run directory is given), or one ``.xplane.pb`` file — read with JAX's own
  ``jax.profiler.ProfileData`` (see :mod:`rooftop.analysis.trace.xplane`);
- Chrome / Perfetto trace-event JSON (``*.trace.json.gz``, ``perfetto_trace.json.gz``, ``.json``) written by
  JAX, and PyTorch profiler (Kineto) JSON traces — streamed, never held as text
  (see :mod:`rooftop.analysis.trace.chrome_json`).

Pure functions of a loaded Trace (op executions, per-op groups, steps) are in :mod:`rooftop.analysis.trace.ops`.
"""

from __future__ import annotations

from pathlib import Path

from rooftop.analysis.gcpause import paused_gc
from rooftop.analysis.trace.chrome_json import load_json_trace
from rooftop.analysis.trace.events import ProgressFn, Trace
from rooftop.analysis.trace.xplane import load_xplanes
from rooftop.errors import InvalidConfigError


def load_trace(path: str | Path, progress: ProgressFn | None = None) -> Trace:
    """Load a JAX profiler directory, ``.xplane.pb``, Chrome/Perfetto JSON or Kineto JSON trace."""
    with paused_gc():
        return _load(Path(path), progress)


def _load(p: Path, progress: ProgressFn | None) -> Trace:
    if not p.exists():
        raise InvalidConfigError(f"{p}: no such file or directory; expected a profile directory or trace file")
    if p.is_dir():
        xplanes, jsons = _profile_files(p)
        if xplanes:
            return load_xplanes(xplanes, source=str(p), progress=progress)
        if len(jsons) > 1:
            names = ", ".join(j.name for j in jsons)
            raise InvalidConfigError(f"{p}: several JSON traces ({names}); pass one file")
        p = jsons[0]
    name = p.name.lower()
    if name.endswith(".pb"):
        return load_xplanes([p], source=str(p), progress=progress)
    if name.endswith((".json", ".json.gz", ".gz")):
        return load_json_trace(p, progress=progress)
    raise InvalidConfigError(
        f"{p}: unknown trace file type; expected .xplane.pb, .json, .json.gz or a JAX profiler directory"
    )


def _profile_files(directory: Path) -> tuple[list[Path], list[Path]]:
    """The ``*.xplane.pb`` files of the run to load, or the JSON traces, under ``directory``."""
    for run in _candidate_runs(directory):
        xplanes = sorted(run.glob("*.xplane.pb"))
        if xplanes:
            return xplanes, []
        jsons = sorted(f for f in run.iterdir() if f.is_file() and f.name.lower().endswith((".json", ".json.gz")))
        preferred = [f for f in jsons if f.name.endswith(".trace.json.gz") and not f.name.startswith("perfetto")]
        if preferred or jsons:
            return [], preferred[:1] if len(preferred) == 1 else jsons
    raise InvalidConfigError(
        f"{directory}: no profile found; expected <logdir>/plugins/profile/<run>/<host>.xplane.pb, "
        "a run directory with .xplane.pb files, or a directory with one .json/.json.gz trace"
    )


def _candidate_runs(directory: Path) -> list[Path]:
    """``directory`` itself, then the newest run under ``plugins/profile`` (or under ``directory``)."""
    runs: list[Path] = [directory]
    for base in (directory / "plugins" / "profile", directory):
        if base.is_dir():
            subdirs = [d for d in base.iterdir() if d.is_dir() and any(d.glob("*.xplane.pb"))]
            subdirs.sort(key=lambda d: (d.name, d.stat().st_mtime), reverse=True)
            runs.extend(subdirs[:1])
    return runs
