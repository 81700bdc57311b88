"""rooftop.jaxlink."""
