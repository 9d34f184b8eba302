"""Small compile-time tables a kernel reads (gather indices, resize taps), kept in its module.

Weight preparers hand the builder float tensors; integer index tables and per-position
interpolation weights belong to the code instead, so a kernel makes them here as private,
read-only globals next to its function.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir

from compiler.codegen.kernel import I32, Kernel


def table(k: Kernel, tag: str, values: np.ndarray, ty: ir.Type = I32) -> ir.Value:
    """A read-only global holding `values` (flattened) as `ty`, as an element pointer."""
    flat = np.asarray(values).reshape(-1)
    py = float if isinstance(ty, ir.FloatType) else int
    array_ty = ir.ArrayType(ty, len(flat))
    gv = ir.GlobalVariable(k.fn.module, array_ty, k.fn.module.get_unique_name(
        f"{k.fn.name}.{tag}"))
    gv.initializer = ir.Constant(array_ty, [ir.Constant(ty, py(v)) for v in flat])
    gv.global_constant = True
    gv.linkage = "internal"
    gv.unnamed_addr = True
    return gv.bitcast(ir.PointerType(ty))
