"""Measured against predicted on a real accelerator: run where JAX (and optionally PyTorch) sees a GPU.

What it does, each part timed and written to OUTDIR (a failure in one part is recorded and the next
part still runs):

1. ``env.json``: jax and torch versions, the device, ``nvidia-smi`` when present.
2. ``calibrated.toml``: ``rooftop calibrate`` on the device (full sizes), the measured ceilings.
3. The worked transformer (a decoder train step in JAX: RMSNorm, causal attention, SwiGLU MLP, bf16,
   SGD update), profiled for ``--steps`` steps with ``jax.profiler``; its compiled HLO; then
   ``rooftop profile`` of that run against the catalog chip (``profile_catalog.json``) and against
   the calibrated one (``profile_calibrated.json``), and ``rooftop hlo`` of the module
   (``hlo_catalog.json``). The xplane is copied to ``decoder.xplane.pb``.
4. ``hbm.json``: HBM bytes/s of a fused ``x * a + b`` from 4 MiB to 16 GiB moved (best and median).
5. ``gemm.json``: bf16 GEMMs over a grid of shapes (square, transformer-shaped, decode-shaped, and
   M just past multiples of a 128-row tile, fine steps of M and of a cube's side), timed with CUDA events
   through PyTorch (cuBLAS): ``--inner`` back-to-back products captured in a CUDA graph (no launch gaps),
   best of ``--repeats`` replays. The data to check a shape-aware GEMM
   efficiency model against (it is not fitted to it).
6. The same decoder in PyTorch (``scaled_dot_product_attention``), profiled with the Kineto profiler
   and ``record_shapes=True`` (``decoder_torch.json.gz``), and ``rooftop profile`` of it
   (``profile_torch.json``).

Then, where the results are (no accelerator needed), ``--summarize`` writes ``ops.csv`` (each op of the
decoder: measured mean, roofline on the catalog and on the calibrated chip), ``gemm_vs_roofline.csv``
and ``totals.json``.

Run it once more with ``XLA_FLAGS=--xla_gpu_enable_command_buffer=`` (every kernel then names its own
instruction: the check of how rooftop attributes kernels replayed from CUDA graphs) and once with
``--attention cudnn`` (cuDNN flash attention), each into its own OUTDIR.

Usage: ``python benchmarks/gpu_check.py OUTDIR [--chip h100] [--quick] [--attention xla|cudnn]``, then
``python benchmarks/gpu_check.py OUTDIR --summarize`` (``--quick``: tiny sizes,
runs on CPU in seconds: a dry run of the script itself).
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import shutil
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

#: decoder dimensions: full on a GPU, tiny with --quick
FULL = {"batch": 4, "seq": 2048, "d": 2048, "heads": 16, "ff": 5632, "layers": 4}
QUICK = {"batch": 2, "seq": 64, "d": 64, "heads": 4, "ff": 128, "layers": 2}


def rooftop(args: list[str], out: Path) -> dict[str, Any]:
    """Run the rooftop CLI as a user would; its stdout is written to ``out``."""
    env = dict(os.environ, PYTHONPATH=f"{ROOT / 'src'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "rooftop.cli.main", *args], capture_output=True, text=True, env=env)
    out.write_text(proc.stdout)
    return {"argv": args, "rc": proc.returncode, "wall_s": round(time.perf_counter() - t0, 2),
            "stderr": proc.stderr[-2000:]}  # fmt: skip


def part_env(outdir: Path, quick: bool) -> dict[str, Any]:
    import jax

    info: dict[str, Any] = {"jax": jax.__version__, "devices": [str(d) for d in jax.devices()],
                            "device_kind": jax.devices()[0].device_kind, "python": sys.version.split()[0],
                            "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "quick": quick}  # fmt: skip
    try:
        import torch

        info["torch"] = torch.__version__
        info["torch_cuda"] = torch.cuda.is_available()
    except ImportError:
        info["torch"] = None
    if shutil.which("nvidia-smi"):
        q = "name,driver_version,memory.total,clocks.max.sm,clocks.max.mem,power.limit"
        smi = subprocess.run(["nvidia-smi", f"--query-gpu={q}", "--format=csv"], capture_output=True, text=True)
        info["nvidia_smi"] = smi.stdout.strip()
    (outdir / "env.json").write_text(json.dumps(info, indent=1))
    return info


def part_calibrate(outdir: Path, quick: bool) -> dict[str, Any]:
    args = ["calibrate", "--out", str(outdir / "calibrated.toml"), "--name", "measured"]
    return rooftop([*args, "--quick"] if quick else args, outdir / "calibrate.txt")


def decoder_jax(dims: dict[str, int], attention: str = "xla") -> tuple[Callable[..., Any], tuple[Any, ...]]:
    """A decoder train step in JAX with named scopes (attention, mlp, loss, optimizer), bf16 weights.
    ``attention``: "xla" (scores materialised, softmax fused by XLA) or "cudnn" (``jax.nn.dot_product_attention``
    with cuDNN's fused flash attention, a custom-call in the HLO)."""
    import jax
    import jax.numpy as jnp

    b, s, d, h, ff, n = (dims[k] for k in ("batch", "seq", "d", "heads", "ff", "layers"))
    key = jax.random.PRNGKey(0)

    def w(i: int, shape: tuple[int, ...]) -> Any:
        return (jax.random.normal(jax.random.fold_in(key, i), shape, jnp.float32) * 0.02).astype(jnp.bfloat16)

    params = [{"wqkv": w(10 * i, (d, 3 * d)), "wo": w(10 * i + 1, (d, d)), "wg": w(10 * i + 2, (d, ff)),
               "wu": w(10 * i + 3, (d, ff)), "wd": w(10 * i + 4, (ff, d)),
               "n1": jnp.ones((d,), jnp.bfloat16), "n2": jnp.ones((d,), jnp.bfloat16)} for i in range(n)]  # fmt: skip
    x = w(999, (b, s, d))

    def rms(v: Any, g: Any) -> Any:
        v32 = v.astype(jnp.float32)
        return (v32 * jax.lax.rsqrt(jnp.mean(v32 * v32, axis=-1, keepdims=True) + 1e-6)).astype(v.dtype) * g

    def loss_fn(ps: Any, xb: Any) -> Any:
        mask = jnp.tril(jnp.ones((s, s), bool))
        for i, p in enumerate(ps):
            with jax.named_scope(f"layer{i}/attention"):
                qkv = (rms(xb, p["n1"]) @ p["wqkv"]).reshape(b, s, 3, h, d // h)
                q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]
                if attention == "cudnn":
                    att = jax.nn.dot_product_attention(q, k, v, is_causal=True, implementation="cudnn")
                else:
                    sc = jnp.einsum("bqhd,bkhd->bhqk", q, k).astype(jnp.float32) / math.sqrt(d // h)
                    pr = jax.nn.softmax(jnp.where(mask, sc, -1e30), axis=-1).astype(jnp.bfloat16)
                    att = jnp.einsum("bhqk,bkhd->bqhd", pr, v)
                xb = xb + att.reshape(b, s, d) @ p["wo"]
            with jax.named_scope(f"layer{i}/mlp"):
                hn = rms(xb, p["n2"])
                xb = xb + (jax.nn.silu(hn @ p["wg"]) * (hn @ p["wu"])) @ p["wd"]
        with jax.named_scope("loss"):
            return jnp.mean(xb.astype(jnp.float32) ** 2)

    @jax.jit
    def train_step(ps: Any, xb: Any) -> Any:
        loss, grads = jax.value_and_grad(loss_fn)(ps, xb)
        with jax.named_scope("optimizer"):
            return loss, jax.tree_util.tree_map(lambda p_, g: p_ - (0.01 * g).astype(p_.dtype), ps, grads)

    return train_step, (params, x)


def part_decoder(outdir: Path, quick: bool, chip: str, steps: int, attention: str) -> dict[str, Any]:
    import jax

    step, args = decoder_jax(QUICK if quick else FULL, attention)
    compiled = step.lower(*args).compile()
    hlo = outdir / "decoder.hlo.txt"
    hlo.write_text(compiled.as_text())
    jax.block_until_ready(step(*args))
    logdir = outdir / "xprof"
    t0 = time.perf_counter()
    with jax.profiler.trace(str(logdir)):
        for i in range(steps):
            with jax.profiler.StepTraceAnnotation("step", step_num=i):
                jax.block_until_ready(step(*args))
    wall = (time.perf_counter() - t0) / steps
    runs = sorted((logdir / "plugins" / "profile").iterdir())
    xplanes = sorted(runs[-1].glob("*.xplane.pb"))
    shutil.copy(xplanes[0], outdir / "decoder.xplane.pb")
    shutil.rmtree(logdir)
    res: dict[str, Any] = {"wall_per_step_s": wall, "dims": QUICK if quick else FULL, "attention": attention,
                           "xla_flags": os.environ.get("XLA_FLAGS", "")}  # fmt: skip
    xp = str(outdir / "decoder.xplane.pb")
    res["profile_catalog"] = rooftop(["profile", xp, "--chip", chip, "--hlo", str(hlo), "--json"],
                                     outdir / "profile_catalog.json")  # fmt: skip
    if (outdir / "calibrated.toml").exists():
        res["profile_calibrated"] = rooftop(
            ["profile", xp, "--chip", str(outdir / "calibrated.toml"), "--hlo", str(hlo), "--json"],
            outdir / "profile_calibrated.json")  # fmt: skip
    res["hlo_catalog"] = rooftop(["hlo", str(hlo), "--chip", chip, "--json"], outdir / "hlo_catalog.json")
    return res


def gemm_shapes(quick: bool) -> list[tuple[int, int, int]]:
    """(M, K, N) of C[M,N] = A[M,K] @ B[K,N]."""
    if quick:
        return [(64, 64, 64), (128, 64, 256), (1, 128, 128)]
    shapes = [(n, n, n) for n in (256, 512, 1024, 2048, 4096, 8192, 16384)]
    for m in (2048, 8192, 16384):  # transformer projections (tokens x d -> out), incl. TP shards
        shapes += [(m, k, n) for k, n in ((768, 3072), (3072, 768), (768, 96), (1024, 4096), (2048, 8192),
                                          (4096, 4096), (4096, 14336), (14336, 4096), (8192, 3584),
                                          (8192, 1024), (8192, 28672), (12288, 1536))]  # fmt: skip
    shapes += [(m, 8192, 8192) for m in (1, 8, 32, 64, 128, 256, 512)]  # decode-shaped (weights dominate)
    shapes += [(m, 8192, 8192) for m in (8192 + 128, 8192 + 256, 8192 + 1024, 16384 + 128)]  # past a tile
    shapes += [(8192, 8192, n) for n in (8192 + 64, 8192 + 128, 8192 + 192)]
    shapes += [(m, 4096, 4096) for m in range(2048, 4608 + 1, 128)]  # waves of output tiles over 132 SMs
    shapes += [(n, n, n) for n in range(1024, 4096 + 1, 256)]
    return list(dict.fromkeys(shapes))


def part_gemm(outdir: Path, quick: bool, repeats: int, inner: int) -> dict[str, Any]:
    import torch

    dev = "cuda" if torch.cuda.is_available() else "cpu"
    rows = []
    for m, k, n in gemm_shapes(quick):
        a = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
        b = torch.randn(k, n, device=dev, dtype=torch.bfloat16)
        c = a @ b
        graph = None
        if dev == "cuda":  # the products captured in a CUDA graph: no launch gaps, even for tiny shapes
            torch.cuda.synchronize()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                for _ in range(inner):
                    torch.matmul(a, b, out=c)
            graph.replay()
            torch.cuda.synchronize()
        best = math.inf
        for _ in range(repeats):
            if graph is not None:
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                graph.replay()
                end.record()
                torch.cuda.synchronize()
                t = start.elapsed_time(end) / 1e3 / inner
            else:
                t0 = time.perf_counter()
                for _ in range(inner):
                    torch.matmul(a, b, out=c)
                t = (time.perf_counter() - t0) / inner
            best = min(best, t)
        flops = 2.0 * m * k * n
        rows.append({"m": m, "k": k, "n": n, "time_s": best, "flops_per_s": flops / best,
                     "bytes": 2.0 * (m * k + k * n + m * n)})  # fmt: skip
        del a, b, c, graph
    (outdir / "gemm.json").write_text(json.dumps({"device": dev, "dtype": "bf16", "repeats": repeats,
                                                  "inner": inner, "rows": rows}, indent=1))  # fmt: skip
    return {"shapes": len(rows)}


def part_hbm(outdir: Path, quick: bool, repeats: int) -> dict[str, Any]:
    """HBM bytes/s of ``y = x * a + b`` (fp32: one read and one write per element) from 4 MiB to 16 GiB
    moved: below, at and far above the L2, to see where the datasheet figure holds and the spread."""
    import jax
    import jax.numpy as jnp

    f = jax.jit(lambda x: x * 1.0001 + 0.5)
    rows = []
    for log2 in range(16, 22) if quick else range(19, 32):
        x = jnp.ones((2**log2,), jnp.float32)
        jax.block_until_ready(f(x))
        times = []
        for _ in range(max(repeats, 5)):
            t0 = time.perf_counter()
            jax.block_until_ready(f(x))
            times.append(time.perf_counter() - t0)
        moved = 2 * 4 * 2**log2
        rows.append({"elements": 2**log2, "bytes_moved": moved, "best_s": min(times),
                     "median_s": sorted(times)[len(times) // 2], "best_bytes_per_s": moved / min(times),
                     "median_bytes_per_s": moved / sorted(times)[len(times) // 2]})  # fmt: skip
        del x
    (outdir / "hbm.json").write_text(json.dumps({"method": "jit(x * a + b), fp32, wall clock per call",
                                                 "rows": rows}, indent=1))  # fmt: skip
    return {"sizes": len(rows), "best_bytes_per_s": max(r["best_bytes_per_s"] for r in rows)}


def decoder_torch(dims: dict[str, int], dev: str) -> tuple[Any, Any, Any]:
    import torch
    import torch.nn.functional as F

    b, s, d, h, ff, n = (dims[k] for k in ("batch", "seq", "d", "heads", "ff", "layers"))

    class Block(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.n1, self.n2 = torch.nn.RMSNorm(d), torch.nn.RMSNorm(d)
            self.qkv, self.o = torch.nn.Linear(d, 3 * d, bias=False), torch.nn.Linear(d, d, bias=False)
            self.g, self.u = torch.nn.Linear(d, ff, bias=False), torch.nn.Linear(d, ff, bias=False)
            self.dn = torch.nn.Linear(ff, d, bias=False)

        def forward(self, x: Any) -> Any:
            q, k, v = self.qkv(self.n1(x)).view(b, s, 3, h, d // h).transpose(1, 3).unbind(2)
            x = x + self.o(F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, s, d))
            hn = self.n2(x)
            return x + self.dn(F.silu(self.g(hn)) * self.u(hn))

    model = torch.nn.Sequential(*[Block() for _ in range(n)]).to(dev, torch.bfloat16)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(b, s, d, device=dev, dtype=torch.bfloat16)
    return model, opt, x


def part_torch(outdir: Path, quick: bool, chip: str, steps: int) -> dict[str, Any]:
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    dev = "cuda" if torch.cuda.is_available() else "cpu"
    model, opt, x = decoder_torch(QUICK if quick else FULL, dev)

    def one() -> None:
        opt.zero_grad(set_to_none=True)
        model(x).float().pow(2).mean().backward()
        opt.step()

    for _ in range(2):
        one()
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev == "cuda" else [])
    t0 = time.perf_counter()
    with profile(activities=acts, record_shapes=True) as prof:
        for i in range(steps):
            with record_function(f"ProfilerStep#{i}"):
                one()
            if dev == "cuda":
                torch.cuda.synchronize()
    wall = (time.perf_counter() - t0) / steps
    raw = outdir / "decoder_torch.json"
    prof.export_chrome_trace(str(raw))
    gz = outdir / "decoder_torch.json.gz"
    with raw.open("rb") as src, gzip.open(gz, "wb") as dst:
        shutil.copyfileobj(src, dst)
    raw.unlink()
    res: dict[str, Any] = {"wall_per_step_s": wall}
    res["profile"] = rooftop(["profile", str(gz), "--chip", chip, "--json"], outdir / "profile_torch.json")
    return res


def summarize(outdir: Path, chip: str) -> dict[str, Any]:
    """Op by op, measured against predicted: ``ops.csv`` (one row per HLO op of the JAX decoder: mean
    measured time, roofline on the catalog chip and on the calibrated one) and ``gemm_vs_roofline.csv``;
    returns the totals. Runs where the results are (no accelerator needed)."""
    import csv

    xp = outdir / "decoder.xplane.pb"
    chips = {"catalog": chip}
    if (outdir / "calibrated.toml").exists():
        chips["calibrated"] = str(outdir / "calibrated.toml")
    reports = {}
    for label, c in chips.items():
        run = rooftop(["profile", str(xp), "--chip", c, "--json"], outdir / f"profile_{label}.json")
        if run["rc"] != 0:
            raise RuntimeError(f"rooftop profile --chip {c} failed: {run['stderr']}")
        reports[label] = {o["name"]: o for o in json.loads((outdir / f"profile_{label}.json").read_text())["ops"]}
    base = reports["catalog"]
    totals: dict[str, Any] = {"ops": len(base)}
    with (outdir / "ops.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["op", "opcode", "category", "runs", "measured_mean_s", *[f"roofline_{k}_s" for k in reports],
                    "bound_catalog", "efficiency_catalog"])  # fmt: skip
        for name, o in sorted(base.items(), key=lambda kv: -kv[1]["total_s"]):
            w.writerow([name, o["opcode"], o["category"], o["count"], f"{o['measured_s']:.4g}",
                        *[f"{(r[name]['lower_bound_s'] or 0):.4g}" for r in reports.values()], o["bound"],
                        f"{o['efficiency'] or 0:.3f}"])  # fmt: skip
    for label, r in reports.items():
        measured = sum(o["total_s"] for o in r.values())
        predicted = sum((o["lower_bound_s"] or 0) * o["count"] for o in r.values())
        effs = sorted(o["efficiency"] for o in r.values() if o["efficiency"])
        totals[label] = {"measured_s": measured, "roofline_s": predicted, "ratio": predicted / measured,
                         "median_op_efficiency": effs[len(effs) // 2] if effs else None,
                         "unpriced": sum(1 for o in r.values() if not o["lower_bound_s"])}  # fmt: skip
    gemm = outdir / "gemm.json"
    if gemm.exists():
        sys.path.insert(0, str(ROOT / "src"))
        from rooftop.hardware.catalog import get_chip

        c = get_chip(chip)
        peak, hbm = c.flops_per_s("bf16"), c.hbm_bytes_per_s
        with (outdir / "gemm_vs_roofline.csv").open("w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["m", "k", "n", "measured_s", "roofline_s", "bound", "efficiency"])
            for r in json.loads(gemm.read_text())["rows"]:
                roof = max(2.0 * r["m"] * r["k"] * r["n"] / peak, r["bytes"] / hbm)
                bound = "compute" if 2.0 * r["m"] * r["k"] * r["n"] / peak >= r["bytes"] / hbm else "memory"
                w.writerow([r["m"], r["k"], r["n"], f"{r['time_s']:.4g}", f"{roof:.4g}", bound,
                            f"{roof / r['time_s']:.3f}"])  # fmt: skip
    (outdir / "totals.json").write_text(json.dumps(totals, indent=1))
    return totals


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("outdir", type=Path)
    ap.add_argument("--chip", default="h100", help="catalog chip the device is (default h100)")
    ap.add_argument("--quick", action="store_true", help="tiny sizes (a dry run on CPU)")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--inner", type=int, default=20)
    ap.add_argument("--attention", choices=("xla", "cudnn"), default="xla", help="the decoder's attention")
    ap.add_argument("--summarize", action="store_true", help="only write ops.csv and totals from OUTDIR's files")
    ap.add_argument("--skip", default="", help="comma-separated parts to skip: calibrate,decoder,gemm,hbm,torch")
    a = ap.parse_args(argv)
    a.outdir.mkdir(parents=True, exist_ok=True)
    skip = set(filter(None, a.skip.split(",")))
    if a.summarize:
        print(json.dumps(summarize(a.outdir, a.chip), indent=1))
        return 0
    parts: list[tuple[str, Callable[[], dict[str, Any]]]] = [
        ("env", lambda: part_env(a.outdir, a.quick)),
        ("calibrate", lambda: part_calibrate(a.outdir, a.quick)),
        ("decoder", lambda: part_decoder(a.outdir, a.quick, a.chip, a.steps, a.attention)),
        ("gemm", lambda: part_gemm(a.outdir, a.quick, a.repeats, a.inner)),
        ("hbm", lambda: part_hbm(a.outdir, a.quick, a.repeats)),
        ("torch", lambda: part_torch(a.outdir, a.quick, a.chip, a.steps)),
    ]
    summary: dict[str, Any] = {}
    for name, fn in parts:
        if name in skip:
            continue
        t0 = time.perf_counter()
        try:
            summary[name] = fn()
        except Exception:  # one part failing must not lose the others' measurements
            summary[name] = {"error": traceback.format_exc()[-3000:]}
        summary[name]["part_wall_s"] = round(time.perf_counter() - t0, 2)
        print(f"{name}: {time.perf_counter() - t0:.1f} s", json.dumps(summary[name])[:600], flush=True)
    (a.outdir / "summary.json").write_text(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
