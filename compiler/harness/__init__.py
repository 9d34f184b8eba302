"""Running compiled networks: benchmarks, the guarded host build, qemu-user for AArch64/RV32.

The benchmarks and the guarded build drive whole compilations, so the package sits above the
driver; the user-mode runner (`usermode`) needs only a compiled net but belongs with the other
runners.
"""
