"""``rooftop limits``: the book's thresholds for a job as JSON and a table, each with its formula
written out from the figures it used, the book's closed form beside it and where both come from."""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from rooftop.cost.roofline import achievable
from rooftop.report.formulas import group_why
from rooftop.report.table import say, styled, table
from rooftop.units import format_bytes, format_duration, format_number, format_rate

if TYPE_CHECKING:
    from rich.console import Console

    from rooftop.plan.limit_values import AxisSet, JobLimits, Limit

BOOK = "How to Scale Your Model (Austin et al.)"

#: where each rule comes from (the book's part and section, or the module whose model it uses)
SOURCES = {
    "dp": f"{BOOK}, Part 5 'Data Parallelism' (B/X > C/W_ici) and Part 12 'Rooflines for LLM Scaling on GPUs'",
    "fsdp": f"{BOOK}, Part 5 'Fully-Sharded Data Parallelism (FSDP)': bandwidth-bound below 2550 / n_axes on TPU v5p",
    "moe": f"{BOOK}, Part 12 'Rooflines for LLM Scaling on GPUs', Data Parallelism, MoE models: x E/k",
    "tp": f"{BOOK}, Part 5 'Tensor Parallelism' (Y < n_axes x F / 2550) and Part 12 'Tensor Parallelism'",
    "tp_layout": f"{BOOK}, Part 5 'Tensor Parallelism'; the mesh of plan/train/step.layout_mesh",
    "ep_layout": f"{BOOK}, Part 12 'Expert Parallelism'; the mesh of plan/train/step.layout_mesh",
    "split_min": f"{BOOK}, Part 5 'Mixed FSDP and Tensor Parallelism' (BS per device > 4 alpha^2 / (F M_X M_Y))",
    "split_opt": f"{BOOK}, Part 5 'Mixed FSDP and Tensor Parallelism' (the quadratic in X; its minimum derived here)",
    "split_best": f"{BOOK}, Part 5 'Mixed FSDP and Tensor Parallelism'; the mesh of plan/train/step.layout_mesh",
    "train_memory": "model/memory.training_bytes_per_param: weights, gradients, master copy, optimizer moments "
    "(ZeRO, Rajbhandari et al. 2020, section 3.1)",
    "serve_memory": "plan/serve/layout.weights_per_chip_bytes: every weight in the serving dtype",
}


def _n(v: float) -> str:
    """4 significant digits below 10,000, whole numbers with separators below 1e9, then k/M/G."""
    if abs(v) < 1e4:
        return f"{v:,.4g}"
    return f"{v:,.0f}" if abs(v) < 1e9 else format_number(v)


def _c(lim: Limit) -> str:
    return format_rate(lim.figure("C"), "FLOP/s")


def _w(lim: Limit, key: str = "W") -> str:
    return format_rate(lim.figure(key))


def _critical(lim: Limit) -> tuple[str, str]:
    f = lim.figure
    what = "all-reduce of its gradients" if lim.rule == "dp" else "2 all-gathers + a reduce-scatter of its weights"
    moved, fpp, params = f("bytes_per_param"), f("flops_per_param"), format_number(f("layer_params"))
    ratio = "" if moved == fpp else f" x {moved:g} B / {fpp:g}"
    value = (
        f"tokens/chip > t x C / ({fpp:g} P) = {format_duration(f('comm_s'))} x {_c(lim)} / ({fpp:g} x {params}) = "
        f"{_n(lim.value)}; t: {what} for a layer of P = {params} params over {lim.axes}; bandwidth-bound "
        f"this is (N-1)/N x C{ratio} / W with N = {f('N'):g}, W = {_w(lim)}"
    )
    return value, f"C{ratio} / W = {_c(lim)} / {_w(lim)} = {_n(lim.book_value or 0)}"


def _moe(lim: Limit) -> tuple[str, str]:
    f = lim.figure
    e, k = f("E"), f("k")
    return (
        f"E/k x FSDP threshold = {e:g}/{k:g} x {_n(f('fsdp_tokens'))} = {_n(lim.value)}",
        f"E/k x C / W = {e / k:g} x {_c(lim)} / {_w(lim)} = {_n(lim.book_value or 0)}",
    )


def _tp(lim: Limit) -> tuple[str, str]:
    f = lim.figure
    return (
        f"Y <= 1 + 2 F W / (a C) = 1 + 2 x {f('F'):g} x {_w(lim)} / ({f('a'):g} B x {_c(lim)}) = {_n(lim.value)} "
        f"(axes of {f('N'):g} chips)",
        f"Y < F W / C = {f('F'):g} x {_w(lim)} / {_c(lim)} = {_n(lim.book_value or 0)}",
    )


def _largest(lim: Limit, what: str, test: str) -> tuple[str, str]:
    f = dict(lim.figures)
    head = f"largest {what} laid on the topology with {test} <= 1: {what}={lim.value:g}"
    if lim.value > 1:
        head += f" (ratio {f['ratio']:.3g}, its axis W = {format_rate(f['W'])})"
    if "next_degree" in f:
        head += f"; {what}={f['next_degree']:g} gives {f['next_ratio']:.3g}"
    return head, ""


def _tp_layout(lim: Limit) -> tuple[str, str]:
    f = lim.figure
    test = f"(t_AG + t_RS per byte) x a Y C / (4 F) [F = {f('F'):g}, C = {_c(lim)}]"
    return _largest(lim, "tp", test)


def _ep_layout(lim: Limit) -> tuple[str, str]:
    f = lim.figure
    test = f"2 x t_all-to-all(k D a per token) / (4 k D F_e / C) [F_e = {f('F_e'):g}, k = {f('k'):g}, C = {_c(lim)}]"
    return _largest(lim, "ep", test)


def _alphas(lim: Limit) -> str:
    f = lim.figure
    return (
        f"alpha_X = C w / (2 W_X) = {_n(f('alpha_X'))} (W_X = {_w(lim, 'W_X')}), alpha_Y = C a / (2 W_Y) = "
        f"{_n(f('alpha_Y'))} (W_Y = {_w(lim, 'W_Y')}), C = {_c(lim)}"
    )


def _split_min(lim: Limit) -> tuple[str, str]:
    f = lim.figure
    return (
        f"B/N > 4 alpha_X alpha_Y F_w / F^2 = 4 x {_n(f('alpha_X'))} x {_n(f('alpha_Y'))} x {f('F_w'):g} / "
        f"{f('F'):g}^2 = {_n(lim.value)}; {_alphas(lim)}",
        f"dense layer: 4 alpha^2 / (F M_X M_Y) = 4 alpha_X alpha_Y / F (2 x 2550^2 / F on TPU v5p with "
        f"M_X = 2, M_Y = 1) = {_n(lim.book_value or 0)}",
    )


def _split_opt(lim: Limit) -> tuple[str, str]:
    f = dict(lim.figures)
    text = (
        f"X_opt = sqrt(alpha_Y N B / (alpha_X F_w)) = sqrt({_n(f['alpha_Y'])} x {f['N']:g} x {f['B']:,.0f} / "
        f"({_n(f['alpha_X'])} x {f['F_w']:g})) = {_n(lim.value)}, tp = N / X = {f['Y_opt']:.3g}, "
        f"(T_FSDP + T_TP) / T_math = {f['ratio']:.3g}"
    )
    if "X_low" in f:
        text += f"; compute-bound for fsdp in [{_n(f['X_low'])}, {_n(f['X_high'])}]"
    book = "no root: every split is communication-bound"
    if lim.book_value is not None:
        book = f"larger root of alpha_X F_w X^2 - B F X + alpha_Y N B = 0: X = {_n(lim.book_value)}"
    return text, book


def _split_best(lim: Limit) -> tuple[str, str]:
    f = lim.figure
    return (
        f"fsdp={f('fsdp'):g} x tp={f('tp'):g} laid on the topology: (T_FSDP + T_TP) / T_math = "
        f"({format_duration(f('t_fsdp_s'))} + {format_duration(f('t_tp_s'))}) / {format_duration(f('t_math_s'))} = "
        f"{f('ratio'):.3g} per layer, forward (of the tp degrees valid for the model, with fsdp <= the "
        f"{f('sequences'):g} sequences: no context parallelism)",
        "",
    )


def _memory(lim: Limit) -> tuple[str, str]:
    f = lim.figure
    return (
        f"ceil(P x bytes/param / usable HBM) = ceil({format_number(f('params'))} x {f('bytes_per_param'):.3g} B / "
        f"{format_bytes(f('usable_hbm_bytes'))}) = ceil({f('chips_exact'):.4g}) = {lim.value:g}",
        "",
    )


_RULES: dict[str, Callable[[Limit], tuple[str, str]]] = {
    "dp": _critical,
    "fsdp": _critical,
    "moe": _moe,
    "tp": _tp,
    "tp_layout": _tp_layout,
    "ep_layout": _ep_layout,
    "split_min": _split_min,
    "split_opt": _split_opt,
    "split_best": _split_best,
    "train_memory": _memory,
    "serve_memory": _memory,
}


def w_parts(s: AxisSet) -> str:
    """Where an axis set's all-gather bandwidth W comes from, link by link."""
    rings = [g for g in s.groups if g.shape == "ring"]
    if rings and len(rings) == len(s.groups) and len({g.link_bytes_per_s for g in rings}) == 1:
        k = len(rings)
        rate = format_rate(rings[0].link_bytes_per_s)
        return f"{k} wrapped ring{'s' if k > 1 else ''} x 2 x {rate} per link each way (the book's W_ici x n_axes)"
    parts = " + ".join(f"{g.name} {g.shape} of {g.size} {format_rate(g.inbound_bytes_per_s)}" for g in s.groups)
    total = sum(g.inbound_bytes_per_s for g in s.groups)
    if abs(total - s.gather_bytes_per_s) <= 1e-9 * total:
        return parts
    return f"{parts} inbound, {format_rate(s.gather_bytes_per_s)} as cost/collectives.py stages the gather"


def formulas(lim: Limit, job: JobLimits | None = None) -> tuple[str, str]:
    """(the formula of ``lim`` with its figures, the book's closed form with the same figures);
    with ``job``, what W of the limit's axes is made of."""
    formula, book = _RULES[lim.rule](lim)
    sets = {s.name: s for s in job.axis_sets} if job is not None else {}
    if lim.rule in ("dp", "fsdp", "moe", "tp") and lim.axes in sets:
        book += f"; W = {w_parts(sets[lim.axes])}"
    return formula, book


def _ring_share(n: float) -> str:
    f = Fraction(int(n) - 1, int(n))
    return f"{f.numerator}/{f.denominator}"


def _why_critical(lim: Limit) -> str:
    n = lim.figure("N") if lim.rule != "moe" else None
    if n is None or n < 2:
        return ""
    why = (
        f"rooftop prices the collectives over N = {n:g} chips with the exact (N-1)/N = {_ring_share(n)} (each chip "
        "receives N-1 of the N shards); the book's C / W is its large-N limit"
    )
    ratio = lim.value / (lim.book_value or lim.value)
    if abs(ratio - (n - 1) / n) > 1e-3:
        why += f", and the staged collective's other terms make the ratio {ratio:.4g}, not {(n - 1) / n:.4g}"
    return why


def book_why(lim: Limit) -> str:
    """Which assumption of the book's closed form the job breaks, when ``value`` differs from
    ``book_value`` by more than 0.1% ("" when they agree or the book has no closed form)."""
    if lim.book_value is None or abs(lim.value - lim.book_value) <= 1e-3 * max(abs(lim.value), abs(lim.book_value)):
        return ""
    f = dict(lim.figures)
    if lim.rule in ("dp", "fsdp"):
        return _why_critical(lim)
    if lim.rule == "moe":
        return (
            "E/k times the FSDP threshold, which differs from the book's as that one does (the (N-1)/N of the gathers)"
        )
    if lim.rule == "tp":
        return (
            "the all-gather and reduce-scatter of the activations over Y chips move (Y-1)/Y of them, which "
            "rooftop keeps: compute-bound while Y <= 1 + 2 F W / (a C); the book drops the (Y-1)/Y and the 1"
            + ("" if f.get("a") == 2 else f", and counts 2-byte activations where the job's are {f.get('a', 0):g}")
        )
    if lim.rule == "split_min" and f.get("F_w", 0) != f.get("F", 0):
        return (
            f"a mixture-of-experts layer: FSDP gathers the weights of every expert (F_w = {f['F_w']:,.0f}) while a "
            f"token runs through its k routed + shared experts (F = {f['F']:,.0f}); the book's dense layer gathers "
            f"what it computes with, so the minimum grows by F_w / F = {f['F_w'] / f['F']:.3g}"
        )
    if lim.rule == "split_opt":
        return (
            "rooftop gives the FSDP degree with the least communication (the geometric mean of the quadratic's "
            "roots); the book quotes the larger root, the largest FSDP degree that stays compute-bound"
        )
    return f"rooftop's {_n(lim.value)} against the book's {_n(lim.book_value)}: the priced collectives' exact terms"


def limit_dict(lim: Limit, job: JobLimits | None = None) -> dict[str, Any]:
    formula, book = formulas(lim, job)
    return {
        "name": lim.name,
        "rule": lim.rule,
        "axes": lim.axes,
        "value": lim.value,
        "book_value": lim.book_value,
        "unit": lim.unit,
        "job": lim.job,
        "met": lim.met,
        "formula": formula,
        "book_formula": book,
        "book_why": book_why(lim),
        "source": SOURCES[lim.rule],
        "figures": dict(lim.figures),
    }


def axis_dict(s: AxisSet, lim: JobLimits) -> dict[str, Any]:
    chip = lim.setup.chip
    return {
        "name": s.name,
        "axes": list(s.axes),
        "chips": s.chips,
        "gather_bytes_per_s": s.gather_bytes_per_s,
        "groups": [
            {
                "link": g.link,
                "shape": g.shape,
                "size": g.size,
                "stride": g.stride,
                "inbound_bytes_per_s": g.inbound_bytes_per_s,
                "why": group_why(g, chip),
            }
            for g in s.groups
        ],
    }


def _figure(value: float, unit: str, source: str) -> dict[str, Any]:
    return {"value": value, "unit": unit, "source": source}


def catalog_figures(lim: JobLimits) -> dict[str, dict[str, Any]]:
    """The data-file figures every threshold derives from, each with its source."""
    setup = lim.setup
    chip, cfg, eff = setup.chip, setup.cfg, setup.efficiency
    used, peak = chip.flops_rate(setup.dtypes.activations)

    def src(key: str) -> str:
        fig = chip.sources.get(key)
        return f"{chip.name}: {fig.source}" if fig is not None else f"{chip.name} chip file ({key})"

    def eff_src(name: str) -> str:
        s = eff.sources.get(name)
        return s[0] if s else "ideal: every efficiency 1 (--efficiency changes it)"

    model = f"{cfg.name}: {cfg.source}"
    out = {
        "peak_flops_per_s": _figure(peak, f"FLOP/s ({used} matrix)", src(f"matrix_flops_per_s.{used}")),
        "matrix_efficiency": _figure(eff.matrix, "ratio", eff_src("matrix")),
        "matrix_achievable": _figure(
            achievable(chip, used, eff),
            "ratio",
            src(f"matrix_achievable.{used}") if eff.matrix_achievable else "off (efficiency matrix_achievable=0)",
        ),
        "link_bytes_per_s": _figure(chip.link_bytes_per_s, "B/s per link each way", src("links.bytes_per_s")),
        "link_count": _figure(chip.link_count, "links", src("links.count")),
        "dcn_bytes_per_s": _figure(chip.dcn_bytes_per_s, "B/s per chip", src("dcn.bytes_per_s")),
        "network_efficiency": _figure(eff.network, "ratio", eff_src("network")),
        "hbm_bytes": _figure(chip.hbm_capacity_bytes, "bytes", src("memory.hbm_bytes")),
        "usable_hbm_fraction": _figure(eff.usable_hbm_fraction, "ratio", eff_src("memory_reserve")),
        "d_model": _figure(cfg.d_model, "count", model),
        "d_ff": _figure(cfg.d_ff, "count", model),
    }
    if cfg.moe is not None:
        out["n_experts"] = _figure(cfg.moe.n_experts, "count", model)
        out["top_k"] = _figure(cfg.moe.top_k, "count", model)
        out["d_ff_expert"] = _figure(cfg.moe.d_ff_expert, "count", model)
        out["n_shared_experts"] = _figure(cfg.moe.n_shared_experts, "count", model)
    return out


def limits_payload(lim: JobLimits) -> dict[str, Any]:
    """``rooftop limits --json``."""
    setup = lim.setup
    return {
        "model": setup.cfg.name,
        "chip": setup.chip.name,
        "topology": setup.topology.spec,
        "chips": setup.chips,
        "batch_sequences": lim.batch_sequences,
        "batch_tokens": lim.batch_tokens,
        "seq_len": lim.seq_len,
        "tokens_per_chip": lim.tokens_per_chip,
        "efficiency": setup.efficiency.as_dict(),
        "optimizer": setup.precision.optimizer,
        "weight_dtype": lim.weight_dtype,
        "algorithm": lim.algorithm.name if lim.algorithm is not None else "hierarchical",
        "flops_per_s": lim.flops_per_s,
        "f_active": lim.f_active,
        "f_weights": lim.f_weights,
        "figures": catalog_figures(lim),
        "axes": [axis_dict(s, lim) for s in lim.axis_sets],
        "limits": [limit_dict(x, lim) for x in lim.limits],
    }


_LABELS = {
    "dp_critical_tokens_per_chip": "DP critical tokens/chip",
    "fsdp_critical_tokens_per_chip": "FSDP critical tokens/chip",
    "moe_critical_tokens_per_chip": "MoE (E/k) critical tokens/chip",
    "tp_max_degree": "largest TP on these axes",
    "tp_largest_degree": "largest TP on the topology",
    "ep_largest_degree": "largest EP on the topology",
    "fsdp_tp_min_tokens_per_chip": "FSDP x TP min tokens/chip",
    "fsdp_tp_optimal_fsdp": "FSDP x TP optimal fsdp degree",
    "fsdp_tp_best_split": "FSDP x TP best split laid",
    "train_min_chips": "chips for the training state",
    "serve_min_chips": "chips for the served weights",
}


def _value(lim: Limit) -> str:
    if lim.rule == "split_best":
        return f"fsdp={lim.figure('fsdp'):g} x tp={lim.figure('tp'):g}"
    if lim.unit in ("chips", "degree") and lim.value == int(lim.value):
        return f"{lim.value:g}"
    return _n(lim.value)


def _met(lim: Limit) -> str:
    return "" if lim.met is None else ("yes" if lim.met else "NO")


def render_limits(console: Console, lim: JobLimits) -> None:
    """The axes and their bandwidths, then every threshold with the book's value and its formula."""
    setup = lim.setup
    per_chip = lim.tokens_per_chip
    job = f", {per_chip:,.1f} tokens per chip" if per_chip is not None else ""
    title = f"{setup.cfg.name} on {setup.chips} x {setup.chip.name} ({setup.topology.spec}){job}"
    rows = [
        (s.name, s.chips, "; ".join(f"{g.shape} of {g.size} over {g.link}" for g in s.groups), _rate(s))
        for s in lim.axis_sets
    ]
    if rows:
        console.print(table(f"{title}: axes", ["axes", "chips", "links", "W (all-gather per chip)"], rows))
    out = []
    for x in lim.limits:
        formula = formulas(x, lim)[0]
        book_value = "" if x.book_value is None else _n(x.book_value)
        job_value = "" if x.job is None else _n(x.job)
        out.append(
            (_LABELS.get(x.name, x.name), x.axes, styled(_value(x), "bold"), book_value, job_value, _met(x), formula)
        )
    limits = table(f"{title}: limits", ["limit", "axes", "value", "book", "job", "met", "formula"], out)
    limits.columns[-1].justify = "left"
    console.print(limits)
    say(console, f"C = {format_rate(lim.flops_per_s, 'FLOP/s')}: the matrix peak x efficiency.")
    say(console, "W: all-gather bandwidth per chip of the axes, as cost/collectives.py prices it.")
    say(console, f"book: the closed form of {BOOK}, Parts 5 and 12, with the same figures.")
    seen = set()
    for x in lim.limits:
        why = book_why(x)
        if why and x.rule not in seen:
            seen.add(x.rule)
            say(console, f"book differs, {_LABELS.get(x.name, x.name)}: {why}")
    if setup.chips == 1:
        say(console, "One chip: nothing to communicate, only the memory limits apply.")


def _rate(s: AxisSet) -> str:
    return format_rate(s.gather_bytes_per_s)
