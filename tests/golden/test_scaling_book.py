"""Published worked examples from "How to Scale Your Model" (Austin et al., 2025,
jax-ml/scaling-book): Part 3 "Sharded Matrices and How to Multiply Them" (sharding.md) and
Part 12 "How to Think About GPUs" (gpus.md). Each test cites the question it reproduces and
writes the book's arithmetic next to rooftop's."""

from __future__ import annotations

import json

import pytest

from rooftop.cost.collectives import collective_time
from rooftop.cost.cost import Comm
from rooftop.hardware.catalog import get_chip
from rooftop.hardware.topology import make_mesh, parse_topology
from rooftop.sharding.matmul import plan_sharded_matmul
from rooftop.sharding.notation import parse_matmul, parse_tensor
from rooftop.sharding.shard import shard_array
from tests.conftest import run_cli

B, D = 1024, 4096
W_BIDIR_V4 = 9e10  # the book's bidirectional ICI bandwidth for TPU v4p (2 x 4.5e10)


def ag(axes: str, nbytes: float, mesh, **kw):
    return collective_time(Comm("all-gather", tuple(axes.split(",")), nbytes), mesh, **kw)


def collective(*argv: str) -> dict:
    code, out, err = run_cli("collective", *argv, "--json")
    assert code == 0, err
    return json.loads(out)


V4 = ("--chip", "tpu-v4", "--topology", "4x4x4", "--mesh", "X=4,Y=4,Z=4")
BXDY = ("--array", "bf16[1024,4096]", "--sharding", "[B_X, D_Y]")


def test_part3_question2_allgather_x_of_bx_dy() -> None:
    """Part 3 Question 2.1: AllGather_X([B_X, D_Y]) on a v4p 4x4x4: the book's 2BD / (9e10 x Y)
    = 23 us (full wraparound). rooftop keeps the exact (N-1)/N factor (each chip receives 3 of the
    4 shards, half each way): 3/4 x 23.3 = 17.5 us, and says so in book_why."""
    d = collective("all-gather", *V4, "--axes", "X", *BXDY)
    assert d["book_time_s"] == pytest.approx(2 * B * D / (W_BIDIR_V4 * 4))
    assert d["book_time_s"] == pytest.approx(23e-6, abs=0.5e-6)  # the book prints 23 us
    assert d["time_s"] == pytest.approx((4 - 1) / 4 * d["book_time_s"])
    assert d["time_s"] == pytest.approx(17.5e-6, rel=2e-3)
    assert "Part 3" in d["book_part"] and "V / W_bidir" in d["book_formula"]
    assert "3/4" in d["book_why"] and d["bound"] == d["book_bound"] == "bandwidth"


def test_part3_question2_allgather_y() -> None:
    """Part 3 Question 2.2 (the same gather over Y, which also wraps): 23 us again, rooftop 3/4 of it."""
    d = collective("all-gather", *V4, "--axes", "Y", "--array", "bf16[1024,4096]", "--sharding", "[B_Y, D_X]")
    assert d["book_time_s"] == pytest.approx(2 * B * D / (W_BIDIR_V4 * 4))
    assert d["time_s"] == pytest.approx(0.75 * d["book_time_s"])


def test_part3_question2_allgather_xy() -> None:
    """Part 3 Question 2.2: AllGather_XY([B_X, D_Y]): T = 2BD / (2 W) = 46 us (twice the bandwidth,
    the whole array); rooftop keeps the (N-1)/N = 15/16 of its ingress bound: 43.7 us."""
    d = collective("all-gather", *V4, "--axes", "X,Y", *BXDY)
    assert d["book_time_s"] == pytest.approx(2 * B * D / (2 * W_BIDIR_V4))
    assert d["book_time_s"] == pytest.approx(46e-6, abs=1e-6)  # printed 46 us
    assert d["time_s"] == pytest.approx((16 - 1) / 16 * d["book_time_s"])
    assert "15/16" in d["book_why"] and "n_axes" in d["book_formula"]


def test_part3_question2_allreduce_z() -> None:
    """Part 3 Question 2.3: AllReduce_Z([B_X, D_Y]{U_Z}): twice an all-gather, the book's 4BD / W =
    4 x 1024 x 4096 / 9e10 = 190 us. The book's figure prices the whole [B, D] array (V = 2BD bytes
    per device), so the command gives --bytes 2BD; rooftop keeps 3/4 of it."""
    d = collective("all-reduce", *V4, "--axes", "Z", "--bytes", str(2 * B * D))
    assert d["book_time_s"] == pytest.approx(4 * B * D / W_BIDIR_V4)
    assert d["book_time_s"] == pytest.approx(190e-6, rel=0.03)  # the book rounds 186 us to 190
    assert d["time_s"] == pytest.approx(0.75 * d["book_time_s"])


def test_part3_question2_allreduce_z_of_the_shard() -> None:
    """The same all-reduce of the [B_X, D_Y] shard each chip holds (2BD / 16 bytes): the book's rule gives
    2 x 2BD / (16 x 9e10) = 11.6 us."""
    d = collective("all-reduce", *V4, "--axes", "Z", *BXDY)
    assert d["book_time_s"] == pytest.approx(2 * 2 * B * D / (16 * W_BIDIR_V4))


def test_part3_question3_latency_bound() -> None:
    """Part 3 Question 3: AllGather_X([B_X]) with B=128 in bf16: latency-bound, 2 hops ~ 2 us; the book's
    figure and rooftop's agree (book_why is empty)."""
    d = collective("all-gather", *V4, "--axes", "X", "--array", "bf16[128]", "--sharding", "[B_X]")
    assert d["bound"] == d["book_bound"] == "latency" and d["hops"] == 2
    assert d["time_s"] == d["book_time_s"] == pytest.approx(2e-6)
    assert d["book_why"] == ""


def test_part3_pop_quiz2_v5e_without_wraparound() -> None:
    """Part 3 Pop Quiz 2: AllGather_Y([E_Y, F]) on v5e {'X': 8, 'Y': 4}, E=2048, F=8192 bf16: no
    wraparound on an axis of 4, so 3 hops of the 8.4 MB shard at the book's 4.5e10 = 560 us
    (--chip tpu-v5e@book; the catalog's Google figure is 5e10: 503 us). E = F = 256: latency-bound, ~3 us."""
    d = collective(
        "all-gather",
        "--chip",
        "tpu-v5e@book",
        "--topology",
        "8x4",
        "--mesh",
        "X=8,Y=4",
        "--axes",
        "Y",
        "--array",
        "bf16[2048,8192]",
        "--sharding",
        "[E_Y, F]",
    )
    assert d["book_time_s"] == d["time_s"] == pytest.approx(3 * (512 * 8192 * 2) / 4.5e10)
    assert d["book_time_s"] == pytest.approx(560e-6, rel=0.01)
    assert "(N-1) x S / W" in d["book_formula"] and "no wraparound on Y" in d["why"]
    vendor = collective(
        "all-gather",
        "--chip",
        "tpu-v5e",
        "--topology",
        "8x4",
        "--mesh",
        "X=8,Y=4",
        "--axes",
        "Y",
        "--array",
        "bf16[2048,8192]",
        "--sharding",
        "[E_Y, F]",
    )
    assert vendor["book_time_s"] == pytest.approx(3 * (512 * 8192 * 2) / 5e10)
    small = collective(
        "all-gather",
        "--chip",
        "tpu-v5e@book",
        "--topology",
        "8x4",
        "--mesh",
        "X=8,Y=4",
        "--axes",
        "Y",
        "--array",
        "bf16[256,256]",
        "--sharding",
        "[E_Y, F]",
    )
    assert small["book_bound"] == "latency" and small["book_time_s"] == pytest.approx(3e-6)


def test_part3_alltoall_is_a_quarter_of_an_allgather() -> None:
    """Part 3 summary table: AllToAll = AllGather / 4 on a bidirectional ring, comparing arrays of
    the same global size G (all-to-all's per-device buffer is G / N). The book's quarter is asymptotic:
    the all-gather keeps its (N-1)/N = 15/16 factor, the ring all-to-all's floor(n^2/4) has none for even n."""
    mesh = make_mesh(parse_topology(get_chip("tpu-v5e"), "16x16"), "X=16,Y=16")
    g = 64 * 2.0**20
    gather = ag("X", g, mesh).bandwidth_time_s
    a2a = collective_time(Comm("all-to-all", ("X",), g / 16), mesh).bandwidth_time_s
    assert a2a == pytest.approx(gather / 4 * 16 / 15)
    d = collective("all-to-all", "--chip", "tpu-v5e", "--topology", "16x16", "--axes", "X", "--bytes", str(g / 16))
    assert d["book_time_s"] == pytest.approx(g / (2 * 5e10) / 4)  # the book's AllGather(G) / 4
    assert d["time_s"] == pytest.approx(d["book_time_s"])  # even ring: the quarter is exact


def test_part3_memory_pop_quiz_and_question1() -> None:
    """Part 3 Pop Quiz: int8[128, 2048] as A[I_XY, J] on {X: 2, Y: 8, Z: 2}: 16,384 bytes per device,
    512 KiB in total. Question 1: A[I_X, J, K] on {X: 4, Y: 8, Z: 2} is stored Y x Z = 16 times."""
    rep = shard_array(parse_tensor("A[I_XY, J]"), (128, 2048), "int8", {"X": 2, "Y": 8, "Z": 2})
    assert rep.bytes_per_device == 8 * 2048 == 16384
    assert rep.total_bytes == 128 * 2048 * 2 == 512 * 1024
    q1 = shard_array(parse_tensor("A[I_X, J, K]"), (64, 8, 8), "bf16", {"X": 4, "Y": 8, "Z": 2})
    assert q1.total_bytes / q1.array_bytes == 8 * 2 and q1.copies == 16


def test_part3_question4_comm_volumes() -> None:
    """Part 3 Question 4: A[B, D] . W[D_X, F]: gathering W moves 2DF bytes (bf16); multiplying the
    shards and all-reducing C moves an all-reduce of 2BF bytes (4BF on the wire)."""
    sizes = {"B": 256, "D": 8192, "F": 4096}
    found = {
        tuple(s.kind for s in st.steps): st
        for st in plan_sharded_matmul(parse_matmul("A[B, D] @ W[D_X, F] -> C[B, F]"), sizes, {"X": 4})
    }
    assert found[("all-gather", "matmul")].steps[0].bytes == 2 * 8192 * 4096
    assert found[("matmul", "all-reduce")].steps[1].bytes == 2 * 256 * 4096


def test_part12_pop_quiz1_nvlink_allgather() -> None:
    """Part 12 Pop Quiz 1: AllGather(bf16[B_X, F]) on 8xH100, B=1024, F=16384:
    2BF (8-1) / (8 x 450e9) = 65 us."""
    mesh = make_mesh(parse_topology(get_chip("h100"), "8"), "X=1,Y=8")
    ct = ag("Y", 2 * 1024 * 16384, mesh)
    assert ct.bandwidth_time_s == pytest.approx(2 * 1024 * 16384 * (8 - 1) / (8 * 450e9))
    assert ct.time_s == pytest.approx(65e-6, rel=0.02)
    d = collective(
        "all-gather",
        "--chip",
        "h100",
        "--topology",
        "8",
        "--mesh",
        "X=1,Y=8",
        "--axes",
        "Y",
        "--array",
        "bf16[1024,16384]",
        "--sharding",
        "[B_Y, F]",
    )
    assert d["book_time_s"] == pytest.approx(65e-6, rel=0.01)  # Part 12 keeps (N-1)/N: the same rule
    assert d["time_s"] == d["book_time_s"] and d["book_why"] == "" and "Part 12" in d["book_part"]


def test_part12_sharp_and_cross_node() -> None:
    """Part 12: SHARP all-reduce = bytes / GPU egress; beyond the node an AllGather costs
    bytes (D-1) / (D x W_node egress) with D = 16 nodes and W_node = 8 x 400 Gb/s = 400e9;
    cross-node AllToAll over M nodes = B (M-1) / (M^2 W_node) with B the global bytes."""
    mesh = make_mesh(parse_topology(get_chip("h100"), "16x8"), "data=16,model=8")
    v = 2.0**30
    sharp = collective_time(Comm("all-reduce", ("model",), v), mesh, sharp=True)
    assert sharp.bandwidth_time_s == pytest.approx(v / 450e9)
    gather = ag("data,model", v, mesh)
    assert gather.bandwidth_time_s == pytest.approx(v * (16 - 1) / (16 * 400e9))
    a2a = collective_time(Comm("all-to-all", ("data", "model"), v / 128), mesh)
    assert a2a.bandwidth_time_s == pytest.approx(v * (16 - 1) / (16**2 * 400e9))
    d = collective(
        "all-gather",
        "--chip",
        "h100",
        "--topology",
        "16x8",
        "--mesh",
        "data=16,model=8",
        "--axes",
        "data,model",
        "--bytes",
        str(v),
    )
    assert d["book_time_s"] == pytest.approx(v * (16 - 1) / (16 * 400e9)) == pytest.approx(d["time_s"])


def test_book_catalog_chip_has_the_books_rounded_figures() -> None:
    """Part 2's TPU tables: v5p at 96 GB, 2.8e12 B/s HBM and 9e10 B/s links (the catalog: Google's 95 GiB,
    2.765e12 and 1e11); every other figure is the catalog's. A chip the book has no figures for is refused."""
    book, vendor = get_chip("tpu-v5p@book"), get_chip("tpu-v5p")
    assert (book.hbm_capacity_bytes, book.hbm_bytes_per_s, book.link_bytes_per_s) == (96e9, 2.8e12, 9e10)
    assert vendor.link_bytes_per_s == 1e11 and book.dcn_bytes_per_s == vendor.dcn_bytes_per_s
    assert "Part 2" in book.sources["links.bytes_per_s"].source
    code, _, err = run_cli(
        "collective", "all-gather", "--chip", "a100@book", "--topology", "8", "--axes", "X", "--bytes", "1MiB"
    )
    assert code == 2 and "h100@book" in err and "Traceback" not in err


def test_part3_question4_strategies_by_the_books_rule() -> None:
    """Part 3 Question 4 on a v5p 4x4x4 with the book's figures (--chip tpu-v5p@book, 9e10 B/s links):
    gathering W[D_X, F] costs 2DF / W_ici and all-reducing C[B, F]{U_X} costs 4BF / W_ici (W_ici the
    bidirectional 1.8e11); T = max(T_math, T_comms). The book's figures are in book_time_s of each strategy."""
    b, d_, f = 256, 8192, 4096
    code, out, err = run_cli(
        "matmul",
        "A[B, D] @ W[D_X, F] -> C[B, F]",
        "--dims",
        f"B={b},D={d_},F={f}",
        "--chip",
        "tpu-v5p@book",
        "--topology",
        "4x4x4",
        "--mesh",
        "X=4,Y=4,Z=4",
        "--json",
    )
    assert code == 0, err
    p = json.loads(out)
    by = {s["strategy"]: s for s in [p, *p["alternatives"]]}
    reduce = next(s for n, s in by.items() if n.startswith("matmul") and "all-reduce" in n)
    gather = next(s for n, s in by.items() if n.startswith("all-gather W"))
    assert reduce["book_time_s"] == pytest.approx(max(2 * b * d_ * f / 4 / 4.59e14, 4 * b * f / 1.8e11))
    assert gather["book_time_s"] == pytest.approx(max(2 * b * d_ * f / 4.59e14, 2 * d_ * f / 1.8e11))
    assert p["strategy"] == reduce["strategy"]  # the book's answer: Strategy 2 wins for D > 5100
    assert p["book_comm_s"] == pytest.approx(4 * b * f / 1.8e11) and "3/4" not in p["book_why"]
    assert p["comm_s"] == pytest.approx(0.75 * p["book_comm_s"])


def model_json(*argv: str) -> dict:
    code, out, err = run_cli("model", *argv, "--json")
    assert code == 0, err
    return json.loads(out)


def test_part4_question1_params_and_kv_from_dims() -> None:
    """Part 4 Question 1: D = 4096, F = 4D, V = 32,000, L = 64, N H = D, multi-head attention, int8 KV:
    L (3DF + 4DNH + D) + 2DV ~ 16e9 parameters (the book rounds 4096 to 4e3) and
    2 L N H = 512 kB of KV cache per token."""
    d_, f, v, layers = 4096, 4 * 4096, 32000, 64
    p = model_json("--dims", f"D={d_},F={f},L={layers},N=32,V={v}", "--kv-dtype", "int8")
    book = layers * (3 * d_ * f + 4 * d_ * d_ + d_) + 2 * d_ * v
    assert p["params_total"] == book + layers * d_ + d_  # rooftop: 2 norms a layer and the final norm
    assert p["params_total"] == pytest.approx(16e9, rel=0.1)
    assert p["kv_cache_bytes_per_token"] == 2 * layers * 4096 == 512 * 1024


def test_part4_question5_attention_equals_projections_at_t_2d() -> None:
    """Part 4 Question 5: self-attention FLOPs equal the QKVO projections' when 24 B T D N H = 12 B T^2 N H,
    T = 2D = 8192 for D = 4096 (full attention, as Part 4 counts): book_attention_flops_per_token at T = 8192
    is the projections' 2 x 4 D N H x L forward. rooftop's default causal count is half that, and says so."""
    p = model_json("--dims", "D=4096,F=16384,L=64,N=32,V=32000", "--seq-len", "8192")
    assert p["book_attention_flops_per_token"] == pytest.approx(2 * 4 * 4096 * 4096 * 64)
    assert p["attention_flops_per_token"] == pytest.approx(p["book_attention_flops_per_token"] * (8192 + 1) / 2 / 8192)
    assert "causal" in p["book_why"] and "Part 4" in p["book_part"]
    full = model_json("--dims", "D=4096,F=16384,L=64,N=32,V=32000", "--seq-len", "8192", "--attention", "full")
    assert full["flops_per_token_train"] == pytest.approx(full["book_flops_per_token_train"])
    assert full["book_why"] == ""
