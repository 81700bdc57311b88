"""The words of the reasons library code returns as data (``rooftop.reasons``): each
:class:`~rooftop.reasons.ReasonCode`'s sentence from its figures, and each
:class:`~rooftop.reasons.Option` spelled as the command line's flag. The CLI and every report print
notes through :func:`note_text`, so the sentence of a code is written once, here."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from rooftop.errors import one_line, visible
from rooftop.reasons import Note, Option, Part, Reason, ReasonCode, said


def flag(option: Option) -> str:
    """``Option("batch_tokens")`` -> ``"--batch-tokens"`` (argparse's rule from a flag to its dest)."""
    return "--" + option.name.replace("_", "-")


def _refused(r: Reason) -> str:
    parts: tuple[Part, ...] = r.figure("parts")  # type: ignore[assignment]  # Reason.of(REFUSED, parts=...)
    return one_line(visible(said(parts, flag)))


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


def sentence(reason: Reason) -> str:
    """The sentence a report prints for ``reason``."""
    return _SENTENCES[reason.code](reason)


def note_text(note: Note) -> str:
    """A note as printed: a Reason's sentence, or a note that is still a sentence as it is."""
    return note if isinstance(note, str) else sentence(note)


def note_texts(notes: Iterable[Note]) -> list[str]:
    return [note_text(n) for n in notes]
