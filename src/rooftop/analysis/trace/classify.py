"""What an event of a JAX profile is: its line's role and the event's kind, device, module, instruction,
step and correlation — the same rules for XPlane (:mod:`rooftop.analysis.trace.xplane`) and for JAX's
Chrome JSON (:mod:`rooftop.analysis.trace.chrome_json`), where a process is a plane and a thread a line.

How JAX/XLA names things (tsl/profiler xplane schema and stat names in
xla/tsl/profiler/utils/xplane_schema.h; observed in jax 0.10 CPU profiles and in ROCm GPU profiles):

- ``/device:GPU:N`` planes, lines ``Stream #N(...)``: one event per kernel or memcpy, stats ``hlo_module``,
  ``hlo_op``, ``program_id``, ``correlation_id``, ``kernel_details`` / ``memcpy_details``.
  -> ``kind="kernel"`` (``"memcpy"`` with ``memcpy_details`` or a ``Memcpy`` name, or on a line named
  ``Memcpy...`` that is not a ``Stream #N(...)``: the stream's list, e.g. ``(MemcpyD2D,Compute)``, names
  what ran on it, kernels among them).
- ``/device:TPU:N`` planes (and xprof-processed GPU planes): lines ``XLA Ops`` (event name = HLO
  instruction, or on recent TPU profiles the instruction's whole HLO text ``%name = shape op(...)``, whose
  name is the instruction; stats ``program_id``, ``long_name``, ``device_duration_ps``) -> ``"op"``;
  ``XLA Modules`` (``jit_f(12)``) -> ``"module"``; ``Steps`` -> ``"step"``; ``TensorFlow Ops`` /
  ``Framework Ops`` -> ``"other"``.
- ``/host:CPU``: thread lines. With XLA:CPU the HLO ops run here, each event carrying ``hlo_op``,
  ``hlo_module``, ``program_id``, ``run_id`` and ``device_ordinal`` -> ``"op"`` on ``/device:CPU:<ordinal>``.
  When the profile has device planes with events, host events with ``hlo_op`` are kernel launches ->
  ``"other"`` (their ``correlation_id`` places device kernels in steps). ``StepTraceAnnotation``
  events (stat ``step_num``) and ``ProfilerStep#N`` -> ``"step"``.
"""

from __future__ import annotations

import re
from typing import Any

from rooftop.analysis.trace.events import correlation_key
from rooftop.errors import shown

MODULE_NAME = re.compile(r"^(?P<name>.+)\((?P<id>[0-9]+)\)$")
PROFILER_STEP = re.compile(r"^ProfilerStep#([0-9]+)$")  # ASCII digits: "²" passes str.isdigit, not int()
#: step numbers, program ids and device numbers are int64 in the profilers that write them
INT64_MAX = 2**63 - 1
_STEP_DIGITS = 19
_MAX_NAME = 1024  # the longest instruction name looked for at the start of an event's HLO text
_FRAMEWORK_LINES = frozenset(
    {
        "TensorFlow Ops",
        "Framework Ops",
        "TensorFlow Name Scope",
        "Framework Name Scope",
        "Source code",
        "Async XLA Ops",
        "XLA TraceMe",
        "Launch Stats",
        "SparseCore Ops",
    }
)
MEMCPY_NAMES = (
    "Memcpy",
    "MemcpyH2D",
    "MemcpyD2H",
    "MemcpyD2D",
    "CopyDeviceToDevice",
    "CopyHostToDevice",
    "CopyDeviceToHost",
    "Memset",
)


def line_role(plane: str, line: str) -> str:
    """What a line holds, from the plane and line names alone (decided once per line)."""
    if plane.startswith("/host:"):
        return "host"
    if not plane.startswith("/device:"):
        return "other"
    roles = {"Steps": "steps", "XLA Modules": "modules", "XLA Ops": "ops"}
    if line in roles:
        return roles[line]
    if line in _FRAMEWORK_LINES:
        return "other"
    if line.startswith("Stream #"):  # "Stream #14(MemcpyD2D,Compute)": one stream can run copies and kernels
        return "stream"
    return "memcpy" if "Memcpy" in line else "stream"


def classify(role: str, plane: str, name: str, stats: dict[str, Any], *, host_ops: bool) -> tuple[Any, ...]:
    """(kind, device, module, instruction, step, correlation) of one event on a line of ``role``."""
    module, inst, corr = stats.get("hlo_module"), stats.get("hlo_op"), stats.get("correlation_id")
    if module is not None and module.__class__ is not str:
        module = name_text(module, "hlo_module")
    if inst is not None and inst.__class__ is not str:
        inst = name_text(inst, "hlo_op")
    if corr is not None:
        corr = correlation_key(corr)
    step = stats.get("step_num")
    if step is None:
        step = stats.get("group_id")
    if step is not None:
        step = step_number(step)
    if role == "stream":
        kind = "memcpy" if "memcpy_details" in stats or name.startswith(MEMCPY_NAMES) else "kernel"
        return kind, plane, module, inst, step, corr
    if role == "host":
        if inst is not None and host_ops:
            ordinal = stats.get("device_ordinal")
            if ordinal is not None and ordinal.__class__ is not int:
                ordinal = _ordinal(ordinal)
            return "op", plane if ordinal is None else f"/device:CPU:{ordinal}", module, inst, step, None
        marker = PROFILER_STEP.match(name)
        if marker or ("step_num" in stats and inst is None):
            return "step", plane, None, None, step_number(marker.group(1)) if marker else step, None
        return "other", plane, module, inst, step, corr
    if role == "steps":
        number = step_number(name) if name.isascii() and name.isdigit() else None
        return "step", plane, None, None, step if number is None else number, None
    if role == "modules":
        m = MODULE_NAME.match(name)
        return "module", plane, m.group("name") if m else name, None, step, None
    if role == "ops":
        if inst is None and name[:1] == "%":  # TPU XLA Ops lines name an event by its HLO text
            inst = hlo_text_name(name)
        return "op", plane, module, inst or name, step, corr
    return role, plane, module, inst, step, corr  # "memcpy" or "other"


def hlo_text_name(text: str) -> str | None:
    """The instruction name of an event named by its HLO text (``%broadcast.2 = f32[...] broadcast(...)``:
    ``broadcast.2``), as xprof writes TPU ``XLA Ops`` lines; None when the text is not of that form."""
    end = text.find(" = ", 1, 1 + _MAX_NAME)
    name = text[1:end] if end > 1 else ""
    return name if name and " " not in name else None


def step_number(value: Any) -> int | None:
    """A step number from a stat, an arg or a name: an int64 (an int, an integral float, or ASCII digits
    with an optional sign); None for anything else (NaN, infinity, "²", 5,000 digits, a list), which
    leaves the event to be placed by the step markers' time windows."""
    cls = value.__class__
    if cls is int:
        return value if -INT64_MAX - 1 <= value <= INT64_MAX else None
    if cls is float:
        return int(value) if value.is_integer() and -(2.0**63) <= value < 2.0**63 else None
    if cls is str:
        text = value.strip()
        digits = text[1:] if text[:1] in ("+", "-") else text
        if digits.isascii() and digits.isdigit() and len(digits.lstrip("0")) <= _STEP_DIGITS:
            return step_number(int(text))
    return None


def _ordinal(value: Any) -> int:
    """A device_ordinal that is not an int: ASCII digits (or an integral float) as its number; a TypeError
    naming the value otherwise."""
    number = step_number(value)
    if number is None or number < 0:
        raise TypeError(f"device_ordinal {shown(value)} is not a device number (an integer >= 0)")
    return number


def name_text(value: Any, what: str) -> str | None:
    """A module or instruction name given as something other than a string: a number (an int-typed stat)
    as its text, bytes decoded; a TypeError naming the value for a list, an object or a boolean."""
    if value is None or value.__class__ is str:
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return repr(value)
    raise TypeError(f"{what} {shown(value)} is not a name (expected a string)")
