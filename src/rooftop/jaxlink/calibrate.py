"""Measure the current JAX device's real ceilings and write them as a chip file.

What is measured (each the best of ``repeats`` timed runs after a warm-up compile):
- matrix FLOPs/s per dtype: an N x N x N matmul, 2 N^3 FLOPs (N large: 8192 on GPU/TPU,
  smaller on CPU so the run stays short);
- vector FLOPs/s: a fused chain of multiply-adds over a large fp32 array (2 FLOPs each);
- HBM bytes/s: ``y = x * a + b`` over a large array: one read and one write per element;
- collective bytes/s across the devices (when there are several): an all-gather over all
  devices, whose ideal time on a switch is (n-1)/n x V / B (cost/collectives.py), so
  B = (n-1)/n x V / t; and the latency of a tiny all-reduce as the per-step latency.

The chip file has the catalog's schema; every figure's source says it was measured, how,
when, with which jax and on which device, so ``--chip mychip.toml`` works in every command.
"""

from __future__ import annotations

import datetime
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rooftop.errors import InvalidConfigError, shown

DTYPES = {"bf16": "bfloat16", "fp32": "float32"}

#: the most timed runs per measurement (each is a full matmul or sweep over memory)
MAX_REPEATS = 100
#: the longest chip name a calibration writes
MAX_NAME_CHARS = 100


@dataclass(frozen=True)
class Measurement:
    name: str
    value: float
    method: str


@dataclass
class Calibration:
    device_kind: str
    platform: str
    devices: int
    jax_version: str
    date: str
    matrix: dict[str, Measurement] = field(default_factory=dict)
    vector: Measurement | None = None
    hbm: Measurement | None = None
    link: Measurement | None = None
    latency: Measurement | None = None
    memory_bytes: float = 0.0


def _jax() -> Any:
    try:
        import jax
    except ModuleNotFoundError:
        raise InvalidConfigError("rooftop calibrate needs JAX: pip install 'rooftop[jax]'") from None
    return jax


def _best_time(fn: Callable[[], Any], repeats: int) -> float:
    """The fastest of ``repeats`` timed runs after a warm-up; never below the clock's resolution
    (a rate is divided by it)."""
    fn().block_until_ready()  # compile and warm up
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn().block_until_ready()
        best = min(best, time.perf_counter() - t0)
    return max(best, time.get_clock_info("perf_counter").resolution, 1e-9)


def _matmul(jax: Any, dtype: str, n: int, repeats: int) -> Measurement:
    jnp = jax.numpy
    a = jnp.ones((n, n), DTYPES[dtype])
    b = jnp.ones((n, n), DTYPES[dtype])
    f = jax.jit(lambda x, y: x @ y)
    t = _best_time(lambda: f(a, b), repeats)
    return Measurement(dtype, 2.0 * n**3 / t, f"{n}x{n}x{n} {dtype} matmul, 2*N^3 FLOPs / best of {repeats} runs")


def _vector(jax: Any, elements: int, repeats: int, chain: int = 32) -> Measurement:
    jnp = jax.numpy
    x = jnp.ones((elements,), jnp.float32)

    def body(v: Any) -> Any:
        for _ in range(chain):
            v = v * 0.999 + 0.001
        return v

    f = jax.jit(body)
    t = _best_time(lambda: f(x), repeats)
    return Measurement(
        "fp32", 2.0 * chain * elements / t, f"{chain} fused multiply-adds over {elements} fp32 elements (2 FLOPs each)"
    )


def _hbm(jax: Any, elements: int, repeats: int) -> Measurement:
    jnp = jax.numpy
    x = jnp.ones((elements,), jnp.float32)
    f = jax.jit(lambda v: v * 1.0001 + 0.5)
    t = _best_time(lambda: f(x), repeats)
    return Measurement("hbm", 2.0 * 4 * elements / t, f"y = x*a + b over {elements} fp32: one read + one write")


def _collectives(jax: Any, elements: int, repeats: int) -> tuple[Measurement, Measurement] | None:
    devices = jax.devices()
    n = len(devices)
    if n < 2:
        return None
    import numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    jnp = jax.numpy
    mesh = Mesh(np.array(devices), ("d",))
    shard = NamedSharding(mesh, PartitionSpec("d"))
    full = NamedSharding(mesh, PartitionSpec())
    per = max(1, elements // n)
    x = jax.device_put(jnp.ones((per * n,), jnp.float32), shard)
    gather = jax.jit(lambda v: v * 1.0, out_shardings=full)
    t = _best_time(lambda: gather(x), repeats)
    v_bytes = 4.0 * per * n
    link = Measurement(
        "link", (n - 1) / n * v_bytes / t, f"all-gather of {v_bytes:.3g} bytes over {n} devices: B = (n-1)/n x V / t"
    )
    small = jax.device_put(jnp.ones((n,), jnp.float32), shard)
    reduce = jax.jit(lambda v: jnp.sum(v), out_shardings=full)
    lat = _best_time(lambda: reduce(small), repeats)
    return link, Measurement("latency", lat, f"all-reduce of {n} floats over {n} devices (latency-bound)")


def check_repeats(repeats: int) -> int:
    """``repeats`` if it is a whole number of timed runs in [1, MAX_REPEATS]; else a one-line error."""
    if isinstance(repeats, bool) or not isinstance(repeats, int) or not 1 <= repeats <= MAX_REPEATS:
        raise InvalidConfigError(
            f"repeats {shown(repeats)} must be a whole number of timed runs in [1, {MAX_REPEATS}] (default 5)"
        )
    return repeats


def check_chip_name(name: str) -> str:
    """``name`` if it can name a chip (printable text, 1 to MAX_NAME_CHARS characters, not only
    spaces); else a one-line error naming it."""
    if not isinstance(name, str) or not name.strip() or len(name) > MAX_NAME_CHARS or not name.isprintable():
        raise InvalidConfigError(
            f"chip name {shown(name)} must be printable text of 1 to {MAX_NAME_CHARS} characters "
            "(no control characters), e.g. my-gpu"
        )
    return name


def calibrate(quick: bool = False, repeats: int = 5, progress: Callable[[str], None] | None = None) -> Calibration:
    """Measure the first JAX device (and the collectives across all of them)."""
    check_repeats(repeats)
    jax = _jax()
    dev = jax.devices()[0]
    accel = dev.platform != "cpu"
    n = 8192 if accel else (512 if quick else 1536)
    elements = (1 << 28) if accel else ((1 << 22) if quick else (1 << 25))
    say = progress or (lambda _msg: None)
    cal = Calibration(
        str(dev.device_kind), dev.platform, len(jax.devices()), jax.__version__, datetime.date.today().isoformat()
    )
    for dtype in DTYPES:
        say(f"matmul {dtype} {n}^3")
        cal.matrix[dtype] = _matmul(jax, dtype, n, repeats)
    say("vector unit")
    cal.vector = _vector(jax, elements // 4, repeats)
    say("memory bandwidth")
    cal.hbm = _hbm(jax, elements, repeats)
    say("collectives")
    coll = _collectives(jax, elements // 4, repeats)
    if coll:
        cal.link, cal.latency = coll
    stats = dev.memory_stats() if hasattr(dev, "memory_stats") else None
    if stats and stats.get("bytes_limit"):
        cal.memory_bytes = float(stats["bytes_limit"])
    else:
        cal.memory_bytes = float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    return cal


def _fig(m: Measurement, cal: Calibration) -> str:
    src = f"measured by rooftop calibrate on {cal.date} (jax {cal.jax_version}, {cal.device_kind}): {m.method}"
    return f"{{ value = {float(m.value)!r}, source = {_quote(src)} }}"


def _quote_char(ch: str) -> str:
    code = ord(ch)
    if ch in '"\\':
        return "\\" + ch
    if code < 0x20 or code == 0x7F:
        return f"\\u{code:04x}"
    return "\\ufffd" if 0xD800 <= code <= 0xDFFF else ch  # a lone surrogate is no Unicode scalar value


def _quote(text: str) -> str:
    """``text`` as a TOML basic string: quotes, backslashes and control characters escaped."""
    return '"' + "".join(_quote_char(ch) for ch in text) + '"'


def chip_toml(cal: Calibration, name: str) -> str:
    """The calibration as a chip file of the catalog's schema (hardware/catalog.py)."""
    check_chip_name(name)
    lines = [
        f"# Written by `rooftop calibrate` on {cal.date}: measured, not datasheet, ceilings.",
        "schema_version = 1",
        f"name = {_quote(name)}",
        "aliases = []",
        f"vendor = {_quote(cal.platform)}",
        'kind = "custom"',
        f"description = {_quote(f'{cal.device_kind} x {cal.devices} as measured through JAX {cal.jax_version}')}",
        "",
        "[matrix_flops_per_s]",
        *(f"{d} = {_fig(m, cal)}" for d, m in cal.matrix.items()),
        "",
        "[vector_flops_per_s]",
    ]
    if cal.vector:
        lines.append(f"fp32 = {_fig(cal.vector, cal)}")
    mem = Measurement("memory", cal.memory_bytes, "device bytes_limit, or the host's physical memory on CPU")
    lines += ["", "[memory]", f"hbm_bytes = {_fig(mem, cal)}"]
    if cal.hbm:
        lines.append(f"hbm_bytes_per_s = {_fig(cal.hbm, cal)}")
    link = cal.link or Measurement(
        "link",
        cal.hbm.value if cal.hbm else 1e9,
        "single device: no collective measured; the memory copy rate stands in",
    )
    latency = cal.latency or Measurement("latency", 1e-6, "single device: no collective measured; 1 us assumed")
    lines += [
        "",
        "[links]",
        'kind = "measured"',
        f"count = {_fig(Measurement('count', 1, 'one aggregate link per device (measured as a whole)'), cal)}",
        f"bytes_per_s = {_fig(link, cal)}",
        f"hop_latency_s = {_fig(latency, cal)}",
        "",
        "[topology]",
        'kind = "switched"',
        f"domain_sizes = [{cal.devices}]",
        "max_chips = 100000",
        f"source = {_quote(f'the {cal.devices} devices JAX sees, treated as one switched domain')}",
    ]
    return "\n".join(lines) + "\n"
