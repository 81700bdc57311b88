"""The Chip: every hardware figure rooftop uses, each with its source."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Literal

from rooftop.dtypes import canonical_dtype
from rooftop.errors import InvalidConfigError, UnknownNameError

Unit = Literal["matrix", "vector"]

#: most chips in any topology (a slice, a cluster of NVLink domains, or several slices over DCN):
#: far above any system built, and it bounds every search over layouts and factorizations
MAX_CHIPS = 1 << 24
#: most physical dims of a torus a chip file may declare (TPUs have 2 or 3)
MAX_TORUS_DIMS = 6


@dataclass(frozen=True)
class Figure:
    """One number and where it came from."""

    value: float
    source: str
    note: str = ""


@dataclass(frozen=True)
class TopologySpec:
    """How a chip's slices are built.

    kind "torus": TPU ICI torus; ``max_dims`` is the full pod, ``wraparound`` the
    generation's rule ("full-axis": an axis wraps only at length ``wrap_length``;
    "whole-cubes": every axis wraps when the slice is built of whole ``cube`` blocks).
    kind "switched": GPU NVLink domains of ``domain_sizes`` joined by a scale-out fabric.
    """

    kind: Literal["torus", "switched"]
    max_dims: tuple[int, ...] = ()
    max_chips: int = 0
    wraparound: str = "none"
    wrap_length: int = 0
    cube: tuple[int, ...] = ()
    domain_sizes: tuple[int, ...] = ()
    source: str = ""
    note: str = ""


@dataclass(frozen=True)
class Internals:
    """What is inside a chip, from its whitepaper or docs (``[internals]`` of a chip file); None where the
    file does not say. They answer questions about the chip itself, ``matrix_peak_from_internals`` checks them
    against the catalog's peak, and the matmul shape model (cost/gemm.py) reads ``sms`` and ``mxu_size``.

    GPUs: ``sms`` streaming multiprocessors, ``tensor_cores_per_sm``, ``matrix_flops_per_cycle_per_sm`` (dense
    bf16 on the Tensor Cores), ``clock_hz`` the clock NVIDIA quotes the Tensor Core peak at and
    ``boost_clock_hz`` the highest boost clock, and per SM: ``shared_memory_bytes_per_sm`` (the shared-memory
    carve-out), ``l1_shared_bytes_per_sm`` (L1 and shared memory together), ``register_bytes_per_sm`` and
    ``tensor_memory_bytes_per_sm`` (Blackwell's TMEM).
    TPUs: ``mxus_per_core`` and ``mxu_size`` (the side of each systolic array) per TensorCore, the VPU's shape
    ``vpu_sublanes`` x ``vpu_lanes``, and ``clock_hz``.
    """

    sms: int | None = None
    tensor_cores_per_sm: int | None = None
    matrix_flops_per_cycle_per_sm: float | None = None
    clock_hz: float | None = None
    boost_clock_hz: float | None = None
    shared_memory_bytes_per_sm: float | None = None
    l1_shared_bytes_per_sm: float | None = None
    register_bytes_per_sm: float | None = None
    tensor_memory_bytes_per_sm: float | None = None
    mxus_per_core: int | None = None
    mxu_size: int | None = None
    vpu_sublanes: int | None = None
    vpu_lanes: int | None = None

    @property
    def tensor_cores(self) -> int | None:
        """A GPU's Tensor Cores: SMs x Tensor Cores per SM."""
        return self.sms * self.tensor_cores_per_sm if self.sms and self.tensor_cores_per_sm else None


@dataclass(frozen=True)
class Fabric:
    """The switches a GPU's slices are built of (``[fabric]`` of a chip file), each bandwidth per switch and per
    direction; None where the file does not say. ``nvswitch_*``: the NVLink switches of one node (NVLink
    domain). ``leaf_*`` and ``spine_*``: the scale-out fat tree of the vendor's reference cluster, a leaf unit of
    ``leaf_gpus`` GPUs under ``leaf_switches`` switches, ``spine_switches`` above ``spine_gpus`` GPUs."""

    nvswitches_per_node: int | None = None
    nvswitch_ports: int | None = None
    nvswitch_bytes_per_s: float | None = None
    leaf_gpus: int | None = None
    leaf_switches: int | None = None
    leaf_switch_ports: int | None = None
    leaf_switch_bytes_per_s: float | None = None
    spine_gpus: int | None = None
    spine_switches: int | None = None
    spine_switch_bytes_per_s: float | None = None


@dataclass(frozen=True)
class Chip:
    """A chip's peak figures in SI units (FLOPs/s, bytes, bytes/s, s, USD/h).

    ``matrix_flops_per_s`` / ``vector_flops_per_s`` map a dtype to dense peak FLOPs/s
    (vendor sparsity figures are halved in the catalog). ``matrix_achievable`` maps a dtype to the
    fraction of that peak the best large matmul measurably sustains (a GPU's tensor cores do not hold
    their datasheet clock under load; empty, or a dtype it lacks: 1, the datasheet). Link bandwidth is per link,
    each way. ``tensor_cores`` is the chip's TensorCores (TPUs; 1 for other chips) and
    ``cores_per_device`` how many of them XLA drives as one device: 2 on a megacore chip
    (TPU v4, v5p), where the peaks and bandwidth are the chip's and an op that runs on one
    core gets ``one_core()``'s share.
    """

    name: str
    vendor: str
    kind: Literal["tpu", "gpu", "cpu", "custom"]
    matrix_flops_per_s: MappingProxyType[str, float]
    vector_flops_per_s: MappingProxyType[str, float]
    hbm_capacity_bytes: float
    hbm_bytes_per_s: float
    link_count: int
    link_bytes_per_s: float
    link_latency_s: float
    link_kind: str
    host_bytes_per_s: float
    dcn_bytes_per_s: float
    topology: TopologySpec = field(repr=False)
    on_chip_bytes: MappingProxyType[str, float] = field(default_factory=lambda: MappingProxyType({}))
    price_usd_per_hour: float | None = None
    price_as_of: str = ""  # the date the price's source was read (ISO, "2026-05" or "2026-11-22"); "" when none
    power_w: float | None = None  # board power per chip at full load (W), for energy figures; None when unknown
    aliases: tuple[str, ...] = ()
    description: str = ""
    scaleout_latency_s: float = 5e-6
    tensor_cores: int = 1
    cores_per_device: int = 1
    internals: Internals = field(default_factory=Internals, repr=False)
    matrix_achievable: MappingProxyType[str, float] = field(default_factory=lambda: MappingProxyType({}))
    fabric: Fabric = field(default_factory=Fabric, repr=False)
    sources: MappingProxyType[str, Figure] = field(default_factory=lambda: MappingProxyType({}), repr=False)
    path: str = field(default="", repr=False)

    def __post_init__(self) -> None:
        if self.hbm_bytes_per_s <= 0:
            raise InvalidConfigError(f"chip {self.name}: hbm_bytes_per_s must be > 0, got {self.hbm_bytes_per_s}")
        if not self.matrix_flops_per_s:
            raise InvalidConfigError(f"chip {self.name}: needs at least one matrix_flops_per_s entry")

    @property
    def megacore(self) -> bool:
        """Whether XLA drives several TensorCores of the chip as one device (TPU v4 and v5p)."""
        return self.cores_per_device > 1

    def one_core(self) -> Chip:
        """The chip as one of the ``cores_per_device`` TensorCores of a megacore device sees it: the
        matrix and vector peaks, the HBM bandwidth and the bandwidth of each ICI link divided by
        ``cores_per_device`` (an op that runs on one core, compute-, memory- or collective-bound, takes
        twice the whole-chip roofline on v4 and v5p: the core drives its share of the chip's DMA into
        HBM and the links); the chip itself when it is not a megacore chip."""
        n = self.cores_per_device
        if n <= 1:
            return self
        return replace(
            self,
            name=f"{self.name} (one of {n} TensorCores)",
            matrix_flops_per_s=MappingProxyType({k: v / n for k, v in self.matrix_flops_per_s.items()}),
            vector_flops_per_s=MappingProxyType({k: v / n for k, v in self.vector_flops_per_s.items()}),
            hbm_bytes_per_s=self.hbm_bytes_per_s / n,
            link_bytes_per_s=self.link_bytes_per_s / n,
        )

    @property
    def hbm_bytes(self) -> float:
        """HBM capacity in bytes (the name of rooftop 0.1; ``hbm_capacity_bytes`` says what it is)."""
        return self.hbm_capacity_bytes

    def __hash__(self) -> int:  # the mappings are read-only views; hash the identity figures
        return hash((self.name, self.path, self.hbm_bytes_per_s, tuple(sorted(self.matrix_flops_per_s.items()))))

    def flops_per_s(self, dtype: str, unit: Unit = "matrix") -> float:
        """Peak dense FLOPs/s for a dtype on a unit. A dtype the unit lacks falls back
        to the nearest wider dtype it has (fp8 on a chip without fp8 runs as bf16):
        that is what compilers do, and the estimate says so in its formula."""
        return self.flops_rate(dtype, unit)[1]

    def flops_rate(self, dtype: str, unit: Unit = "matrix") -> tuple[str, float]:
        """(dtype actually used, FLOPs/s) for ``dtype`` on ``unit``."""
        table = self.matrix_flops_per_s if unit == "matrix" else self.vector_flops_per_s
        if unit not in ("matrix", "vector"):
            raise UnknownNameError("compute unit", unit, ["matrix", "vector"])
        if not table:
            table = self.matrix_flops_per_s
        d = canonical_dtype(dtype)
        for candidate in _WIDEN.get(d, (d,)):
            if candidate in table:
                return candidate, table[candidate]
        raise UnknownNameError(f"dtype on {self.name}'s {unit} unit", dtype, list(table))

    def achievable_fraction(self, dtype: str) -> float:
        """Fraction of the matrix peak in ``dtype`` (the dtype the chip runs, ``flops_rate``'s first
        value) that the best large matmul sustains: ``matrix_achievable``, 1 where it has no figure."""
        return self.matrix_achievable.get(canonical_dtype(dtype), 1.0)

    def critical_intensity(self, dtype: str = "bf16", unit: Unit = "matrix") -> float:
        """FLOPs per HBM byte at which compute time equals memory time (the ridge point)."""
        return self.flops_per_s(dtype, unit) / self.hbm_bytes_per_s

    def matrix_peak_from_internals(self) -> float | None:
        """The dense bf16 matrix peak the chip's internals give (None when they are not all known), to check
        against ``matrix_flops_per_s["bf16"]``: a GPU's SMs x FLOPs per cycle per SM x clock; a TPU's
        TensorCores x MXUs per core x 2 x mxu_size^2 (one multiply-add per cell per cycle) x clock."""
        n = self.internals
        if n.clock_hz is None:
            return None
        if n.sms and n.matrix_flops_per_cycle_per_sm:
            return n.sms * n.matrix_flops_per_cycle_per_sm * n.clock_hz
        if n.mxus_per_core and n.mxu_size:
            return self.tensor_cores * n.mxus_per_core * 2 * n.mxu_size**2 * n.clock_hz
        return None

    @property
    def ici_bytes_per_s(self) -> float:
        """Total one-way chip-to-chip bandwidth (all links)."""
        return self.link_count * self.link_bytes_per_s


#: fall-back order when a unit has no peak for a dtype: the next wider precision, down to fp32 (a vector
#: unit listed with fp32 alone, as B200's datasheet and a calibrated chip give it, runs int8 and fp8 math
#: in fp32 registers).
_WIDEN: dict[str, tuple[str, ...]] = {
    "int4": ("int4", "int8", "bf16", "fp16", "fp32"),
    "fp4": ("fp4", "fp8", "bf16", "fp16", "fp32"),
    "int8": ("int8", "bf16", "fp16", "fp32"),
    "fp8": ("fp8", "bf16", "fp16", "fp32"),
    "bf16": ("bf16", "fp16", "fp32"),
    "fp16": ("fp16", "bf16", "fp32"),
    "fp32": ("fp32", "bf16"),
    "int32": ("int32", "fp32", "bf16"),
    "fp64": ("fp64", "fp32"),
}
