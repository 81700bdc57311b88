"""`rooftop collective`, `rooftop shard` and sharded `rooftop matmul`: JSON contracts, tables, errors."""

from __future__ import annotations

import json

import pytest

from tests.conftest import run_cli

V4 = ("--chip", "tpu-v4", "--topology", "4x4x4", "--mesh", "X=4,Y=4,Z=4")


def as_json(*argv: str) -> dict:
    code, out, err = run_cli(*argv, "--json")
    assert code == 0, err
    return json.loads(out)


def test_collective_all_gather_golden_json() -> None:
    d = as_json(
        "collective", "all-gather", *V4, "--axes", "X", "--array", "bf16[1024,4096]", "--sharding", "[B_X, D_Y]"
    )
    assert d["bytes_per_device"] == 1024 * 4096 * 2 / 4
    assert d["time_s"] == pytest.approx((4 - 1) / 2 * (1024 * 4096 * 2 / 4 / 4) / 4.5e10)
    assert d["bound"] == "bandwidth" and d["hops"] == 2
    assert d["latency_time_s"] == pytest.approx(2e-6)
    (axis,) = d["axes"]
    assert axis == {
        "name": "X",
        "size": 4,
        "links": ["ici"],
        "wrap": True,
        "shape": "ring",
        "bandwidth_bytes_per_s": 2 * 4.5e10,
        "segments": [{"dim": 0, "size": 4, "stride": 1, "link": "ici"}],
    }
    for key in ("formula", "why", "bandwidth_time_s", "groups", "devices", "sharp", "schema_version"):
        assert key in d
    assert d["array"]["sharding"] == "A[B_X, D_Y]"


def test_collective_latency_bound_and_bytes_flag() -> None:
    d = as_json("collective", "all-gather", *V4, "--axes", "X", "--array", "bf16[128]", "--sharding", "[B_X]")
    assert d["bound"] == "latency" and d["time_s"] == pytest.approx(2e-6)
    e = as_json("collective", "all-gather", *V4, "--axes", "X", "--bytes", "256")
    assert e["time_s"] == d["time_s"]


def test_collective_line_says_why() -> None:
    v5e = ("--chip", "tpu-v5e", "--topology", "4x4", "--mesh", "X=4,Y=4")
    d = as_json("collective", "all-gather", *v5e, "--axes", "X", "--bytes", "2MiB")
    assert d["hops"] == 3 and d["axes"][0]["wrap"] is False
    assert "no wraparound on X: line of 4" in d["why"]


def test_collective_reduce_and_gpu_sharp() -> None:
    rs = as_json("collective", "reduce-scatter", *V4, "--axes", "X,Y", "--array", "bf16[1024,4096]")
    assert rs["bytes_per_device"] == 1024 * 4096 * 2 and rs["devices"] == 16
    gpu = ("--chip", "h100", "--topology", "16x8", "--mesh", "data=16,model=8", "--axes", "model", "--bytes", "1GiB")
    sharp = as_json("collective", "all-reduce", *gpu, "--sharp")
    assert sharp["sharp"] is True and sharp["time_s"] == pytest.approx(2**30 / 4.5e11, rel=1e-3)


def test_collective_table_output() -> None:
    code, out, _ = run_cli("collective", "all-to-all", *V4, "--axes", "Y", "--bytes", "4MiB")
    assert code == 0 and "all-to-all over Y" in out and "ring" in out and "formula" in out


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (("collective", "all-reduce", *V4, "--axes", "X", "--bytes", "1MiB", "--sharp"), "--sharp"),
        (("collective", "all-gather", *V4, "--axes", "Q", "--bytes", "1MiB"), "unknown mesh axis 'Q'"),
        (("collective", "all-gather", *V4, "--axes", "X", "--array", "bf16[1022]", "--sharding", "[B_X]"), "B=1022"),
        (("collective", "all-gather", *V4, "--axes", "X", "--bytes", "1MiB", "--sharding", "[B_X]"), "--array"),
        (("collective", "all-gather", *V4[:4], "--mesh", "X=8,Y=4", "--axes", "X", "--bytes", "1"), "has 32 devices"),
        (("shard", "A[I_X, J]", "--shape", "6,8", "--mesh", "X=4"), "I=6"),
        (("matmul", "A[I_X, J] @ B[J, K]", "--dims", "I=64,J=8,K=8", "--chip", "tpu-v4"), "--topology"),
        (("matmul", "A[I_X, J_X] @ B[J, K]", "--dims", "I=64,J=8,K=8", *V4), "at most one dim"),
    ],
)
def test_errors_are_one_line_exit_2(argv: tuple[str, ...], needle: str) -> None:
    code, out, err = run_cli(*argv)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and needle in err


def test_shard_command() -> None:
    d = as_json("shard", "A[I_XY, J]", "--shape", "128,2048", "--dtype", "int8", "--mesh", "X=2,Y=8,Z=2")
    assert d["local_shape"] == [8, 2048] and d["bytes_per_device"] == 16384
    assert d["total_bytes"] == 512 * 1024 and d["copies"] == 2 and d["replicated_axes"] == ["Z"]
    code, out, _ = run_cli("shard", "A[I_XY, J]", "--shape", "128,2048", "--dtype", "int8", "--mesh", "X=2,Y=8,Z=2")
    assert code == 0 and "16 KiB" in out and "512 KiB" in out


def test_sharded_matmul_json() -> None:
    d = as_json("matmul", "A[I, J_X] @ B[J_X, K] -> C[I, K_X]", "--dims", "I=4096,J=8192,K=16384", *V4)
    assert [s["kind"] for s in d["steps"]] == ["matmul", "reduce-scatter"]
    assert d["steps"][1]["bytes"] == 4096 * 16384 * 2 and d["steps"][1]["axes"] == ["X"]
    assert d["output_sharding"] == "C[I, K_X]" and d["per_device_flops"] == 2 * 4096 * 8192 / 4 * 16384
    assert d["lower_bound_s"] == pytest.approx(max(d["compute_s"], d["memory_s"], d["comm_s"]))
    assert d["upper_bound_s"] == pytest.approx(d["compute_s"] + d["memory_s"] + d["comm_s"])
    for key in ("flops", "hbm_bytes", "arithmetic_intensity", "critical_intensity", "bound", "operands"):
        assert key in d
    assert d["alternatives"] and all("lower_bound_s" in a and "steps" in a for a in d["alternatives"])
    assert d["operands"]["lhs"]["local_shape"] == [4096, 2048]


def test_sharded_matmul_table() -> None:
    code, out, _ = run_cli("matmul", "A[I_X, J] @ B[J, K_X]", "--dims", "I=1024,J=1024,K=1024", *V4)
    assert code == 0 and "alternatives" in out and "all-gather" in out


def test_collective_algorithm_by_name() -> None:
    """--algorithm ring: one flat ring over 64 nodes x 8 H100 with NCCL's step latencies (catalog/frameworks/
    training.toml): 2 x 511 shards of V / 512 through a node's 8 NICs of 5e10 B/s, plus 8.4 us + 2 x (511 - 63)
    x 3.4 us + 2 x 63 x 14 us. --algorithm in-network is --sharp; an unknown name and both flags are refused."""
    gpu = ("--chip", "h100", "--topology", "64x8", "--mesh", "dp=64,tp=8", "--axes", "dp,tp", "--bytes", "4MB")
    d = as_json("collective", "all-reduce", *gpu, "--algorithm", "ring")
    lat = 8.4e-6 + 2 * (511 - 63) * 3.4e-6 + 2 * 63 * 14e-6
    assert d["latency_time_s"] == pytest.approx(lat) and d["hops"] == 2 * 511
    assert d["time_s"] == pytest.approx(2 * 511 * (4e6 / 512) / (8 * 5e10) + lat)
    assert d["algorithm"] == "ring" and d["latency_adds"] and d["groups"] == []
    assert d["algorithm_latency"] == {"base_s": 8.4e-6, "intra_step_s": 3.4e-6, "inter_step_s": 14e-6}
    assert [a["shape"] for a in d["axes"]] == ["switch", "switch"]
    sharp, value = (
        as_json("collective", "all-reduce", *gpu, "--sharp"),
        as_json("collective", "all-reduce", *gpu, "--algorithm", "in-network"),
    )
    assert value["time_s"] == sharp["time_s"] and value["sharp"] and value["algorithm"] == "in-network"
    assert as_json("collective", "all-reduce", *gpu)["algorithm"] == "hierarchical"
    code, _, err = run_cli("collective", "all-reduce", *gpu, "--algorithm", "butterfly")
    assert code == 2 and "valid: hierarchical, in-network, ring" in err and len(err.strip().splitlines()) == 1
    code, _, err = run_cli("collective", "all-reduce", *gpu, "--algorithm", "ring", "--sharp")
    assert code == 2 and "not allowed" in err
