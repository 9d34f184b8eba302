"""The operator registry; importing this package registers every operator Kiln supports."""

# Each module registers its operators on import.
from compiler.ops import (  # noqa: F401
    activation,
    attention,
    constant,
    conv,
    convert,
    decoding,
    deform,
    elementwise,
    gather,
    image,
    index,
    kiln,
    layernorm,
    logic,
    loss,
    math,
    matmul,
    norm,
    pool,
    qdiv,
    qlinear,
    qlogsoftmax,
    qlstm,
    qnorm,
    qpool,
    qreduce,
    qresize,
    qsum,
    qtables,
    quant,
    recurrent,
    reduce,
    resize,
    select,
    shape,
    tensor,
)
from compiler.ops.registry import REQUIRED, Attr, OpDef, all_ops, get, lookup, register

__all__ = ["REQUIRED", "Attr", "OpDef", "all_ops", "get", "lookup", "register"]
