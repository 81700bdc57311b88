"""Run calculon and llm-analysis on the ten rows of Megatron-LM 2021 Table 1 and write peers.csv.

    PYTHONPATH=/path/to/peersite:/path/to/calculon python run_peers.py CALCULON_DIR [OUT.csv]

CALCULON_DIR is a checkout of github.com/calculon-ai/calculon (its ``systems/`` folder is read;
calculon is not on PyPI under that name). llm-analysis is the PyPI package ``llm-analysis``.
Nothing here imports rooftop: the rows are restated from the paper so that the peers can run in
an environment of their own. ``benchmarks/accuracy_training.py`` checks that the rows of the CSV
match its own.

Every prediction is converted the same way the benchmark converts rooftop's: predicted iteration
time t_pred -> utilization under the paper's FLOPs formula,
    U_pred = 96 B s l h^2 (1 + s/(6h) + V/(16 l h)) / (GPUs x 312e12 x t_pred),
and the error is |U_pred - U_pub| / U_pub.
"""

from __future__ import annotations

import csv
import json
import logging
import os
import sys
import tempfile
from importlib import metadata

SEQ = 2048
VOCAB = 51200
PEAK_FLOP_S = 312e12  # A100 dense fp16/bf16 tensor-core peak, the paper's 100%

# Narayanan et al. 2021, Table 1:
# params (B), heads, h, layers, t, p, GPUs, batch, TFLOP/s per GPU, % of peak
ROWS = [
    (1.7, 24, 2304, 24, 1, 1, 32, 512, 137, 0.44),
    (3.6, 32, 3072, 30, 2, 1, 64, 512, 138, 0.44),
    (7.5, 32, 4096, 36, 4, 1, 128, 512, 142, 0.46),
    (18.4, 48, 6144, 40, 8, 1, 256, 1024, 135, 0.43),
    (39.1, 64, 8192, 48, 8, 2, 512, 1536, 138, 0.44),
    (76.1, 80, 10240, 60, 8, 4, 1024, 1792, 140, 0.45),
    (145.6, 96, 12288, 80, 8, 8, 1536, 2304, 148, 0.47),
    (310.1, 128, 16384, 96, 8, 16, 1920, 2160, 155, 0.50),
    (529.6, 128, 20480, 105, 8, 35, 2520, 2520, 163, 0.52),
    (1008.0, 160, 25600, 128, 8, 64, 3072, 3072, 163, 0.52),
]

CALCULON_SYSTEMS = ("a100_80e", "a100_80g")  # both A100 80GB files calculon ships
LLM_ANALYSIS_FLOPS_EFF = (0.5, 1.0)  # the figure its README suggests; its default (1)


def paper_flops(batch: int, layers: int, h: int) -> float:
    return 96 * batch * SEQ * layers * h * h * (1 + SEQ / (6 * h) + VOCAB / (16 * layers * h))


def calculon_time(calculon_dir: str, system: str, row: tuple) -> float:
    import calculon  # noqa: F401  (registers the package)
    from calculon.llm import Llm
    from calculon.system import System

    _, heads, h, layers, t, p, gpus, batch, _, _ = row
    app = Llm.Application(
        {
            "hidden": h,
            "feedforward": 4 * h,
            "seq_size": SEQ,
            "attn_heads": heads,
            "attn_size": h // heads,
            "num_blocks": layers,
        }
    )
    exe = Llm.Execution.from_json(
        {
            "num_procs": gpus,
            "tensor_par": t,
            "pipeline_par": p,
            "data_par": gpus // (t * p),
            "tensor_par_net": 0,  # NVLink tier
            "pipeline_par_net": 1,  # InfiniBand tier
            "data_par_net": 1,
            "batch_size": batch,
            "microbatch_size": 1,
            "datatype": "float16",  # the only matrix datatype in the shipped A100 files
            "fused_activation": False,  # as calculon's own Megatron validation files
            "attention_type": "multihead",
            "activation_recompute": "full",
            "pipeline_interleaving": 1,
            "optimizer_sharding": False,  # no distributed optimizer in 2021
            "tensor_par_comm_type": "ar",  # all-reduce, no sequence parallelism
            "tensor_par_overlap": "none",
            "seq_par_ag_redo": False,
            "data_par_overlap": False,
            "weight_offload": False,
            "activations_offload": False,
            "optimizer_offload": False,
            "training": True,
        }
    )
    with open(os.path.join(calculon_dir, "systems", f"{system}.json")) as f:
        syst = System(json.load(f))
    model = Llm(app, logging.getLogger("calculon"))
    model.compile(syst, exe)
    model.run(syst)
    return float(model.get_total_time())


def llm_analysis_time(flops_eff: float, row: tuple, workdir: str) -> float:
    from llm_analysis.analysis import ActivationRecomputation, train

    params_b, heads, h, layers, t, p, gpus, batch, _, _ = row
    path = os.path.join(workdir, f"megatron-gpt-{params_b}b.json")
    with open(path, "w") as f:
        json.dump(
            {
                "name": f"megatron-gpt-{params_b}b",
                "num_layers": layers,
                "n_head": heads,
                "hidden_dim": h,
                "vocab_size": VOCAB,
                "max_seq_len": SEQ,
                "ffn_embed_dim": 4 * h,
                "model_type": "gpt2",
            },
            f,
        )
    summary = train(
        model_name=path,
        gpu_name="a100-sxm-80gb",
        dtype_name="w16a16e16",
        log_level="ERROR",
        batch_size_per_gpu=1,
        global_batch_size=batch,
        seq_len=SEQ,
        activation_recomputation=ActivationRecomputation.FULL.value,  # 4 at HEAD, 2 in PyPI 0.2.2
        ds_zero=0,
        tp_size=t,
        pp_size=p,
        sp_size=1,  # no sequence parallelism in 2021
        dp_size=1,  # llm-analysis's dp_size is sharded (ZeRO/FSDP) data parallelism; with
        total_num_gpus=gpus,  # dp_size=1 the remaining GPUs/(t p) replicas are plain (replicated) DP
        flash_attn=False,
        softmax_dropout=True,
        flops_efficiency=flops_eff,
    )
    return float(summary["latency_per_iter"])


def version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "unknown"


def main() -> None:
    calculon_dir = sys.argv[1]
    out = sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.path.dirname(__file__), "peers.csv")
    fields = ["params_b", "heads", "hidden", "layers", "t", "p", "gpus", "batch", "published_util", "paper_flops"]
    tools = [f"calculon_{s}" for s in CALCULON_SYSTEMS] + [f"llm_analysis_fe{e:g}" for e in LLM_ANALYSIS_FLOPS_EFF]
    for tool in tools:
        fields += [f"{tool}_time_s", f"{tool}_util", f"{tool}_error"]
    rows = []
    with tempfile.TemporaryDirectory() as workdir:
        for row in ROWS:
            params_b, heads, h, layers, t, p, gpus, batch, _, util = row
            flops = paper_flops(batch, layers, h)
            values = (params_b, heads, h, layers, t, p, gpus, batch, util, f"{flops:.6e}")
            rec: dict[str, object] = dict(zip(fields, values, strict=False))
            times = {f"calculon_{s}": calculon_time(calculon_dir, s, row) for s in CALCULON_SYSTEMS}
            times |= {f"llm_analysis_fe{e:g}": llm_analysis_time(e, row, workdir) for e in LLM_ANALYSIS_FLOPS_EFF}
            for tool, t_pred in times.items():
                u = flops / (gpus * PEAK_FLOP_S * t_pred)
                rec[f"{tool}_time_s"] = f"{t_pred:.4f}"
                rec[f"{tool}_util"] = f"{u:.4f}"
                rec[f"{tool}_error"] = f"{abs(u - util) / util:.4f}"
            rows.append(rec)
            print(params_b, {k: rec[f"{k}_error"] for k in times}, flush=True)
    with open(out, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {out}; llm-analysis {version('llm-analysis')}")


if __name__ == "__main__":
    main()
