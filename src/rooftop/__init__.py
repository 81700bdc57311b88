"""rooftop: roofline numbers for LLM training and serving.

Count, then time: ops produce a hardware-free ``Cost``; ``roofline(cost, chip)`` turns
it into an ``Estimate`` whose every term says which figure it came from.
"""

from rooftop.cost.cost import Comm, Cost, CostTree
from rooftop.cost.efficiency import Efficiency
from rooftop.cost.op import Operand, elementwise, explicit, matmul, reduction
from rooftop.cost.roofline import Estimate, roofline
from rooftop.errors import InvalidConfigError, ParseError, RooftopError, ShardingError, UnknownNameError
from rooftop.hardware.catalog import get_chip, load_chips
from rooftop.hardware.chip import Chip
from rooftop.hardware.topology import Mesh, Topology, make_mesh, parse_topology
from rooftop.model.catalog import get_model, load_hf_config
from rooftop.model.config import Dtypes, TransformerConfig, Workload
from rooftop.model.transformer import layer_costs, model_costs
from rooftop.plan.parallelism import Parallelism
from rooftop.plan.search import search as search_training
from rooftop.plan.training import TrainingSetup

__version__ = "0.1.0"

__all__ = [
    "Chip",
    "Comm",
    "Cost",
    "CostTree",
    "Dtypes",
    "Efficiency",
    "Estimate",
    "InvalidConfigError",
    "Mesh",
    "Operand",
    "Parallelism",
    "ParseError",
    "RooftopError",
    "ShardingError",
    "Topology",
    "TrainingSetup",
    "TransformerConfig",
    "UnknownNameError",
    "Workload",
    "__version__",
    "elementwise",
    "explicit",
    "get_chip",
    "get_model",
    "layer_costs",
    "load_chips",
    "load_hf_config",
    "make_mesh",
    "matmul",
    "model_costs",
    "parse_topology",
    "reduction",
    "roofline",
    "search_training",
]
