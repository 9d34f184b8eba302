"""conv operators."""
