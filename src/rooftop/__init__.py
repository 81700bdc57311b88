"""rooftop: roofline numbers for LLM training and serving.

Count, then time: ops produce a hardware-free ``Cost``; ``roofline(cost, chip)`` turns
it into an ``Estimate`` whose every term says which figure it came from.

The names below are the curated public API. They are imported on first use (module
``__getattr__``), so ``import rooftop`` and the command line start without loading
numpy, the catalogs or the planners.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

#: public name -> (module, attribute in that module)
_EXPORTS: dict[str, tuple[str, str]] = {
    "Comm": ("rooftop.cost.cost", "Comm"),
    "Cost": ("rooftop.cost.cost", "Cost"),
    "CostTree": ("rooftop.cost.cost", "CostTree"),
    "Operand": ("rooftop.cost.op", "Operand"),
    "elementwise": ("rooftop.cost.op", "elementwise"),
    "explicit": ("rooftop.cost.op", "explicit"),
    "matmul": ("rooftop.cost.op", "matmul"),
    "reduction": ("rooftop.cost.op", "reduction"),
    "Efficiency": ("rooftop.cost.efficiency", "Efficiency"),
    "Estimate": ("rooftop.cost.roofline", "Estimate"),
    "roofline": ("rooftop.cost.roofline", "roofline"),
    "InvalidConfigError": ("rooftop.errors", "InvalidConfigError"),
    "ParseError": ("rooftop.errors", "ParseError"),
    "RooftopError": ("rooftop.errors", "RooftopError"),
    "ShardingError": ("rooftop.errors", "ShardingError"),
    "UnknownNameError": ("rooftop.errors", "UnknownNameError"),
    "get_chip": ("rooftop.hardware.catalog", "get_chip"),
    "load_chips": ("rooftop.hardware.catalog", "load_chips"),
    "Chip": ("rooftop.hardware.chip", "Chip"),
    "Mesh": ("rooftop.hardware.topology", "Mesh"),
    "Topology": ("rooftop.hardware.topology", "Topology"),
    "make_mesh": ("rooftop.hardware.topology", "make_mesh"),
    "parse_topology": ("rooftop.hardware.topology", "parse_topology"),
    "get_model": ("rooftop.model.catalog", "get_model"),
    "load_hf_config": ("rooftop.model.hf", "load_hf_config"),
    "Dtypes": ("rooftop.model.workload", "Dtypes"),
    "TransformerConfig": ("rooftop.model.config", "TransformerConfig"),
    "Workload": ("rooftop.model.workload", "Workload"),
    "layer_costs": ("rooftop.model.transformer", "layer_costs"),
    "model_costs": ("rooftop.model.passes", "model_costs"),
    "Parallelism": ("rooftop.plan.train.layout", "Parallelism"),
    "search_training": ("rooftop.plan.train.search", "search"),
    "plan_training": ("rooftop.plan.train.plan", "plan_training"),
    "TrainingSetup": ("rooftop.plan.train.step", "TrainingSetup"),
    "ServingRequest": ("rooftop.plan.serve.sweep", "ServingRequest"),
    "plan_serving": ("rooftop.plan.serve.sweep", "plan_serving"),
    "parse_hlo": ("rooftop.analysis.hlo.parse", "parse_hlo"),
    "parse_hlo_file": ("rooftop.analysis.hlo.parse", "parse_hlo_file"),
    "analyze_hlo": ("rooftop.analysis.hlo.analyze", "analyze"),
    "load_trace": ("rooftop.analysis.trace.load", "load_trace"),
    "profile_report": ("rooftop.analysis.profile", "profile_report"),
    "roofline_figure": ("rooftop.report.plot", "roofline_figure"),
    "train_figure": ("rooftop.report.train", "train_figure"),
    "serve_figure": ("rooftop.report.serve_chart", "serve_figure"),
    "hlo_figure": ("rooftop.report.hlo", "hlo_figure"),
    "profile_figure": ("rooftop.report.profile", "profile_figure"),
}

if TYPE_CHECKING:
    from rooftop.analysis.hlo.analyze import analyze as analyze_hlo
    from rooftop.analysis.hlo.parse import parse_hlo, parse_hlo_file
    from rooftop.analysis.profile import profile_report
    from rooftop.analysis.trace.load import load_trace
    from rooftop.cost.cost import Comm, Cost, CostTree
    from rooftop.cost.efficiency import Efficiency
    from rooftop.cost.op import Operand, elementwise, explicit, matmul, reduction
    from rooftop.cost.roofline import Estimate, roofline
    from rooftop.errors import InvalidConfigError, ParseError, RooftopError, ShardingError, UnknownNameError
    from rooftop.hardware.catalog import get_chip, load_chips
    from rooftop.hardware.chip import Chip
    from rooftop.hardware.topology import Mesh, Topology, make_mesh, parse_topology
    from rooftop.model.catalog import get_model
    from rooftop.model.config import TransformerConfig
    from rooftop.model.hf import load_hf_config
    from rooftop.model.passes import model_costs
    from rooftop.model.transformer import layer_costs
    from rooftop.model.workload import Dtypes, Workload
    from rooftop.plan.serve.sweep import ServingRequest, plan_serving
    from rooftop.plan.train.layout import Parallelism
    from rooftop.plan.train.plan import plan_training
    from rooftop.plan.train.search import search as search_training
    from rooftop.plan.train.step import TrainingSetup
    from rooftop.report.hlo import hlo_figure
    from rooftop.report.plot import roofline_figure
    from rooftop.report.profile import profile_figure
    from rooftop.report.serve_chart import serve_figure
    from rooftop.report.train import train_figure


def __getattr__(name: str) -> Any:
    """Import a public name from its module on first use and keep it in this namespace."""
    try:
        module, attr = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module 'rooftop' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), attr)
    globals()[name] = value
    return value


#: the module that registers the notebook views of the result types (rooftop.display's registry)
_VIEWS_MODULE = "rooftop.report.notebook"


def _load_views() -> None:
    """Register the notebook views: called by ``rooftop.display`` when a result is shown before report/ was
    imported. The package root wires the layers together (as ``_EXPORTS`` does), so no module below report/
    names it."""
    importlib.import_module(_VIEWS_MODULE)


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})


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
    "ServingRequest",
    "ShardingError",
    "Topology",
    "TrainingSetup",
    "TransformerConfig",
    "UnknownNameError",
    "Workload",
    "__version__",
    "analyze_hlo",
    "elementwise",
    "explicit",
    "get_chip",
    "get_model",
    "hlo_figure",
    "layer_costs",
    "load_chips",
    "load_hf_config",
    "load_trace",
    "make_mesh",
    "matmul",
    "model_costs",
    "parse_hlo",
    "parse_hlo_file",
    "parse_topology",
    "plan_serving",
    "plan_training",
    "profile_figure",
    "profile_report",
    "reduction",
    "roofline",
    "roofline_figure",
    "search_training",
    "serve_figure",
    "train_figure",
]
