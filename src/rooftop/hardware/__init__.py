"""rooftop.hardware."""
