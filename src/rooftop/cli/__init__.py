"""rooftop.cli."""
