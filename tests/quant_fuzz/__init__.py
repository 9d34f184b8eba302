"""The hostile quantized-model campaign of `tests/test_quant_fuzz.py`: sources, oracle, checks."""
