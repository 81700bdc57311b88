"""The JAX bridge: profile a jitted function and put every op on the roofline.

    report = rooftop.jaxlink.analyze(step, *args, chip="h100", steps=3)

Lowers and compiles ``fn`` (jitting it if needed), runs it once to warm up and ``steps``
times under ``jax.profiler.trace`` (each run in a StepTraceAnnotation), then reads the
profile and the compiled HLO and returns the same ProfileReport as ``rooftop profile``.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from rooftop.analysis.compare import ProfileReport
from rooftop.analysis.profile import profile_report
from rooftop.errors import InvalidConfigError, shown
from rooftop.hardware.catalog import get_chip
from rooftop.hardware.chip import Chip

MAX_STEPS = 10_000  # profiled calls: each one's events are kept in memory


def _block(out: Any) -> None:
    import jax

    jax.block_until_ready(out)


def analyze(
    fn: Any,
    *args: Any,
    chip: str | Chip = "h100",
    steps: int = 3,
    mesh: str | None = None,
    topology: str | None = None,
    logdir: str | Path | None = None,
) -> ProfileReport:
    """Profile ``steps`` calls of ``fn(*args)`` and compare each op with its roofline on ``chip``. The
    profile is written to ``logdir`` when given (a new run directory in it), else to a temporary one."""
    if steps.__class__ is not int or not 1 <= steps <= MAX_STEPS:
        raise InvalidConfigError(f"steps {shown(steps)} must be an integer in [1, {MAX_STEPS}]")
    if logdir is not None and (not str(logdir).strip() or (Path(logdir).exists() and not Path(logdir).is_dir())):
        raise InvalidConfigError(f"logdir {shown(str(logdir))} is not a directory; give a directory for the profile")
    try:
        import jax
    except ModuleNotFoundError:
        raise InvalidConfigError("rooftop.jaxlink.analyze needs JAX: pip install 'rooftop[jax]'") from None
    target = get_chip(chip) if isinstance(chip, str) else chip
    jitted = fn if hasattr(fn, "lower") else jax.jit(fn)
    compiled = jitted.lower(*args).compile()
    hlo_text = compiled.as_text()  # None where the backend cannot print it: the profile's own HLO is used
    _block(jitted(*args))  # warm-up: compile outside the profile
    with tempfile.TemporaryDirectory() as tmp:
        out_dir = Path(logdir) if logdir else Path(tmp)
        before = _runs(out_dir)
        with jax.profiler.trace(str(out_dir)):
            for i in range(steps):
                with jax.profiler.StepTraceAnnotation("step", step_num=i):
                    _block(jitted(*args))
        hlo_path = None
        if hlo_text is not None:  # in the private temporary directory, never in the user's logdir
            hlo_path = Path(tmp) / "compiled.hlo.txt"
            hlo_path.write_text(hlo_text)
        new = sorted(_runs(out_dir) - before)  # the run just written, not an older one in the user's logdir
        source = new[-1] if len(new) == 1 else out_dir
        return profile_report(source, target, hlo=hlo_path, mesh=mesh, topology=topology)


def _runs(logdir: Path) -> set[Path]:
    """The run directories jax.profiler has written under ``logdir`` (plugins/profile/<run>)."""
    base = logdir / "plugins" / "profile"
    try:
        return {p for p in base.iterdir() if p.is_dir()}
    except OSError:
        return set()
