"""elementwise operators."""
