"""The book's thresholds for one job (``rooftop limits``): below or above which figure each way of
splitting a model stops hiding its communication, and how many chips its state needs.

Every threshold is a ratio of a communication time, priced by cost/collectives.py on the job's
topology (the chip's link figures, the network efficiency), to a compute time at the chip's matrix
peak x efficiency; the closed form of "How to Scale Your Model" (Austin et al., Part 5 "How to
Parallelize a Transformer for Training" and Part 12 "How to Think About GPUs", section "Rooflines
for LLM Scaling on GPUs") is given beside it, evaluated with the same figures. C is the FLOP rate,
W the all-gather bandwidth per chip of the axes as cost/collectives.py has it (``AxisSet``:
2 x link x k for k wrapped ICI rings, the book's bidirectional W_ici x n_axes; NVLink or NIC
bandwidth per GPU on switched links), N the chips of the axes, F the MLP hidden width a token runs
through, D d_model; weights, gradients and activations in bf16 unless the job says otherwise.

- Data parallelism (``dp_critical_tokens_per_chip``) and FSDP (``fsdp_critical_tokens_per_chip``)
  over each set of physical dims hide their gradient all-reduce, or their weight gathers and
  reduce-scatters, only above a per-chip batch priced as the training step prices it
  (plan/train/explain.py): (N-1)/N x C / W; the book's B/X > C/W, 2550 / n_axes on TPU v5p with
  its 9e10 B/s links (Part 5: "both FSDP and pure data parallelism become bandwidth bound on TPUv5
  when the batch size per device is less than 2550 / n_axes").
- Mixture of experts (``moe_critical_tokens_per_chip``): a layer moves all E experts' weights but a
  token computes through k of them, so the FSDP threshold grows by E / k (Part 12, "Data
  Parallelism", MoE models: B/X > E/k x C/W).
- Tensor parallelism over a set of dims (``tp_max_degree``): per layer an all-gather and a
  reduce-scatter of the activations [B, D] against the MLP's 4 B D F / Y FLOPs (Part 5, "Tensor
  Parallelism", the gate ignored as in the book). With the collectives' (Y-1)/Y rule, compute-bound
  while Y <= 1 + 2 F W / (a C), a the activation bytes (1 + F W / C in bf16); the book's Y < F W / C
  (Part 5: "Y < n_axes x F / 2550"). ``tp_largest_degree``: the largest tensor-parallel degree valid
  for the model that, laid on the topology as the training planner lays it (plan/train/step.layout_mesh),
  stays compute-bound.
- Expert parallelism (``ep_largest_degree``, MoE models): per MoE layer a dispatch and a combine
  all-to-all of each token's k routed copies (k D a bytes) against the experts' 4 k D F_e FLOPs per
  token (Part 12, "Expert Parallelism": T_math = 4 B k D F / (Z C)); the largest expert-parallel
  degree laid on the topology that stays compute-bound.
- Mixed FSDP x TP (``fsdp_tp_min_tokens_per_chip``, ``fsdp_tp_optimal_fsdp``, ``fsdp_tp_best_split``):
  Part 5, "Mixed FSDP and Tensor Parallelism", forward pass per layer: T_FSDP = 2 D F w / (Y W_X),
  T_TP = 2 B D a / (X W_Y), T_math = 4 B D F / (N C), N = X Y, communication-bound when T_FSDP + T_TP
  > T_math. With alpha_X = C w / (2 W_X), alpha_Y = C a / (2 W_Y) (the book's C / (W M_X) and
  C / (W M_Y) in bf16) the ratio is R(X) = X alpha_X / B + N alpha_Y / (X F): R = 1 is the book's
  quadratic alpha_X F X^2 - B F X + alpha_Y N B = 0, whose roots bound the compute-bound FSDP
  degrees (the book quotes the larger: 31.7 on a v5p 4x4x4 with F = 32768, B = 48000); R is least
  at X_opt = sqrt(alpha_Y N B / (alpha_X F)) (dR/dX = 0, the geometric mean of the roots), where it
  is 2 sqrt(alpha_X alpha_Y N / B) / F, so no split is compute-bound below B / N = 4 alpha_X
  alpha_Y / F (the book's 4 alpha^2 / (F M_X M_Y), 2 x 2550^2 / F with M_X = 2, M_Y = 1). For an
  MoE layer the gathered weights hold E + shared experts (F_w) while a token runs through k +
  shared (F): R(X) = X alpha_X F_w / (B F) + N alpha_Y / (X F). W_Y is the innermost physical dim
  (where the planner puts tensor parallelism), W_X the others. ``fsdp_tp_best_split``: the fsdp x
  tp layout valid for the model and the batch with the least R, its collectives priced on the
  planner's mesh.
- Memory (``train_min_chips``, ``serve_min_chips``): the training state (weights, gradients, master
  copy, optimizer moments: model/memory.training_state_bytes, 16 bytes per parameter for
  mixed-precision Adam) and the served weights (plan/serve/layout.weights_per_chip_bytes) over the
  usable HBM of a chip, rounded up. Activations, caches and buffers only add to these.

Library code: values only (``JobLimits``, ``Limit``: plan/limit_values.py); report/limits.py writes the
formulas out.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from rooftop.cost.algorithms import Algorithm
from rooftop.cost.efficiency import IDEAL, Efficiency
from rooftop.cost.roofline import flop_rate
from rooftop.errors import InvalidConfigError, ShardingError
from rooftop.hardware.chip import Chip
from rooftop.hardware.topology import Mesh, Topology, make_mesh
from rooftop.model.config import TransformerConfig
from rooftop.model.memory import TrainingPrecision, training_state_bytes
from rooftop.model.params import params_total
from rooftop.plan.limit_values import JobLimits, Limit, axes_rate, axis_set, axis_sets
from rooftop.plan.serve.layout import ServingLayout, weights_per_chip_bytes
from rooftop.plan.train.explain import CriticalTokens, dp_critical_tokens, fsdp_critical_tokens
from rooftop.plan.train.layout import Parallelism, validate
from rooftop.plan.train.step import TrainingSetup, layout_mesh
from rooftop.reasons import Option, OptionError
from rooftop.units import divisors


@dataclass(frozen=True)
class Split:
    """Mixed FSDP x TP in the book's closed form for a batch of ``tokens`` on ``chips``: the FSDP
    degree with the least communication (``x_opt``), the ratio R of communication to compute
    there, and the compute-bound range of FSDP degrees [x_low, x_high] (None when R > 1 for every
    split)."""

    x_opt: float
    ratio_at_opt: float
    x_low: float | None
    x_high: float | None
    min_tokens_per_chip: float


def fsdp_tp_split(
    tokens: float, chips: int, f_active: float, f_weights: float, alpha_x: float, alpha_y: float
) -> Split:
    """The book's mixed FSDP x TP rule (module docstring): R(X) = X alpha_x f_weights / (tokens
    f_active) + chips alpha_y / (X f_active); X_opt = sqrt(alpha_y chips tokens / (alpha_x f_weights));
    R = 1 at the roots of alpha_x f_weights X^2 - tokens f_active X + alpha_y chips tokens = 0."""
    a = alpha_x * f_weights
    x_opt = math.sqrt(alpha_y * chips * tokens / a)
    ratio = 2 * math.sqrt(a * alpha_y * chips / tokens) / f_active
    disc = (tokens * f_active) ** 2 - 4 * a * alpha_y * chips * tokens
    x_low = x_high = None
    if disc >= 0:
        x_low, x_high = (tokens * f_active - math.sqrt(disc)) / (2 * a), (tokens * f_active + math.sqrt(disc)) / (2 * a)
    return Split(x_opt, ratio, x_low, x_high, 4 * a * alpha_y / f_active**2)


def mlp_widths(cfg: TransformerConfig) -> tuple[float, float]:
    """(F a token runs through, F a layer stores) of the book's MLP-only layer; an MoE layer's."""
    if cfg.moe is None:
        return float(cfg.d_ff), float(cfg.d_ff)
    m = cfg.moe
    return float((m.top_k + m.n_shared_experts) * m.d_ff_expert), float(
        (m.n_experts + m.n_shared_experts) * m.d_ff_expert
    )


def _data_limits(lim: JobLimits, mesh: Mesh) -> list[Limit]:
    """DP, FSDP (and MoE) critical tokens per chip and the TP bound, each over every axis set."""
    setup, tokens = lim.setup, lim.tokens_per_chip
    a_bytes, w_bytes, g_bytes = setup.element_bytes
    rules: tuple[tuple[str, Callable[..., CriticalTokens], float], ...] = (
        ("dp", dp_critical_tokens, 2 * g_bytes),
        ("fsdp", fsdp_critical_tokens, 2 * w_bytes + g_bytes),
    )
    out: list[Limit] = []
    moe: list[Limit] = []
    figs: tuple[tuple[str, float], ...]
    for rule, price, moved in rules:
        for s in lim.axis_sets:
            ct, w = price(setup, mesh, s.axes, lim.algorithm), s.gather_bytes_per_s
            book = ct.flops_per_s * moved / (ct.flops_per_param * w)
            figs = (
                ("C", ct.flops_per_s),
                ("W", w),
                ("N", float(s.chips)),
                ("layer_params", ct.layer_params),
                ("comm_s", ct.comm_s),
                ("flops_per_param", ct.flops_per_param),
                ("bytes_per_param", moved),
            )
            out.append(_vs_tokens(f"{rule}_critical_tokens_per_chip", rule, ct.tokens, book, s.name, figs, tokens))
            if rule == "fsdp" and setup.cfg.moe is not None:
                e, k = setup.cfg.moe.n_experts, setup.cfg.moe.top_k
                figs = (("E", float(e)), ("k", float(k)), ("fsdp_tokens", ct.tokens), ("C", ct.flops_per_s), ("W", w))
                name = "moe_critical_tokens_per_chip"
                moe.append(_vs_tokens(name, "moe", ct.tokens * e / k, book * e / k, s.name, figs, tokens))
    out += moe
    for s in lim.axis_sets:
        w = s.gather_bytes_per_s
        book_tp = 2 * lim.f_active * w / (a_bytes * lim.flops_per_s)
        figs = (("F", lim.f_active), ("W", w), ("C", lim.flops_per_s), ("a", a_bytes), ("N", float(s.chips)))
        out.append(
            Limit("tp_max_degree", "tp", 1 + book_tp, book_tp, "degree", s.name, figs, s.chips, s.chips <= 1 + book_tp)
        )
    return out


def _vs_tokens(
    name: str,
    rule: str,
    value: float,
    book: float,
    axes: str,
    figs: tuple[tuple[str, float], ...],
    tokens: float | None,
) -> Limit:
    met = None if tokens is None else tokens >= value
    return Limit(name, rule, value, book, "tokens/chip", axes, figs, tokens, met)


def _laid(setup: TrainingSetup, par: Parallelism, sequences: int) -> Mesh | None:
    """The planner's mesh for ``par`` when it is a valid layout for the model and ``sequences``."""
    try:
        validate(par, setup.cfg, setup.chips, sequences, setup.seq_len)
        return layout_mesh(setup.topology, par)
    except (InvalidConfigError, ShardingError):
        return None


def _largest(name: str, rule: str, rows: list[tuple[int, float, float]], figs: tuple[tuple[str, float], ...]) -> Limit:
    """The largest degree whose communication / compute ratio is at most 1 (1 when none is), with
    the next larger degree tried; ``rows`` are (degree, ratio, bandwidth W of its axis)."""
    ok = [r for r in rows if r[1] <= 1]
    best = max(ok, key=lambda r: r[0]) if ok else (1, 0.0, 0.0)
    after = min((r for r in rows if r[0] > best[0]), key=lambda r: r[0], default=None)
    more = (("next_degree", float(after[0])), ("next_ratio", after[1])) if after else ()
    figs = (("degree", float(best[0])), ("ratio", best[1]), ("W", best[2]), *figs, *more)
    return Limit(name, rule, float(best[0]), None, "degree", "", figs)


def _tp_on_topology(lim: JobLimits) -> Limit:
    """Tensor parallelism laid as the planner lays it: ratio (AG + RS) a Y C / (4 F) per layer per byte;
    with a batch, the AG and RS of a tp group's activations (B / X tokens x D x a bytes) at that size
    against the MLP's 4 (B / X) D F / (Y C)."""
    setup, a, d = lim.setup, lim.setup.element_bytes[0], lim.setup.cfg.d_model
    n, rows = setup.chips, []
    for y in divisors(n)[1:]:
        mesh = _laid(setup, Parallelism(fsdp=n // y, tp=y), n)
        if mesh is not None:
            ag, rs = (
                axes_rate(k, mesh, ("tp",), setup.efficiency, lim.algorithm) for k in ("all-gather", "reduce-scatter")
            )
            ratio = (ag.per_byte_s + rs.per_byte_s) * a * y * lim.flops_per_s / (4 * lim.f_active)
            if lim.batch_tokens is not None:
                group_tokens = lim.batch_tokens / (n // y)
                t_math = 4 * group_tokens * d * lim.f_active / (y * lim.flops_per_s)
                ratio = (ag.time_s(group_tokens * d * a) + rs.time_s(group_tokens * d * a)) / t_math
            rows.append((y, ratio, (y - 1) / y / ag.per_byte_s))
    figs = (("F", lim.f_active), ("C", lim.flops_per_s), ("a", a))
    return _largest("tp_largest_degree", "tp_layout", rows, figs)


def _ep_on_topology(lim: JobLimits) -> Limit | None:
    """Expert parallelism laid as the planner lays it (ep from the fsdp axis): ratio of a dispatch
    and a combine all-to-all per token, 2 x t(k D a), to 4 k D F_e / C: t a C / (2 F_e) per byte; with a
    batch, the all-to-alls of a chip's B / N tokens' k D a bytes at that size against their 4 k D F_e / C."""
    setup, moe = lim.setup, lim.setup.cfg.moe
    if moe is None:
        return None
    a, n, rows, d = setup.element_bytes[0], setup.chips, [], setup.cfg.d_model
    for z in divisors(moe.n_experts)[1:]:
        mesh = _laid(setup, Parallelism(fsdp=n, ep=z), n) if n % z == 0 else None
        if mesh is not None:
            a2a = axes_rate("all-to-all", mesh, ("ep",), setup.efficiency, lim.algorithm)
            ratio = a2a.per_byte_s * a * lim.flops_per_s / (2 * moe.d_ff_expert)
            if lim.batch_tokens is not None:
                routed = lim.batch_tokens / n * moe.top_k * d
                ratio = 2 * a2a.time_s(routed * a) * lim.flops_per_s / (4 * routed * moe.d_ff_expert)
            rows.append((z, ratio, 1 / a2a.per_byte_s))
    figs = (("F_e", float(moe.d_ff_expert)), ("k", float(moe.top_k)), ("C", lim.flops_per_s), ("a", a))
    return _largest("ep_largest_degree", "ep_layout", rows, figs)


def _split_limits(lim: JobLimits, mesh: Mesh) -> list[Limit]:
    """The book's mixed FSDP x TP rule with TP on the innermost dim, FSDP on the others; with a
    batch, its optimum and the best split laid on the topology."""
    names = [a.name for a in mesh.axes if a.size > 1]
    if len(names) < 2:
        return []
    setup, c = lim.setup, lim.flops_per_s
    a_bytes, w_bytes, _ = setup.element_bytes
    sx = axis_set(mesh, tuple(names[:-1]), setup.efficiency, lim.algorithm)
    sy = axis_set(mesh, (names[-1],), setup.efficiency, lim.algorithm)
    wx, wy = sx.gather_bytes_per_s, sy.gather_bytes_per_s
    alpha_x, alpha_y = c * w_bytes / (2 * wx), c * a_bytes / (2 * wy)
    n, fa, fw = setup.chips, lim.f_active, lim.f_weights
    tokens, per_chip = lim.batch_tokens, lim.tokens_per_chip
    split = fsdp_tp_split(tokens or n, n, fa, fw, alpha_x, alpha_y)
    where = f"{sx.name} x {sy.name}"
    figs = (("C", c), ("W_X", wx), ("W_Y", wy), ("alpha_X", alpha_x), ("alpha_Y", alpha_y), ("F", fa), ("F_w", fw))
    book_min = 4 * alpha_x * alpha_y / fa
    out = [
        _vs_tokens(
            "fsdp_tp_min_tokens_per_chip", "split_min", split.min_tokens_per_chip, book_min, where, figs, per_chip
        )
    ]
    if tokens is None:
        return out
    opt = (
        *figs,
        ("B", float(tokens)),
        ("N", float(n)),
        ("Y_opt", n / split.x_opt),
        ("ratio", split.ratio_at_opt),
        *(
            (("X_low", split.x_low), ("X_high", split.x_high))
            if split.x_low is not None and split.x_high is not None
            else ()
        ),
    )
    out.append(
        Limit(
            "fsdp_tp_optimal_fsdp",
            "split_opt",
            split.x_opt,
            split.x_high,
            "fsdp degree",
            where,
            opt,
            None,
            split.ratio_at_opt <= 1,
        )
    )
    best = _best_split(lim, tokens)
    if best is not None:
        out.append(best)
    return out


def _best_split(lim: JobLimits, tokens: int) -> Limit | None:
    """The valid fsdp x tp layout with the least (T_FSDP + T_TP) / T_math, per layer forward, its
    collectives priced on the planner's mesh."""
    setup, eff = lim.setup, lim.setup.efficiency
    a_bytes, w_bytes, _ = setup.element_bytes
    n, d, sequences = setup.chips, setup.cfg.d_model, tokens // setup.seq_len
    t_math = 4 * tokens * d * lim.f_active / (n * lim.flops_per_s)
    found: list[tuple[float, int, float, float]] = []
    for y in divisors(n):
        x = n // y
        mesh = _laid(setup, Parallelism(fsdp=x, tp=y), sequences)
        if mesh is None:
            continue
        t_fsdp = axes_rate("all-gather", mesh, ("fsdp",), eff, lim.algorithm).time_s(
            2 * d * lim.f_weights * w_bytes / y
        )
        act = tokens * d * a_bytes / x
        t_tp = sum(
            axes_rate(k, mesh, ("tp",), eff, lim.algorithm).time_s(act) for k in ("all-gather", "reduce-scatter")
        )
        found.append(((t_fsdp + t_tp) / t_math, y, t_fsdp, t_tp))
    if not found:
        return None
    ratio, y, t_fsdp, t_tp = min(found, key=lambda r: (r[0], r[1]))
    figs = (
        ("fsdp", float(n // y)),
        ("tp", float(y)),
        ("ratio", ratio),
        ("t_fsdp_s", t_fsdp),
        ("t_tp_s", t_tp),
        ("t_math_s", t_math),
        ("sequences", float(sequences)),
    )
    return Limit("fsdp_tp_best_split", "split_best", float(n // y), None, "fsdp degree", "", figs, None, ratio <= 1)


def _chips_for(name: str, rule: str, nbytes: float, lim: JobLimits, figs: tuple[tuple[str, float], ...]) -> Limit:
    usable = lim.setup.chip.hbm_capacity_bytes * lim.setup.efficiency.usable_hbm_fraction
    exact = nbytes / usable
    need = max(1, math.ceil(exact * (1 - 1e-12)))  # an exact multiple is not one chip more
    chips = lim.setup.chips
    figs = (*figs, ("bytes", nbytes), ("usable_hbm_bytes", usable), ("chips_exact", exact))
    return Limit(name, rule, float(need), None, "chips", "", figs, float(chips), chips >= need)


def _memory_limits(lim: JobLimits) -> list[Limit]:
    cfg, setup = lim.setup.cfg, lim.setup
    params = params_total(cfg)
    state = training_state_bytes(cfg, setup.precision).total
    weights = weights_per_chip_bytes(cfg, ServingLayout(), lim.weight_dtype)
    return [
        _chips_for(
            "train_min_chips", "train_memory", state, lim, (("params", params), ("bytes_per_param", state / params))
        ),
        _chips_for(
            "serve_min_chips", "serve_memory", weights, lim, (("params", params), ("bytes_per_param", weights / params))
        ),
    ]


#: the parameters a batch is given by
BATCH_TOKENS, SEQ_LEN = Option("batch_tokens"), Option("seq_len")


def whole_sequences(batch_tokens: int | None, seq_len: int | None) -> int | None:
    """Sequences of ``seq_len`` tokens in a batch of ``batch_tokens``, rounded to the nearest whole
    one as ``rooftop train`` rounds it (4M tokens of 4096 are 977 sequences); None without a batch."""
    if (batch_tokens is None) != (seq_len is None):
        raise OptionError(
            "a batch needs both ", BATCH_TOKENS, " and ", SEQ_LEN, " (or neither, for the thresholds alone)"
        )
    if batch_tokens is None or seq_len is None:
        return None
    if seq_len < 1 or batch_tokens < seq_len:
        raise OptionError(
            BATCH_TOKENS,
            f" {batch_tokens:,} is less than one sequence of ",
            SEQ_LEN,
            f" {seq_len:,}: the batch cannot be divided into sequences",
        )
    return round(batch_tokens / seq_len)


def job_limits(
    cfg: TransformerConfig,
    chip: Chip,
    topology: Topology,
    batch_tokens: int | None = None,
    seq_len: int | None = None,
    efficiency: Efficiency = IDEAL,
    precision: TrainingPrecision | None = None,
    weight_dtype: str = "bf16",
    algorithm: Algorithm | None = None,
) -> JobLimits:
    """Every threshold of the module docstring for ``cfg`` on ``topology`` of ``chip``. A batch of
    ``batch_tokens`` in sequences of ``seq_len`` tokens, when given, is rounded to whole sequences
    (``whole_sequences``) and compared with them; ``JobLimits.batch_tokens`` is the batch used.
    ``algorithm`` is how the collectives run (a cost/algorithms.py value; default the staged rules),
    priced by cost/collectives.py at each threshold's own message size."""
    sequences = whole_sequences(batch_tokens, seq_len)
    n = topology.num_chips
    seq = seq_len or cfg.max_seq_len  # without a batch only the parameter counts of the profile are read
    if sequences is not None:
        batch_tokens = sequences * seq
    setup = TrainingSetup(cfg, chip, topology, sequences or n, seq, efficiency, precision or TrainingPrecision())
    mesh = make_mesh(topology)
    f_active, f_weights = mlp_widths(cfg)
    rate = flop_rate(chip, "matrix", setup.dtypes.activations, efficiency)[2]
    sets = axis_sets(mesh, efficiency, algorithm)
    base = JobLimits(setup, batch_tokens, seq_len, weight_dtype, rate, f_active, f_weights, sets, (), algorithm)
    limits: list[Limit] = _data_limits(base, mesh)
    if n > 1:
        limits.append(_tp_on_topology(base))
        ep = _ep_on_topology(base)
        if ep is not None:
            limits.append(ep)
        limits += _split_limits(base, mesh)
    limits += _memory_limits(base)
    return JobLimits(
        setup, batch_tokens, seq_len, weight_dtype, rate, f_active, f_weights, sets, tuple(limits), algorithm
    )
