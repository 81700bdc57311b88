"""A serving decode step measured on a real accelerator against ``rooftop serve``'s decode step.

Measures (where JAX sees a GPU or TPU; ``--quick``: tiny sizes, a dry run on CPU in seconds):

- a decode step of a catalog model (default ``llama-3-8b``, every layer, random bf16 weights) written
  plainly in JAX, as a static-shape engine runs it: embedding lookup, then per layer RMSNorm, the Q, K, V
  matmuls, rotary embedding, the new token's K and V written into a preallocated cache of
  ``--cache-len`` positions laid out [batch, KV heads, positions, head_dim] (``dynamic_update_slice``, the
  cache donated so the write is in place; with positions before heads XLA transposes the whole cache
  every layer, which ``rooftop profile`` of that version showed as its largest loss),
  grouped-query attention over the whole cache with a mask, the O matmul, RMSNorm and the SwiGLU MLP;
  then the final norm, the LM head and a greedy argmax. One jitted step per batch in ``--batches``;
- each batch's step timed two ways: ``dispatch_s``, the median of ``--steps`` steps each waited for
  (host dispatch included, as a Python serving loop sees it), and ``pipelined_s``, ``--steps`` steps
  issued back to back and waited for once, over ``--steps`` (the device's time per step);
- one batch (``--profile-batch``) profiled with ``jax.profiler`` (``decode.xplane.pb``) with its
  compiled HLO (``decode.hlo.txt``), for ``rooftop profile`` op by op.

Then, where the results are (no accelerator needed), ``--summarize`` prices the same steps with
``rooftop serve MODEL --chip CHIP --chips 1 --fix tp=1 --batch B --prompt-len C-1 --gen-len 2
--static-cache-len C --json`` (the cache read whole every step, as here) and writes ``decode_vs_rooftop.csv``:
per batch the measured step, rooftop's device part of the step (the op groups' rooflines, the kernel
launches: ``time_s - scheduling_s``, since the loop here has no scheduler, sampler or detokenizer), its
bandwidth floor (weights + cache at peak HBM bandwidth) and the ratios. Nothing is fitted to it.

Usage: ``python benchmarks/serving_decode_check.py OUTDIR [--chip h100]``, then
``python benchmarks/serving_decode_check.py OUTDIR --summarize [--chip h100]``.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import shutil
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

QUICK = {"vocab": 512, "d": 64, "layers": 2, "heads": 4, "kv_heads": 2, "head_dim": 16, "ff": 128}


def dims_of(model: str, quick: bool) -> dict[str, int]:
    if quick:
        return dict(QUICK)
    from rooftop.model.catalog import get_model

    c = get_model(model)
    return {"vocab": c.vocab_size, "d": c.d_model, "layers": c.n_layers, "heads": c.n_heads,
            "kv_heads": c.n_kv_heads, "head_dim": c.head_dim, "ff": c.d_ff}  # fmt: skip


@functools.cache
def random_weights() -> Any:
    """A jitted ``(key, shape) -> bf16 weights``, normal with a standard deviation of 0.02: one program per
    shape, made once for every batch's step. The keys are XLA's RngBitGenerator's ("rbg"): threefry's
    rounds took seconds to lower and compile for each shape, longer than the tiny steps themselves."""
    import jax
    import jax.numpy as jnp

    def weights(key: Any, shape: tuple[int, ...]) -> Any:
        return (jax.random.normal(key, shape, jnp.float32) * 0.02).astype(jnp.bfloat16)

    return jax.jit(weights, static_argnums=1)


def decode_step(dims: dict[str, int], batch: int, cache_len: int) -> tuple[Any, tuple[Any, ...]]:
    """The jitted step and its arguments (params, caches, tokens, position)."""
    import jax
    import jax.numpy as jnp

    v, d, n, h, kh, hd, ff = (dims[k] for k in ("vocab", "d", "layers", "heads", "kv_heads", "head_dim", "ff"))
    g = h // kh
    key = jax.random.key(0, impl="rbg")

    def w(i: int, shape: tuple[int, ...]) -> Any:
        return random_weights()(jax.random.fold_in(key, i), shape)

    layers = [{"wq": w(10 * i, (d, h * hd)), "wk": w(10 * i + 1, (d, kh * hd)), "wv": w(10 * i + 2, (d, kh * hd)),
               "wo": w(10 * i + 3, (h * hd, d)), "wg": w(10 * i + 4, (d, ff)), "wu": w(10 * i + 5, (d, ff)),
               "wd": w(10 * i + 6, (ff, d)), "n1": jnp.ones((d,), jnp.bfloat16),
               "n2": jnp.ones((d,), jnp.bfloat16)} for i in range(n)]  # fmt: skip
    params = {"embed": w(7, (v, d)), "head": w(8, (d, v)), "norm": jnp.ones((d,), jnp.bfloat16), "layers": layers}
    caches = [jnp.zeros((batch, kh, cache_len, hd), jnp.bfloat16) for _ in range(2 * n)]  # heads before positions
    tokens = jnp.zeros((batch,), jnp.int32)
    inv = 1.0 / (10000.0 ** (jnp.arange(0, hd, 2, dtype=jnp.float32) / hd))

    def rms(x: Any, gain: Any) -> Any:
        x32 = x.astype(jnp.float32)
        return (x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + 1e-6)).astype(x.dtype) * gain

    def rope(x: Any, pos: Any) -> Any:  # x [B, heads, hd]
        ang = pos.astype(jnp.float32) * inv
        c, s = jnp.cos(ang).astype(x.dtype), jnp.sin(ang).astype(x.dtype)
        a, b = x[..., : hd // 2], x[..., hd // 2 :]
        return jnp.concatenate([a * c - b * s, a * s + b * c], axis=-1)

    def step(ps: Any, cs: list[Any], tok: Any, pos: Any) -> tuple[Any, list[Any]]:
        x = ps["embed"][tok]
        valid = jnp.arange(cache_len) <= pos
        out = []
        for i, p in enumerate(ps["layers"]):
            hn = rms(x, p["n1"])
            q = rope((hn @ p["wq"]).reshape(batch, h, hd), pos)
            k = rope((hn @ p["wk"]).reshape(batch, kh, hd), pos)
            vv = (hn @ p["wv"]).reshape(batch, kh, hd)
            ck = jax.lax.dynamic_update_slice(cs[2 * i], k[:, :, None], (0, 0, pos, 0))
            cv = jax.lax.dynamic_update_slice(cs[2 * i + 1], vv[:, :, None], (0, 0, pos, 0))
            out += [ck, cv]
            sc = jnp.einsum("bkgd,bksd->bkgs", q.reshape(batch, kh, g, hd), ck).astype(jnp.float32) / math.sqrt(hd)
            pr = jax.nn.softmax(jnp.where(valid, sc, -1e30), axis=-1).astype(jnp.bfloat16)
            att = jnp.einsum("bkgs,bksd->bkgd", pr, cv).reshape(batch, h * hd)
            x = x + att @ p["wo"]
            hn = rms(x, p["n2"])
            x = x + (jax.nn.silu(hn @ p["wg"]) * (hn @ p["wu"])) @ p["wd"]
        logits = rms(x, ps["norm"]) @ ps["head"]
        return jnp.argmax(logits, axis=-1).astype(jnp.int32), out

    return jax.jit(step, donate_argnums=(1,)), (params, caches, tokens)


def measure(dims: dict[str, int], batch: int, cache_len: int, steps: int, profile: Path | None) -> dict[str, Any]:
    import jax
    import jax.numpy as jnp

    fn, (params, caches, tok) = decode_step(dims, batch, cache_len)
    t0 = time.perf_counter()
    compiled = fn.lower(params, caches, tok, jnp.int32(0)).compile()
    compile_s = time.perf_counter() - t0
    fn = compiled  # the runs below run this executable (calling the jitted function would compile it again)
    pos = cache_len // 2
    for i in range(3):  # warm-up
        tok, caches = fn(params, caches, tok, jnp.int32(pos + i))
    jax.block_until_ready(tok)
    each = []
    for i in range(steps):
        t0 = time.perf_counter()
        tok, caches = fn(params, caches, tok, jnp.int32(pos + i))
        jax.block_until_ready(tok)
        each.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    for i in range(steps):
        tok, caches = fn(params, caches, tok, jnp.int32(pos + i))
    jax.block_until_ready(tok)
    pipelined = (time.perf_counter() - t0) / steps
    res = {"batch": batch, "cache_len": cache_len, "dispatch_s": sorted(each)[len(each) // 2],
           "dispatch_min_s": min(each), "pipelined_s": pipelined, "compile_s": compile_s}  # fmt: skip
    if profile is not None:
        profile.mkdir(parents=True, exist_ok=True)
        (profile / "decode.hlo.txt").write_text(compiled.as_text())
        logdir = profile / "xprof"
        with jax.profiler.trace(str(logdir)):
            for i in range(5):
                with jax.profiler.StepTraceAnnotation("step", step_num=i):
                    tok, caches = fn(params, caches, tok, jnp.int32(pos + i))
                    jax.block_until_ready(tok)
        run = sorted((logdir / "plugins" / "profile").iterdir())[-1]
        shutil.copy(sorted(run.glob("*.xplane.pb"))[0], profile / "decode.xplane.pb")
        shutil.rmtree(logdir)
    del params, caches
    return res


def run(outdir: Path, a: argparse.Namespace) -> None:
    import jax

    dims = dims_of(a.model, a.quick)
    rows = []
    info = {"model": a.model, "dims": dims, "jax": jax.__version__, "device_kind": jax.devices()[0].device_kind,
            "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "steps": a.steps, "quick": a.quick}  # fmt: skip
    for b in a.batches:
        prof = outdir if b == a.profile_batch else None
        try:
            rows.append(measure(dims, b, a.cache_len, a.steps, prof))
        except Exception as exc:  # one batch failing (memory) must not lose the others
            rows.append({"batch": b, "error": f"{type(exc).__name__}: {str(exc)[:300]}"})
        print(json.dumps(rows[-1]), flush=True)
        (outdir / "decode.json").write_text(json.dumps({**info, "rows": rows}, indent=1))


def _rooftop(argv: list[str]) -> str:
    """The stdout of ``rooftop ARGV`` (run in this process: the rooftop this script imports)."""
    import contextlib
    import io

    from rooftop.cli.main import main as rooftop_main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = rooftop_main(argv)
    if code != 0:
        raise RuntimeError(f"rooftop {' '.join(argv)}: {err.getvalue().strip()}")
    return out.getvalue()


def summarize(outdir: Path, chip: str) -> list[dict[str, Any]]:
    import csv

    data = json.loads((outdir / "decode.json").read_text())
    out = []
    for r in data["rows"]:
        if "error" in r:
            continue
        c, b = r["cache_len"], r["batch"]
        argv = ["serve", data["model"], "--chip", chip, "--chips", "1", "--fix", "tp=1", "--batch", str(b),
                "--prompt-len", str(c - 1), "--gen-len", "2", "--static-cache-len", str(c), "--json"]  # fmt: skip
        plan = json.loads(_rooftop(argv))
        step = plan["points"][plan["chosen"]]["breakdown"]
        device = step["time_s"] - step["scheduling_s"]
        out.append({"batch": b, "measured_pipelined_s": r["pipelined_s"], "measured_dispatch_s": r["dispatch_s"],
                    "rooftop_device_s": device, "rooftop_step_s": step["time_s"],
                    "bandwidth_floor_s": step["bandwidth_roofline_s"], "bound": step["bound"],
                    "device_over_measured": device / r["pipelined_s"],
                    "floor_over_measured": step["bandwidth_roofline_s"] / r["pipelined_s"]})  # fmt: skip
    with (outdir / "decode_vs_rooftop.csv").open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(out[0]))
        w.writeheader()
        w.writerows({k: (f"{v:.4g}" if isinstance(v, float) else v) for k, v in row.items()} for row in out)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("outdir", type=Path)
    ap.add_argument("--model", default="llama-3-8b", help="catalog model whose shapes the step has")
    ap.add_argument("--chip", default="h100", help="catalog chip the device is (for --summarize)")
    ap.add_argument("--batches", type=lambda s: [int(x) for x in s.split(",")], default=[1, 8, 32, 64, 128, 256])
    ap.add_argument("--cache-len", type=int, default=2048, help="cache positions per sequence, read whole")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--profile-batch", type=int, default=64, help="the batch profiled op by op (0: none)")
    ap.add_argument("--quick", action="store_true", help="tiny sizes (a dry run on CPU)")
    ap.add_argument("--summarize", action="store_true", help="price the measured steps with rooftop serve")
    a = ap.parse_args(argv)
    a.outdir.mkdir(parents=True, exist_ok=True)
    if a.summarize:
        print(json.dumps(summarize(a.outdir, a.chip), indent=1))
    else:
        run(a.outdir, a)
    return 0


if __name__ == "__main__":
    sys.exit(main())
