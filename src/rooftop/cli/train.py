"""``rooftop train MODEL --chip C (--chips N | --topology T) --batch-tokens B --seq-len S``."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rooftop.cli.common import (
    JOB_DEFAULT,
    MAX_TOKENS,
    Output,
    add_algorithm,
    add_common,
    add_price,
    algorithm_from,
    chip_from_args,
    count,
    int_type,
)
from rooftop.cli.emit import TRAIN_KINDS, add_emit, train_text, with_emit
from rooftop.cli.goal import add_goal, train_goal_output
from rooftop.errors import InvalidConfigError, shown
from rooftop.units import parse_number

if TYPE_CHECKING:
    from rooftop.hardware.chip import Chip
    from rooftop.hardware.topology import Topology
    from rooftop.plan.train.plan import TrainingPlan
    from rooftop.plan.train.step import TrainingSetup

OBJECTIVES = ("time", "cost", "memory")  # plan.search.OBJECTIVES (a test checks); importing it loads the planner
OPTIMIZERS = ("adam", "adamw", "lion", "sgd-momentum", "sgd")  # model.memory.OPTIMIZERS (a test checks)

MAX_SEQUENCES = 10**8  # per optimizer step; far above any published run
MAX_CHIPS = 1 << 24  # hardware.chip.MAX_CHIPS (a test checks); importing it would slow down --help
MAX_TOP = 256  # each layout shown gets its full breakdown and table rows


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("train", help="find the fastest training layout: step time, MFU, memory, days and dollars")
    p.add_argument("model", help="model name (see `rooftop models`), a model .toml or a Hugging Face config.json")
    add_common(p)
    where = p.add_mutually_exclusive_group()
    where.add_argument("--chips", help="number of chips (a default slice / NVLink layout is chosen)")
    where.add_argument("--topology", help="physical slice, e.g. 16x20x28 (TPU), 2*16x16 (2 slices), 2048x8 (GPU)")
    add_goal(p)
    p.add_argument(
        "--batch-tokens",
        required=True,
        help="global batch in tokens per optimizer step, e.g. 4M or 4Mi (M = 10^6, Mi = 2^20), rounded to "
        "whole sequences of --seq-len (a line says so when it is)",
    )
    p.add_argument("--seq-len", required=True, help="sequence length, e.g. 4096 or 8Ki (k = 1000, Ki = 1024)")
    p.add_argument("--tokens", help="total training tokens, e.g. 15T: adds days, chip-hours and dollars")
    p.add_argument(
        "--fix",
        help="pin degrees or choices, e.g. tp=8,pp=16,mb=32,v=2,remat=full,zero=1,offload=none; on/off (0|1): "
        "sequence_parallel (sp), flash (fused attention), dropout, pipeline_balance (the pipeline split counts the "
        "head and loss as layers; default 1), fsdp_reshard (1, the default: each layer's weights gathered for "
        "the forward and again for the backward of every microbatch, HBM holds the shard and two gathered "
        "layers; 0: each layer gathered once per step and kept, its gradients reduce-scattered once, HBM holds "
        "the stage's weights whole, and its gradients over several microbatches), grad_clip (the optimizer step "
        "clips the gradients' global norm; default: the framework's), compile (1: norms, rotary and the gated "
        "activation run as fused kernels; 0: eagerly, one kernel per PyTorch op, each through HBM; default: the "
        "framework's, 0 for pytorch-fsdp1/2 and deepspeed). flash and dropout default to the "
        "framework's era (megatron-2021: 0, 1)",
    )
    p.add_argument(
        "--objective", choices=OBJECTIVES, default="time", help="rank by step time (default), cost or memory"
    )
    p.add_argument("--top", type=int_type(1, MAX_TOP), default=5, help="how many layouts to show (default 5)")
    p.add_argument(
        "--optimizer",
        choices=OPTIMIZERS,
        default="adam",
        help="optimizer whose state is stored and updated each step (default adam: fp32 master and two moments)",
    )
    p.add_argument(
        "--max-nodes-per-token",
        metavar="M",
        help="MoE node-limited routing: each token's experts on at most M nodes (DeepSeek-V3: 4)",
    )
    p.add_argument(
        "--compute-dtype",
        metavar="DTYPE",
        help="dtype of the weight matmuls (e.g. fp8: FP8 GEMMs, their inputs kept for the backward and the MoE "
        "dispatch in fp8; attention and the rest in bf16); default: bf16",
    )
    p.add_argument(
        "--framework",
        help="the training stack, whose collectives and kernels are priced (catalog/frameworks/training.toml): "
        "megatron, megatron-2021, pytorch-fsdp1, pytorch-fsdp2, deepspeed, xla; default megatron on GPUs, xla on "
        "TPUs",
    )
    add_algorithm(p, JOB_DEFAULT)
    p.add_argument("--efficiency", help="override efficiency factors, e.g. matrix=0.7,network=0.9 (see docs)")
    p.add_argument("--price-per-chip-hour", help="USD per chip-hour (default: the catalog's list price)")
    add_price(p)
    add_emit(p, TRAIN_KINDS)
    p.add_argument("--plot", metavar="FILE.png", help="write the best layout's step-time and memory breakdown")
    p.add_argument(
        "--timeline",
        metavar="FILE.json",
        help="write one step of the best layout as a Chrome trace (Perfetto, chrome://tracing): per layer "
        "forward/backward, each collective on its axis, the bubble, the optimizer, a lane per pipeline stage",
    )
    p.add_argument("--html", metavar="FILE.html", help="write a self-contained HTML report of the plan")
    p.set_defaults(func=run)


def _int(text: str, what: str, hi: int = MAX_TOKENS * MAX_SEQUENCES) -> int:
    return count(text, what, hi)


def setup_from_args(args: argparse.Namespace, topology: Topology | None = None) -> TrainingSetup:
    """The training job of ``args`` on ``topology`` (default: ``--topology`` or ``--chips``)."""
    from rooftop.cost.efficiency import default_efficiency, parse_efficiency
    from rooftop.hardware.slices import slice_for_chips, topology_or_nearest
    from rooftop.model.catalog import get_model
    from rooftop.model.memory import TrainingPrecision
    from rooftop.model.workload import Dtypes
    from rooftop.plan.train.step import TrainingSetup

    chip = chip_from_args(args)
    cfg = get_model(args.model)
    if topology is not None:
        topo = topology
    elif args.topology:
        topo = topology_or_nearest(chip, args.topology)
    else:
        topo = slice_for_chips(chip, _int(args.chips, "--chips", MAX_CHIPS))
    batch_tokens, seq = _int(args.batch_tokens, "--batch-tokens"), _int(args.seq_len, "--seq-len", MAX_TOKENS)
    if batch_tokens / seq > MAX_SEQUENCES:
        raise InvalidConfigError(
            f"--batch-tokens {batch_tokens} is {batch_tokens // seq:,} sequences, more than the {MAX_SEQUENCES:,} the "
            "planner searches"
        )
    if batch_tokens < seq:
        raise InvalidConfigError(f"--batch-tokens {batch_tokens} is less than one sequence of --seq-len {seq}")
    from rooftop.plan.train.framework import default_framework, get_framework

    name = getattr(args, "framework", None)  # rooftop compare builds these arguments without it
    stack = get_framework(name) if name else default_framework(chip)
    if getattr(args, "algorithm", None):  # the stack's collectives run by another algorithm
        stack = dataclasses.replace(stack, algorithm=algorithm_from(args))
    eff = stack.efficiency(default_efficiency("training"))  # the framework's overlap rules, then the user's
    if args.efficiency:
        eff = parse_efficiency(args.efficiency, eff)
    # a batch that is not a whole number of sequences is rounded to the nearest (reported as global_batch_tokens)
    precision = TrainingPrecision(optimizer=args.optimizer)
    dtypes = Dtypes(matmul=compute_dtype_arg(args.compute_dtype, chip)) if args.compute_dtype else Dtypes()
    nodes = 0
    if args.max_nodes_per_token is not None:
        if cfg.moe is None:
            raise InvalidConfigError(f"--max-nodes-per-token limits MoE routing; {cfg.name} is dense")
        nodes = count(args.max_nodes_per_token, "--max-nodes-per-token", MAX_CHIPS)
        if nodes < 1:
            raise InvalidConfigError(f"--max-nodes-per-token must be >= 1, got {nodes}")
    batch = max(1, round(batch_tokens / seq))
    return TrainingSetup(
        cfg, chip, topo, batch, seq, eff, precision, dtypes, stack.fused_attention, stack.dropout, nodes, stack
    )


def compute_dtype_arg(text: str, chip: Chip) -> str:
    """``--compute-dtype``: a dtype the chip's matrix unit has a peak for (fp8 on an A100 is refused, not
    silently run at bf16)."""
    from rooftop.dtypes import canonical_dtype

    dtype = canonical_dtype(text)
    if dtype not in chip.matrix_flops_per_s:
        have = ", ".join(sorted(chip.matrix_flops_per_s))
        raise InvalidConfigError(
            f"--compute-dtype {shown(text)}: {chip.name}'s matrix unit has no {dtype} peak ({have})"
        )
    return dtype


def run(args: argparse.Namespace) -> Output:
    from rooftop.plan.train.plan import plan_training
    from rooftop.plan.train.search import parse_fix
    from rooftop.report import train as report

    if args.top < 1:
        raise InvalidConfigError(f"--top must be >= 1, got {args.top}")
    _check_files(args)
    price = parse_number(args.price_per_chip_hour) if args.price_per_chip_hour is not None else None
    if price is not None and price < 0:
        raise InvalidConfigError(f"--price-per-chip-hour must be >= 0, got {shown(args.price_per_chip_hour)}")
    tokens = parse_number(args.tokens) if args.tokens is not None else None
    if tokens is not None and tokens < 1:
        raise InvalidConfigError(f"--tokens must be >= 1, got {shown(args.tokens)}")
    fix = parse_fix(args.fix)
    if args.chips is None and args.topology is None:  # a goal instead of a slice
        return train_goal_output(args, setup_from_args, fix, tokens, price)
    setup = setup_from_args(args)
    plan = _with_progress(lambda progress: plan_training(setup, fix, args.objective, args.top, tokens, price, progress))
    best = plan.ranked[0]
    _write_files(args, plan)
    note = batch_rounding(args.batch_tokens, setup.global_batch, setup.seq_len)
    from rooftop.report.energy import render_energy, train_energy, train_json

    energy = train_energy(plan)

    def render(console: Any) -> None:
        if note:
            from rooftop.report.table import say

            say(console, note, soft_wrap=True)
        report.render_train(console, plan)
        render_energy(console, energy, "tokens")

    out = Output(train_json(plan), render, [lambda path: report.plot_train(best, path)])
    return with_emit(out, args.emit, train_text(args.emit, args, plan)) if args.emit else out


def batch_rounding(text: str, sequences: int, seq_len: int) -> str | None:
    """The line that says --batch-tokens was rounded to whole sequences (None when it was not): "4M" is
    4,000,000 tokens (M = 10^6; 4Mi would be 4,194,304), 976.6 sequences of 4096, rounded to 977."""
    tokens = _int(text, "--batch-tokens")
    if tokens == sequences * seq_len:
        return None
    return (
        f"--batch-tokens {text} = {tokens:,} tokens (k, M, G are powers of 1000; Ki, Mi, Gi of 1024) is "
        f"{tokens / seq_len:,.1f} sequences of --seq-len {seq_len:,}: rounded to {sequences:,} sequences, "
        f"{sequences * seq_len:,} tokens a step"
    )


def _check_files(args: argparse.Namespace) -> None:
    """--timeline and --html name files that can be written, checked before the search."""
    if args.timeline is not None:
        from rooftop.report.timeline import check_timeline_path

        check_timeline_path(args.timeline)
    if args.html is not None:
        from rooftop.report.html import check_html_path

        check_html_path(args.html)


def _write_files(args: argparse.Namespace, plan: TrainingPlan) -> None:
    if args.timeline is not None:
        from rooftop.plan.train.schedule import step_schedule
        from rooftop.report.timeline import train_events, train_metadata, write_timeline

        schedule = step_schedule(plan.setup, plan.ranked[0].parallelism)
        meta = train_metadata(schedule, plan.setup.cfg.name, plan.setup.chip.name)
        write_timeline(args.timeline, train_events(schedule, plan.setup.chip.kind), meta)
    if args.html is not None:
        from rooftop.report.html import train_html, write_html

        write_html(args.html, train_html(plan))


def _with_progress(work: Callable[[Callable[[int], None] | None], TrainingPlan]) -> TrainingPlan:
    """Run ``work`` with a live count of layouts on stderr when it is a terminal."""
    if not sys.stderr.isatty():
        return work(None)
    from rich.console import Console

    console = Console(stderr=True)
    with console.status("searching layouts...") as status:

        def progress(n: int) -> None:
            status.update(f"searching layouts: {n:,} evaluated")

        return work(progress)
