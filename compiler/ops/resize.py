"""resize operators."""
