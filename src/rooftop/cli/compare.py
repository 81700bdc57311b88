"""``rooftop compare MODEL --chips-list h100:16384,tpu-v5p:16x20x28 (training or serving job options)``.

One job, several chips or slices side by side: training (``--batch-tokens`` and ``--seq-len``, optionally
``--tokens``) or serving (``--prompt-len`` and ``--gen-len``). Each entry is planned exactly as
``rooftop train`` / ``rooftop serve`` plan it; the table and JSON put the answers in one place."""

from __future__ import annotations

import argparse
import copy
from typing import TYPE_CHECKING, Any

from rooftop.cli.common import Output, add_common
from rooftop.errors import InvalidConfigError, shown

if TYPE_CHECKING:
    from rooftop.hardware.chip import Chip
    from rooftop.hardware.topology import Topology
    from rooftop.plan.compare import Comparison
    from rooftop.plan.train.step import TrainingSetup

#: the most entries one comparison plans (each is a full search)
MAX_ENTRIES = 16


#: dest -> (the one command that has it, its default): an option of one job only
ONLY: dict[str, tuple[str, object]] = {}
#: options of train and serve that compare does not take: where each entry runs comes from --chips-list;
#: the files, the layouts shown and --emit are one plan's; one price for several chips is --price CHIP=USD
NOT_SHARED = frozenset({"help", "chip", "chips", "topology", "model", "json", "debug", "catalog", "plot", "timeline",
                        "html", "top", "objective", "emit", "price_per_chip_hour"})  # fmt: skip


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "compare",
        help="one training or serving job on several chips or slices, side by side",
        description="Every option of `rooftop train` and `rooftop serve` applies to each entry as it does there "
        "(the training ones to a training job, the serving ones to a serving job). A goal (training: --tokens "
        "with --max-days/--max-cost; serving: --requests-per-s with --max-ttft/--max-step-latency) and bare "
        "chip names in --chips-list compare each chip's smallest slice meeting it, ranked by dollars.",
    )
    p.add_argument("model", help="model name (see `rooftop models`), a model .toml or a Hugging Face config.json")
    add_common(p, chip=False)
    p.add_argument(
        "--chips-list",
        required=True,
        metavar="CHIP[:N|:TOPOLOGY],...",
        help="the slices to compare, e.g. h100:16384,tpu-v5p:16x20x28,b200:8192 (a count or a topology each); "
        "with a goal, chip names alone, e.g. h100,b200,tpu-v5p",
    )
    share_options(p, sub)
    p.set_defaults(func=run)


def share_options(p: argparse.ArgumentParser, sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add every option of ``train`` and ``serve`` (their parsers as registered, else built here) that
    ``p`` lacks, none required: the same flags, help and checks, declared once."""
    from rooftop.cli import serve as serve_cmd
    from rooftop.cli import train as train_cmd

    have = {s for a in p._actions for s in a.option_strings}
    seen: dict[str, list[str]] = {}
    for name, mod in (("train", train_cmd), ("serve", serve_cmd)):
        parser = sub.choices.get(name)
        if parser is None:
            scratch = argparse.ArgumentParser().add_subparsers()
            mod.register(scratch)
            parser = scratch.choices[name]
        for action in parser._actions:
            if action.dest in NOT_SHARED or not action.option_strings:
                continue
            seen.setdefault(action.dest, []).append(name)
            ONLY[action.dest] = (name, action.default) if len(seen[action.dest]) == 1 else ("", None)
            if have & set(action.option_strings):
                continue
            shared = copy.copy(action)
            shared.required = False
            p._add_action(shared)
            have |= set(action.option_strings)
    for action in p._actions:  # say which job each shared option applies to
        jobs = seen.get(action.dest)
        if jobs and action.help:
            action.help = f"{' and '.join(jobs)}: {action.help}"


def entries(text: str, bare: bool = False) -> list[tuple[str, str]]:
    """``h100:16384,tpu-v5p:16x20x28`` -> [(chip, count or topology)], one-line errors for what is not;
    with ``bare`` (a goal), chip names alone -> [(chip, "")]."""
    out = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        if bare and ":" not in part:
            out.append((part, ""))
            continue
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
    """The arguments `rooftop train` / `rooftop serve` would get for one entry ("" where: a goal's)."""
    count = where.isascii() and where.isdigit()
    return argparse.Namespace(**{**vars(args), "chip": chip, "chips": where if count else None,
                                 "topology": where if where and not count else None,
                                 "price_per_chip_hour": None, "emit": None})  # fmt: skip


def _check_options(args: argparse.Namespace, job: str) -> None:
    """An option only the other job has, given a value: one line naming it."""
    for dest, (owner, default) in ONLY.items():
        if owner and owner != job and getattr(args, dest, default) != default:
            other = "training" if owner == "train" else "serving"
            this = "training" if job == "train" else "serving"
            raise InvalidConfigError(f"--{dest.replace('_', '-')} is a {other} option; this is a {this} comparison")


def run(args: argparse.Namespace) -> Output:
    from rooftop.report import compare as report

    job = job_of(args)
    _check_options(args, job)
    goal = _is_goal(args, job)
    slices = entries(args.chips_list, bare=goal)
    counted = [f"{c}:{w}" for c, w in slices if w]
    if goal and counted:
        raise InvalidConfigError(f"with a goal, give chip names alone (the goal picks each slice), not {counted[0]}")
    if not goal and len(counted) < len(slices):
        bare = next(c for c, w in slices if not w)
        raise InvalidConfigError(f"--chips-list entry {shown(bare)} has no count or topology; give CHIP:N, or a goal "
                                 "(training: --tokens with --max-days/--max-cost; serving: --requests-per-s with "
                                 "--max-ttft/--max-step-latency)")  # fmt: skip
    result = _train(args, slices, goal) if job == "train" else _serve(args, slices, goal)
    payload: dict[str, Any] = report.compare_payload(result)
    return Output(payload, lambda console: report.render_compare(console, result))


def _is_goal(args: argparse.Namespace, job: str) -> bool:
    if job == "train":
        return args.max_days is not None or args.max_cost is not None
    return args.requests_per_s is not None and (args.max_ttft is not None or args.max_step_latency is not None)


def _train(args: argparse.Namespace, slices: list[tuple[str, str]], goal: bool) -> Comparison:
    from rooftop.cli.train import setup_from_args
    from rooftop.plan.compare import compare_training
    from rooftop.plan.train.search import parse_fix

    fix = parse_fix(args.fix)
    tokens = _tokens(args.tokens)
    if not goal:
        return compare_training([setup_from_args(_entry_args(args, c, w)) for c, w in slices], fix, tokens)
    from rooftop.cli.common import chip_from_args
    from rooftop.cli.goal import goal_figures
    from rooftop.hardware.slices import valid_slices
    from rooftop.plan.goal.compare import compare_training_goal

    days, cost, total = goal_figures(args, tokens)
    names = {}
    for c, _ in slices:
        chip = chip_from_args(_entry_args(args, c, ""))
        names[chip.name] = c

    def setup_for(chip: Chip, topology: Topology | None) -> TrainingSetup:
        where = topology or valid_slices(chip)[0].topology(chip)
        return setup_from_args(_entry_args(args, names[chip.name], ""), where)

    chips = [chip_from_args(_entry_args(args, c, "")) for c, _ in slices]
    return compare_training_goal(chips, setup_for, total, days, cost, fix)


def _serve(args: argparse.Namespace, slices: list[tuple[str, str]], goal: bool) -> Comparison:
    from rooftop.cli.serve import request_from_args

    requests = [request_from_args(_entry_args(args, c, w)) for c, w in slices]
    if not goal:
        from rooftop.plan.compare import compare_serving

        return compare_serving(requests)
    from rooftop.plan.goal.compare import compare_serving_goal
    from rooftop.report.goal import serve_goal_reason

    return compare_serving_goal(requests, serve_goal_reason)


def _tokens(text: str | None) -> float | None:
    from rooftop.units import parse_number

    if text is None:
        return None
    value = parse_number(text)
    if not value >= 1:
        raise InvalidConfigError(f"--tokens must be >= 1, got {shown(text)}")
    return float(value)
