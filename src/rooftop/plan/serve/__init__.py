"""Serving planner: layouts, prefill and decode phases, the sweep, disaggregation."""
