"""The fuzz oracle: run one case (a command line and the files it reads) and say how it ended.

A case passes when ``rooftop`` exits 0 (JSON output strict and without negative times, every file it
was asked to write complete, nothing else written, nothing on stderr) or exits 2 with exactly one line
on stderr. Everything else is a finding:

- ``internal``: exit 1 "internal error" (or an exception escaping ``main``); rerun with ``--debug`` to
  name the exception and the innermost rooftop frame, the key findings are grouped by;
- ``hang``: still running after the time limit (a watchdog interrupts Python code and names the frame
  it was in; a case run as a process is killed);
- ``multiline``: exit 2 with more than one line on stderr (C++ logging included: fd 2 is captured);
- ``noise``: exit 0 with text on stderr (Python warnings, C++ logging);
- ``bad_output``: exit 0 but the JSON is not strict JSON or has a negative or NaN time, markup from an
  input was rendered (not shown as text), a file was written with the wrong mode or not at all, or the
  case is one the command must refuse (``Case.refuse``);
- ``stray_file``: a file left behind that the command was not asked to write (a temporary file, a
  plot written by a failing command) or a zero-byte output;
- ``long_error``: a one-line error longer than :data:`LONG_ERROR` characters (an input echoed whole).

Cases run in-process (fast: ``rooftop.cli.main.main(argv)`` with stdout/stderr captured) unless they
are marked ``process`` (inputs that may block inside C code, such as a FIFO): those run as
``python -m rooftop.cli.main``. Each in-process case runs under an address-space cap, so that an input
that asks for terabytes fails with MemoryError instead of taking the machine down.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: per-case time limit, seconds (the issue's "no hang over 10 s")
TIME_LIMIT_S = 10.0
#: a one-line error longer than this echoes its input whole (errors.shown cuts values to ~60 chars)
LONG_ERROR = 1000
#: address space a case may add to the process (MemoryError beyond it)
MEMORY_CAP_BYTES = 3 << 30
#: rich markup a fuzzed name may carry: rendered, it would blink; a table must print it as it is
MARKUP = "[red on white blink]ALERT[/]"
#: JSON keys that hold what a profile measured: never NaN or infinite (null in the JSON)
MEASURED = ("measured_s", "total_s", "duration_s", "busy_s")
#: kinds of outcome that are findings; ``long_error`` is reported but does not fail the CI slice
FAILURES = ("internal", "hang", "multiline", "noise", "bad_output", "stray_file")
SOFT_FAILURES = ("long_error",)

_SRC = Path(__file__).resolve().parents[2] / "src"


class Hang(BaseException):
    """Raised by the watchdog in the main thread when a case runs past its limit (a BaseException, so
    that ``main``'s ``except Exception`` does not turn it into an internal error)."""


@dataclass(frozen=True)
class Special:
    """A file that is not plain content: ``dir``, ``fifo`` or ``symlink`` (to ``arg``)."""

    kind: str
    arg: str = ""


@dataclass(repr=False)
class Case:
    """One input: a command line (``{W}`` stands for the case's own directory) and the files it reads.

    ``outputs`` are the files the command is asked to write (a plot, a chip file); ``compress`` names
    files gzip-compressed when written (their content is kept uncompressed, for reduction);
    ``main_file`` is the file the reducer shrinks line by line; ``lines`` counts HLO lines."""

    target: str
    argv: list[str]
    files: dict[str, bytes | Special] = field(default_factory=dict)
    outputs: tuple[str, ...] = ()
    label: str = ""
    process: bool = False
    compress: tuple[str, ...] = ()
    main_file: str | None = None
    lines: int = 0
    seed: int | None = None
    refuse: str = ""

    def has_markup(self) -> bool:
        """Whether an input carries :data:`MARKUP` (a table must show it as text, not render it)."""
        return any(MARKUP in a for a in self.argv) or any(
            MARKUP.encode() in v for v in self.files.values() if isinstance(v, bytes)
        )

    def __repr__(self) -> str:
        return f"<Case {self.describe(120)}>"

    def size(self) -> int:
        return sum(len(a) for a in self.argv) + sum(len(v) for v in self.files.values() if isinstance(v, bytes))

    def describe(self, limit: int = 400) -> str:
        """The command line, then each file (cut to ``limit`` characters)."""
        argv = ", ".join(_short(repr(a), 120) for a in self.argv)
        parts = [f"[{self.target}] {_short(self.label, limit)}".rstrip(), f"argv: [{argv}]"]
        for name, value in self.files.items():
            if isinstance(value, Special):
                parts.append(f"file {name}: <{value.kind} {value.arg}>".rstrip())
            else:
                text = value.decode("utf-8", "backslashreplace")
                parts.append(f"file {name} ({len(value)} bytes): {_short(text, limit)}")
        return "\n  ".join(parts)


@dataclass(frozen=True)
class Outcome:
    """How a case ended: ``kind`` (``pass``, ``error`` = a RooftopError as one line, or one of
    :data:`FAILURES`), what was said (``detail``), where (``where``: ``ExcType @ rooftop/file.py:LINE
    in func`` for internal errors and hangs) and the time it took."""

    kind: str
    detail: str = ""
    where: str = ""
    seconds: float = 0.0

    @property
    def failed(self) -> bool:
        return self.kind in FAILURES

    def key(self) -> str:
        """The group of a finding: its kind and where it happened (or, without a frame, its text)."""
        if self.where:
            return f"{self.kind}: {self.where}"
        return f"{self.kind}: {_normalise(self.detail)}"


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else f"{text[: limit - 40]}...{text[-30:]} ({len(text)} chars)"


def _log_line(text: str) -> str:
    """The first line of ``text`` without a C++ log prefix (``E1126 12:10:16.268211   24180 file.cc:73] ``)."""
    first = text.strip().splitlines()[0] if text.strip() else ""
    return _normalise(re.sub(r"^[EWIF]\d{4} [\d:.]+\s+\d+ ", "", first))


def _normalise(text: str) -> str:
    """A message with its numbers and paths masked, so similar messages group together."""
    text = re.sub(r"/[^\s:]*rooftop-fuzz-[^/\s:]+", "{W}", text)
    text = re.sub(r"'[^']{40,}'", "'...'", text)
    return re.sub(r"\d+", "N", text)[:160]


# ----------------------------------------------------------------------------------------------------
# guards: time limit, memory cap, captured streams


@contextlib.contextmanager
def watchdog(seconds: float) -> Iterator[None]:
    """Raise :class:`Hang` in the main thread after ``seconds`` (no-op outside the main thread)."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        yield
        return

    def fire(signum: int, frame: Any) -> None:
        raise Hang(f"still running after {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@contextlib.contextmanager
def memory_cap(extra_bytes: int = MEMORY_CAP_BYTES) -> Iterator[None]:
    """Limit the address space to what the process uses now plus ``extra_bytes`` (Linux)."""
    try:
        import resource

        with open("/proc/self/statm") as fh:
            used = int(fh.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    except (ImportError, OSError, ValueError):
        yield
        return
    limit = used + extra_bytes
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


@contextlib.contextmanager
def fd_capture() -> Iterator[list[str]]:
    """Send file descriptors 1 and 2 to a file for the duration; the list receives what was written
    there (C and C++ code writes to them directly, past sys.stdout and sys.stderr)."""
    result: list[str] = []
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        with contextlib.suppress(Exception):
            stream.flush()
    saved = [os.dup(1), os.dup(2)]
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 1)
        os.dup2(tmp.fileno(), 2)
        try:
            yield result
        finally:
            for stream in (sys.__stdout__, sys.__stderr__):
                with contextlib.suppress(Exception):
                    stream.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)
            tmp.seek(0)
            result.append(tmp.read().decode("utf-8", "replace"))


def rooftop_frame(tb: Any) -> str:
    """``rooftop/file.py:LINE in func`` of the innermost rooftop frame of a traceback ('' if none)."""
    frames = traceback.extract_tb(tb) if not isinstance(tb, list) else tb
    for frame in reversed(frames):
        path = frame.filename.replace("\\", "/")
        if "/rooftop/" in path and "/tests/" not in path and "/benchmarks/" not in path:
            rel = path[path.rindex("/rooftop/") + 1 :]
            return f"{rel}:{frame.lineno} in {frame.name}"
    return ""


def _exception_where(exc: BaseException) -> str:
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename != __file__]  # not the watchdog
    inner = frames[-1] if frames else None
    where = rooftop_frame(frames)
    outside = ""
    if inner is not None and "/rooftop/" not in inner.filename.replace("\\", "/"):
        outside = f" (raised in {Path(inner.filename).name}:{inner.lineno} {inner.name})"
    return f"{type(exc).__name__} @ {where or '?'}{outside}"


# ----------------------------------------------------------------------------------------------------
# running a case


def materialize(case: Case, work: Path) -> None:
    """Write the case's files into ``work``."""
    import gzip

    for name, value in case.files.items():
        path = work / name.replace("{PID}", str(os.getpid()))
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(value, Special):
            if value.kind == "dir":
                path.mkdir(exist_ok=True)
            elif value.kind == "fifo":
                os.mkfifo(path)
            elif value.kind == "symlink":
                os.symlink(value.arg.replace("{W}", str(work)), path)
            continue
        data = gzip.compress(value, mtime=0) if name in case.compress else value
        path.write_bytes(data)


def _snapshot(work: Path) -> dict[str, tuple[int, int]]:
    out = {}
    for root, dirs, files in os.walk(work):
        for name in files + dirs:
            path = Path(root) / name
            with contextlib.suppress(OSError):
                st = path.lstat()
                out[str(path.relative_to(work))] = (st.st_size, st.st_mtime_ns)
    return out


def warm_up() -> None:
    """Import what commands import lazily (matplotlib, rich, JAX's profiler reader), so that no case's time
    limit falls inside an import (an import cut short leaves its package half set up for later cases)."""
    import matplotlib.pyplot  # noqa: F401
    import rich.console  # noqa: F401

    import rooftop.cli.main  # noqa: F401

    with contextlib.suppress(ImportError):
        import jax.profiler  # noqa: F401
        from jaxlib import xla_client  # noqa: F401


def run_case(case: Case, time_limit: float = TIME_LIMIT_S) -> Outcome:
    """Run ``case`` in a fresh directory and judge the result (see the module docstring)."""
    with tempfile.TemporaryDirectory(prefix="rooftop-fuzz-") as tmp:
        work = Path(tmp)
        materialize(case, work)
        before = _snapshot(work)
        argv = [a.replace("{W}", tmp) for a in case.argv]
        t0 = time.perf_counter()
        cwd = os.getcwd()
        os.chdir(work)  # a relative output path lands here, not in the caller's directory
        try:
            if case.process:
                outcome = _run_process(argv, time_limit, case.has_markup())
            else:
                outcome = _run_inprocess(argv, time_limit, case.has_markup())
        finally:
            os.chdir(cwd)
        seconds = time.perf_counter() - t0
        if not outcome.failed:
            outcome = _check_files(case, work, before, outcome) or outcome
        if outcome.kind == "pass" and case.refuse:
            outcome = Outcome("bad_output", f"exit 0, but {case.refuse}", case.refuse)
        return Outcome(outcome.kind, outcome.detail, outcome.where, seconds)


def _run_inprocess(argv: list[str], time_limit: float, markup: bool = False) -> Outcome:
    from rooftop.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    code: Any = None
    escaped: BaseException | None = None
    with fd_capture() as raw, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        for quiet in (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning):
            warnings.simplefilter("ignore", quiet)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                with memory_cap(), watchdog(time_limit):
                    code = main(argv)
            except SystemExit as exc:
                code = exc.code
            except BaseException as exc:  # Hang, or anything escaping main
                escaped = exc
    if isinstance(escaped, KeyboardInterrupt):
        raise escaped
    if isinstance(escaped, Hang):
        return Outcome("hang", str(escaped), _exception_where(escaped))
    if escaped is not None:
        return Outcome(
            "internal", f"escaped main: {type(escaped).__name__}: {escaped}"[:300], _exception_where(escaped)
        )
    stray = "".join(raw)
    messages = [f"{w.category.__name__}: {w.message} ({Path(w.filename).name}:{w.lineno})" for w in caught]
    debug = lambda: _debug_where(argv, time_limit)
    return judge(argv, code, out.getvalue(), err.getvalue(), stray, messages, debug, markup)


def judge(
    argv: list[str],
    code: Any,
    stdout: str,
    stderr: str,
    raw_stderr: str = "",
    warned: list[str] | None = None,
    debug: Callable[[], str] | None = None,
    markup: bool = False,
) -> Outcome:
    """The outcome of a finished run from its exit code and streams (see the module docstring)."""
    code = 0 if code is None else code
    if not isinstance(code, int):  # SystemExit("message")
        return Outcome("internal", f"exit with a message: {str(code)[:200]}")
    if code == 2:
        text = stderr + raw_stderr
        lines = text.splitlines()
        if len(lines) != 1 or not text.endswith("\n") or "Traceback" in text:
            where = f"C++ log on fd 2: {_log_line(raw_stderr)}" if raw_stderr.strip() else ""
            return Outcome("multiline", f"{len(lines)} lines: {_short(text, 300)}", where)
        if "internal error" in text:
            return Outcome("internal", text.strip()[:300], debug() if debug else "")
        if len(lines[0]) > LONG_ERROR:
            return Outcome("long_error", f"{len(lines[0])} chars: {_short(lines[0], 200)}")
        return Outcome("error", lines[0])
    if code == 1 and "internal error" in stderr:
        return Outcome("internal", stderr.strip()[:300], debug() if debug else "")
    if code != 0:
        return Outcome("internal", f"exit {code}: {_short(stderr + raw_stderr, 300)}")
    if stderr or raw_stderr.strip() or warned:
        if warned:
            return Outcome(
                "noise", _short("; ".join(warned), 300), "warning " + warned[0].rsplit(" (", 1)[-1].rstrip(")")
            )
        text = stderr + raw_stderr
        return Outcome("noise", _short(text, 300), "stderr: " + _log_line(text))
    asked_help = any(a in ("-h", "--help", "--version") or a.startswith("--he") for a in argv)
    if "--json" in argv and not asked_help:
        problem = _json_problem(stdout)
        if problem:
            first = problem.split(": ", 1)[-1].split(", ")[0].split("=")[0]
            said = "negative " if problem.startswith("negative") else "null " if "null" in problem else ""
            return Outcome("bad_output", problem, said + re.sub(r"\[\d+\]", "[N]", first) if said else "")
    if markup and "--json" not in argv and re.search(r"(?<!blink\])ALERT", stdout):
        return Outcome("bad_output", f"markup {MARKUP!r} from an input was rendered, not shown", "markup rendered")
    return Outcome("pass")


def _json_problem(text: str) -> str:
    def reject(name: str) -> Any:
        raise ValueError(f"non-standard JSON constant {name}")

    try:
        data = json.loads(text, parse_constant=reject)
    except ValueError as exc:
        return f"--json output is not strict JSON: {exc}"
    bad: list[str] = []
    unknown: list[str] = []

    def walk(obj: Any, path: str) -> None:
        if isinstance(obj, dict):
            if obj.get("kind") == "hidden":  # a term that subtracts communication hidden behind compute
                return
            for k, v in obj.items():
                if isinstance(v, int | float) and not isinstance(v, bool) and v < 0:
                    # memory.timeline[].time_s is the trace's own timestamp (docs/json.md), on its clock
                    stamp = k == "time_s" and path.startswith(".memory.timeline")
                    # a diff's deltas (b - a) and what they leave unexplained are signed (docs/json.md)
                    signed = k.startswith("delta_") or k.endswith("delta_s") or k == "unexplained_s"
                    if (k.endswith("_s") and k != "lost_s" and not stamp and not signed) or k in (
                        "flops",
                        "bytes",
                        "count",
                    ):
                        bad.append(f"{path}.{k}={v}")
                if v is None and k in MEASURED:  # NaN or inf, written as null
                    unknown.append(f"{path}.{k}")
                walk(v, f"{path}.{k}")
        elif isinstance(obj, list):
            for i, v in enumerate(obj[:200]):
                walk(v, f"{path}[{i}]")

    walk(data, "")
    if bad:
        return f"negative time or count in --json output: {', '.join(bad[:3])}"
    if unknown:
        return f"measured time NaN or infinite (null) in --json output: {', '.join(unknown[:3])}"
    return ""


def _debug_where(argv: list[str], time_limit: float) -> str:
    """Rerun with ``--debug`` (the CLI then raises) and name the exception and its rooftop frame."""
    from rooftop.cli.main import main

    try:
        with fd_capture(), warnings.catch_warnings(), memory_cap(), watchdog(time_limit):
            warnings.simplefilter("ignore")
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                main([*argv, "--debug"])
    except Hang:
        return "Hang on rerun"
    except SystemExit:
        return ""
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt):
            raise
        return _exception_where(exc)
    return ""


def _last_values(argv: tuple[str, ...] | list[str]) -> set[str]:
    """The value each option ends up with (the last of ``--flag V`` / ``--flag=V``), and every positional."""
    last: dict[str, str] = {}
    values: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg.startswith("--") and "=" in arg:
            flag, _, value = arg.partition("=")
            last[flag] = value
        elif arg.startswith("--") and i + 1 < len(argv) and not argv[i + 1].startswith("--"):
            last[arg] = argv[i + 1]
            i += 1
        else:
            values.append(arg)
        i += 1
    return {*last.values(), *values}


def _check_files(case: Case, work: Path, before: dict[str, tuple[int, int]], outcome: Outcome) -> Outcome | None:
    """Files the run wrote: outputs complete, with the umask's mode, nothing else, none on failure."""
    after = _snapshot(work)
    outputs = {o.replace("{W}/", "") for o in case.outputs}
    changed = {k for k, v in after.items() if before.get(k) != v}
    for name in sorted(changed - outputs):
        if any(name.startswith(o + "/") or o.startswith(name + "/") for o in outputs):
            continue
        return Outcome(
            "stray_file", f"left {name!r} ({after[name][0]} bytes) after {outcome.kind}", "file not asked for"
        )
    umask = os.umask(0)
    os.umask(umask)
    for name in sorted(outputs & changed):
        path = work / name
        if path.is_dir():
            continue
        size = after[name][0]
        if outcome.kind != "pass":
            return Outcome(
                "stray_file",
                f"{name!r} ({size} bytes) written by a failed run: {outcome.detail}",
                "output of a failed run",
            )
        if size == 0:
            return Outcome("stray_file", f"{name!r} written with 0 bytes", "empty output")
        mode = path.stat().st_mode & 0o777
        if mode != 0o666 & ~umask:
            said = f"{name!r} written with mode {mode:04o} (umask {umask:04o} gives {0o666 & ~umask:04o})"
            return Outcome("bad_output", said, f"output mode {mode:04o}")
    if outcome.kind == "pass":
        chosen = _last_values(case.argv)
        for name in case.outputs:
            if name not in chosen:  # a flag given twice: argparse keeps the last value, the first writes nothing
                continue
            rel = name.replace("{W}/", "")
            if rel not in changed and (not rel.strip() or not (work / rel).is_dir()):
                return Outcome(
                    "bad_output", f"exit 0 but the requested output {rel!r} was not written", "output missing"
                )
    return None


def _dumped_frame(stderr: bytes) -> str:
    """The innermost rooftop frame of the main thread in a faulthandler dump (most recent call first)."""
    text = stderr.decode("utf-8", "replace")
    main = text.split("Current thread", 1)[-1] if "Current thread" in text else text
    for m in re.finditer(r'File "([^"]*/rooftop/[^"]*)", line (\d+) in (\S+)', main):
        path = m.group(1)
        return f"{path[path.rindex('/rooftop/') + 1 :]}:{m.group(2)} in {m.group(3)} (process)"
    return "? (process)"


def _run_process(argv: list[str], time_limit: float, markup: bool = False) -> Outcome:
    """Run as ``python -m rooftop.cli.main`` (for inputs that may block inside C code)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(_SRC), env.get("PYTHONPATH", "")) if p)
    cmd = [sys.executable, "-X", "faulthandler", "-m", "rooftop.cli.main", *argv]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=time_limit)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGABRT)  # faulthandler prints where each thread is
        try:
            _, err = proc.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            err = b""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return Outcome("hang", f"process still running after {time_limit:g} s", "Hang @ " + _dumped_frame(err))
    stdout, stderr = out.decode("utf-8", "replace"), err.decode("utf-8", "replace")

    def debug() -> str:
        try:
            res = subprocess.run([*cmd, "--debug"], capture_output=True, timeout=time_limit, env=env, check=False)
        except subprocess.TimeoutExpired:
            return "Hang on rerun"
        text = res.stderr.decode("utf-8", "replace").splitlines()
        frames = [ln.strip() for ln in text if ln.strip().startswith('File "') and "/rooftop/" in ln]
        last = text[-1].split(":")[0] if text else "?"
        if not frames:
            return f"{last} @ ?"
        path, line, func = frames[-1].split('"')[1], frames[-1].split("line ")[1].split(",")[0], frames[-1].split()[-1]
        return f"{last} @ {path[path.rindex('/rooftop/') + 1 :]}:{line} in {func}"

    return judge(argv, proc.returncode, stdout, stderr, "", None, debug, markup)
