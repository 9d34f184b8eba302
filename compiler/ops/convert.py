"""convert operators."""
