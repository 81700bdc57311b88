"""docs/json.md documents every key of every command's --json payload.

Each case runs one command on a small input and checks that the keys of the payload (top level,
the first item of its main lists, and its nested objects) appear as backticked paths
(``points[].batch``, ``best.parallelism.dp``) in the command's section, ``## rooftop COMMAND`` up
to the next ``## `` heading. A key added to a payload without documentation fails here.
"""

from __future__ import annotations

import json
import re
import shlex
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli

DOC = Path(__file__).resolve().parents[2] / "docs" / "json.md"

#: a small HLO module: a dot and an all-reduce over pairs of the 8 devices.
HLO = "\n".join(
    [
        "HloModule json_doc, num_partitions=8",
        "",
        "%sum (a: f32[], b: f32[]) -> f32[] {",
        "  %a = f32[] parameter(0)",
        "  %b = f32[] parameter(1)",
        "  ROOT %s = f32[] add(f32[] %a, f32[] %b)",
        "}",
        "",
        "ENTRY %main (x: f32[128,256], w: f32[256,512]) -> f32[128,512] {",
        "  %x = f32[128,256]{1,0} parameter(0)",
        "  %w = f32[256,512]{1,0} parameter(1)",
        "  %dot = f32[128,512]{1,0} dot(f32[128,256]{1,0} %x, f32[256,512]{1,0} %w), lhs_contracting_dims={1},"
        " rhs_contracting_dims={0}",
        "  ROOT %all-reduce = f32[128,512]{1,0} all-reduce(f32[128,512]{1,0} %dot), channel_id=1,"
        " replica_groups={{0,1},{2,3},{4,5},{6,7}}, use_global_device_ids=true, to_apply=%sum",
        "}",
        "",
    ]
)

#: (id, command line without --json, objects besides the top level whose keys must be documented).
#: An object is "a.b" or "a[0]" (first item of a list), optionally "a.b=prefix|prefix..." when it is
#: documented under other prefixes (any one will do); the default prefix is its path with [0] -> [].
CASES: list[tuple[str, str, str]] = [
    ("chips", "chips", "chips[0] chips[0].links chips[0].topology"),
    ("chips NAME", "chips h100", "chip=chips[] chip.links=chips[].links"),
    ("matmul", "matmul 'A[B,D] @ W[D,F]' --dims B=4096,D=8192,F=8192 --chip tpu-v5e", "dtypes terms[0]"),
    (
        "matmul sharded",
        "matmul 'A[I, J_X] @ B[J_X, K] -> C[I, K]' --dims I=1024,J=1024,K=1024 --chip tpu-v5e --topology 4x4"
        " --mesh X=4,Y=4",
        "dtypes operands.lhs=operands.* as_multiplied steps[0] alternatives[0]",
    ),
    (
        "matmul critical sweep",
        "matmul 'A[B,D] @ W[D,F]' --dims B=64,D=512,F=512 --chip tpu-v5e --critical B --sweep B=1:4 --series D=256",
        "critical sweep sweep.series[0] sweep.series[0].points[0]",
    ),
    ("roofline", "roofline --chip tpu-v5p --flops 1e12 --bytes 4GiB", "op terms[0]"),
    (
        "matmul search",
        "matmul 'A[B,D] @ W[D,F]' --dims B=64,D=64,F=64 --chip tpu-v5e --topology 2x2 --search",
        "search[0] search[0].collectives[0]",
    ),
    ("p2p", "p2p --chip tpu-v5e --topology 4x4 --from 0,0 --to 3,3 --bytes 1MiB", "legs[0]"),
    (
        "collective",
        "collective all-gather --chip tpu-v4 --topology 4x4x4 --mesh X=4,Y=4,Z=4 --axes X --array 'bf16[1024,4096]'"
        " --sharding '[B_X, D_Y]'",
        "axes[0] axes[0].segments[0] groups[0] array algorithm_latency",
    ),
    ("shard", "shard 'A[I_XY, J]' --shape 128,2048 --dtype int8 --mesh X=2,Y=8,Z=2", "dims[0]"),
    ("models", "models", "models[0]"),
    (
        "model",
        "model deepseek-v3 --seq-len 4096",
        "model model.config model.config.moe model.config.mla params_breakdown layer_groups[0]"
        " training_bytes_per_param_breakdown training_state_bytes conventions",
    ),
    (
        "train",
        "train llama-3-8b --chip h100 --chips 64 --batch-tokens 1M --seq-len 4096 --tokens 1T --top 2",
        "efficiency best best.ideal candidates[0] candidates[0].parallelism candidates[0].memory_per_chip_bytes"
        " candidates[0].breakdown energy",
    ),
    (
        "train",
        "train llama-3-8b --chip h100 --batch-tokens 1M --seq-len 4096 --tokens 100G --max-days 7 --top 1"
        " --emit maxtext",
        "energy goal goal.next_smaller=goal.tried[] goal.tried[0] emit",
    ),
    (
        "serve",
        "serve llama-3-8b --chip h100 --prompt-len 512 --gen-len 128 --requests-per-s 100 --max-step-latency 20ms"
        " --emit vllm",
        "energy goal goal.layout=points[].parallelism goal.one_replica_fewer=goal.layouts[] goal.layouts[0]"
        " goal.ttft_stages[0] emit",
    ),
    (
        "compare",
        "compare llama-3-8b --chips-list h100:16,tpu-v5e:4x4 --batch-tokens 1M --seq-len 4096 --tokens 1T",
        "settings settings.fix entries[0]",
    ),
    (
        "compare",
        "compare llama-3-8b --chips-list h100:8,tpu-v5e:2x2 --prompt-len 512 --gen-len 128",
        "settings entries[0]",
    ),
    (
        "limits",
        "limits mixtral-8x7b --chip h100 --topology 16x8 --batch-tokens 4M --seq-len 4096",
        "efficiency figures figures.peak_flops_per_s=figures.* figures.n_experts=figures.* axes[0]"
        " axes[0].groups[0] limits[0] limits[0].figures",
    ),
    (
        "serve",
        "serve llama-3-8b --chip h100 --chips 8 --prompt-len 512 --gen-len 128 --max-step-latency 50ms"
        " --requests-per-s 4 --percentiles --requests 1000 --prefix-len 256 --prefix-hit-rate 0.5 --mtp 2"
        " --accept-rate 0.8 --decode-chip h200",
        "dtypes efficiency constraints critical_batch points[0] points[0].parallelism points[0].memory"
        " points[0].cost_per_million_tokens_usd points[0].breakdown"
        " points[0].prefill_batch_breakdown=points[].prefill_batch_breakdown|points[].breakdown"
        " layouts[0] large_batch_end min_slice"
        " disaggregation disaggregation.prefill disaggregation.decode=disaggregation.decode|disaggregation.prefill"
        " continuous_batching continuous_batching.layouts[0]"
        " disaggregation.kv_transfer energy percentiles percentiles.ttft_s percentiles.tpot_s percentiles.e2e_s"
        " prefix_cache speculative decode_chip_disaggregation=decode_chip_disaggregation|disaggregation"
        " decode_chip_disaggregation.kv_transfer=decode_chip_disaggregation.kv_transfer|disaggregation.kv_transfer"
        " decode_chip_disaggregation.prefill=disaggregation.prefill"
        " decode_chip_disaggregation.decode=disaggregation.decode|disaggregation.prefill",
    ),
    ("hlo", "hlo {hlo} --chip h100", "mesh totals collectives_by_axis[0] instructions[0]"),
    ("profile", "profile {profile} --chip h100", "ops[0] steps[0] overlap memory"),
    ("diff", "diff {hlo} {hlo} --chip h100", "a b counts rows[0]"),
    ("calibrate", "calibrate --quick --repeats 1", ""),
]


@cache
def documented(command: str) -> frozenset[str]:
    """The backticked spans of ``## rooftop COMMAND`` (up to the next ``## `` heading)."""
    text = DOC.read_text()
    m = re.search(rf"^## rooftop {re.escape(command)}[ \t]*\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert m, f"docs/json.md has no section '## rooftop {command}'"
    return frozenset(re.findall(r"`([^`\n]+)`", m.group(1)))


def resolve(payload: dict[str, Any], path: str) -> Any:
    obj: Any = payload
    for part in filter(None, path.split(".")):
        name, index = re.fullmatch(r"([^\[]+)(?:\[(\d+)\])?", part).groups()
        obj = obj.get(name) if isinstance(obj, dict) else None
        if index is not None:
            obj = obj[int(index)] if isinstance(obj, list) and len(obj) > int(index) else None
    return obj


@pytest.fixture(scope="module")
def hlo_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("hlo") / "json_doc.hlo"
    path.write_text(HLO)
    return path


@pytest.fixture(scope="module")
def profile_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A profile of a small sharded jitted function, two annotated steps."""
    jax = pytest.importorskip("jax")
    import numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    out = tmp_path_factory.mktemp("prof")
    mesh = Mesh(np.array(jax.devices()), ("d",))
    x = jax.device_put(jax.numpy.ones((len(jax.devices()) * 16, 128)), NamedSharding(mesh, PartitionSpec("d")))
    f = jax.jit(lambda a: jax.numpy.tanh(a @ a.T).sum())
    jax.block_until_ready(f(x))
    with jax.profiler.trace(str(out)):
        for i in range(2):
            with jax.profiler.StepTraceAnnotation("step", step_num=i):
                jax.block_until_ready(f(x))
    return out


@pytest.mark.parametrize(("command", "objects"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_every_key_is_documented(command: str, objects: str, request: pytest.FixtureRequest) -> None:
    argv = shlex.split(command)
    if argv[0] == "calibrate":
        pytest.importorskip("jax")
    subs = {"{hlo}": "hlo_file", "{profile}": "profile_dir"}
    argv = [str(request.getfixturevalue(subs[a])) if a in subs else a for a in argv]
    if argv[0] == "calibrate":  # the session's calibration (tests/conftest.py): the same command, with --out
        out = request.getfixturevalue("calibration")[1]
    else:
        code, out, err = run_cli(*argv, "--json")
        assert code == 0, err
    payload = json.loads(out)
    docs = documented(argv[0])
    missing = []
    for spec in ["", *objects.split()]:
        path, _, prefixes = spec.partition("=")
        names = prefixes.split("|") if prefixes else [path.replace("[0]", "[]")]
        obj = resolve(payload, path)
        if not obj:  # an empty list or a null object in this run: nothing to check
            continue
        assert isinstance(obj, dict), f"{path} is a {type(obj).__name__}, not an object"
        keys = {k: [f"{p}.{k}".lstrip(".") for p in names] for k in obj}
        missing += [paths[0] for paths in keys.values() if not docs.intersection(paths)]
    assert not missing, f"keys of `rooftop {argv[0]} --json` not in docs/json.md: {missing}"


def test_every_command_is_covered() -> None:
    """A new subcommand needs a section in docs/json.md and a case above."""
    from rooftop.cli.main import build_parser

    parser = build_parser()
    commands = set(next(a for a in parser._actions if a.dest == "command").choices)
    assert commands == {c[1].split()[0] for c in CASES}
    for command in commands:
        assert "schema_version" in documented(command)
