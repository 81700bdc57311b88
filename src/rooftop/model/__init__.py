"""rooftop.model."""
