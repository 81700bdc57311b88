"""The device a profile was recorded on, and the catalog chip that matches it.

A PyTorch (Kineto) trace lists its GPUs in ``deviceProperties`` (``name``, ``totalGlobalMem``, ``numSms``,
``computeMajor``/``computeMinor``; ROCm builds may leave ``name`` empty); an XPlane has one plane per device
whose stats say ``device_type_string`` (TPUs), ``device_vendor``, ``core_count`` and ``memory_size`` (GPUs).
A chip matches by name first (the catalog's names and aliases, case, spaces and dashes ignored, with or
without the vendor's word in front), else by what the device reports of itself: the same count of SMs /
compute units (the chip file's ``internals.sms``) and the same memory within :data:`MEMORY_TOLERANCE`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from rooftop.analysis.trace.events import Trace
from rooftop.hardware.chip import Chip
from rooftop.reason_codes import ReasonCode
from rooftop.reasons import Reason

#: how far a device's reported memory may sit from a chip file's HBM capacity and still match (the
#: driver reserves a little; a 40 GB and an 80 GB part of the same SM count stay apart)
MEMORY_TOLERANCE = 0.05
_VENDOR_WORDS = ("nvidia", "amdinstinct", "amd", "google")


@dataclass(frozen=True)
class RecordedDevice:
    """What a profile says of one of its devices: its name ("" when the trace leaves it empty), vendor,
    memory in bytes and SM / compute-unit count (None when not recorded)."""

    name: str
    vendor: str = ""
    memory_bytes: float | None = None
    cores: int | None = None

    def describe(self) -> str:
        if self.name:
            return self.name
        parts = [self.vendor or "a device", f"{self.cores} SMs/CUs" if self.cores else "",
                 f"{self.memory_bytes / 2**30:.0f} GiB" if self.memory_bytes else ""]  # fmt: skip
        return ", ".join(p for p in parts if p)


def _number(value: Any) -> float | None:
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if out > 0 and out == out and out != float("inf") else None


def _kineto(props: Any) -> Iterable[RecordedDevice]:
    for p in props if isinstance(props, list) else ():
        if isinstance(p, Mapping):
            cores = _number(p.get("numSms"))
            yield RecordedDevice(str(p.get("name") or "").strip()[:200], "", _number(p.get("totalGlobalMem")),
                                 int(cores) if cores else None)  # fmt: skip


def _xplane(props: Any) -> Iterable[RecordedDevice]:
    for stats in props.values() if isinstance(props, Mapping) else ():
        if not isinstance(stats, Mapping):
            continue
        name = str(stats.get("device_type_string") or "").strip()[:200]
        cores = _number(stats.get("core_count"))
        memory = _number(stats.get("memory_size"))
        vendor = str(stats.get("device_vendor") or "")[:40]
        if name or memory or cores:
            yield RecordedDevice(name, vendor, memory, int(cores) if cores else None)


def recorded_devices(trace: Trace) -> tuple[RecordedDevice, ...]:
    """The devices the profile describes, each distinct one once, in the order first listed."""
    found = [*_kineto(trace.metadata.get("deviceProperties")), *_xplane(trace.metadata.get("device_properties"))]
    return tuple(dict.fromkeys(found))


def _norm(name: str) -> str:
    return "".join(ch for ch in name.lower() if ch.isalnum())


def _names(chip: Chip) -> set[str]:
    return {_norm(n) for n in (chip.name, *chip.aliases)}


def match_chip(device: RecordedDevice, chips: Iterable[Chip]) -> Chip | None:
    """The catalog chip ``device`` is (module docstring), or None when none matches."""
    chips = tuple(chips)
    if device.name:
        key = _norm(device.name)
        keys = {key, *(key[len(w) :] for w in _VENDOR_WORDS if key.startswith(w) and len(key) > len(w))}
        for chip in chips:
            if keys & _names(chip):
                return chip
    if device.cores is None or device.memory_bytes is None:
        return None
    fits = [
        c for c in chips
        if c.internals.sms == device.cores and (not device.vendor or device.vendor.lower() == c.vendor.lower())
        and abs(c.hbm_capacity_bytes - device.memory_bytes) <= MEMORY_TOLERANCE * c.hbm_capacity_bytes
    ]  # fmt: skip
    return fits[0] if len(fits) == 1 else None


@dataclass(frozen=True)
class DeviceChoice:
    """The recorded device, the catalog chip matching it (or None), and the chip the report is priced on."""

    recorded: RecordedDevice | None
    matched: Chip | None
    chip: Chip | None

    @property
    def what_if(self) -> bool:
        """Priced on a chip other than the one recorded (known only when the recorded one matched)."""
        return self.chip is not None and self.matched is not None and self.chip.name != self.matched.name

    def note(self) -> Reason | None:
        """Where the chip came from, or the difference between the chip and the profile (report/ writes it)."""
        if self.recorded is None or self.chip is None:
            return None
        seen, chip = self.recorded.describe(), self.chip.name
        if self.what_if:
            assert self.matched is not None
            return Reason.of(ReasonCode.DEVICE_WHAT_IF, seen=seen, matched=self.matched.name, chip=chip)
        if self.matched is None:
            return Reason.of(ReasonCode.DEVICE_UNMATCHED, seen=seen, chip=chip)
        return Reason.of(ReasonCode.DEVICE_FROM_PROFILE, seen=seen, chip=chip)

    def payload(self) -> dict[str, Any]:
        return {
            "recorded": self.recorded.describe() if self.recorded else None,
            "matched": self.matched.name if self.matched else None,
            "what_if": self.what_if,
        }


def choose_chip(trace: Trace, chips: Iterable[Chip], given: Chip | None) -> DeviceChoice:
    """The chip to price ``trace`` on: ``given`` when there is one (a what-if when it differs from the
    recorded device), else the catalog chip matching the first recorded device that matches one."""
    return choose_from(recorded_devices(trace), chips, given)


def choose_from(devices: Iterable[RecordedDevice], chips: Iterable[Chip], given: Chip | None) -> DeviceChoice:
    """:func:`choose_chip` of devices already read (those of several hosts, in order)."""
    chips, devices = tuple(chips), tuple(dict.fromkeys(devices))
    for device in devices:
        found = match_chip(device, chips)
        if found is not None:
            return DeviceChoice(device, found, given or found)
    return DeviceChoice(devices[0] if devices else None, None, given)
