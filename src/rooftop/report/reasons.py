"""The words of the reasons library code returns as data (``rooftop.reasons``): each
:class:`~rooftop.reasons.ReasonCode`'s sentence from its figures, and each
:class:`~rooftop.reasons.Option` spelled as the command line's flag. The CLI and every report print
notes through :func:`note_text`, so the sentence of a code is written once, here."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from rooftop.errors import one_line, visible
from rooftop.reasons import Note, Option, Part, Reason, ReasonCode, said
from rooftop.report.plan_reasons import plan_sentences
from rooftop.units import format_percent


def flag(option: Option) -> str:
    """``Option("batch_tokens")`` -> ``"--batch-tokens"`` (argparse's rule from a flag to its dest)."""
    return "--" + option.name.replace("_", "-")


def _refused(r: Reason) -> str:
    parts: tuple[Part, ...] = r.figure("parts")  # type: ignore[assignment]  # Reason.of(REFUSED, parts=...)
    return one_line(visible(said(parts, flag, sentence)))


#: each code's sentence from its figures (``f`` reads one figure by name)
_SENTENCES: dict[ReasonCode, Callable[[Reason], str]] = {
    ReasonCode.REFUSED: _refused,
    ReasonCode.MESH_INFERRED: lambda r: f"mesh {r.figure('mesh')} {r.figure('how')} (give --mesh to name the axes)",
    ReasonCode.TOPOLOGY_DEFAULT: lambda r: (
        f"topology {r.figure('topology')}: the default for {r.figure('devices')} {r.figure('chip')} (give --topology)"
    ),
    ReasonCode.NCCL_TOPOLOGY_DEFAULT: lambda r: (
        f"NCCL collectives over {r.figure('ranks')} ranks timed on topology "
        f"{r.figure('topology')}, the default for {r.figure('ranks')} {r.figure('chip')} (give --topology)"
    ),
    ReasonCode.GRAPH_REPLAY_NO_CAPTURE: lambda r: (
        f"{r.figure('left')} of the {r.figure('unexplained')} were replayed "
        "from CUDA/HIP graphs with no op shapes: no capture trace beside the profile: record one (vLLM and SGLang can "
        f"profile CUDA-graph capture into capture_traces/) and give it with --capture, or profile in "
        "eager mode (vLLM enforce_eager=True)"
    ),
    ReasonCode.HLO_JOINED_BUSIEST: lambda r: (
        f"--hlo module {r.figure('given')!r} joined with the profile's busiest module {r.figure('target')!r}"
    ),
    ReasonCode.HLO_MISSING: lambda r: (
        f"no HLO for module {r.figure('module')!r} in the profile (give --hlo to price its ops)"
    ),
    ReasonCode.NO_HLO: lambda r: (
        "no HLO available: ops have measured times only (give --hlo, or "
        "profile with JAX so the XPlane carries each module's HLO)"
    ),
    ReasonCode.HLO_MESH_UNUSED: lambda r: (
        "--hlo and --mesh are not used for a PyTorch trace (it is priced from its aten ops)"
    ),
    ReasonCode.TARGET_TOPOLOGY_DEFAULT: lambda r: (
        f"collectives on {r.figure('chip')} timed on its default topology "
        f"(--topology {r.figure('topology')} is {r.figure('source_chip')}'s)"
    ),
}


#: plan/'s codes (goals, the serving sweep, continuous batching, disaggregation): their words are in
#: report/plan_reasons.py, a reason they quote said through note_text
_SENTENCES.update(plan_sentences(lambda note: note_text(note)))


def _pct(x: object) -> str:
    return "-" if x is None else format_percent(float(x), 1)  # type: ignore[arg-type]  # a share or None


def _coverage(r: Reason) -> str:
    return (
        f"coverage: {_pct(r.figure('priced'))} of the op time priced, {_pct(r.figure('unpriced'))} not (ranked by "
        f"time below); graph-replayed {_pct(r.figure('graph_replayed'))}; device idle {_pct(r.figure('idle'))} of "
        "the steps' time"
    )


_HLO_FAILED = {"unusable": "in the profile is unusable", "unreadable": "could not be read",
               "unpriced": "in the profile could not be priced"}  # fmt: skip

_SENTENCES.update({
    ReasonCode.COVERAGE: _coverage,
    ReasonCode.DEVICE_FROM_PROFILE: lambda r: f"device from the profile: {r.figure('seen')!r} is catalog chip "
    f"{r.figure('chip')}",
    ReasonCode.DEVICE_WHAT_IF: lambda r: f"recorded on {r.figure('seen')!r} (catalog {r.figure('matched')}); priced "
    f"on {r.figure('chip')} as asked: the verdicts are a what-if for {r.figure('chip')}, not how well the ops ran",
    ReasonCode.DEVICE_UNMATCHED: lambda r: f"recorded on {r.figure('seen')!r}, which no catalog chip matches; priced "
    f"on {r.figure('chip')} as asked",
    ReasonCode.CPU_PROFILE: lambda r: f"this profile ran on the CPU and is judged against {r.figure('chip')}'s "
    "roofline: efficiencies say how far the CPU is from that chip, not how well the ops run (`rooftop calibrate` "
    "makes a chip file of this CPU)",
    ReasonCode.GROUPS_FROM_EVENTS: lambda r: f"{r.figure('module')}: replica groups of {r.figure('instruction')} read "
    f"from the profile's event text ({r.figure('groups')}): the HloProto had none",
    ReasonCode.GROUPS_ALL_DEVICES: lambda r: f"{r.figure('module')}: {r.figure('instruction')} names no replica "
    f"groups: all {r.figure('devices')} devices of the profile taken as one group",
    ReasonCode.GRAPH_REPLAY_UNMATCHED: lambda r: f"{r.figure('left')} of the {r.figure('unexplained')} were "
    "replayed from CUDA/HIP graphs with no op shapes: the capture trace has no op for them",
    ReasonCode.GRAPH_REPLAY_ATTRIBUTED: lambda r: f"{r.figure('kernels')} graph-replayed kernels attributed to their "
    f"ops from the capture trace {r.figure('capture')} ({r.figure('launches')} captured launches)",
    ReasonCode.GRAPH_REPLAY_SHARE: lambda r: f"graph-replayed share of the kernel time: {_pct(r.figure('share'))}",
    ReasonCode.KERNELS_PRICED: lambda r: f"PyTorch trace: {r.figure('priced')} of {r.figure('kernels')} kernels "
    "priced from the aten op that launched them (its Input Dims) or from their NCCL args; "
    f"{r.figure('unexplained')} launched by no op with Input Dims",
    ReasonCode.KERNELS_WITHOUT_LAUNCH: lambda r: f"{r.figure('kernels')} kernels without a launch in the trace "
    "(recorded before its host activity) priced as the ops they replay: a run of kernel names launched in that "
    "order on their stream, or a name one op signature alone launches",
    ReasonCode.NO_INPUT_DIMS: lambda r: "no cpu_op carries Input Dims: record with "
    "torch.profiler.profile(record_shapes=True)",
    ReasonCode.HLO_FAILED: lambda r: f"HLO of {r.figure('module')!r} {_HLO_FAILED[str(r.figure('stage'))]}: "
    f"{r.figure('error')}",
})  # fmt: skip


def sentence(reason: Reason) -> str:
    """The sentence a report prints for ``reason``."""
    return _SENTENCES[reason.code](reason)


def note_text(note: Note) -> str:
    """A note as printed: a Reason's sentence, or a note that is still a sentence as it is."""
    return note if isinstance(note, str) else sentence(note)


def note_texts(notes: Iterable[Note]) -> list[str]:
    return [note_text(n) for n in notes]
