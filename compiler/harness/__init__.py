"""Running compiled networks: the host and Cortex-M benchmarks and the guarded host build.

They drive whole compilations, so they sit above the driver.
"""
