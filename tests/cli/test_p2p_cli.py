"""``rooftop p2p``: Part 2 Question 5 and the routing rules (shortest way per dim, wraparound, switches)."""

from __future__ import annotations

import json

import pytest

from tests.conftest import run_cli


def _json(*argv: str) -> dict:
    code, out, err = run_cli("p2p", *argv, "--json")
    assert code == 0, err
    return json.loads(out)


def test_part2_question5_v5e_4x4() -> None:
    """bf16[8, 128, 8192] from TPU{0, 0} to TPU{3, 3} of a v5e 4x4 (no wraparound below 16): 6 hops, so the
    first byte after ~6 us; half the 1.7e7 bytes right and half down at 2 x 4.5e10 = 188 us, 194 us in all
    (the book rounds 16.8 MB to 1.7e7: 186 + 6 = 192 us)."""
    d = _json("--chip", "tpu-v5e@book", "--topology", "4x4", "--from", "0,0", "--to", "3,3",
              "--array", "bf16[8,128,8192]")  # fmt: skip
    v = 2 * 8 * 128 * 8192
    assert d["bytes"] == v and d["hops"] == 6 and d["links"] == 2
    assert d["first_byte_s"] == pytest.approx(6e-6)
    assert d["time_s"] == pytest.approx(6e-6 + v / (2 * 4.5e10))
    assert d["time_s"] == pytest.approx(194e-6, rel=0.02)
    assert "Part 2" in d["book_part"]


def test_wraparound_takes_the_short_way() -> None:
    """A full v5e 16x16 wraps: 0 -> 15 is one hop back round, 0 -> 3 three hops."""
    d = _json("--chip", "tpu-v5e", "--topology", "16x16", "--from", "0,0", "--to", "15,3", "--bytes", "1MiB")
    assert [leg["hops"] for leg in d["legs"]] == [1, 3] and d["hops"] == 4
    assert d["bandwidth_bytes_per_s"] == 2 * 5e10


def test_gpu_cross_node_is_capped_by_the_nic() -> None:
    d = _json("--chip", "h100", "--topology", "16x8", "--from", "0,0", "--to", "3,5", "--bytes", "1GiB")
    assert d["hops"] == 2 and d["bandwidth_bytes_per_s"] == 5e10
    assert d["time_s"] == pytest.approx(5e-6 + 2e-6 + 2**30 / 5e10)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--from", "0,0", "--to", "4,0"], "outside 0..3"),
        (["--from", "0,0", "--to", "0,0"], "same chip"),
        (["--from", "0", "--to", "1,1"], "give 2 whole coordinates"),
    ],
)
def test_bad_input_is_one_line_exit_2(argv: list[str], message: str) -> None:
    code, _, err = run_cli("p2p", "--chip", "tpu-v5e", "--topology", "4x4", "--bytes", "1MiB", *argv)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1
