"""``rooftop models`` (the model catalog) and ``rooftop model NAME|config.json`` (the
transformer math of one model: parameters, FLOPs per token, KV cache, training memory)."""

from __future__ import annotations

import argparse
from dataclasses import replace
from typing import TYPE_CHECKING

from rooftop.cli.common import MAX_TOKENS, Output, add_common, count
from rooftop.errors import InvalidConfigError, shown

if TYPE_CHECKING:
    from rooftop.model.catalog import ModelEntry
    from rooftop.model.config import TransformerConfig

KV_DTYPES = ("bf16", "fp16", "fp8", "int8", "fp32")
DEFAULT_SEQ_LEN = 4096
#: the names of model.activations.REMAT_POLICIES (a test checks): importing that module would slow down --help
REMAT_CHOICES = ("none", "selective", "dots", "selective-op", "full")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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
        "--dims",
        metavar="D=..,F=..,L=..,N=..,V=..",
        help="a dense model from its dims instead of a name (the book's Part 4 letters; K and H optional), "
        "e.g. D=8192,F=28672,L=80,N=64,K=8,H=128,V=128256",
    )
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
        choices=REMAT_CHOICES,
        help="remat policy for flops_per_token_train (activations are shown for every policy)",
    )
    q.add_argument(
        "--attention",
        default="causal",
        choices=("causal", "full"),
        help="count attention pairs under a causal mask (default) or all T^2 (some papers' MFU convention)",
    )
    add_common(q, chip=False)
    q.set_defaults(func=run_model)


def _count(text: str | None, flag: str) -> int:
    """A positive count of tokens or sequences, e.g. 8192 or 8Ki."""
    return count(text or "", flag, MAX_TOKENS)


def resolve_model(name: str) -> tuple[TransformerConfig, ModelEntry | None]:
    """A config.json (a path ending .json, or a model folder holding one) or a catalog name / .toml file,
    with its catalog entry."""
    from rooftop.catalog.io import is_directory
    from rooftop.model.catalog import get_entry
    from rooftop.model.hf import load_hf_config

    if name.endswith(".json") or ("/" in name and is_directory(name)):
        return load_hf_config(name), None
    entry = get_entry(name)
    return entry.config, entry


def run_model(args: argparse.Namespace) -> Output:
    name = args.model or args.name
    if args.dims:
        from rooftop.cli.common import parse_kv_ints
        from rooftop.model.catalog import config_from_dims

        if name:
            raise InvalidConfigError(f"give the model once: --dims or {shown(name)}, not both")
        cfg = config_from_dims(parse_kv_ints(args.dims, "--dims"))
        cfg, entry = replace(cfg, source=f"--{cfg.source}"), None  # the source as the user wrote it: the flag
        return _model_output(args, cfg, entry)
    if not name:
        raise InvalidConfigError(
            "give a model: `rooftop model NAME` or `--model path/to/config.json` (see `rooftop models`)"
        )
    if args.model and args.name:
        raise InvalidConfigError(
            f"give the model once: NAME {shown(args.name)} or --model {shown(args.model)}, not both"
        )
    cfg, entry = resolve_model(name)
    return _model_output(args, cfg, entry)


def _model_output(args: argparse.Namespace, cfg: TransformerConfig, entry: ModelEntry | None) -> Output:
    from rooftop.report import models as report

    seq_len = _count(args.seq_len, "--seq-len") if args.seq_len else min(DEFAULT_SEQ_LEN, cfg.max_seq_len)
    batch = _count(args.batch, "--batch")
    payload = report.model_payload(cfg, entry, seq_len, batch, args.kv_dtype, args.remat, args.attention)
    return Output(payload, lambda console: report.render_model(console, cfg, payload))


def run_models(args: argparse.Namespace) -> Output:
    from rooftop.model.catalog import load_models
    from rooftop.report import models as report

    entries = load_models()
    payload = report.catalog_payload(entries)
    return Output(payload, lambda console: report.render_catalog(console, entries, payload))
