"""rooftop.report."""
