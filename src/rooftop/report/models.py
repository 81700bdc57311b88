"""``rooftop models`` and ``rooftop model``: the model catalog and one model's transformer
math (parameters, FLOPs per token, KV cache, training memory) as JSON and tables."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from rooftop.model import activations as act
from rooftop.model import memory as mem
from rooftop.model import per_token
from rooftop.model.activations import REMAT_POLICIES, remat_policy
from rooftop.model.catalog import config_to_dict
from rooftop.model.layers import layer_groups
from rooftop.model.params import ParamTree, param_tree
from rooftop.report.book import BOOK
from rooftop.report.table import say, styled, table, words
from rooftop.units import format_bytes, format_number

if TYPE_CHECKING:
    from rich.console import Console

    from rooftop.model.catalog import ModelEntry
    from rooftop.model.config import TransformerConfig


def _published(entry: ModelEntry | None) -> dict[str, Any]:
    if entry is None:
        return {}
    return {k: {"value": f.value, "source": f.source, "note": f.note} for k, f in entry.published.items()}


def _tree_dict(t: ParamTree) -> dict[str, Any]:
    return {
        "name": t.name,
        "params": t.params,
        "active": t.active,
        "matmul": t.matmul,
        "kind": t.kind,
        "count": t.count,
        "children": [_tree_dict(c) for c in t.children],
    }


def model_summary(
    cfg: TransformerConfig, seq_len: int, batch: int, kv_dtype: str, remat: str, attention: str = "causal"
) -> dict[str, Any]:
    """The transformer-math keys of ``rooftop model --json`` (SI units: FLOPs, bytes). ``attention``: causal
    (each query sees the keys before it, as a decoder trains) or full (every key: the T^2 count some papers
    use, e.g. PaLM's MFU)."""
    remat_policy(remat)
    causal = attention == "causal"
    tree = param_tree(cfg)
    per_param = mem.training_bytes_per_param()
    state = mem.training_state_bytes(cfg)
    return {
        "seq_len": seq_len,
        "batch": batch,
        "kv_dtype": kv_dtype,
        "remat": remat,
        "params_total": tree.params,
        "params_active": tree.active,
        "params_matmul_active": tree.matmul,
        "params_breakdown": _tree_dict(tree),
        "attention": attention,
        "flops_per_token_forward": per_token.flops_per_token_forward(cfg, seq_len, causal),
        "flops_per_token_train": per_token.flops_per_token_train(cfg, seq_len, remat, causal),
        "attention_flops_per_token": per_token.attention_flops_per_token(cfg, seq_len, causal),
        "vector_flops_per_token_forward": per_token.vector_flops_per_token_forward(cfg, seq_len, causal),
        "recompute_flops_per_token": {p: per_token.recompute_flops_per_token(cfg, seq_len, p) for p in REMAT_POLICIES},
        "prefill_flops": per_token.prefill_flops(cfg, seq_len, batch),
        "decode_flops_per_token": per_token.decode_flops_per_token(cfg, seq_len),
        "kv_cache_bytes_per_token": mem.kv_cache_bytes_per_token(cfg, kv_dtype),
        "kv_cache_bytes": mem.kv_cache_bytes(cfg, batch, seq_len, kv_dtype),
        "state_bytes_per_sequence": mem.state_bytes_per_sequence(cfg, kv_dtype),
        "activation_bytes_per_token": act.activation_bytes_by_policy(cfg, seq_len),
        "activation_bytes_per_token_flash": act.activation_bytes_by_policy(cfg, seq_len, flash=True),
        "logits_bytes_per_token": act.logits_bytes_per_token(cfg),
        "training_bytes_per_param": per_param.total,
        "training_bytes_per_param_breakdown": {**per_param.as_dict(), "total": per_param.total},
        "training_state_bytes": {**state.as_dict(), "total": state.total},
        **_book_flops(cfg, seq_len, remat, causal),
        "layer_groups": [
            {"name": g.name, "count": g.count, "moe": g.moe, "window": g.window, "mixer": g.mixer, "mlp": g.mlp}
            for g in layer_groups(cfg)
        ],
        "conventions": {
            "flops": "matrix-unit FLOPs; forward = 2 x params_matmul_active + attention; train = 3 x forward"
            " + remat recompute",
            "attention": ("causal: (T+1)/2 keys per query on average" if causal else "full: T keys per query (no mask)")
            + "; QK^T and AV each 2 x heads x head_dim per pair",
            "activation_bytes_per_token": "bf16, summed over layers, per remat policy; logits separate; unfused"
            " attention (the T x T probabilities kept); activation_bytes_per_token_flash: fused attention (softmax"
            " statistics only), what `rooftop train` assumes unless --fix flash=0",
            "training_bytes_per_param": "bf16 weights + bf16 grads + fp32 master + fp32 Adam moments",
        },
    }


def _book_flops(cfg: TransformerConfig, seq_len: int, remat: str, causal: bool) -> dict[str, Any]:
    """The book's FLOP counts ("How to Scale Your Model", Part 4): full attention (every query sees all T
    keys), training = 3 x forward = 6 x matmul params + 12 x L x N x H x T per token, no recompute."""
    attn = per_token.attention_flops_per_token(cfg, seq_len, False)
    forward = per_token.flops_per_token_forward(cfg, seq_len, False)
    why = []
    if causal:
        why.append("rooftop counts causal attention ((T+1)/2 keys per query on average, its default); the book "
                   "counts all T (--attention full gives the book's count)")  # fmt: skip
    if remat != "none":
        why.append(f"rooftop's training count adds the recompute of remat {remat}; the book's has none")
    return {
        "book_flops_per_token_forward": forward,
        "book_flops_per_token_train": 3 * forward,
        "book_attention_flops_per_token": attn,
        "book_formula": (
            f"train = 3 x forward = 3 x (2 x {format_number(param_tree(cfg).matmul)} matmul params + "
            f"{format_number(attn)} attention with all T = {seq_len} keys per query) = "
            f"{format_number(3 * forward, 'FLOP')}"
        ),
        "book_part": f"{BOOK}, Part 4",
        "book_why": "; ".join(why),
    }


def model_payload(
    cfg: TransformerConfig,
    entry: ModelEntry | None,
    seq_len: int,
    batch: int,
    kv_dtype: str,
    remat: str,
    attention: str = "causal",
) -> dict[str, Any]:
    """``rooftop model --json``: the model as read, then its transformer math, and notes (a sequence past
    the model's context)."""
    notes = []
    if seq_len > cfg.max_seq_len:
        notes.append(f"--seq-len {seq_len:,} exceeds {cfg.name}'s context of {cfg.max_seq_len:,} tokens: the math is "
                     "extrapolated past what the model was trained for")  # fmt: skip
    return {
        "notes": notes,
        "model": {
            "name": cfg.name,
            "source": cfg.source,
            "description": entry.description if entry else "",
            "published": _published(entry),
            "config": config_to_dict(cfg),
        },
        **model_summary(cfg, seq_len, batch, kv_dtype, remat, attention),
    }


def render_model(console: Console, cfg: TransformerConfig, d: dict[str, Any]) -> None:
    """Tables of ``rooftop model`` from its payload ``d``."""
    say(console, styled(cfg.name, "bold"), f"  {d['model']['description']}")
    say(console, f"source: {cfg.source}")
    t, b = d["seq_len"], d["batch"]
    rows = [
        ("parameters (total / active)", f"{format_number(d['params_total'])} / {format_number(d['params_active'])}"),
        ("N of 6N (matmul params per token)", format_number(d["params_matmul_active"])),
        (
            f"forward FLOPs per token (T={t}, {d['attention']} attention)",
            format_number(d["flops_per_token_forward"], "FLOP"),
        ),
        ("  of which attention", format_number(d["attention_flops_per_token"], "FLOP")),
        (f"train FLOPs per token (remat {d['remat']})", format_number(d["flops_per_token_train"], "FLOP")),
        ("  the book's (Part 4: full attention, no remat)", format_number(d["book_flops_per_token_train"], "FLOP")),
        (
            "vector FLOPs per token (forward, not in the above)",
            format_number(d["vector_flops_per_token_forward"], "FLOP"),
        ),
        (f"prefill FLOPs ({b} x {t} tokens)", format_number(d["prefill_flops"], "FLOP")),
        (f"decode FLOPs per token (context {t})", format_number(d["decode_flops_per_token"], "FLOP")),
        (f"KV cache per token ({d['kv_dtype']})", f"{d['kv_cache_bytes_per_token']:,.0f} B"),
        (f"KV cache ({b} x {t} tokens)", format_bytes(d["kv_cache_bytes"])),
        *(
            [("  of which linear / SSM state (constant in context)", format_bytes(b * d["state_bytes_per_sequence"]))]
            if d["state_bytes_per_sequence"]
            else []
        ),
        ("training state per param", f"{d['training_bytes_per_param']:g} B"),
        ("training state (unsharded)", format_bytes(d["training_state_bytes"]["total"])),
        ("  in the book's units", f"{format_bytes(d['training_state_bytes']['total'], binary=False)}"),
    ]
    console.print(table(f"{cfg.name}: per-token math", ["quantity", "value"], rows))
    console.print(
        table(
            f"activations kept per token (bf16, all layers, T={t}; fused attention keeps softmax statistics, as "
            "rooftop train assumes; unfused keeps the T x T probabilities)",
            ["remat", "bytes (fused attention)", "bytes (unfused)", "recompute"],
            [
                (
                    p,
                    format_bytes(d["activation_bytes_per_token_flash"][p]),
                    format_bytes(v),
                    format_number(d["recompute_flops_per_token"][p], "FLOP"),
                )
                for p, v in d["activation_bytes_per_token"].items()
            ],
        )
    )
    prows = [
        (
            "  " * path.count("/") + words(path.rsplit("/", 1)[-1]) + (f" x{n['count']}" if n["count"] > 1 else ""),
            format_number(n["params"]),
            format_number(n["active"]),
        )
        for path, n in _walk(d["params_breakdown"])
        if path.count("/") <= 3
    ]
    console.print(table("parameters", ["part", "params", "active"], prows))
    for note in d.get("notes", ()):
        say(console, f"note: {note}")
    if d["book_why"]:
        say(console, f"book differs: {d['book_why']}")


def _walk(node: dict[str, Any], prefix: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    path = f"{prefix}/{node['name']}" if prefix else node["name"]
    yield path, node
    for child in node["children"]:
        yield from _walk(child, path)


def _entry_dict(e: ModelEntry) -> dict[str, Any]:
    tree = param_tree(e.config)
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


def catalog_payload(entries: Sequence[ModelEntry]) -> dict[str, Any]:
    """``rooftop models --json``."""
    return {"models": [_entry_dict(e) for e in entries]}


def render_catalog(console: Console, entries: Sequence[ModelEntry], payload: dict[str, Any]) -> None:
    """The catalog table from the entries and their payload (parameter counts computed once)."""
    rows = []
    for e, m in zip(entries, payload["models"], strict=True):
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
