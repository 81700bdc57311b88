"""``rooftop matmul "A[I_X, J] @ B[J, K_Y] -> C[I_X, K_Y]" --dims ... --chip C --topology T --mesh M``.

Called by cli/matmul.py for sharded expressions; the payload, tables and chart are in
report/matmul.py.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from rooftop.cli.common import Output
from rooftop.errors import InvalidConfigError

if TYPE_CHECKING:
    from rooftop.hardware.chip import Chip
    from rooftop.hardware.topology import Mesh
    from rooftop.sharding.notation import MatmulExpr
    from rooftop.sharding.strategy import Dtypes


def run_sharded(
    args: argparse.Namespace, expr: MatmulExpr, sizes: dict[str, int], chip: Chip, dtypes: Dtypes
) -> Output:
    from rooftop.hardware.topology import make_mesh, parse_topology
    from rooftop.report import matmul as report
    from rooftop.sharding.matmul import analyze_sharded_matmul

    if not getattr(args, "topology", None):
        raise InvalidConfigError(
            f"a sharded matmul needs --topology (the physical slice its collectives run on), e.g. --topology "
            f"{'16x8' if chip.topology.kind == 'switched' else '4x4x4'} --mesh ..."
        )
    mesh = make_mesh(parse_topology(chip, args.topology), getattr(args, "mesh", None))
    if getattr(args, "search", False):
        return _search(expr, sizes, mesh, chip, dtypes)
    r = analyze_sharded_matmul(expr, sizes, mesh, chip, dtypes)
    return Output(
        report.sharded_payload(expr, sizes, dtypes, mesh, r),
        lambda console: report.render_sharded(console, r, mesh, chip),
        [lambda path: report.plot_sharded(path, r, chip)],
    )


def _search(expr: MatmulExpr, sizes: dict[str, int], mesh: Mesh, chip: Chip, dtypes: Dtypes) -> Output:
    """``--search``: the fastest input shardings; the payload is the best one's, with ``search`` added."""
    from rooftop.report import matmul as report
    from rooftop.report import matmul_solve as solved
    from rooftop.sharding.search import search_shardings

    found = search_shardings(expr, sizes, mesh, chip, dtypes)
    best = found[0]
    payload = report.sharded_payload(best.expr, sizes, dtypes, mesh, best.result)
    payload["search"] = solved.search_dict(found)

    def render(console: object) -> None:
        solved.render_search(console, found)  # type: ignore[arg-type]
        report.render_sharded(console, best.result, mesh, chip)  # type: ignore[arg-type]

    return Output(payload, render, [lambda path: report.plot_sharded(path, best.result, chip)])
