"""Measure the current JAX device's real ceilings and write them as a chip file.

What is measured (each the best of ``repeats`` timed runs after a warm-up compile; a timed run repeats a
short call back to back until it lasts about 20 ms and divides, so that dispatch is not timed):
- matrix FLOPs/s per dtype: an N x N x N matmul, 2 N^3 FLOPs (N large: 8192 on GPU/TPU,
  smaller on CPU so the run stays short);
- vector FLOPs/s per dtype (fp32, bf16): a fused chain of multiply-adds over a large array (2 FLOPs each);
- HBM bytes/s: ``y = x * a + b`` over arrays from well above the caches up to an eighth of the device's
  memory: one read and one write per element. The figure is the rate at the largest size; the spread over
  the sizes is said in its source (on an H100, 2.5 TB/s at 2 GiB moved, 2.8 at 16 GiB);
- collective bytes/s across the devices (when there are several): an all-gather over all
  devices, whose ideal time on a switch is (n-1)/n x V / B (cost/collectives.py), so
  B = (n-1)/n x V / t; and the latency of a tiny all-reduce as the per-step latency.

The chip file has the catalog's schema; every figure's source says it was measured, how,
when, with which jax and on which device, so ``--chip mychip.toml`` works in every command.
"""

from __future__ import annotations

import datetime
import functools
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rooftop.errors import InvalidConfigError, UnknownNameError, shown
from rooftop.units import format_bytes, format_rate, plural

if TYPE_CHECKING:
    from rooftop.hardware.chip import Chip

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
    vectors: dict[str, Measurement] = field(default_factory=dict)  # other vector dtypes than fp32
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


#: a timed run repeats a short call until it lasts about this long (dispatch then weighs little)
RUN_S = 0.02
#: the most calls in one timed run
MAX_CALLS = 1000


def _best_time(fn: Callable[[], Any], repeats: int, wait_each: bool = False) -> float:
    """Seconds per call: the fastest of ``repeats`` timed runs after a warm-up, each of ``calls`` calls
    issued back to back and waited for once (calls to one device run in order), ``calls`` chosen so that
    a run lasts about RUN_S; never below the clock's resolution (a rate is divided by it). ``wait_each``
    waits for every call before issuing the next: XLA:CPU can deadlock with many collective programs in
    flight over its host devices (some devices' threads never reach a rendezvous, and after 40 s the
    runtime aborts the process), so the collectives of a CPU run are timed one call at a time."""
    fn().block_until_ready()  # compile and warm up
    t0 = time.perf_counter()
    fn().block_until_ready()
    once = time.perf_counter() - t0
    calls = max(1, min(MAX_CALLS, int(RUN_S / max(once, 1e-9))))
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        for _ in range(calls - 1):
            if wait_each:
                out.block_until_ready()
            out = fn()
        out.block_until_ready()
        best = min(best, (time.perf_counter() - t0) / calls)
    return max(best, time.get_clock_info("perf_counter").resolution, 1e-9)


def _matmul(jax: Any, dtype: str, n: int, repeats: int) -> Measurement:
    jnp = jax.numpy
    a = jnp.ones((n, n), DTYPES[dtype])
    b = jnp.ones((n, n), DTYPES[dtype])
    f = jax.jit(lambda x, y: x @ y)
    t = _best_time(lambda: f(a, b), repeats)
    method = f"{n}x{n}x{n} {dtype} matmul, 2*N^3 FLOPs / best of {plural(repeats, 'run')}"
    return Measurement(dtype, 2.0 * n**3 / t, method)


def _vector(jax: Any, elements: int, repeats: int, dtype: str = "fp32", chain: int = 512) -> Measurement:
    """Elementwise FLOPs/s: ``chain`` multiply-adds per element in one fusion. The chain must be long enough
    that the unit, not memory, bounds it: 2 x chain FLOPs per 2 x itemsize bytes moved (32 multiply-adds on
    fp32 is 8 FLOPs per byte, which an H100 streams at 23 TFLOP/s: its memory, not its 67 TFLOP/s unit). XLA
    emits a multiply and an add, not one FMA: an H100 measured 28 TFLOP/s in fp32 with a 512 chain, against
    the ~33.5 TFLOP/s without FMAs that 'How to Scale Your Model' Part 12 gives."""
    jnp = jax.numpy
    x = jnp.ones((elements,), DTYPES[dtype])

    def body(v: Any) -> Any:
        for _ in range(chain):
            v = v * 0.5 + 0.25  # exact in bf16 (0.999 rounds to 1.0 there, and x * 1 costs nothing)
        return v

    f = jax.jit(body)
    t = _best_time(lambda: f(x), repeats)
    per_byte = chain / jnp.dtype(DTYPES[dtype]).itemsize
    return Measurement(dtype, 2.0 * chain * elements / t, f"{chain} fused multiply-adds over {elements} {dtype} "
                       f"elements (2 FLOPs each; {per_byte:.0f} FLOPs per byte moved)")  # fmt: skip


def _hbm(jax: Any, sizes: list[int], repeats: int) -> Measurement:
    """Bytes/s of ``y = x * a + b`` at each fp32 size (one read and one write per element): the rate at the
    largest, with the spread over all of them in the method."""
    jnp = jax.numpy
    f = jax.jit(lambda v: v * 1.0001 + 0.5)
    rates = []
    for elements in sizes:
        x = jnp.ones((elements,), jnp.float32)
        rates.append(2.0 * 4 * elements / _best_time(functools.partial(f, x), repeats))
        del x
    moved = [f"{8 * e / 2**20:.0f} MiB" for e in (sizes[0], sizes[-1])]
    spread = f"{format_rate(min(rates))} to {format_rate(max(rates))}" if len(rates) > 1 else format_rate(rates[0])
    return Measurement("hbm", rates[-1], f"y = x*a + b in fp32 (one read + one write per element) at "
                       f"{len(sizes)} sizes from {moved[0]} to {moved[1]} moved: the largest's rate; {spread} "
                       "over the sizes")  # fmt: skip


def hbm_sizes(accelerator: bool, quick: bool, memory_bytes: float) -> list[int]:
    """fp32 element counts for the memory sweep, doubling: on an accelerator from 2^26 (512 MiB moved, ten
    times an H100's L2) up to what an eighth of the memory holds (two arrays) and at most 2^31; on a CPU
    from 2^23 (2^20 with --quick) over three sizes."""
    if not accelerator:
        first = 1 << (20 if quick else 23)
        return [first, first * 2, first * 4]
    last = 1 << 27 if quick else 1 << 31
    while last > 1 << 26 and 8 * last > memory_bytes / 8:
        last //= 2
    sizes = [1 << 26]
    while sizes[-1] < last:
        sizes.append(sizes[-1] * 2)
    return sizes


def _collectives(jax: Any, elements: int, repeats: int, wait_each: bool) -> tuple[Measurement, Measurement] | None:
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
    t = _best_time(lambda: gather(x), repeats, wait_each)
    v_bytes = 4.0 * per * n
    method = f"all-gather of {format_bytes(v_bytes)} over {n} devices: B = (n-1)/n x V / t"
    link = Measurement("link", (n - 1) / n * v_bytes / t, method)
    small = jax.device_put(jnp.ones((n,), jnp.float32), shard)
    reduce = jax.jit(lambda v: jnp.sum(v), out_shardings=full)
    lat = _best_time(lambda: reduce(small), repeats, wait_each)
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
    chain = 512 if accel else 64  # >= 128 FLOPs/B on an accelerator, 16 on a CPU: the unit bounds both
    cal.vector = _vector(jax, elements // 16, repeats, chain=chain)
    cal.vectors["bf16"] = _vector(jax, elements // 16, repeats, "bf16", chain)
    stats = dev.memory_stats() if hasattr(dev, "memory_stats") else None
    if stats and stats.get("bytes_limit"):
        cal.memory_bytes = float(stats["bytes_limit"])
    else:
        cal.memory_bytes = float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    say("memory bandwidth")
    cal.hbm = _hbm(jax, hbm_sizes(accel, quick, cal.memory_bytes), repeats)
    say("collectives")
    coll = _collectives(jax, elements // 4, repeats, wait_each=not accel)
    if coll:
        cal.link, cal.latency = coll
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


def catalog_match(device_kind: str) -> Chip | None:
    """The catalog chip that JAX's ``device_kind`` names (``NVIDIA H100 80GB HBM3`` is h100), else None."""
    from rooftop.hardware.catalog import get_chip

    for name in dict.fromkeys((device_kind, device_kind.removeprefix("NVIDIA ").strip())):
        try:
            return get_chip(name)
        except (UnknownNameError, InvalidConfigError):
            continue
    return None


def _assumed(value: float, cal: Calibration, why: str) -> str:
    src = f"NOT MEASURED, assumed by rooftop calibrate on {cal.date} ({cal.device_kind}): {why}"
    return f"{{ value = {float(value)!r}, source = {_quote(src)} }}"


def _catalog_fig(value: float, ref: Chip, key: str) -> str:
    figure = ref.sources.get(key)
    src = f"not measured (one device): the catalog's {ref.name} figure ({figure.source if figure else 'no source'})"
    return f"{{ value = {float(value)!r}, source = {_quote(src)} }}"


def _network(cal: Calibration) -> list[str]:
    """The [links], [dcn] and [topology] tables: measured across the devices when there were several; with
    one device, the catalog's figures for the chip JAX names (each source says so); else the memory copy
    rate stands in, said to be an assumption. Beyond the measured devices the measured link stands in for
    the scale-out fabric, so that a profile of more devices than were calibrated can still be priced."""
    ref = catalog_match(cal.device_kind) if cal.link is None else None
    if ref is not None:
        t = ref.topology
        topo = [f'kind = "{t.kind}"', f"max_chips = {t.max_chips}"]
        topo += [f"{k} = [{', '.join(map(str, v))}]" for k, v in
                 (("domain_sizes", t.domain_sizes), ("max_dims", t.max_dims), ("cube", t.cube)) if v]  # fmt: skip
        if t.kind == "torus":
            topo += [f"wraparound = {_quote(t.wraparound)}", f"wrap_length = {t.wrap_length}"]
        topo.append(f"source = {_quote(f'not measured (one device): the catalog topology of {ref.name}: {t.source}')}")
        out = ["", "[links]", f"kind = {_quote(ref.link_kind)}",
               f"count = {_catalog_fig(ref.link_count, ref, 'links.count')}",
               f"bytes_per_s = {_catalog_fig(ref.link_bytes_per_s, ref, 'links.bytes_per_s')}",
               f"hop_latency_s = {_catalog_fig(ref.link_latency_s, ref, 'links.hop_latency_s')}"]  # fmt: skip
        if ref.dcn_bytes_per_s:
            out += ["", "[dcn]", f"bytes_per_s = {_catalog_fig(ref.dcn_bytes_per_s, ref, 'dcn.bytes_per_s')}"]
        if ref.host_bytes_per_s:
            out += ["", "[host]", f"bytes_per_s = {_catalog_fig(ref.host_bytes_per_s, ref, 'host.bytes_per_s')}"]
        return [*out, "", "[topology]", *topo]
    one = "one device, and no catalog chip of its kind"
    link = _fig(cal.link, cal) if cal.link else _assumed(cal.hbm.value if cal.hbm else 1e9, cal,
                                                         f"{one}: the memory copy rate stands in")  # fmt: skip
    latency = _fig(cal.latency, cal) if cal.latency else _assumed(1e-6, cal, f"{one}: 1 us")
    beyond = _assumed(cal.link.value if cal.link else cal.hbm.value if cal.hbm else 1e9, cal,
                      f"beyond the {cal.devices} calibrated device(s) the link figure stands in for the scale-out "
                      "fabric")  # fmt: skip
    return [
        "",
        "[links]",
        'kind = "measured"',
        f"count = {_fig(Measurement('count', 1, 'one aggregate link per device (measured as a whole)'), cal)}",
        f"bytes_per_s = {link}",
        f"hop_latency_s = {latency}",
        "",
        "[dcn]",
        f"bytes_per_s = {beyond}",
        "",
        "[topology]",
        'kind = "switched"',
        f"domain_sizes = [{cal.devices}]",
        "max_chips = 100000",
        f"source = {_quote(f'the {cal.devices} devices JAX sees, treated as one switched domain')}",
    ]


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
    lines += [f"{d} = {_fig(m, cal)}" for d, m in cal.vectors.items()]
    mem = Measurement("memory", cal.memory_bytes, "device bytes_limit, or the host's physical memory on CPU")
    lines += ["", "[memory]", f"hbm_bytes = {_fig(mem, cal)}"]
    if cal.hbm:
        lines.append(f"hbm_bytes_per_s = {_fig(cal.hbm, cal)}")
    lines += _network(cal)
    return "\n".join(lines) + "\n"
