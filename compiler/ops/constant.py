"""constant operators."""
