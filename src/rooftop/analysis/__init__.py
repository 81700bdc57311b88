"""rooftop.analysis."""
