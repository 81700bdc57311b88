"""rooftop.catalog."""
