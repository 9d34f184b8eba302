"""matmul operators."""
