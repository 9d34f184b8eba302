"""The integer arithmetic of quantized operators: rules, tables, fixed-point softmax, checks.

Ops, front ends, passes and kernels share it, so it sits below them all and imports nothing of
Kiln but the graph and its errors.
"""
