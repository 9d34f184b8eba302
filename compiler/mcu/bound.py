"""The arithmetic bound of an int8 layer on a core: its products at the core's widest rate.

A DSP core (Cortex-M4, M7, M33) multiplies and adds two int16 pairs per SMLAD, Helium
(Cortex-M55) sixteen int8 products per VMLADAVA.S8, a scalar core one per MLA, so a layer of M
multiply-accumulates needs at least M / rate instructions for its products alone, before
any load, address or requantization. Instructions per MAC against 1 / rate say how far a
kernel is from that floor.
"""

from __future__ import annotations

from compiler.codegen.targets import DotProduct, Target
from compiler.ir.graph import Graph
from compiler.stats import node_macs

PRODUCTS_PER_INSTRUCTION = {DotProduct.DSP: 2, DotProduct.MVE: 16, DotProduct.SCALAR: 1}


def products_per_instruction(target: Target) -> int:
    """Multiply-accumulates one instruction of `target` can do at best (1 without SIMD)."""
    return PRODUCTS_PER_INSTRUCTION.get(target.int8_dot, 1)


def macs_by_name(graph: Graph) -> dict[str, int]:
    """Multiply-accumulates per node name (0 for a node that has none or cannot say)."""
    macs = node_macs(graph)
    return {n.name: int(macs.get(n.id) or 0) for n in graph.nodes}
