"""The HLO modules a JAX profile carries, without reading its events.

An XPlane's ``/host:metadata`` plane holds one serialized HloProto per compiled program, named
``jit_f(<program_id>)`` (:func:`rooftop.analysis.trace.xplane.metadata_hlo_protos`). ``rooftop hlo
P.xplane.pb --module NAME`` prices one of them, ``rooftop profile P --export-hlo DIR`` writes each as text
(printed by XLA's own printer, :func:`~rooftop.analysis.trace.xplane.hlo_proto_to_text`).

The trace readers are imported by the functions that read a profile: ``rooftop hlo`` on an HLO text file
asks only :func:`is_profile_path` and loads none of them.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

from rooftop.analysis.trace.files import read_regular, stat_mode
from rooftop.errors import InvalidConfigError, UnknownNameError
from rooftop.reasons import Option, OptionError

#: the largest XPlane read (a protobuf message holds at most 2 GiB)
MAX_XPLANE_BYTES = 2**31 - 1


def is_profile_path(path: str | Path) -> bool:
    """A JAX profile rather than HLO text: a directory, or a ``.pb`` file. A path that cannot be looked up
    is not one: the HLO reader that follows names the problem in its own words."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return False
    return stat.S_ISDIR(mode) or str(path).lower().endswith(".pb")


def xplane_files(path: str | Path) -> list[Path]:
    """The ``.xplane.pb`` files of a profile directory (its newest run), or the one file given."""
    p = Path(path)
    mode = stat_mode(p)
    if mode is None:
        raise InvalidConfigError(f"{p}: no such file or directory; expected a profile directory or .xplane.pb")
    if not stat.S_ISDIR(mode):
        if not p.name.lower().endswith(".pb"):
            raise InvalidConfigError(f"{p}: not an .xplane.pb: only a JAX XPlane profile carries HLO modules")
        return [p]
    from rooftop.analysis.trace.load import profile_files

    xplanes, _ = profile_files(p)
    if not xplanes:
        raise InvalidConfigError(f"{p}: no .xplane.pb in it: only a JAX XPlane profile carries HLO modules")
    return xplanes


def hlo_protos(path: str | Path) -> dict[str, bytes]:
    """``{"jit_f(12)": serialized HloProto}`` of every host file of the profile (the first host's copy of a
    program every host ran)."""
    from rooftop.analysis.trace.xplane import metadata_hlo_protos

    out: dict[str, bytes] = {}
    for file in xplane_files(path):
        data = read_regular(file, MAX_XPLANE_BYTES, "the 2 GiB a protobuf message can hold (not an XPlane)")
        for name, proto in metadata_hlo_protos(data, str(file), {}).items():
            out.setdefault(name, proto)
    return dict(sorted(out.items()))


def module_key(protos: dict[str, bytes], name: str | None, source: str) -> str:
    """The key of the module ``name`` names: ``jit_f(12)`` exactly, or ``jit_f`` when one program has that
    name; without a name, the profile's only module. Errors name the modules the profile holds."""
    if not protos:
        raise InvalidConfigError(f"{source}: the profile carries no HLO modules (only JAX XPlane profiles do)")
    if name is None:
        if len(protos) == 1:
            return next(iter(protos))
        raise OptionError(
            f"{source} holds {len(protos)} HLO modules: give ", Option("module"), f" NAME, one of {', '.join(protos)}"
        )
    if name in protos:
        return name
    same = [k for k in protos if k.rsplit("(", 1)[0] == name]
    if len(same) == 1:
        return same[0]
    if same:
        raise InvalidConfigError(f"{source}: {len(same)} programs are named {name!r}: give one of {', '.join(same)}")
    raise UnknownNameError("HLO module", name, protos)


def module_text(path: str | Path, name: str | None) -> tuple[str, str]:
    """(key, HLO text) of the module ``name`` (:func:`module_key`) of the profile at ``path``."""
    from rooftop.analysis.trace.xplane import hlo_proto_to_text

    protos = hlo_protos(path)
    key = module_key(protos, name, str(path))
    return key, hlo_proto_to_text(protos[key])


def file_name(key: str) -> str:
    """``jit_f(12)`` -> ``jit_f.12.hlo.txt``: a file name of letters, digits and ``._-`` only."""
    base = re.sub(r"\(([0-9]+)\)$", r".\1", key)
    return re.sub(r"[^A-Za-z0-9._-]", "_", base).lstrip(".") + ".hlo.txt"


def module_texts(protos: dict[str, bytes]) -> dict[str, str]:
    """file name (:func:`file_name`) -> HLO text of every module; two keys that give one name keep both,
    the second numbered."""
    from rooftop.analysis.trace.xplane import hlo_proto_to_text

    out: dict[str, str] = {}
    for key, proto in protos.items():
        name = file_name(key)
        while name in out:
            name = name.removesuffix(".hlo.txt") + "_.hlo.txt"
        out[name] = hlo_proto_to_text(proto)
    return out
