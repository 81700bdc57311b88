"""``rooftop models`` (the model catalog) and ``rooftop model NAME|config.json`` (the
transformer math of one model: parameters, FLOPs per token, KV cache, training memory)."""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console

from rooftop.cli.common import Output, add_common
from rooftop.errors import InvalidConfigError
from rooftop.model import memory as mem
from rooftop.model import transformer as tf
from rooftop.model.catalog import ModelEntry, get_entry, load_hf_config, load_models
from rooftop.model.config import REMAT_POLICIES, TransformerConfig, config_to_dict, remat_policy
from rooftop.report.table import table
from rooftop.units import format_bytes, format_number, parse_number

KV_DTYPES = ("bf16", "fp16", "fp8", "int8", "fp32")
DEFAULT_SEQ_LEN = 4096


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("models", help="list the model catalog with parameter counts and their published figures")
    add_common(p, chip=False)
    p.set_defaults(func=run_models)

    q = sub.add_parser("model", help="transformer math of one model: params, FLOPs/token, KV cache, training memory")
    q.add_argument(
        "name",
        nargs="?",
        metavar="NAME|config.json",
        help="catalog model (see `rooftop models`), a catalog-schema .toml, or a Hugging Face config.json",
    )
    q.add_argument("--model", metavar="PATH", help="a Hugging Face config.json (or any NAME) instead of the positional")
    q.add_argument(
        "--seq-len",
        default=None,
        metavar="T",
        help=f"sequence length for FLOPs, KV cache, activations (default min({DEFAULT_SEQ_LEN}, context))",
    )
    q.add_argument("--batch", default="1", metavar="B", help="sequences for kv_cache_bytes, prefill_flops (default 1)")
    q.add_argument("--kv-dtype", default="bf16", choices=KV_DTYPES, help="KV cache element type (default bf16)")
    q.add_argument(
        "--remat",
        default="none",
        choices=list(REMAT_POLICIES),
        help="remat policy for flops_per_token_train (activations are shown for every policy)",
    )
    add_common(q, chip=False)
    q.set_defaults(func=run_model)


def _count(text: str | None, flag: str) -> int:
    value = parse_number(text or "")
    if value != int(value) or value < 1:
        raise InvalidConfigError(f"{flag} {text!r} must be a positive integer (e.g. 8192 or 8Ki)")
    return int(value)


def resolve_model(name: str) -> tuple[TransformerConfig, ModelEntry | None]:
    """A config.json (path ending .json) or a catalog name / .toml file, with its catalog entry."""
    if name.endswith(".json"):
        return load_hf_config(name), None
    entry = get_entry(name)
    return entry.config, entry


def _published(entry: ModelEntry | None) -> dict[str, Any]:
    if entry is None:
        return {}
    return {k: {"value": f.value, "source": f.source, "note": f.note} for k, f in entry.published.items()}


def _tree_dict(t: tf.ParamTree) -> dict[str, Any]:
    return {
        "name": t.name,
        "params": t.params,
        "active": t.active,
        "matmul": t.matmul,
        "kind": t.kind,
        "count": t.count,
        "children": [_tree_dict(c) for c in t.children],
    }


def model_summary(cfg: TransformerConfig, seq_len: int, batch: int, kv_dtype: str, remat: str) -> dict[str, Any]:
    """The JSON contract of ``rooftop model`` (SI units: FLOPs, bytes)."""
    remat_policy(remat)
    tree = tf.param_tree(cfg)
    per_param = mem.training_bytes_per_param()
    return {
        "seq_len": seq_len,
        "batch": batch,
        "kv_dtype": kv_dtype,
        "remat": remat,
        "params_total": tree.params,
        "params_active": tree.active,
        "params_matmul_active": tree.matmul,
        "params_breakdown": _tree_dict(tree),
        "flops_per_token_forward": tf.flops_per_token_forward(cfg, seq_len),
        "flops_per_token_train": tf.flops_per_token_train(cfg, seq_len, remat),
        "attention_flops_per_token": tf.attention_flops_per_token(cfg, seq_len),
        "vector_flops_per_token_forward": tf.vector_flops_per_token_forward(cfg, seq_len),
        "recompute_flops_per_token": {p: tf.recompute_flops_per_token(cfg, seq_len, p) for p in REMAT_POLICIES},
        "prefill_flops": tf.prefill_flops(cfg, seq_len, batch),
        "decode_flops_per_token": tf.decode_flops_per_token(cfg, seq_len),
        "kv_cache_bytes_per_token": mem.kv_cache_bytes_per_token(cfg, kv_dtype),
        "kv_cache_bytes": mem.kv_cache_bytes(cfg, batch, seq_len, kv_dtype),
        "activation_bytes_per_token": mem.activation_bytes_by_policy(cfg, seq_len),
        "logits_bytes_per_token": mem.logits_bytes_per_token(cfg),
        "training_bytes_per_param": per_param["total"],
        "training_bytes_per_param_breakdown": per_param,
        "training_state_bytes": mem.training_state_bytes(cfg),
        "layer_groups": [
            {"name": g.name, "count": g.count, "moe": g.moe, "window": g.window} for g in tf.layer_groups(cfg)
        ],
        "conventions": {
            "flops": "matrix-unit FLOPs; forward = 2 x params_matmul_active + attention; train = 3 x forward"
            " + remat recompute",
            "attention": "causal: (T+1)/2 keys per query on average; QK^T and AV each 2 x heads x head_dim per pair",
            "activation_bytes_per_token": "bf16, summed over layers, per remat policy; logits separate",
            "training_bytes_per_param": "bf16 weights + bf16 grads + fp32 master + fp32 Adam moments",
        },
    }


def run_model(args: argparse.Namespace) -> Output:
    name = args.model or args.name
    if not name:
        raise InvalidConfigError(
            "give a model: `rooftop model NAME` or `--model path/to/config.json` (see `rooftop models`)"
        )
    if args.model and args.name:
        raise InvalidConfigError(f"give the model once: NAME {args.name!r} or --model {args.model!r}, not both")
    cfg, entry = resolve_model(name)
    seq_len = _count(args.seq_len, "--seq-len") if args.seq_len else min(DEFAULT_SEQ_LEN, cfg.max_seq_len)
    batch = _count(args.batch, "--batch")
    summary = model_summary(cfg, seq_len, batch, args.kv_dtype, args.remat)
    payload = {
        "model": {
            "name": cfg.name,
            "source": cfg.source,
            "description": entry.description if entry else "",
            "published": _published(entry),
            "config": config_to_dict(cfg),
        },
        **summary,
    }

    def render(console: Console) -> None:
        _render_model(console, cfg, payload)

    return Output(payload, render)


def _render_model(console: Console, cfg: TransformerConfig, d: dict[str, Any]) -> None:
    console.print(f"[bold]{cfg.name}[/bold]  {d['model']['description']}")
    console.print(f"source: {cfg.source}")
    t, b = d["seq_len"], d["batch"]
    rows = [
        ("parameters (total / active)", f"{format_number(d['params_total'])} / {format_number(d['params_active'])}"),
        ("N of 6N (matmul params per token)", format_number(d["params_matmul_active"])),
        (f"forward FLOPs per token (T={t})", format_number(d["flops_per_token_forward"], "FLOP")),
        ("  of which attention", format_number(d["attention_flops_per_token"], "FLOP")),
        (f"train FLOPs per token (remat {d['remat']})", format_number(d["flops_per_token_train"], "FLOP")),
        (
            "vector FLOPs per token (forward, not in the above)",
            format_number(d["vector_flops_per_token_forward"], "FLOP"),
        ),
        (f"prefill FLOPs ({b} x {t} tokens)", format_number(d["prefill_flops"], "FLOP")),
        (f"decode FLOPs per token (context {t})", format_number(d["decode_flops_per_token"], "FLOP")),
        (f"KV cache per token ({d['kv_dtype']})", f"{d['kv_cache_bytes_per_token']:,.0f} B"),
        (f"KV cache ({b} x {t} tokens)", format_bytes(d["kv_cache_bytes"])),
        ("training state per param", f"{d['training_bytes_per_param']:g} B"),
        ("training state (unsharded)", format_bytes(d["training_state_bytes"]["total"])),
    ]
    console.print(table(f"{cfg.name}: per-token math", ["quantity", "value"], rows))
    console.print(
        table(
            f"activations kept per token (bf16, all layers, T={t})",
            ["remat", "bytes", "recompute"],
            [
                (p, format_bytes(v), format_number(d["recompute_flops_per_token"][p], "FLOP"))
                for p, v in d["activation_bytes_per_token"].items()
            ],
        )
    )
    prows = [
        (
            "  " * path.count("/") + path.rsplit("/", 1)[-1] + (f" x{n['count']}" if n["count"] > 1 else ""),
            format_number(n["params"]),
            format_number(n["active"]),
        )
        for path, n in _walk(d["params_breakdown"])
        if path.count("/") <= 3
    ]
    console.print(table("parameters", ["part", "params", "active"], prows))


def _walk(node: dict[str, Any], prefix: str = ""):  # type: ignore[no-untyped-def]
    path = f"{prefix}/{node['name']}" if prefix else node["name"]
    yield path, node
    for child in node["children"]:
        yield from _walk(child, path)


def _entry_dict(e: ModelEntry) -> dict[str, Any]:
    tree = tf.param_tree(e.config)
    return {
        "name": e.name,
        "aliases": list(e.aliases),
        "description": e.description,
        "source": e.config.source,
        "params_total": tree.params,
        "params_active": tree.active,
        "published": _published(e),
        "config": config_to_dict(e.config),
        "file": e.path,
    }


def run_models(args: argparse.Namespace) -> Output:
    entries = load_models()
    models = [_entry_dict(e) for e in entries]

    def render(console: Console) -> None:
        rows = []
        for e, m in zip(entries, models, strict=True):
            c = e.config
            pub = e.published.get("params_total")
            attn = "MLA" if c.mla else ("MHA" if c.n_kv_heads == c.n_heads else "MQA" if c.n_kv_heads == 1 else "GQA")
            mlp = f"MoE {c.moe.top_k}/{c.moe.n_experts}" if c.moe else c.mlp
            rows.append(
                (
                    c.name,
                    format_number(m["params_total"]),
                    format_number(m["params_active"]),
                    format_number(pub.value) if pub else "-",
                    c.n_layers,
                    c.d_model,
                    f"{c.n_heads}/{c.n_kv_heads}",
                    attn,
                    mlp,
                    c.vocab_size,
                    c.max_seq_len,
                )
            )
        console.print(
            table(
                "model catalog (params counted by rooftop; published figure beside)",
                ["model", "params", "active", "published", "L", "D", "heads q/kv", "attention", "MLP", "V", "context"],
                rows,
            )
        )

    return Output({"models": models}, render)
