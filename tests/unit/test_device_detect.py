"""The device a profile recorded, matched to a catalog chip (analysis/device.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rooftop.analysis.device import RecordedDevice, choose_chip, match_chip, recorded_devices
from rooftop.analysis.trace.events import Trace
from rooftop.analysis.trace.rows import RowBuilder
from rooftop.hardware.catalog import get_chip, load_chips
from rooftop.reason_codes import ReasonCode
from rooftop.reasons import Reason
from rooftop.report.reasons import sentence
from tests.conftest import run_cli

CHIPS = load_chips()


def _trace(**metadata: object) -> Trace:
    return Trace(RowBuilder().build(), "t.json", "kineto", metadata=metadata)


@pytest.mark.parametrize(
    ("name", "chip"),
    [("AMD Instinct MI300X", "mi300x"), ("NVIDIA H100 80GB HBM3", "h100"), ("NVIDIA A100-SXM4-80GB", "a100"),
     ("NVIDIA B200", "b200"), ("TPU v6 Lite", "tpu-v6e"), ("NVIDIA H20", "h20"), ("AMD Instinct MI355X", "mi355x"),
     ("NVIDIA B300 SXM6 AC", "b300")],
)  # fmt: skip
def test_matched_by_name_with_or_without_the_vendor_word(name: str, chip: str) -> None:
    found = match_chip(RecordedDevice(name), CHIPS)
    assert found is not None and found.name == chip


def test_nameless_rocm_device_matched_by_compute_units_and_memory() -> None:
    # a ROCm trace's deviceProperties: name "", 304 compute units, 192 GiB = 206,141,652,992 bytes
    trace = _trace(deviceProperties=[{"id": 0, "name": "", "totalGlobalMem": 192 * 2**30, "numSms": 304}])
    (device,) = recorded_devices(trace)
    assert device == RecordedDevice("", "", 192 * 2**30, 304)
    assert choose_chip(trace, CHIPS, None).chip == get_chip("mi300x")
    # the same count of compute units with 256 GiB is the MI325X; with 64 GiB nothing
    assert match_chip(RecordedDevice("", "", 256 * 2**30, 304), CHIPS) == get_chip("mi325x")
    assert match_chip(RecordedDevice("", "", 64 * 2**30, 304), CHIPS) is None


def test_xplane_device_plane_stats() -> None:
    stats = {"device_vendor": "AMD", "core_count": "256", "memory_size": str(288 * 2**30)}
    trace = _trace(device_properties={"/device:GPU:0": stats, "/device:GPU:1": {"device_vendor": "AMD"}})
    choice = choose_chip(trace, CHIPS, None)
    assert choice.chip == get_chip("mi355x") and not choice.what_if
    said = Reason.of(ReasonCode.DEVICE_FROM_PROFILE, seen="AMD, 256 SMs/CUs, 288 GiB", chip="mi355x")
    assert choice.note() == said
    assert sentence(said) == "device from the profile: 'AMD, 256 SMs/CUs, 288 GiB' is catalog chip mi355x"


def test_a_differing_chip_is_a_what_if_and_unknown_devices_are_said() -> None:
    trace = _trace(deviceProperties=[{"name": "AMD Instinct MI300X", "totalGlobalMem": 1, "numSms": 304}])
    choice = choose_chip(trace, CHIPS, get_chip("h100"))
    assert choice.what_if and choice.chip == get_chip("h100")
    note = choice.note()
    assert note is not None and note == Reason.of(
        ReasonCode.DEVICE_WHAT_IF, seen="AMD Instinct MI300X", matched="mi300x", chip="h100"
    )
    assert "recorded on 'AMD Instinct MI300X' (catalog mi300x); priced on h100" in sentence(note)
    odd = choose_chip(_trace(deviceProperties=[{"name": "NVIDIA A100-PG509-200", "numSms": 108}]), CHIPS, None)
    assert odd.chip is None and odd.recorded is not None and odd.recorded.name == "NVIDIA A100-PG509-200"
    assert choose_chip(_trace(), CHIPS, None).recorded is None


def test_cli_profile_takes_the_chip_from_the_profile(third_party: Path) -> None:
    path = str(third_party / "chrome_trace" / "tracelens_sglang_qwen3_8b_prefilldecode_mi300x.json.gz")
    code, out, _ = run_cli("profile", path, "--json")
    assert code == 0
    payload = json.loads(out)
    assert payload["chip"] == "mi300x"
    assert payload["device"] == {"recorded": "AMD Instinct MI300X", "matched": "mi300x", "what_if": False}
    assert payload["notes"][1] == "device from the profile: 'AMD Instinct MI300X' is catalog chip mi300x"
    code, out, _ = run_cli("profile", path, "--json", "--chip", "h100")
    payload = json.loads(out)
    assert code == 0 and payload["chip"] == "h100" and payload["device"]["what_if"] is True
    assert sum("'AMD Instinct MI300X'" in n and "what-if" in n for n in payload["notes"]) == 1


def test_cli_profile_without_a_known_device_asks_for_chip(third_party: Path) -> None:
    code, _, err = run_cli("profile", str(third_party / "chrome_trace" / "hta_nccl_a100_2rank.json.gz"))
    assert code == 2
    assert "give --chip: the profile records 'NVIDIA A100-PG509-200', which no catalog chip matches" in err
