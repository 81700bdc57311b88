"""A module name compiled into several programs, of which only one runs inside the trace window, is priced
from that program's own HLO (the events' program_id picks it among the metadata's): JAX on the CPU, a
function run for two shapes before the trace and one of them inside it."""

from __future__ import annotations

from pathlib import Path

import pytest

from rooftop.analysis.profile import profile_report
from rooftop.hardware.catalog import get_chip
from rooftop.report.reasons import note_texts


def test_one_of_two_programs_run_in_the_window_is_priced(tmp_path: Path) -> None:
    jax = pytest.importorskip("jax")
    jnp = jax.numpy

    @jax.jit
    def f(x):
        return jnp.sin(x) @ x.T

    f(jnp.ones((64, 64))).block_until_ready()  # program 1, before the trace
    f(jnp.ones((128, 128))).block_until_ready()  # program 2
    jax.profiler.start_trace(str(tmp_path))
    for _ in range(2):
        f(jnp.ones((128, 128))).block_until_ready()
    jax.profiler.stop_trace()
    report = profile_report(tmp_path, get_chip("h100"))
    mine = [o for o in report.ops if (o.module or "").startswith("jit_f")]
    assert mine and all(o.lower_bound_s is not None for o in mine)
    assert not any("no HLO for module 'jit_f'" in n for n in note_texts(report.notes))
    assert max(o.flops or 0 for o in mine) == 2 * 128 * 128 * 128  # the 128 x 128 program's matmul
