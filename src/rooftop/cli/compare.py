"""``rooftop compare MODEL --chips-list h100:16384,tpu-v5p:16x20x28 (training or serving job options)``.

One job, several chips or slices side by side: training (``--batch-tokens`` and ``--seq-len``, optionally
``--tokens``) or serving (``--prompt-len`` and ``--gen-len``). Each entry is planned exactly as
``rooftop train`` / ``rooftop serve`` plan it; the table and JSON put the answers in one place."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from rooftop.cli.common import Output, add_common
from rooftop.cli.serve import WEIGHT_DTYPES
from rooftop.errors import InvalidConfigError, shown

if TYPE_CHECKING:
    from rooftop.plan.compare import Comparison

#: the most entries one comparison plans (each is a full search)
MAX_ENTRIES = 16


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("compare", help="one training or serving job on several chips or slices, side by side")
    p.add_argument("model", help="model name (see `rooftop models`), a model .toml or a Hugging Face config.json")
    add_common(p, chip=False)
    p.add_argument(
        "--chips-list",
        required=True,
        metavar="CHIP:N|CHIP:TOPOLOGY,...",
        help="the slices to compare, e.g. h100:16384,tpu-v5p:16x20x28,b200:8192 (a count or a topology each)",
    )
    p.add_argument("--batch-tokens", help="training: global batch in tokens per optimizer step, e.g. 4M")
    p.add_argument("--seq-len", help="training: sequence length, e.g. 4096")
    p.add_argument("--tokens", help="training: total tokens, e.g. 15T: adds days and dollars")
    p.add_argument("--fix", help="training: pin degrees or choices on every entry, e.g. remat=full")
    p.add_argument("--prompt-len", help="serving: prompt tokens per request")
    p.add_argument("--gen-len", help="serving: generated tokens per request")
    p.add_argument("--max-step-latency", metavar="X", help="serving: target time per output token, e.g. 50ms")
    p.add_argument(
        "--weight-dtype", default="bf16", choices=WEIGHT_DTYPES, help="serving: weight element type (default bf16)"
    )
    p.set_defaults(func=run)


def entries(text: str) -> list[tuple[str, str]]:
    """``h100:16384,tpu-v5p:16x20x28`` -> [(chip, count or topology)], one-line errors for what is not."""
    out = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        chip, sep, where = part.rpartition(":")
        if not sep or not chip.strip() or not where.strip():
            raise InvalidConfigError(
                f"--chips-list entry {shown(part)} must be CHIP:N or CHIP:TOPOLOGY, e.g. h100:16384 or tpu-v5p:16x20x28"
            )
        out.append((chip.strip(), where.strip()))
    if not out:
        raise InvalidConfigError("--chips-list names no slice; e.g. h100:16384,tpu-v5p:16x20x28")
    if len(out) > MAX_ENTRIES:
        raise InvalidConfigError(f"--chips-list has {len(out)} entries; at most {MAX_ENTRIES}")
    return out


def job_of(args: argparse.Namespace) -> str:
    """ "train" or "serve", from which job options are given (both, or half of one, is an error)."""
    train = [f for f in ("batch_tokens", "seq_len") if getattr(args, f) is not None]
    serve = [f for f in ("prompt_len", "gen_len") if getattr(args, f) is not None]
    if train and serve:
        raise InvalidConfigError("give a training job (--batch-tokens, --seq-len) or a serving one (--prompt-len, "
                                 "--gen-len), not both")  # fmt: skip
    if len(train) == 2:
        return "train"
    if len(serve) == 2:
        return "serve"
    raise InvalidConfigError("a job needs --batch-tokens and --seq-len (training) or --prompt-len and --gen-len "
                             "(serving)")  # fmt: skip


def _entry_args(args: argparse.Namespace, chip: str, where: str) -> argparse.Namespace:
    """The arguments `rooftop train` / `rooftop serve` would get for one entry."""
    count = where.isascii() and where.isdigit()
    return argparse.Namespace(**{
        **vars(args), "chip": chip, "chips": where if count else None, "topology": None if count else where,
        "optimizer": "adam", "efficiency": None, "compute_dtype": None, "max_nodes_per_token": None,
        "batch": None, "max_ttft": None, "kv_dtype": "bf16",
        "activation_dtype": "bf16", "requests_per_s": None, "price_per_chip_hour": None, "ideal": False,
    })  # fmt: skip


def run(args: argparse.Namespace) -> Output:
    from rooftop.plan.compare import compare_serving, compare_training
    from rooftop.report import compare as report

    job = job_of(args)
    slices = entries(args.chips_list)
    if job == "train":
        from rooftop.cli.train import setup_from_args
        from rooftop.plan.train.search import parse_fix

        fix = parse_fix(args.fix)
        tokens = _tokens(args.tokens)
        setups = [setup_from_args(_entry_args(args, chip, where)) for chip, where in slices]
        result: Comparison = compare_training(setups, fix, tokens)
    else:
        from rooftop.cli.serve import request_from_args

        extra = [f for f in ("tokens", "fix") if getattr(args, f) is not None]
        if extra:
            raise InvalidConfigError(f"--{extra[0]} is a training option; this is a serving comparison")
        result = compare_serving([request_from_args(_entry_args(args, chip, where)) for chip, where in slices])
    payload: dict[str, Any] = report.compare_payload(result)
    return Output(payload, lambda console: report.render_compare(console, result))


def _tokens(text: str | None) -> float | None:
    from rooftop.units import parse_number

    if text is None:
        return None
    value = parse_number(text)
    if not value >= 1:
        raise InvalidConfigError(f"--tokens must be >= 1, got {shown(text)}")
    return float(value)
