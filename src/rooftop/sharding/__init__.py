"""rooftop.sharding."""
