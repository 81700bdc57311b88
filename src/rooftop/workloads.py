"""Worked workloads for profiling exercises (needs the jax extra). See jaxlink/workloads.py."""

from rooftop.jaxlink.workloads import SHARDINGS, make_mesh, mock_transformer

__all__ = ["SHARDINGS", "make_mesh", "mock_transformer"]
