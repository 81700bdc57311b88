"""``rooftop limits MODEL --chip C (--chips N | --topology T) [--batch-tokens B --seq-len S]``: the
book's thresholds for that job, each with its formula and the figures it used (plan/limits.py)."""

from __future__ import annotations

import argparse

from rooftop.cli.common import MAX_TOKENS, Output, add_algorithm, add_common, chip_from_args, count
from rooftop.cli.serve import WEIGHT_DTYPES
from rooftop.cli.train import MAX_CHIPS, MAX_SEQUENCES, OPTIMIZERS


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "limits",
        help="the book's thresholds for a job: critical batch per chip, largest TP/EP, FSDP x TP split, min chips",
    )
    p.add_argument("model", help="model name (see `rooftop models`), a model .toml or a Hugging Face config.json")
    add_common(p)
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--chips", metavar="N", help="number of chips (a default slice / NVLink layout is chosen)")
    where.add_argument(
        "--topology", metavar="T", help="physical slice, e.g. 16x20x28 (TPU), 2*16x16 (2 slices), 16x8 (GPU)"
    )
    p.add_argument(
        "--batch-tokens",
        metavar="B",
        help="global batch in tokens per step, e.g. 4M (with --seq-len; rounded to whole sequences as in train)",
    )
    p.add_argument("--seq-len", metavar="S", help="sequence length in tokens, e.g. 4096 (with --batch-tokens)")
    p.add_argument(
        "--optimizer",
        choices=OPTIMIZERS,
        default="adam",
        help="optimizer whose state the training memory counts (default adam: fp32 master and two moments)",
    )
    p.add_argument("--weight-dtype", default="bf16", choices=WEIGHT_DTYPES, help="served weight type (default bf16)")
    p.add_argument(
        "--efficiency", help="efficiency factors over the ideal 1, e.g. matrix=0.7,network=0.9,memory_reserve=0.1"
    )
    add_algorithm(p, "hierarchical")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> Output:
    from rooftop.cost.efficiency import IDEAL, default_efficiency, parse_efficiency
    from rooftop.hardware.topology import parse_topology, topology_for_chips
    from rooftop.model.catalog import get_model
    from rooftop.model.memory import TrainingPrecision
    from rooftop.plan.limits import job_limits
    from rooftop.plan.train.framework import catalog_algorithm
    from rooftop.report import limits as report

    chip = chip_from_args(args)
    cfg = get_model(args.model)
    if args.topology:
        topology = parse_topology(chip, args.topology)
    else:
        topology = topology_for_chips(chip, count(args.chips, "--chips", MAX_CHIPS))
    batch = (
        count(args.batch_tokens, "--batch-tokens", MAX_TOKENS * MAX_SEQUENCES)
        if args.batch_tokens is not None
        else None
    )
    seq = count(args.seq_len, "--seq-len", MAX_TOKENS) if args.seq_len is not None else None
    # ideal factors (the book's thresholds), but train's HBM headroom: train_min_chips is then the count at
    # which `rooftop train` finds room for the training state (its usable HBM, 1 - memory_reserve)
    base = IDEAL.replace(memory_reserve=default_efficiency("training").memory_reserve)
    eff = parse_efficiency(args.efficiency, base) if args.efficiency else base
    algorithm = catalog_algorithm(args.algorithm) if args.algorithm else None
    precision = TrainingPrecision(optimizer=args.optimizer)
    result = job_limits(cfg, chip, topology, batch, seq, eff, precision, args.weight_dtype, algorithm)
    return Output(report.limits_payload(result), lambda console: report.render_limits(console, result))
