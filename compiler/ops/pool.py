"""pool operators."""
