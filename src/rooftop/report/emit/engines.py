"""``--emit maxtext`` (a training plan) and ``--emit vllm`` / ``--emit sglang`` (a serving plan): the
launch line with the plan's degrees and batch settings, under the names each project documents:

- MaxText (AI-Hypercomputer/maxtext, ``configs/base.yml``): ``ici_*_parallelism`` inside a slice (ICI,
  NVLink) and ``dcn_*_parallelism`` across slices or nodes, ``per_device_batch_size``,
  ``max_target_length``, ``num_pipeline_microbatches``, ``gradient_accumulation_steps``, ``remat_policy``,
  ``dtype``, ``quantization``. Not covered: MaxText's model config (give ``model_name``), FSDP-transpose and
  tensor-sequence axes (rooftop does not plan them), offload, interleaved pipeline repeats.
- vLLM (docs.vllm.ai, "Engine Arguments"): ``--tensor-parallel-size``, ``--pipeline-parallel-size``,
  ``--data-parallel-size`` (replicas), ``--enable-expert-parallel``, ``--max-num-seqs``,
  ``--max-num-batched-tokens`` with ``--enable-chunked-prefill``, ``--max-model-len``, ``--dtype``,
  ``--kv-cache-dtype``, ``--quantization fp8``. Not covered: attention data parallelism and a cache split
  over the batch (no vLLM flag), int8/int4/fp4 checkpoints (their --quantization is the checkpoint's).
- SGLang (docs.sglang.io, "Server Arguments"): ``--tp-size``, ``--dp-size``, ``--ep-size``,
  ``--enable-dp-attention``, ``--pp-size``, ``--max-running-requests``, ``--chunked-prefill-size``,
  ``--context-length``, ``--dtype``, ``--kv-cache-dtype``, ``--quantization fp8``. Not covered: the same
  quantized checkpoints; the router that spreads requests over replicas.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rooftop.hardware.topology import Topology
    from rooftop.model.workload import Dtypes
    from rooftop.plan.serve.layout import ServingLayout
    from rooftop.plan.train.layout import Parallelism

#: the plan's axes -> MaxText's parallelism names (outermost first, as the plan places them)
MAXTEXT_AXES = {"dp": "data", "pp": "pipeline", "fsdp": "fsdp", "cp": "context", "tp": "tensor"}
#: the plan's remat policy -> the closest MaxText remat_policy ("minimal" recomputes the least)
MAXTEXT_REMAT = {"none": "minimal", "selective": "save_qkv_proj", "dots": "minimal", "full": "full"}
#: rooftop dtype -> the spelling vLLM's --dtype / SGLang's --dtype take
TORCH_DTYPE = {"bf16": "bfloat16", "fp16": "float16"}
#: rooftop KV dtype -> (vLLM, SGLang) --kv-cache-dtype
KV_DTYPE = {"bf16": ("auto", "auto"), "fp16": ("auto", "auto"), "fp8": ("fp8", "fp8_e4m3")}


def _outer(topology: Topology) -> int:
    """Chips the scale-out network joins: slices over DCN (TPU) or nodes on the fabric (GPU)."""
    return math.prod(d.size for d in topology.dims if d.link in ("dcn", "fabric"))


def maxtext_degrees(par: Parallelism, topology: Topology) -> dict[str, int]:
    """ici_* and dcn_* degrees: the outermost axes fill the scale-out network first (as the plan lays them)."""
    outer = _outer(topology)
    out: dict[str, int] = {}
    for axis, size in par.mesh_axes().items():
        dcn = math.gcd(size, outer)
        outer //= dcn
        out[f"ici_{MAXTEXT_AXES[axis]}_parallelism"] = size // dcn
        if dcn > 1:
            out[f"dcn_{MAXTEXT_AXES[axis]}_parallelism"] = dcn
    return out


def maxtext(par: Parallelism, topology: Topology, global_batch: int, seq_len: int, dtype: str, title: str) -> str:
    """``python3 -m MaxText.train MaxText/configs/base.yml KEY=VALUE ...`` for a training layout."""
    settings: dict[str, object] = dict(maxtext_degrees(par, topology))
    if par.ep > 1:
        settings["ici_expert_parallelism"] = par.ep  # MaxText's expert axis; rooftop splits experts over data
    settings["per_device_batch_size"] = _plain(global_batch / topology.num_chips)
    settings["max_target_length"] = seq_len
    if par.pp > 1:
        settings["num_pipeline_microbatches"] = par.microbatches
    elif par.microbatches > 1:
        settings["gradient_accumulation_steps"] = par.microbatches
    settings["remat_policy"] = MAXTEXT_REMAT[par.remat]
    settings["dtype"] = "bfloat16"
    if dtype == "fp8":
        settings["quantization"] = "fp8"
    lines = [f"# {title}", "python3 -m MaxText.train MaxText/configs/base.yml run_name=rooftop \\"]
    lines += [f"  {k}={v} \\" for k, v in settings.items()]
    lines[-1] = lines[-1].removesuffix(" \\")
    notes = [f"# remat={par.remat} -> remat_policy={MAXTEXT_REMAT[par.remat]} (closest MaxText policy)"]
    if par.virtual_stages > 1:
        notes.append(f"# virtual_stages={par.virtual_stages}: MaxText's num_pipeline_repeats, not emitted")
    return "\n".join(lines + notes) + "\n"


def _plain(x: float) -> int | float:
    return int(x) if x == int(x) else float(format(x, ".10g"))


def model_id(model: str) -> str:
    """The Hugging Face repository id among a catalog model's names (``org/name``), else ``model`` as given."""
    from rooftop.errors import RooftopError
    from rooftop.model.catalog import get_entry

    try:
        entry = get_entry(model)
    except RooftopError:  # a config file: the engines take its folder or id as the user gave it
        return model
    return next((a for a in entry.aliases if "/" in a), entry.name)


def _dtypes(dt: Dtypes, engine: int) -> tuple[list[str], list[str]]:
    """(flags, notes) for the weight, activation and KV dtypes (engine 0: vLLM, 1: SGLang)."""
    flags = ["--dtype", TORCH_DTYPE.get(dt.activations, "bfloat16")]
    notes = []
    if dt.weights == "fp8":
        flags += ["--quantization", "fp8"]
    elif dt.weights not in TORCH_DTYPE:
        notes.append(f"# weights {dt.weights}: load a {dt.weights} checkpoint and give its --quantization")
    if dt.kv_cache in KV_DTYPE:
        kv = KV_DTYPE[dt.kv_cache][engine]
        if kv != "auto":
            flags += ["--kv-cache-dtype", kv]
    else:
        notes.append(f"# KV cache {dt.kv_cache}: no such --kv-cache-dtype; not emitted")
    return flags, notes


def vllm(model: str, layout: ServingLayout, batch: int, budget: int, max_len: int, dt: Dtypes,
         title: str) -> str:  # fmt: skip
    """``vllm serve MODEL ...`` for a serving layout at ``batch`` sequences per replica."""
    flags = ["--tensor-parallel-size", str(layout.tp), "--pipeline-parallel-size", str(layout.pp)]
    if layout.replicas > 1:
        flags += ["--data-parallel-size", str(layout.replicas)]
    if layout.ep > 1:
        flags += ["--enable-expert-parallel"]
    flags += ["--max-num-seqs", str(batch), "--enable-chunked-prefill", "--max-num-batched-tokens", str(budget)]
    flags += ["--max-model-len", str(max_len)]
    dtype_flags, notes = _dtypes(dt, 0)
    if layout.attn_dp > 1 or layout.kv_batch > 1:
        notes.append("# attention data parallelism / the cache split over the batch: no vLLM flag; not emitted")
    return _command(title, ["vllm", "serve", model_id(model)], flags + dtype_flags, notes)


def sglang(model: str, layout: ServingLayout, batch: int, budget: int, max_len: int, dt: Dtypes,
           title: str) -> str:  # fmt: skip
    """``python -m sglang.launch_server --model-path MODEL ...`` for a serving layout."""
    flags = ["--tp-size", str(layout.tp)]
    if layout.pp > 1:
        flags += ["--pp-size", str(layout.pp)]
    if layout.attn_dp > 1:  # SGLang: --dp-size with --enable-dp-attention splits attention within the TP group
        flags += ["--dp-size", str(layout.attn_dp), "--enable-dp-attention"]
    elif layout.replicas > 1:
        flags += ["--dp-size", str(layout.replicas)]
    if layout.ep > 1:
        flags += ["--ep-size", str(layout.ep)]
    flags += ["--max-running-requests", str(batch), "--chunked-prefill-size", str(budget)]
    flags += ["--context-length", str(max_len)]
    dtype_flags, notes = _dtypes(dt, 1)
    if layout.attn_dp > 1 and layout.replicas > 1:
        notes.append(f"# {layout.replicas} replicas of this server: one launch each (behind a router)")
    if layout.kv_batch > 1:
        notes.append("# the cache split over the batch (kv_batch): no SGLang flag; not emitted")
    command = ["python", "-m", "sglang.launch_server", "--model-path", model_id(model)]
    return _command(title, command, flags + dtype_flags, notes)


def _command(title: str, command: list[str], flags: list[str], notes: list[str]) -> str:
    parts, i = [], 0
    while i < len(flags):  # a flag and its value on one line
        if i + 1 < len(flags) and not flags[i + 1].startswith("--"):
            parts.append(f"{flags[i]} {flags[i + 1]}")
            i += 2
        else:
            parts.append(flags[i])
            i += 1
    lines = [f"# {title}", " ".join(command) + " \\", *(f"  {p} \\" for p in parts)]
    lines[-1] = lines[-1].removesuffix(" \\")
    return "\n".join(lines + notes) + "\n"
