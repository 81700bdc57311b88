"""The valid slices of a chip, smallest first: what a search over slice sizes walks, and what an error lists
when a chip count forms no slice.

- TPUs (torus): every chip count some slice shape of the generation has (the shapes ``parse_topology``
  accepts: whole 4x4x4 cubes or 1, 2, 4 per dim on v4/v5p/TPU7x, powers of two on v5e/v6e), each as
  the shape ``topology_for_chips`` picks (the most cubic); and ``k`` equal slices of at least a quarter
  pod over the data-center network (``k*SHAPE``, Google's multislice) for the counts no single slice has,
  the fewest slices for each count.
- GPUs (switched): 1 to one NVLink domain, then whole domains (``topology_for_chips``'s rule), up to
  the chip file's ``max_chips``.
"""

from __future__ import annotations

import bisect
import itertools
import math
from dataclasses import dataclass
from functools import lru_cache

from rooftop.errors import InvalidConfigError
from rooftop.hardware.chip import Chip
from rooftop.hardware.topology import Topology, parse_topology, topology_for_chips
from rooftop.reasons import Option, OptionError, Phrased

#: most equal slices over DCN a search considers (64 TPU v5p pods: 573,440 chips)
MAX_SLICES = 64


@dataclass(frozen=True, order=True)
class SliceOption:
    """A valid slice: its chip count and its topology text (``16x16x16``, ``2*16x20x28``, ``64``)."""

    chips: int
    spec: str

    def topology(self, chip: Chip) -> Topology:
        return parse_topology(chip, self.spec)


def _dims_allowed(chip: Chip, longest: int) -> list[int]:
    rule = chip.topology.wraparound
    if rule == "whole-cubes":
        return sorted({d for d in (1, 2, 4) if d <= longest} | set(range(4, longest + 1, 4)))
    if rule == "full-axis":
        return [1 << i for i in range(longest.bit_length()) if 1 << i <= longest]
    return list(range(1, longest + 1))


def _torus_counts(chip: Chip) -> list[int]:
    """Chip counts of the single slices of a torus chip (one pod at most)."""
    spec = chip.topology
    dims = sorted(spec.max_dims)
    most = spec.max_chips or math.prod(dims)
    allowed = _dims_allowed(chip, max(dims))
    counts = set()
    for shape in itertools.combinations_with_replacement(allowed, len(dims)):
        if all(a <= b for a, b in zip(shape, dims, strict=True)) and math.prod(shape) <= most:
            counts.add(math.prod(shape))
    return sorted(counts)


@lru_cache(maxsize=32)
def valid_slices(chip: Chip) -> tuple[SliceOption, ...]:
    """Every valid slice of ``chip`` (module docstring), by chip count."""
    spec = chip.topology
    if spec.kind == "switched":
        domain = spec.domain_sizes[0]
        most = spec.max_chips or MAX_SLICES * domain
        counts = [*range(1, domain), *range(domain, most + 1, domain)]
        return tuple(SliceOption(n, str(n)) for n in counts)
    single = {}
    for n in _torus_counts(chip):
        try:
            single[n] = topology_for_chips(chip, n).spec
        except InvalidConfigError:  # a count whose most cubic shapes the rules refuse: none of its shapes fits
            continue
    pod = max(single)
    out = {n: SliceOption(n, s) for n, s in single.items()}
    for n, s in sorted(single.items(), reverse=True):  # larger slices first: the fewest slices per count
        if 4 * n < pod:  # a multislice of small slices: never what a job larger than a slice is built of
            break
        for k in range(2, MAX_SLICES + 1):
            if k * n not in out:
                out[k * n] = SliceOption(k * n, f"{k}*{s}")
    return tuple(sorted(out.values()))


def replica_counts(chip: Chip, per_replica: int) -> tuple[int, int]:
    """(free, step): the counts of independent replicas of ``per_replica`` chips each (a serving deployment)
    that fill valid slices are 1 to ``free``, then the multiples of ``step``. GPUs: the deployment is one
    valid slice (``valid_slices``): below one NVLink domain any count of chips, from one domain up whole
    domains (nodes: replicas fill them), so k x per_replica is a multiple of the domain past ``free``.
    TPUs: the replicas do not talk to each other, so they sit on separate slices, as many on each as fill
    the smallest valid single slice whose chips are a multiple of ``per_replica`` (one replica on its own
    slice when ``per_replica`` chips form one)."""
    spec = chip.topology
    if spec.kind == "switched":
        domain = spec.domain_sizes[0]
        free = -(-domain // per_replica) - 1
        return free, math.lcm(per_replica, domain) // per_replica
    unit = next((o.chips for o in valid_slices(chip) if "*" not in o.spec and o.chips % per_replica == 0), None)
    if unit is None:
        raise InvalidConfigError(f"no {chip.name} slice holds a whole number of {per_replica}-chip replicas")
    return 0, unit // per_replica


def nearest_slices(chip: Chip, chips: int, each_side: int = 3) -> list[SliceOption]:
    """The valid slices closest to ``chips`` in count, ``each_side`` below and above."""
    options = valid_slices(chip)
    i = bisect.bisect_left([o.chips for o in options], chips)
    return list(options[max(0, i - each_side) : i + each_side])


def slice_for_chips(chip: Chip, chips: int) -> Topology:
    """``topology_for_chips``, its error listing the nearest valid slices when ``chips`` forms none."""
    try:
        return topology_for_chips(chip, chips)
    except InvalidConfigError as exc:
        near = ", ".join(f"{o.spec} ({o.chips:,})" for o in nearest_slices(chip, chips))
        said = exc.parts if isinstance(exc, Phrased) else (exc.one_line(),)  # an option it names stays one
        raise OptionError(*said, f"; nearest valid slices: {near} (give one with ", Option("topology"), ")") from None


def topology_or_nearest(chip: Chip, text: str) -> Topology:
    """``parse_topology``, its error listing the valid slices nearest in chips when the shape is not one."""
    try:
        return parse_topology(chip, text)
    except InvalidConfigError as exc:
        try:
            count = math.prod(int(p) for p in text.replace("*", "x").split("x"))
        except ValueError:  # not a shape at all: the parser's message says what is wrong
            raise exc from None
        if not 1 <= count <= 1 << 24:
            raise
        near = ", ".join(f"{o.spec} ({o.chips:,})" for o in nearest_slices(chip, count))
        raise InvalidConfigError(f"{exc.one_line()}; nearest valid slices: {near}") from None
