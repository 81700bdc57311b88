"""The fuzz targets by name, each a function of a seeded ``random.Random`` to a :class:`Case`."""

from __future__ import annotations

import random
from collections.abc import Callable

from tests.fuzz.cli_cases import cli_case
from tests.fuzz.file_cases import chip_case, config_case
from tests.fuzz.hlo_cases import hlo_case
from tests.fuzz.input_cases import capture_case, diff_case, engine_case, request_case
from tests.fuzz.oracle import Case
from tests.fuzz.trace_cases import trace_case


def calibrate_case(rng: random.Random) -> Case:
    """``rooftop calibrate --quick`` with hostile --out/--name/--repeats (each run measures the device)."""
    return cli_case(rng, "calibrate")


TARGETS: dict[str, Callable[[random.Random], Case]] = {
    "cli": cli_case,
    "hlo": hlo_case,
    "trace": trace_case,
    "chip": chip_case,
    "config": config_case,
    "calibrate": calibrate_case,
    "capture": capture_case,
    "engine": engine_case,
    "requests": request_case,
    "diff": diff_case,
}


def make_case(target: str, seed: int | str) -> Case:
    """Case number ``seed`` of ``target`` (the same case on every machine and run)."""
    case = TARGETS[target](random.Random(f"{target}:{seed}"))
    case.seed = seed if isinstance(seed, int) else None
    return case
