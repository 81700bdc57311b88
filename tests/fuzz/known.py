# ruff: noqa: E501  (the table of causes keeps one reproducer per entry, long lines included)
"""Causes the fuzz run found that are still open: how to recognise each one's outcome, and a minimal
reproducer for each. The CI slice (test_fuzz_slice.py) xfails when only these fail, and runs each
reproducer as an xfail (not strict) test; delete a cause here once it is fixed.

Outcomes are matched on their kind and place (exception type, rooftop file and function: line numbers
move as code changes) or, for errors without a frame, on their text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.fuzz.oracle import TIME_LIMIT_S, Case, Outcome, Special

INF, NAN = float("inf"), float("nan")

#: time limit for a hang's reproducer, and the first limit the slice gives a case (a case that runs past it
#: in the frame of a known hang is that hang; any other gets the oracle's full limit): a fixed cause
#: answers in well under a second, and each known hang costs this much
REPRODUCER_TIME_LIMIT_S = 2.0


@dataclass(frozen=True)
class Cause:
    """One open cause: ``name`` (an id), ``says`` (the cause and what would fix it), the outcome ``kind``
    and ``where`` (a regex on Outcome.where) or ``text`` (a regex on Outcome.detail), and a reproducer."""

    name: str
    says: str
    kind: str
    where: str = ""
    text: str = ""
    argv: tuple[str, ...] = ()
    files: dict[str, bytes | Special | Callable[[], bytes]] = field(default_factory=dict)
    process: bool = False
    needs_shared: bool = False
    outputs: tuple[str, ...] = ()
    refuse: str = ""

    def matches(self, outcome: Outcome) -> bool:
        if outcome.kind != self.kind:
            return False
        if self.where and not re.search(self.where, outcome.where):
            return False
        return not self.text or re.search(self.text, outcome.detail) is not None

    def reproducer(self) -> Case:
        files = {k: v() if callable(v) else v for k, v in self.files.items()}
        case = Case("known", list(self.argv), files, self.outputs, self.name, self.process, refuse=self.refuse)
        return case

    @property
    def time_limit(self) -> float:
        """Seconds a reproducer may run: :data:`REPRODUCER_TIME_LIMIT_S` for a hang, else the oracle's limit."""
        return REPRODUCER_TIME_LIMIT_S if self.kind == "hang" else TIME_LIMIT_S


def at(exc: str, path: str, func: str) -> str:
    """A regex for Outcome.where: ``exc`` raised with innermost rooftop frame in ``path``'s ``func``."""
    return rf"^{re.escape(exc)} @ rooftop/{re.escape(path)}:\d+ in {re.escape(func)}(?=\s|$)"


ROOT = Path(__file__).resolve().parents[2]
HF = ROOT / "tests" / "fixtures" / "hf_configs"
CHIPS = ROOT / "src" / "rooftop" / "catalog" / "chips"
XPLANE = ROOT.parent / "shared" / "data" / "third_party_profiles" / "xplane" / "tracelens_jax08_gemm_mi300x.xplane.pb"
BIG = "1" * 5000  # past Python's 4,300-digit int() limit
SUM = "%sum (a: f32[], b: f32[]) -> f32[] {\n  %a = f32[] parameter(0)\n  %b = f32[] parameter(1)\n  ROOT %r = f32[] add(%a, %b)\n}\n"


def hlo(body: str, header: str = "HloModule m, num_partitions=8") -> bytes:
    """A module: ``header``, the ``%sum`` reducer, and an ENTRY computation of ``body`` lines."""
    return f"{header}\n\n{SUM}\nENTRY %e {{\n{body}\n}}\n".encode()


def kineto(*events: dict[str, Any], **top: Any) -> bytes:
    """A Kineto JSON trace of ``events`` (top-level keys ``top``, schemaVersion by default)."""
    return json.dumps({"schemaVersion": 1, **top, "traceEvents": list(events)}).encode()


def kernel(**args: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": "kernel", "name": "k", "pid": 2, "tid": 7, "ts": 10.0, "dur": 5.0,
            "args": {"device": 0, "correlation": 1, **args}}  # fmt: skip


def jax_gpu(*events: dict[str, Any]) -> bytes:
    """A JAX-layout Chrome trace: one GPU plane with a stream line holding ``events``."""
    meta = [{"ph": "M", "pid": 0, "name": "process_name", "args": {"name": "/device:GPU:0"}},
            {"ph": "M", "pid": 0, "tid": 1, "name": "thread_name", "args": {"name": "Stream #1"}}]  # fmt: skip
    return json.dumps({"traceEvents": meta + [{"ph": "X", "pid": 0, "tid": 1, **e} for e in events]}).encode()


def hf(name: str, **changes: Any) -> bytes:
    doc = json.loads((HF / name).read_text())
    (doc.get("text_config") or doc).update(changes)
    return json.dumps(doc).encode()


def chip(name: str, old: str, new: str) -> bytes:
    text = (CHIPS / f"{name}.toml").read_text()
    assert old in text
    return text.replace(old, new).replace(f'name = "{name}"', 'name = "fuzzchip"').encode()


def xplane(edit: Callable[[Any], None]) -> Callable[[], bytes]:
    """The jax08 gemm XPlane from ../shared with ``edit`` applied to the first GPU kernel event's stats."""

    def build() -> bytes:
        from tests.fuzz.xspace import parse_space

        space = parse_space(XPLANE.read_bytes())
        plane = next(p for p in space.planes if p.name.startswith("/device:GPU") and any(ln.events for ln in p.lines))
        event = next(ln for ln in plane.lines if ln.events).events[0]
        edit((plane, event))
        return bytes(space.SerializeToString())

    return build


def _bytes_stat(pe: Any) -> None:
    plane, event = pe
    ids = {v.name: k for k, v in plane.stat_metadata.items()}
    event.stats.add(metadata_id=ids["hlo_op"]).bytes_value = b"\xff\xfe"


def _empty_stat(pe: Any) -> None:
    plane, event = pe
    event.stats.add(metadata_id=next(iter(plane.stat_metadata)))


def xplane_bad_utf8() -> bytes:
    """A string field (an event name) holding bytes that are not UTF-8: jaxlib logs before failing."""
    data = XPLANE.read_bytes()
    name = b"__amd_rocclr_copyBuffer.kd"
    at = data.index(name)
    return data[:at] + b"\xff" + data[at + 1 :]


PROFILE = ("profile", "{W}/t.json", "--chip", "h100")
TRAIN = ("--chip", "h100", "--chips", "8", "--batch-tokens", "1M", "--seq-len", "2048")

# fmt: off
OPEN: tuple[Cause, ...] = (
)
# fmt: on


def cause_of(outcome: Outcome) -> Cause | None:
    """The open cause an outcome is an instance of, or None (a new cause: the slice fails)."""
    return next((c for c in OPEN if c.matches(outcome)), None)
