"""``--emit KIND`` of ``rooftop train`` (jax, maxtext) and ``rooftop serve`` (jax, vllm, sglang): the plan as
code or a launch line (report/emit/), printed instead of the tables; with ``--json``, under ``emit``."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from rooftop.cli.common import Output
from rooftop.errors import InvalidConfigError

if TYPE_CHECKING:
    from rooftop.plan.serve.layout import ServingLayout
    from rooftop.plan.serve.sweep import ServingRequest
    from rooftop.plan.train.plan import TrainingPlan

TRAIN_KINDS = ("jax", "maxtext")
SERVE_KINDS = ("jax", "vllm", "sglang")


def add_emit(p: argparse.ArgumentParser, kinds: tuple[str, ...]) -> None:
    p.add_argument(
        "--emit",
        choices=kinds,
        help="print the chosen layout as code instead of the tables: "
        + ", ".join(
            {
                "jax": "jax (mesh, PartitionSpecs, jit shardings)",
                "maxtext": "maxtext (ici_*/dcn_* parallelism, batch)",
                "vllm": "vllm (vllm serve flags)",
                "sglang": "sglang (launch_server flags)",
            }[k]
            for k in kinds
        )
        + "; see docs/emit.md for what each does not cover",
    )


def with_emit(out: Output, kind: str, text: str) -> Output:
    """``out`` printing ``text`` instead of its tables, and carrying it in its JSON."""

    def render(console: Any) -> None:
        console.print(text, markup=False, highlight=False, soft_wrap=True, end="")

    return Output({**out.payload, "emit": {"kind": kind, "text": text}}, render, out.plots)


def train_text(kind: str, args: argparse.Namespace, plan: TrainingPlan) -> str:
    from rooftop.report.emit.engines import maxtext
    from rooftop.report.emit.jax import jax_train

    setup, par = plan.setup, plan.ranked[0].parallelism
    title = f"rooftop train {setup.cfg.name} on {setup.chip.name} {setup.topology.spec}: {par.label}"
    if kind == "jax":
        return jax_train(par, title)
    dtype = setup.dtypes.matmul or setup.dtypes.activations
    return maxtext(par, setup.topology, setup.global_batch, setup.seq_len, dtype, title)


def serve_text(kind: str, args: argparse.Namespace, req: ServingRequest, layout: ServingLayout, batch: int) -> str:
    from rooftop.report.emit.engines import sglang, vllm
    from rooftop.report.emit.jax import jax_serve

    title = f"rooftop serve {req.cfg.name} on {req.chip.name}: {layout.label()}, {batch} sequences per replica"
    if kind == "jax":
        return jax_serve(req.cfg, layout, batch, title)
    emit = vllm if kind == "vllm" else sglang
    return emit(args.model, layout, batch, req.token_budget, req.max_context_len, req.dtypes, title)


def serve_choice(plan: Any) -> tuple[ServingLayout, int]:
    """The layout and batch per replica a serving plan chose (under load when it has a rate)."""
    batching = plan.batching
    if batching is not None and batching.chosen is not None:
        layout, state = batching.layouts[batching.chosen]
        return layout, state.max_batch
    if plan.chosen is None:
        from rooftop.report.reasons import note_text

        raise InvalidConfigError(f"--emit: the plan chose no serving point ({note_text(plan.chosen_reason)})")
    point = plan.points[plan.chosen]
    return point.layout, point.batch
