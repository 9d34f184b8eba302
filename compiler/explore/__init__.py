"""Exploring quantization and compile options for accuracy, speed and footprint on a target."""
