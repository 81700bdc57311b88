"""Hypothesis strategies for the fuzz slice: hostile flag values (unicode digits, huge integers, floats of
every kind, markup, arbitrary text), a valid command line with one value replaced by one of them, and
cases of every target drawn through hypothesis' own random source (so that runs are derandomized)."""

from __future__ import annotations

import random
from collections.abc import Callable

from hypothesis import strategies as st

from tests.fuzz import hostile
from tests.fuzz.cli_cases import PATH_KINDS, _bases
from tests.fuzz.oracle import Case


def hostile_values() -> st.SearchStrategy[str]:
    """A string a flag might be given: the pools of :mod:`tests.fuzz.hostile` and generated ones."""
    return st.one_of(
        st.sampled_from(hostile.NUMBERS + hostile.TEXTS),
        st.integers(min_value=-(10**40), max_value=10**40).map(str),
        st.floats(allow_nan=True, allow_infinity=True).map(repr),
        st.text(alphabet=st.characters(categories=["Nd", "No", "Nl"]), min_size=1, max_size=4),
        st.tuples(st.integers(1, 64), st.sampled_from(hostile.SUFFIXES)).map(lambda t: f"{t[0]}{t[1]}"),
        st.from_regex(r"\[/?[a-z ]{0,12}\]", fullmatch=True),
        st.text(max_size=24),
        st.integers(4295, 5200).map(lambda n: "1" * n),  # past Python's int() digit limit
    )


@st.composite
def hostile_command_lines(draw: st.DrawFn) -> Case:
    """A valid command line (no path flags) with one value replaced by a hostile one."""
    bases = [(cmd, b) for cmd, bs in _bases().items() if cmd != "calibrate" for b in bs]
    bases = [(cmd, b) for cmd, b in bases if b and not any(kind in PATH_KINDS for _, kind, _ in b)]
    command, base = draw(st.sampled_from(bases))
    slots = [i for i, (_, _, v) in enumerate(base) if v is not None]
    at = draw(st.sampled_from(slots))
    value = draw(hostile_values())
    argv, positionals = [command], []
    for i, (flag, _, old) in enumerate(base):
        new = value if i == at else old
        if flag is not None and new is not None:
            argv.append(f"{flag}={new}")  # '=' lets a value starting with '-' through
        elif new is not None:
            positionals.append(new)
    if draw(st.booleans()):
        argv.append("--json")
    argv += ["--", *positionals] if any(p.startswith("-") for p in positionals) else positionals
    return Case("cli", argv, label=f"{command}: {base[at][1]} = {value[:40]!r}")


def cases(make: Callable[[random.Random], Case]) -> st.SearchStrategy[Case]:
    """Cases of a target, built from hypothesis' random source."""
    return st.randoms(use_true_random=False).map(make)
