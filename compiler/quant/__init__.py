"""Integer arithmetic of quantized models: requantization rules and their parameters."""
