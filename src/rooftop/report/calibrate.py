"""``rooftop calibrate``: the measured ceilings of this JAX device as JSON, a table and a chip file."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rooftop.report.files import check_output_path, replacing
from rooftop.report.table import say, table
from rooftop.units import format_duration, format_rate

if TYPE_CHECKING:
    from rich.console import Console

    from rooftop.jaxlink.calibrate import Calibration


def check_chip_path(path: str) -> str:
    """``path`` if a chip file can be written there (a ``.toml`` name in an existing folder, so
    ``--chip FILE.toml`` reads it back); else a one-line error, before anything is measured."""
    check_output_path(path, "chip file", (".toml",), "mychip.toml", flag="--out")
    return path


def write_chip_file(text: str, path: str) -> None:
    """Validate ``text`` as a chip file, then write it atomically (report/files.py: a temporary
    file made with mkstemp beside ``path``, renamed over it; nothing half-written, no planted
    link followed)."""
    import tomllib

    from rooftop.hardware.catalog import chip_from_dict

    check_chip_path(path)
    chip_from_dict(tomllib.loads(text), path)
    with replacing(path, "chip file") as tmp, open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)


def calibrate_payload(cal: Calibration, chip_toml: str, chip_file: str | None) -> dict[str, Any]:
    """``rooftop calibrate --json``: the measurements and the chip file's text (and path, if written)."""
    return {
        "device_kind": cal.device_kind,
        "platform": cal.platform,
        "devices": cal.devices,
        "jax_version": cal.jax_version,
        "date": cal.date,
        "matrix_flops_per_s": {d: m.value for d, m in cal.matrix.items()},
        "vector_flops_per_s": cal.vector.value if cal.vector else None,
        "vector_flops_per_s_by_dtype": {d: m.value for d, m in ({"fp32": cal.vector} if cal.vector else {}).items()}
        | {d: m.value for d, m in cal.vectors.items()},
        "hbm_bytes_per_s": cal.hbm.value if cal.hbm else None,
        "link_bytes_per_s": cal.link.value if cal.link else None,
        "collective_latency_s": cal.latency.value if cal.latency else None,
        "memory_bytes": cal.memory_bytes,
        "chip_file": chip_file,
        "chip_toml": chip_toml,
    }


def render_calibrate(console: Console, cal: Calibration, chip_file: str | None) -> None:
    rows = [(f"matrix {d}", format_rate(m.value, "FLOP/s"), m.method) for d, m in cal.matrix.items()]
    for label, m, unit in (
        ("vector fp32", cal.vector, "FLOP/s"),
        *((f"vector {d}", m, "FLOP/s") for d, m in cal.vectors.items()),
        ("memory", cal.hbm, "B/s"),
        ("collective link", cal.link, "B/s"),
    ):
        if m is not None:
            rows.append((label, format_rate(m.value, unit), m.method))
    if cal.latency is not None:
        rows.append(("collective latency", format_duration(cal.latency.value), cal.latency.method))
    console.print(
        table(
            f"{cal.device_kind} x {cal.devices} ({cal.platform}), jax {cal.jax_version}",
            ["ceiling", "measured", "how"],
            rows,
        )
    )
    say(console, f"chip file written to {chip_file}" if chip_file else "pass --out FILE.toml to write a chip file")
