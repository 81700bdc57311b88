"""plan/train/plan.py: the whole plan ``rooftop train`` prints, from one library call."""

from __future__ import annotations

import pytest

import rooftop
from rooftop.cost.efficiency import default_efficiency
from rooftop.cost.figures import CollectiveFigures
from rooftop.errors import InvalidConfigError
from rooftop.hardware.catalog import get_chip
from rooftop.hardware.topology import parse_topology
from rooftop.model.catalog import get_model
from rooftop.plan.train.plan import plan_training, totals_for
from rooftop.plan.train.step import TrainingSetup
from rooftop.report.train_explain import explanation_lines

H100 = get_chip("h100")


def _setup() -> TrainingSetup:
    return TrainingSetup(
        get_model("llama-3-8b"), H100, parse_topology(H100, "8x8"), 256, 4096, default_efficiency("training")
    )


def test_the_plan_holds_the_ranked_layouts_their_parts_and_the_totals() -> None:
    plan = rooftop.plan_training(_setup(), {"tp": 1}, top=3, tokens=1e12, price_usd_per_chip_hour=2.0)
    assert len(plan.ranked) == len(plan.parts) <= 3
    best = plan.ranked[0]
    assert best.parallelism.tp == 1
    assert sum(p.time_s for p in plan.parts[0]) == pytest.approx(best.step_time_s)
    assert plan.ideal.step_time_s <= best.step_time_s  # every factor 1 is never slower
    t = plan.totals
    assert t.train_time_s == pytest.approx(1e12 / best.tokens_per_s)
    assert t.chip_hours == pytest.approx(t.train_time_s * 64 / 3600)
    assert t.cost_usd == pytest.approx(t.chip_hours * 2.0)
    assert plan.explanation


def test_totals_without_tokens_are_null_and_the_price_defaults_to_the_catalog() -> None:
    plan = plan_training(_setup(), top=1)
    assert (plan.totals.tokens, plan.totals.train_time_s, plan.totals.cost_usd) == (None, None, None)
    assert plan.totals.price_usd_per_chip_hour == H100.price_usd_per_hour


def test_bad_totals_and_top_are_refused() -> None:
    plan = plan_training(_setup(), top=1)
    with pytest.raises(InvalidConfigError, match="price per chip-hour must be >= 0"):
        totals_for(plan.setup, plan.ranked[0], 1e9, -1.0)
    with pytest.raises(InvalidConfigError, match="tokens to train on must be > 0"):
        totals_for(plan.setup, plan.ranked[0], 0.0, None)
    with pytest.raises(InvalidConfigError, match="top must be >= 1"):
        plan_training(_setup(), top=0)


def test_a_layout_with_other_choices_is_the_layout_built_with_them() -> None:
    from dataclasses import replace

    from rooftop.plan.train.layout import Parallelism

    base = Parallelism(dp=4, fsdp=2, tp=8, pp=2, microbatches=8, virtual_stages=2)
    fast = base.with_choices("full", 1, "optimizer")
    slow = replace(base, remat="full", zero_stage=1, offload="optimizer")
    assert fast == slow and hash(fast) == hash(slow) and fast.label() == slow.label()
    assert base.remat == "none"  # the base is unchanged


MB_PARTS = ("compute_forward", "compute_backward", "compute_recompute", "tensor_parallel", "context_parallel",
            "fsdp", "expert_parallel", "pipeline_p2p")  # fmt: skip


def _pinned(fix: str, chips: int = 32, sequences: int = 64, model: str = "llama-3-8b"):
    """The best layout under ``fix`` (ranked by time) and its parts, at 4096 tokens on h100."""
    pins = {k: (v if k == "remat" else int(v)) for k, v in (kv.split("=") for kv in fix.split(","))}
    setup = TrainingSetup(get_model(model), H100, parse_topology(H100, f"{chips // 8}x8"), sequences, 4096,
                          default_efficiency("training"))  # fmt: skip
    plan = plan_training(setup, pins, top=1)
    return plan.ranked[0], {p.name: p.time_s for p in plan.parts[0]}


@pytest.mark.parametrize("v", [1, 2, 4])
def test_more_microbatches_never_raise_the_bubble_fraction(v: int) -> None:
    """The bubble is (pp - 1) / v microbatch times: its share of the step, (pp-1)/v / (m + (pp-1)/v), falls
    as the microbatches m grow (the time of one microbatch cancels out)."""
    fractions = []
    for m in (4, 8, 16, 32, 64):
        _, parts = _pinned(f"dp=1,tp=8,pp=4,microbatches={m},virtual_stages={v},remat=none")
        work = sum(parts[k] for k in MB_PARTS)
        assert parts["pipeline_bubble"] == pytest.approx(work / m * 3 / v, rel=1e-9)  # t_mb x (pp-1)/v
        fractions.append(parts["pipeline_bubble"] / (work + parts["pipeline_bubble"]))
    assert fractions == sorted(fractions, reverse=True)
    assert fractions[0] == pytest.approx((3 / v) / (4 + 3 / v))


def test_any_microbatch_count_the_rules_allow_is_honoured() -> None:
    """Was: counts limited to powers of two and pp, interleave to 1, 2, 4; a pinned count outside them was
    refused with no reason. 280 sequences per replica over pp=35 stages, 280 microbatches, 2 chunks each."""
    best, _ = _pinned("dp=1,tp=8,pp=35,microbatches=280,virtual_stages=2", 280, 280, "llama-3-70b")
    assert (best.parallelism.microbatches, best.parallelism.virtual_stages) == (280, 2)
    for fix, rule in [
        ("dp=1,tp=8,pp=35,microbatches=280,virtual_stages=3", "pp x virtual_stages=105 exceeds n_layers=80"),
        ("dp=1,tp=8,pp=35,microbatches=100,virtual_stages=2", "must be a multiple of pp=35"),
        ("dp=1,tp=8,pp=35,microbatches=300", "cannot fill 300 microbatches"),
    ]:
        with pytest.raises(InvalidConfigError, match=rule):
            _pinned(fix, 280, 280, "llama-3-70b")


def test_the_search_tries_counts_that_divide_the_batch() -> None:
    from rooftop.plan.train.candidates import interleave_options, microbatch_options

    assert microbatch_options(280, 35) == [35, 40, 56, 64, 70, 128, 140, 256, 280]  # divisors, powers of 2, pp
    assert microbatch_options(24, 1) == [1, 2, 3, 4, 6, 8, 12, 16, 24]
    assert interleave_options(105, 35) == [1, 3]  # 3 layers per stage: 3 chunks of one; 2 would leave 1.5
    assert interleave_options(80, 4) == [1, 2, 4, 5]
    assert interleave_options(32, 1) == [1]


def test_on_off_choices_can_be_pinned() -> None:
    """--fix sequence_parallel=0|1, flash=0|1, dropout=0|1 (issue: settings of older runs)."""
    from rooftop.plan.train.search import parse_fix

    assert parse_fix("sp=0,flash=1,dropout=true") == {"sequence_parallel": False, "flash": True, "dropout": True}
    with pytest.raises(InvalidConfigError, match="flash='maybe': expected 0 or 1"):
        parse_fix("flash=maybe")
    base = "dp=1,tp=8,pp=4,microbatches=8,remat=none"
    flash, _ = _pinned(base)
    scores, _ = _pinned(base + ",flash=0")  # the T x T scores written and read through HBM
    assert scores.step_time_s > flash.step_time_s
    assert scores.memory_per_chip_bytes >= flash.memory_per_chip_bytes
    dropped, _ = _pinned(base + ",dropout=1")
    assert dropped.step_time_s > flash.step_time_s and dropped.memory_per_chip_bytes >= flash.memory_per_chip_bytes
    no_sp, _ = _pinned(base + ",sequence_parallel=0")
    assert not no_sp.parallelism.sequence_parallel and flash.parallelism.sequence_parallel
    assert no_sp.memory_per_chip_bytes > flash.memory_per_chip_bytes  # norm-region activations replicated over tp


def test_sequence_parallel_splits_the_norm_regions_korthikanti() -> None:
    """Without sequence parallelism every tp rank keeps the layer's input, both norm outputs and the residual
    whole: 4 x d_model bf16 values per token and layer, 8 s b h bytes (Korthikanti et al. 2022's 10 s b h
    less the 2 s b h of dropout masks, which are not counted)."""
    from rooftop.model.activations import sequence_region_bytes_per_token

    assert sequence_region_bytes_per_token(get_model("llama-3-8b"), 4096) == 32 * 4 * 4096 * 2
    assert sequence_region_bytes_per_token(get_model("llama-3-8b"), 4096, "full") == 32 * 1 * 4096 * 2  # input only
    base = "dp=1,tp=8,pp=4,microbatches=8,remat=none,pipeline_balance=0"
    sp, _ = _pinned(base)
    no_sp, _ = _pinned(base + ",sequence_parallel=0")
    tokens = 64 // 8 * 4096  # one microbatch of 8 sequences per replica
    in_flight, stage = 4, 32 // 4  # 1F1B: pp microbatches in flight on the first stage, 8 of 32 layers
    extra = 32 * 4 * 4096 * 2 / 32 * stage * tokens * in_flight * (1 - 1 / 8)
    assert no_sp.memory["activations"] - sp.memory["activations"] == pytest.approx(extra)


def test_tp_across_nvlink_domains_is_explained_against_the_best_tp_inside_one() -> None:
    """GPT-3 175B on 4,096 A100 (1,536 sequences of 2,048): a tp of 16 spans two 8-GPU nodes, and the
    explanation names the crossing, the fabric's and NVLink's rates and the exposed TP time. With NCCL's ring
    (the GPU default framework), whose 15 steps each wait for the slowest hop, the planner keeps tp inside
    a node, and that layout is the faster one. Llama 3 405B on 16,384 H100, with a balanced 8-way
    interleaved pipeline to choose from, keeps its tp inside a node."""
    chip = get_chip("a100")
    setup = TrainingSetup(
        get_model("gpt-3-175b"), chip, parse_topology(chip, "512x8"), 1536, 2048, default_efficiency("training")
    )
    crossing = plan_training(setup, {"tp": 16})
    x = crossing.explanation.cross_domain  # the crossing as data: 2 domains of 8, at the fabric's rate
    assert x is not None and (x.tp, x.spanned, x.inside, x.switched) == (16, 2, 8, True)
    assert (x.dcn_bytes_per_s, x.fast_bytes_per_s) == (chip.dcn_bytes_per_s, chip.ici_bytes_per_s)
    text = " ".join(explanation_lines(crossing.explanation))
    assert "tp=16 spans 2 NVLink domains of 8" in text
    assert "25 GB/s per chip (against 300 GB/s over NVLink)" in text
    best = plan_training(setup).ranked[0]
    assert best.parallelism.tp <= 8
    assert best.step_time_s <= crossing.ranked[0].step_time_s
    llama = TrainingSetup(
        get_model("llama-3.1-405b"), H100, parse_topology(H100, "2048x8"), 16 * 2**20 // 8192, 8192,
        default_efficiency("training"),
    )  # fmt: skip
    chosen = plan_training(llama, top=1).ranked[0].parallelism
    assert chosen.tp <= 8 and chosen.pipeline_balance and chosen.virtual_stages == 8


def test_a_balanced_split_moves_layers_off_the_head_stage_llama3() -> None:
    """Llama 3 405B on 16 stages (Dubey 2024, section 3.3.2: one layer each off the first and last stages).
    With the head worth 0.63 of a layer, k = 7 layers on the last stage gives max(7.63, ceil(119 / 15) = 8)
    = 8, against 8.63 for k = 8; the even split keeps ceil(126 / 16) = 8 layers and the head on top.
    Interleaved 8 ways, the 128 slots make 8 a stage, the last stage's head in one of them."""
    from rooftop.plan.train.layout import Parallelism, StageSplit, stage_split

    assert stage_split(126, Parallelism(pp=16, pipeline_balance=True), 0.63) == StageSplit(7, 8)
    assert stage_split(126, Parallelism(pp=16), 0.63) == StageSplit(8, 8)
    assert stage_split(126, Parallelism(pp=16, virtual_stages=8, pipeline_balance=True), 0.63) == StageSplit(7, 8)
    assert stage_split(128, Parallelism(pp=16, pipeline_balance=True), 0.6) == StageSplit(8, 8)  # 9 elsewhere: worse
    assert stage_split(32, Parallelism(pp=1, pipeline_balance=True), 0.6) == StageSplit(32, 0)
    # the pacing stage: the last one when its layers and head take longest, else the fullest other one
    assert StageSplit(7, 8).pace(1.0, 0.63) == (8, 0.0)
    assert StageSplit(8, 8).pace(1.0, 0.63) == (8, 1.0)


@pytest.mark.parametrize("layers", [24, 32, 61, 80, 126, 128])
@pytest.mark.parametrize("pp", [2, 4, 8, 16])
@pytest.mark.parametrize("head", [0.0, 0.3, 0.63, 2.2])
def test_a_balanced_split_is_never_slower_than_the_even_one(layers: int, pp: int, head: float) -> None:
    from rooftop.plan.train.layout import Parallelism, stage_split

    def work(balance: bool) -> float:
        layers_on, outside = stage_split(layers, Parallelism(pp=pp, pipeline_balance=balance), head).pace(1.0, head)
        return layers_on + outside * head

    assert work(True) <= work(False)


def test_the_planner_balances_llama3_and_interleaves_it_8_ways() -> None:
    """With the embedding and head counted as a layer each, 126 layers fill 16 x 8 chunks of one (the
    search tries v = 8 only then); a balanced split that cannot interleave evenly is refused by name."""
    from rooftop.plan.train.candidates import interleave_options

    assert 8 in interleave_options(126, 16, balance=True) and 8 not in interleave_options(126, 16)
    setup = TrainingSetup(get_model("llama-3.1-405b"), H100, parse_topology(H100, "2048x8"), 2048, 8192,
                          default_efficiency("training"))  # fmt: skip
    plan = plan_training(setup, {"dp": 128, "tp": 8, "pp": 16}, top=1)
    best = plan.ranked[0]
    assert (best.parallelism.virtual_stages, best.parallelism.pipeline_balance) == (8, True)
    assert "Balanced split (pipeline_balance): the last stage holds 7 layers and the output head" in " ".join(
        explanation_lines(plan.explanation)
    )
    with pytest.raises(InvalidConfigError, match="pipeline_balance with virtual_stages=3 needs n_layers"):  # pinned
        plan_training(setup, {"dp": 128, "tp": 8, "pp": 16, "virtual_stages": 3, "pipeline_balance": True}, top=1)
    with pytest.raises(InvalidConfigError, match="pp x virtual_stages=128 exceeds n_layers=126"):  # even split
        plan_training(setup, {"dp": 128, "tp": 8, "pp": 16, "virtual_stages": 8, "pipeline_balance": False}, top=1)
    with pytest.raises(InvalidConfigError, match=r"pipeline_balance with virtual_stages=3 needs n_layers \+ 2 = 128"):
        from rooftop.plan.train.layout import Parallelism, validate

        validate(Parallelism(dp=128, tp=8, pp=16, microbatches=16, virtual_stages=3, pipeline_balance=True),
                 setup.cfg, 16384, 2048, 8192)  # fmt: skip


def test_fsdp_without_resharding_gathers_once_and_holds_the_weights() -> None:
    """fsdp_reshard=0 (PyTorch's SHARD_GRAD_OP with no_sync accumulation, Llama 3): a layer's weights stay gathered
    for the whole step and its gradients accumulate whole. Llama 3 8B on one node, fsdp=8, 2 microbatches: 32
    layer gathers and 32 reduce-scatters per step instead of 32 x 2 x 2 and 32 x 2, and the weights and the
    gradients whole in HBM: 8 times the shard."""
    from rooftop.model.params import params_total

    setup = TrainingSetup(get_model("llama-3-8b"), H100, parse_topology(H100, "1x8"), 16, 4096,
                          default_efficiency("training"))  # fmt: skip
    fix = {"fsdp": 8, "tp": 1, "microbatches": 2, "remat": "full"}
    plans = {r: plan_training(setup, {**fix, "fsdp_reshard": bool(r)}, top=1) for r in (0, 1)}
    layer_bytes = 2 * (4096 * (4096 + 2 * 1024 + 4096) + 3 * 4096 * 14336 + 2 * 4096)  # a layer's bf16 weights
    counts = {}
    for r, plan in plans.items():
        (fsdp,) = (p for p in plan.parts[0] if p.name == "fsdp")
        figures = [t.figures for t in fsdp.terms if isinstance(t.figures, CollectiveFigures)]
        counts[r] = {f.kind: f.calls for f in figures if f.bytes == layer_bytes}
    assert counts[0] == {"all-gather": 32, "reduce-scatter": 32}
    assert counts[1] == {"all-gather": 32 * 2 * 2, "reduce-scatter": 32 * 2}
    kept, resharded = (plans[r].ranked[0] for r in (0, 1))
    assert not kept.parallelism.fsdp_reshard and resharded.parallelism.fsdp_reshard
    assert kept.memory["weights"] == pytest.approx(8 * resharded.memory["weights"])
    assert kept.memory["weights"] == pytest.approx(2 * params_total(get_model("llama-3-8b")))
    assert kept.memory["gradients"] == pytest.approx(8 * resharded.memory["gradients"])
    assert kept.breakdown["fsdp"] <= resharded.breakdown["fsdp"]


def test_llama3_405b_without_resharding_gathers_once_per_step_near_published_mfu() -> None:
    """The Llama 3 405B layout of docs/cli.md (Dubey 2024, Table 4: 8192 H100, 16M tokens, seq 8192, 43% MFU)
    with fsdp=64 and fsdp_reshard=0: each of the stage's 8 layers (126 layers + 2 over 16 stages, balanced) is
    gathered once and reduce-scattered once per step, whatever the microbatch count; MFU within 10% of 43%."""
    setup = TrainingSetup(get_model("llama-3.1-405b"), H100, parse_topology(H100, "1024x8"), 2048, 8192,
                          default_efficiency("training"))  # fmt: skip
    fix = {"dp": 1, "fsdp": 64, "tp": 8, "pp": 16, "cp": 1, "fsdp_reshard": False}
    plan = plan_training(setup, fix, top=1)
    (fsdp,) = (p for p in plan.parts[0] if p.name == "fsdp")
    counts: dict[str, float] = {}
    for t in fsdp.terms:
        f = t.figures
        if isinstance(f, CollectiveFigures) and f.calls > 1:  # the layers' (the embedding and head's are one each)
            counts[f.kind] = counts.get(f.kind, 0) + f.calls
    assert plan.ranked[0].parallelism.microbatches > 1
    assert counts == {"all-gather": 8, "reduce-scatter": 8}
    assert abs(plan.ranked[0].mfu - 0.43) / 0.43 <= 0.10
