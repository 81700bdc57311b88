"""rooftop limits: more link bandwidth never raises a critical batch; a wider MLP never lowers the
largest tensor-parallel degree."""

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from rooftop.hardware.catalog import get_chip
from rooftop.hardware.topology import parse_topology
from rooftop.model.catalog import get_model
from rooftop.plan.limit_values import JobLimits
from rooftop.plan.limits import job_limits

CFG = get_model("llama-3-8b")
CASES = [("tpu-v5p", "4x4x8"), ("tpu-v5e", "2*4x4"), ("h100", "4x8"), ("b200", "2x8")]


def _limits(chip_name: str, topo: str, link_scale: float = 1.0, dcn_scale: float = 1.0, d_ff: int = 0) -> JobLimits:
    chip = get_chip(chip_name)
    chip = dataclasses.replace(
        chip, link_bytes_per_s=chip.link_bytes_per_s * link_scale, dcn_bytes_per_s=chip.dcn_bytes_per_s * dcn_scale
    )
    cfg = dataclasses.replace(CFG, d_ff=d_ff) if d_ff else CFG
    return job_limits(cfg, chip, parse_topology(chip, topo), 1 << 20, 4096)


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(CASES), st.floats(1.0, 8.0), st.floats(1.0, 8.0))
def test_more_link_bandwidth_never_raises_the_critical_tokens(case: tuple[str, str], link: float, dcn: float) -> None:
    base, fast = _limits(*case), _limits(*case, link_scale=link, dcn_scale=dcn)
    for lim in base.limits:
        if lim.rule in ("dp", "fsdp", "moe", "split_min"):
            faster = fast.limit(lim.name, lim.axes)
            assert faster.value <= lim.value * (1 + 1e-12), (lim.name, lim.axes)
            assert faster.book_value is not None and lim.book_value is not None
            assert faster.book_value <= lim.book_value * (1 + 1e-12)
        if lim.rule in ("tp", "tp_layout"):
            assert fast.limit(lim.name, lim.axes).value >= lim.value


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(CASES), st.integers(1024, 65536), st.integers(1, 8))
def test_a_wider_mlp_never_lowers_the_largest_tp(case: tuple[str, str], d_ff: int, factor: int) -> None:
    narrow, wide = _limits(*case, d_ff=d_ff), _limits(*case, d_ff=d_ff * factor)
    assert wide.limit("tp_largest_degree").value >= narrow.limit("tp_largest_degree").value
    for s in narrow.axis_sets:
        assert wide.limit("tp_max_degree", s.name).value >= narrow.limit("tp_max_degree", s.name).value
