"""Profiler traces -> one :class:`~rooftop.analysis.trace.events.Trace`, dispatched on the kind of file.

``load_trace(path)`` reads:

- a JAX profiler log directory (``<logdir>/plugins/profile/<run>/<host>.xplane.pb``, one file per host;
  the newest run unless a run directory is given), or one ``.xplane.pb`` file — read with the protobuf
  runtime as JAX's own ``ProfileData`` reads it (see :mod:`rooftop.analysis.trace.xplane`);
- Chrome / Perfetto trace-event JSON (``*.trace.json.gz``, ``perfetto_trace.json.gz``, ``.json``) written by
  JAX, and PyTorch profiler (Kineto) JSON traces — streamed, never held as text
  (see :mod:`rooftop.analysis.trace.chrome_json`).

Pure functions of a loaded Trace (op executions, per-op groups; steps) are in :mod:`rooftop.analysis.trace.ops`
and :mod:`rooftop.analysis.trace.steps`.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from rooftop.analysis.gcpause import paused_gc
from rooftop.analysis.trace.chrome_json import load_json_trace
from rooftop.analysis.trace.events import ProgressFn, Trace
from rooftop.analysis.trace.files import stat_mode
from rooftop.errors import InvalidConfigError


def load_trace(path: str | Path, progress: ProgressFn | None = None) -> Trace:
    """Load a JAX profiler directory, ``.xplane.pb``, Chrome/Perfetto JSON or Kineto JSON trace."""
    with paused_gc():
        return _load(Path(path), progress)


def _load(p: Path, progress: ProgressFn | None) -> Trace:
    mode = stat_mode(p)
    if mode is None:
        raise InvalidConfigError(f"{p}: no such file or directory; expected a profile directory or trace file")
    if stat.S_ISDIR(mode):
        xplanes, jsons = profile_files(p)
        if xplanes:
            from rooftop.analysis.trace.xplane import load_xplanes  # here: a JSON trace's read never loads it

            return load_xplanes(xplanes, source=str(p), progress=progress)
        if len(jsons) > 1:
            names = ", ".join(j.name for j in jsons[:5]) + (f" and {len(jsons) - 5} more" if len(jsons) > 5 else "")
            raise InvalidConfigError(f"{p}: several JSON traces ({names}); pass one file")
        p = jsons[0]
    name = p.name.lower()
    if name.endswith(".pb"):
        from rooftop.analysis.trace.xplane import load_xplanes

        return load_xplanes([p], source=str(p), progress=progress)
    if name.endswith((".json", ".json.gz", ".gz")):
        return load_json_trace(p, progress=progress)
    raise InvalidConfigError(
        f"{p}: unknown trace file type; expected .xplane.pb, .json, .json.gz or a JAX profiler directory"
    )


class _Listing:
    """The entries of a profile directory that may be read: regular files and directories inside it. A
    symbolic link counts only when it resolves inside the directory given (a link out of it, or to a
    device or a FIFO, is never read); what was passed over is counted for the error message."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self.skipped: set[str] = set()

    def entries(self, directory: Path) -> list[tuple[Path, bool]]:
        """(path, is_dir) of the readable entries of ``directory``, sorted by name; a subdirectory that
        cannot be listed has none (it is counted as passed over), the directory given is an error."""
        try:
            with os.scandir(directory) as it:
                found = list(it)
        except OSError as exc:
            if os.path.realpath(directory) != str(self.root):
                self.skipped.add(str(directory))
                return []
            raise InvalidConfigError(f"{directory}: cannot read the directory ({exc.strerror})") from None
        out = []
        files: set[tuple[int, int]] = set()  # (device, inode) of each file listed
        for entry in sorted(found, key=lambda e: (e.is_symlink(), e.name)):  # a file before a link to it
            try:
                link = entry.is_symlink()
                if link and not self.inside(Path(entry.path)):
                    self.skipped.add(entry.path)
                    continue
                st = os.stat(entry.path)
            except (OSError, ValueError):
                self.skipped.add(entry.path)
                continue
            if stat.S_ISREG(st.st_mode) and (st.st_dev, st.st_ino) in files:
                continue  # a second name (a link) of a file listed: one host, read once
            if stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode):
                if stat.S_ISREG(st.st_mode):
                    files.add((st.st_dev, st.st_ino))
                out.append((Path(entry.path), stat.S_ISDIR(st.st_mode)))
            else:
                self.skipped.add(entry.path)
        return sorted(out, key=lambda e: e[0].name)

    def inside(self, path: Path) -> bool:
        try:
            return path.resolve().is_relative_to(self.root)
        except (OSError, RuntimeError, ValueError):  # a loop of links
            return False

    def files(self, directory: Path, *suffixes: str) -> list[Path]:
        return [p for p, is_dir in self.entries(directory) if not is_dir and p.name.lower().endswith(suffixes)]

    def subdirs(self, directory: Path) -> list[Path]:
        return [p for p, is_dir in self.entries(directory) if is_dir]


def profile_files(directory: Path) -> tuple[list[Path], list[Path]]:
    """The ``*.xplane.pb`` files of the run to load, or the JSON traces, under ``directory``."""
    listing = _Listing(directory)
    for run in _candidate_runs(directory, listing):
        xplanes = [f for f in listing.files(run, ".xplane.pb") if f.name.endswith(".xplane.pb")]
        if xplanes:
            return xplanes, []
        jsons = listing.files(run, ".json", ".json.gz")
        preferred = [f for f in jsons if f.name.endswith(".trace.json.gz") and not f.name.startswith("perfetto")]
        if preferred or jsons:
            return [], preferred[:1] if len(preferred) == 1 else jsons
    n = len(listing.skipped)
    skipped = (
        f" (not read: {n} {'entry that is' if n == 1 else 'entries that are'} not a regular file or directory inside it"
        ": a link out of it, a device, a FIFO)"
        if n
        else ""
    )
    raise InvalidConfigError(
        f"{directory}: no profile found{skipped}; expected <logdir>/plugins/profile/<run>/<host>.xplane.pb, "
        "a run directory with .xplane.pb files, or a directory with one .json/.json.gz trace"
    )


def _candidate_runs(directory: Path, listing: _Listing) -> list[Path]:
    """``directory`` itself, then the newest run under ``plugins/profile`` (or under ``directory``)."""
    runs: list[Path] = [directory]
    plugins = directory / "plugins" / "profile"
    for base in (plugins, directory):
        if base is plugins and not (os.path.isdir(plugins) and listing.inside(plugins)):
            continue
        subdirs = [
            d for d in listing.subdirs(base) if any(f.name.endswith(".xplane.pb") for f in listing.files(d, ".pb"))
        ]
        subdirs.sort(key=lambda d: (d.name, _mtime(d)), reverse=True)
        runs.extend(subdirs[:1])
    return runs


def _mtime(path: Path) -> float:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return 0.0
