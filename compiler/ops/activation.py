"""Activation functions: element-wise, one input, output type equals input type."""

from __future__ import annotations

import numpy as np

from compiler.ops._util import same_as_input
from compiler.ops.registry import OpDef, register


def _relu(node, x):
    return np.maximum(x, np.zeros((), x.dtype))


register(OpDef("Relu", "activation", same_as_input, _relu, doc="max(x, 0)"))
