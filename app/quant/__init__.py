"""Quantization in the window: calibration, the document's recipe, ranges, the Quantization dock."""
