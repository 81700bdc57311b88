"""What the profile report says of real profiles: the communication line agrees with the parts table
(the v6e psum runs outside the steps' windows), and the report opens with its coverage."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_cli


def test_v6e_communication_outside_the_steps_is_said(third_party: Path) -> None:
    pytest.importorskip("jax")
    code, out, _ = run_cli("profile", str(third_party / "xplane/xprof_tpu_v6e_inference_2.xplane.pb"))
    assert code == 0
    line = next(ln for ln in out.splitlines() if ln.startswith("communication"))
    assert line.startswith("communication 0 s, 0% overlapped by compute inside the steps (365 ms per device in all")


def test_report_opens_with_its_coverage(third_party: Path) -> None:
    path = third_party / "chrome_trace/tracelens_vllm_decode_full_mi300x.json.gz"
    code, out, _ = run_cli("profile", str(path), "--json")
    payload = json.loads(out)
    cov = payload["coverage"]
    assert code == 0 and payload["notes"][0].startswith("coverage: ")
    assert cov["priced_fraction"] == payload["priced_fraction"] < 0.1  # no capture beside the shared copy
    assert cov["unpriced_fraction"] == pytest.approx(1 - cov["priced_fraction"])
    assert cov["graph_replayed_fraction"] > 0.9  # 421 of 425 kernels replayed from the graph
    assert 0 < cov["idle_fraction"] < 1  # one step from vLLM's execute_ annotation to the last kernel
    assert any("--capture" in n for n in payload["notes"])


def test_legacy_conv3d_copies_are_ops(third_party: Path) -> None:
    """53 device-to-device copies of 655,360 bytes (20% of the device time) are an op of their own, priced as
    the bytes read and written on the MI300X's HBM, not dropped."""
    pytest.importorskip("jax")
    code, out, _ = run_cli("profile", str(third_party / "xplane/tracelens_jax_conv3d_mi300x_legacy.xplane.pb"),
                           "--json")  # fmt: skip
    (copy,) = [o for o in json.loads(out)["ops"] if o["opcode"] == "copy"]
    assert code == 0 and copy["count"] == 53 and copy["bytes"] == 2 * 655_360
    assert copy["lower_bound_s"] == pytest.approx(2 * 655_360 / 5.3e12)
