"""The quantization workflow: profile, calibrate, quantize, evaluate and tune.

It runs models through the compile driver, so it sits above it; the arithmetic it
shares with the compiler is in compiler.qmath.
"""
