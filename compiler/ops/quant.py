"""quant operators."""
