"""rooftop.cost."""
