"""rooftop.plan."""
