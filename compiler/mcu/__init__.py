"""Cortex-M firmware under QEMU: build a compiled network into an image, run it, count it.

`firmware` links a network's object with start-up code and a generated `main.c` for QEMU's
MPS2/MPS3 boards and runs it over semihosting; `counting` builds the project's QEMU plugin and
reads executed-instruction counts per layer from a run. Tests and `kiln bench --target` share
them.
"""
