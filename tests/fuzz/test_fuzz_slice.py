"""The time-boxed fuzz slice that runs with the test suite (well under 60 s on two cores): a fixed,
derandomized sample of every target of ``benchmarks/fuzz.py``, judged by :mod:`tests.fuzz.oracle`.

A test fails on any internal error, hang, multi-line error, stderr noise, bad output or stray file
whose cause is not in :data:`tests.fuzz.known.OPEN` (an unknown cause fails at once, with the case);
when the only failures are of known open causes the test is marked xfail naming them, so the suite
stays green today and turns each test green as the causes are fixed (then delete them from OPEN).
``test_known_reproducer`` runs one minimal reproducer per open cause (xfail, not strict: an XPASS
means the cause is fixed).
"""

from __future__ import annotations

import random
import zlib
from collections import Counter

import pytest
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis.strategies import SearchStrategy

from tests.fuzz import known, strategies
from tests.fuzz.cli_cases import THIRD_PARTY, cli_case
from tests.fuzz.file_cases import chip_case, config_case
from tests.fuzz.hlo_cases import generate_module, hlo_case
from tests.fuzz.input_cases import capture_case, diff_case, engine_case, request_case
from tests.fuzz.oracle import Case, run_case, warm_up
from tests.fuzz.trace_cases import json_trace_case, xplane_case


@pytest.fixture(scope="module", autouse=True)
def _imported() -> None:
    warm_up()


needs_shared = pytest.mark.skipif(not THIRD_PARTY.is_dir(), reason="../shared/data/third_party_profiles is absent")


class Findings:
    """Failures seen by one test: an unknown cause raises at once; known open causes are counted."""

    def __init__(self) -> None:
        self.open: Counter[str] = Counter()

    def check(self, case: Case) -> None:
        outcome = run_case(case, known.REPRODUCER_TIME_LIMIT_S)
        if outcome.kind == "hang" and known.cause_of(outcome) is None:
            outcome = run_case(case)  # not a known hang: give it the full limit (slow is not stuck)
        if not outcome.failed:
            return
        cause = known.cause_of(outcome)
        if cause is None:
            raise AssertionError(
                f"{outcome.kind}: {outcome.where or '-'}\n  said: {outcome.detail}\n  {case.describe(1000)}"
            )
        self.open[cause.name] += 1

    def done(self) -> None:
        if self.open:
            pytest.xfail("known open causes: " + ", ".join(f"{n} ({c})" for n, c in self.open.most_common()))


def run_slice(name: str, strategy: SearchStrategy[Case], examples: int) -> None:
    """``examples`` cases from ``strategy``, the same ones every run (a fixed seed per test, no database,
    no shrinking: the long run shrinks), each judged by the oracle; then xfail if only known causes failed."""
    findings = Findings()

    @settings(max_examples=examples, database=None, deadline=None, phases=(Phase.explicit, Phase.generate),
              suppress_health_check=list(HealthCheck), print_blob=False)  # fmt: skip
    @seed(zlib.crc32(name.encode()))
    @given(strategy)
    def each(case: Case) -> None:
        findings.check(case)

    each()
    findings.done()


def test_cli_one_hostile_value() -> None:
    """A valid command line of a subcommand with one value replaced by a hostile one."""
    run_slice("cli-one-value", strategies.hostile_command_lines(), 32)


def test_cli_mutated_command_lines() -> None:
    """Command lines with values, flags and paths (directories, FIFOs, links) spoiled."""
    run_slice("cli-mutated", strategies.cases(cli_case), 16)


def _generated_hlo(rng: random.Random) -> Case:
    text = generate_module(rng).encode("utf-8", "surrogatepass")
    return Case("hlo", ["hlo", "{W}/m.hlo", "--chip", "h100", "--json"], {"m.hlo": text}, label="generated")


def test_hlo_generated_modules() -> None:
    """Modules generated from instruction templates, with sizes from tiny to absurd."""
    run_slice("hlo-generated", strategies.cases(_generated_hlo), 24)


@needs_shared
def test_hlo_mutated_dumps() -> None:
    """The real HLO dumps with numbers, shapes, attributes, operands, opcodes or lines changed."""
    run_slice("hlo-mutated", strategies.cases(hlo_case), 16)


def test_trace_json_mutated() -> None:
    """Kineto and JAX JSON traces with fields of the wrong type or size, B/E pairs out of order."""
    run_slice("trace-json", strategies.cases(json_trace_case), 16)


@needs_shared
def test_trace_xplane_mutated() -> None:
    """The real XPlanes with stat values, names and times changed, or bytes broken."""
    run_slice("trace-xplane", strategies.cases(xplane_case), 8)


def test_chip_files_mutated() -> None:
    """Catalog chip files with values replaced, keys deleted or added, the TOML broken."""
    run_slice("chip-files", strategies.cases(chip_case), 20)


def test_hf_configs_mutated() -> None:
    """Hugging Face config.json files with values replaced, keys deleted or added."""
    run_slice("hf-configs", strategies.cases(config_case), 20)


def test_capture_traces_mutated() -> None:
    """A graph-replayed PyTorch trace with its engine capture trace (``--capture``, a folder, or found
    beside it), the capture's ops, launches and kernel names spoiled."""
    run_slice("capture-traces", strategies.cases(capture_case), 8)


def test_engine_op_signatures_mutated() -> None:
    """LLM-engine custom ops (vLLM, SGLang, FlashInfer, flash-attn) with their Input Dims, types and
    concrete inputs spoiled, or renamed into another family."""
    run_slice("engine-ops", strategies.cases(engine_case), 10)


def test_request_traces_mutated() -> None:
    """``serve --percentiles --request-trace`` files with lines, keys and values spoiled."""
    run_slice("request-traces", strategies.cases(request_case), 6)


def test_diff_inputs_mutated() -> None:
    """``rooftop diff`` of two traces or two HLO modules, one side mutated, of the other kind, or missing."""
    run_slice("diff-inputs", strategies.cases(diff_case), 8)


LONG_SLICES = {  # the long run: each target with 8 to 16 times its slice's cases, other ones (another seed)
    "cli-one-value": (lambda: strategies.hostile_command_lines(), 256, False),
    "cli-mutated": (lambda: strategies.cases(cli_case), 256, False),
    "hlo-generated": (lambda: strategies.cases(_generated_hlo), 192, False),
    "hlo-mutated": (lambda: strategies.cases(hlo_case), 128, True),
    "trace-json": (lambda: strategies.cases(json_trace_case), 240, False),
    "trace-xplane": (lambda: strategies.cases(xplane_case), 64, True),
    "chip-files": (lambda: strategies.cases(chip_case), 160, False),
    "hf-configs": (lambda: strategies.cases(config_case), 160, False),
    "capture-traces": (lambda: strategies.cases(capture_case), 160, False),
    "engine-ops": (lambda: strategies.cases(engine_case), 200, False),
    "request-traces": (lambda: strategies.cases(request_case), 160, False),
    "diff-inputs": (lambda: strategies.cases(diff_case), 160, False),
}


@pytest.mark.long
@pytest.mark.parametrize("name", sorted(LONG_SLICES))
def test_long_slice(name: str) -> None:
    """Each target with 8 to 16 times the examples of its slice above (``python3 -m pytest -m long``)."""
    make, examples, shared = LONG_SLICES[name]
    if shared and not THIRD_PARTY.is_dir():
        pytest.skip("../shared/data/third_party_profiles is absent")
    run_slice(f"{name}-long", make(), examples)


@pytest.mark.parametrize(
    "cause",
    [pytest.param(c, id=c.name, marks=pytest.mark.xfail(strict=False, reason=c.says)) for c in known.OPEN],
)
def test_known_reproducer(cause: known.Cause) -> None:
    """Each open cause's minimal reproducer ends as the oracle wants (xfail until the cause is fixed)."""
    if cause.needs_shared and not THIRD_PARTY.is_dir():
        pytest.skip("../shared/data/third_party_profiles is absent")
    outcome = run_case(cause.reproducer(), cause.time_limit)
    assert not outcome.failed, f"{outcome.kind}: {outcome.where}\n  said: {outcome.detail}"
