"""rooftop: roofline numbers for LLM training and serving.

Count, then time: ops produce a hardware-free ``Cost``; ``roofline(cost, chip)`` turns
it into an ``Estimate`` whose every term says which figure it came from.
"""

from rooftop.cost.cost import Comm, Cost, CostTree
from rooftop.cost.op import Operand, elementwise, explicit, matmul, reduction
from rooftop.cost.roofline import Efficiency, Estimate, roofline
from rooftop.errors import InvalidConfigError, ParseError, RooftopError, ShardingError, UnknownNameError
from rooftop.hardware.catalog import get_chip, load_chips
from rooftop.hardware.chip import Chip
from rooftop.hardware.topology import Mesh, Topology, make_mesh, parse_topology

__version__ = "0.1.0"

__all__ = [
    "Chip",
    "Comm",
    "Cost",
    "CostTree",
    "Efficiency",
    "Estimate",
    "InvalidConfigError",
    "Mesh",
    "Operand",
    "ParseError",
    "RooftopError",
    "ShardingError",
    "Topology",
    "UnknownNameError",
    "__version__",
    "elementwise",
    "explicit",
    "get_chip",
    "load_chips",
    "make_mesh",
    "matmul",
    "parse_topology",
    "reduction",
    "roofline",
]
