"""The kernel table: (operator, element type) -> emitter and weight preparer."""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np

from compiler.codegen.attention import emit_attention
from compiler.codegen.conv import conv_weights, emit_conv
from compiler.codegen.conv_direct import (
    emit_causal_conv,
    emit_conv_direct,
    emit_conv_integer_direct,
    emit_deform_conv,
    runtime_integer_weights,
    runtime_weights,
)
from compiler.codegen.conv_transpose import emit_col2im, emit_conv_transpose
from compiler.codegen.elementwise import SCALAR_OPS, emit_elementwise, emit_softmax
from compiler.codegen.fully_connected import (
    blocked_eligible,
    emit_fully_connected,
    fc_blocked_weights,
    fc_weights,
)
from compiler.codegen.gather import emit_gather
from compiler.codegen.gemm import emit_gemm
from compiler.codegen.grid_sample import emit_affine_grid, emit_grid_sample
from compiler.codegen.intbinary import emit_integer_binary
from compiler.codegen.kernel import Kernel
from compiler.codegen.linear_attention import emit_linear_attention
from compiler.codegen.logic import (
    emit_compare,
    emit_integer_extreme,
    emit_integer_unary,
    emit_is_inf,
    emit_logical,
    emit_where,
)
from compiler.codegen.loss import emit_loss
from compiler.codegen.lrn import emit_lrn
from compiler.codegen.matmul import emit_matmul
from compiler.codegen.movement import emit_bitcast, emit_concat, emit_copy, emit_transpose
from compiler.codegen.operands import constant_operands, refuse_runtime_parameters
from compiler.codegen.pad import emit_pad
from compiler.codegen.pool import avg_divisors_any, emit_pool_any
from compiler.codegen.pool_nd import emit_pool_nd
from compiler.codegen.power import emit_power
from compiler.codegen.qbinary import emit_qbinary, emit_table, table_weights
from compiler.codegen.qconcat import emit_qconcat, qconcat_tables
from compiler.codegen.qconv import emit_qconv, qconv_weights
from compiler.codegen.qconv_dot import (
    dot_eligible,
    emit_qconv_dot,
    emit_qconv_im2col,
    im2col_eligible,
    qconv_dot_weights,
    qconv_im2col_weights,
)
from compiler.codegen.qconv_lanes import emit_qconv_lanes, lane_dot_eligible, qconv_lanes_weights
from compiler.codegen.qdepthwise_dot import (
    depthwise_dot_eligible,
    emit_qdepthwise_dot,
    qdepthwise_dot_weights,
)
from compiler.codegen.qdiv import emit_int_div
from compiler.codegen.qelementwise import (
    emit_dequantize,
    emit_dynamic_quantize,
    emit_quantize,
    emit_quantize_general,
    general_parameters,
)
from compiler.codegen.qfully_connected import emit_qgemm, qgemm_weights
from compiler.codegen.qfully_connected_dot import (
    emit_qgemm_dot,
    fc_dot_eligible,
    qgemm_dot_weights,
)
from compiler.codegen.qfully_connected_lanes import (
    emit_qgemm_lanes,
    fc_lanes_eligible,
    qgemm_lanes_weights,
)
from compiler.codegen.qinteger import emit_conv_integer, emit_matmul_integer, integer_weights
from compiler.codegen.qlogsoftmax import emit_int_log_softmax
from compiler.codegen.qlstm import emit_int_lstm_step
from compiler.codegen.qmatmul_general import emit_qlinear_matmul_general, runtime_b
from compiler.codegen.qnorm import emit_int_l2_normalize
from compiler.codegen.qpool import emit_qaverage_pool, emit_qglobal_average_pool, qaverage_divisors
from compiler.codegen.qreduce import emit_int_reduce
from compiler.codegen.qresize import emit_int_resize_bilinear
from compiler.codegen.qsoftmax import emit_qsoftmax, qsoftmax_tables
from compiler.codegen.qsum import emit_int_rescaled_sum, emit_int_squared_difference
from compiler.codegen.qsvdf import emit_int_svdf
from compiler.codegen.ranking import (
    emit_gather_nd,
    emit_one_hot,
    emit_scatter_nd,
    emit_tensor_scatter,
    emit_top_k,
)
from compiler.codegen.recurrent import emit_recurrent
from compiler.codegen.reduce import (
    emit_channel_norm,
    emit_det,
    emit_hardmax,
    emit_layer_norm,
    emit_lp_normalization,
    emit_reduce,
)
from compiler.codegen.resize import emit_resize
from compiler.codegen.rotary import emit_rotary
from compiler.codegen.select import (
    emit_arg_extreme,
    emit_cast,
    emit_center_crop_pad,
    emit_compress,
    emit_cumsum,
    emit_dropout,
    emit_expand,
    emit_gather_elements,
    emit_gather_runtime,
    emit_known_value,
    emit_scatter_elements,
    emit_trilu,
)
from compiler.codegen.slice import emit_slice, emit_split
from compiler.codegen.tabled import (
    CONSTANT_OPERANDS,
    REARRANGING,
    SHAPE_ONLY,
    emit_known_output,
    emit_rearranged,
)
from compiler.codegen.targets import Target
from compiler.errors import KilnError
from compiler.ir.graph import Constant, Node
from compiler.schedule.model import VIEW_OPS

# (operator, element type) -> (emitter, weight preparer). The preparer turns the node's
# constant inputs into the arrays the kernel reads, by input slot; slots it adds beyond the
# node's inputs hold compile-time tables.
Prepare = Callable[[Node], dict[int, np.ndarray]]


def _constants(node: Node) -> dict[int, np.ndarray]:
    return {i: v.data for i, v in enumerate(node.inputs) if isinstance(v, Constant)}


def _no_weights(node: Node) -> dict[int, np.ndarray]:
    """Nothing: every constant input (scales, zero points) becomes code."""
    return {}


def _data_only(node: Node) -> dict[int, np.ndarray]:
    """Slot 0 only, when constant: the emitter reads the other constants itself.

    Indices, pads, axes and scales are integers or parameters that become code, not weights.
    """
    return {0: node.inputs[0].data} if isinstance(node.inputs[0], Constant) else {}


def _with_operands(prepare: Prepare) -> Prepare:
    """`prepare`, plus the constant operands it leaves out, read from the weights as they are.

    An operand known at compile time (a constant added, joined, looked up, or a graph that is
    only a DequantizeLinear of an initializer) is read from the weights as any runtime operand
    is read from the arena.
    """
    def prepare_all(node: Node) -> dict[int, np.ndarray]:
        return {**constant_operands(node), **prepare(node)}
    return prepare_all


_CODE_TYPES = ("float32", "int8", "uint8", "int32", "int64", "bool")
EMITTERS_FLOAT_MOVES = {"Transpose": (emit_transpose, _constants),
                        "Concat": (emit_concat, _constants), "Pad": (emit_pad, _data_only),
                        "Slice": (emit_slice, _data_only), "Split": (emit_split, _data_only),
                        "Gather": (emit_gather, _data_only),
                        **{op: (emit_copy, _data_only) for op in (*VIEW_OPS, "Identity")}}
EMITTERS: dict[tuple[str, str], tuple[Callable[[Kernel], None], Prepare]] = {
    ("FullyConnected", "float32"): (emit_fully_connected,
                                    lambda n: {**_constants(n), 1: fc_weights(n)}),
    ("Conv", "float32"): (emit_conv, lambda n: {**_constants(n), 1: conv_weights(n)}),
    ("MaxPool", "float32"): (emit_pool_any, _constants),
    ("AveragePool", "float32"): (emit_pool_any, avg_divisors_any),
    ("Transpose", "float32"): (emit_transpose, _constants),
    ("Concat", "float32"): (emit_concat, _constants),
    ("FusedElementwise", "float32"): (emit_elementwise, _constants),
    ("Softmax", "float32"): (emit_softmax, _constants),
    ("LogSoftmax", "float32"): (emit_softmax, _constants),
    ("LRN", "float32"): (emit_lrn, _constants),
    ("Gather", "float32"): (emit_gather, _data_only),
    ("Pad", "float32"): (emit_pad, _data_only),
    ("Resize", "float32"): (emit_resize, _data_only),
    ("MatMul", "float32"): (emit_matmul, _constants),
    ("Slice", "float32"): (emit_slice, _data_only),
    ("Split", "float32"): (emit_split, _data_only),
    **{(op, "float32"): (emit_copy, _data_only) for op in (*VIEW_OPS, "Identity")},
    **{(op, "float32"): (emit_reduce, _data_only)
       for op in ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
                  "ReduceL2", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp")},
    **{(op, dtype): (emit_reduce, _data_only)
       for op in ("ReduceMax", "ReduceMin") for dtype in ("int8", "uint8", "bool")},
    **{(op, "float32"): (emit_elementwise, _constants) for op in SCALAR_OPS},
    **{(op, dtype): (emit_qgemm, qgemm_weights)
       for op in ("QGemm", "QLinearMatMul") for dtype in ("int8", "uint8")},
    **{("QLinearConv", dtype): (emit_qconv, qconv_weights) for dtype in ("int8", "uint8")},
    **{("MaxPool", dtype): (emit_pool_any, _constants) for dtype in ("int8", "uint8")},
    **{(op, dtype): (emit_qbinary, _no_weights)
       for op in ("QLinearAdd", "QLinearSub", "QLinearMul") for dtype in ("int8", "uint8")},
    **{("QLinearGlobalAveragePool", dtype): (emit_qglobal_average_pool, _no_weights)
       for dtype in ("int8", "uint8")},
    **{("QLinearAveragePool", dtype): (emit_qaverage_pool, qaverage_divisors)
       for dtype in ("int8", "uint8")},
    **{("QLinearConcat", dtype): (emit_qconcat, qconcat_tables) for dtype in ("int8", "uint8")},
    **{("QLinearSoftmax", dtype): (emit_qsoftmax, qsoftmax_tables)
       for dtype in ("int8", "uint8")},
    **{(op, dtype): (emit_table, table_weights) for op in ("IntLookupTable",
                                                           "QLinearLeakyRelu", "QLinearSigmoid")
       for dtype in ("int8", "uint8")},
    ("ConvInteger", "int32"): (emit_conv_integer, integer_weights),
    ("MatMulInteger", "int32"): (emit_matmul_integer, integer_weights),
    # Moving values is the same code for any element type.
    **{(op, dtype): EMITTERS_FLOAT_MOVES[op] for op in EMITTERS_FLOAT_MOVES
       for dtype in ("int8", "uint8", "int32")},
    **{("QuantizeLinear", dtype): (emit_quantize, _no_weights) for dtype in ("int8", "uint8")},
    ("DequantizeLinear", "float32"): (emit_dequantize, _no_weights),
    # Bools are bytes: comparisons and logic write them, Where and data movement read them.
    **{(op, "bool"): (emit_compare, _constants)
       for op in ("Equal", "Greater", "Less", "GreaterOrEqual", "LessOrEqual")},
    **{(op, "bool"): (emit_logical, _constants) for op in ("And", "Or", "Xor", "Not")},
    **{("Where", dtype): (emit_where, _constants)
       for dtype in ("float32", "int8", "uint8", "int32", "int64", "bool")},
    **{(op, "bool"): EMITTERS_FLOAT_MOVES[op] for op in EMITTERS_FLOAT_MOVES},
    **{(op, dtype): (emit_arg_extreme, _constants)
       for op in ("ArgMax", "ArgMin") for dtype in ("int32", "int64")},
    **{(op, dtype): (emit_cast, _constants) for op in ("Cast", "CastLike")
       for dtype in _CODE_TYPES},
    **{("Expand", dtype): (emit_expand, _data_only) for dtype in _CODE_TYPES},
    **{(op, dtype): (emit_cumsum, _data_only) for op in ("CumSum", "CumProd")
       for dtype in ("float32", "int32", "int64")},
    **{(op, "int64"): (emit_known_value, _no_weights) for op in ("Shape", "Size")},
    **{("Dropout", dtype): (emit_dropout, _data_only) for dtype in _CODE_TYPES},
    # Indices and updates may be constants too: read from the weights as the data is.
    **{(op, dtype): (emit, _constants) for op, emit in (
        ("GatherElements", emit_gather_elements), ("ScatterElements", emit_scatter_elements),
        ("Scatter", emit_scatter_elements)) for dtype in _CODE_TYPES},
    **{(op, dtype): (emit, _data_only) for op, emit in (
        ("CenterCropPad", emit_center_crop_pad), ("Compress", emit_compress))
       for dtype in _CODE_TYPES},
    **{(op, dtype): (emit_integer_binary, _constants)
       for op in ("Add", "Sub", "Mul", "Div", "Mod", "BitShift", "BitwiseAnd", "BitwiseOr",
                  "BitwiseXor") for dtype in ("int8", "uint8", "int32", "int64")},
    **{(op, "float32"): (emit_layer_norm, _constants)
       for op in ("LayerNormalization", "RMSNormalization")},
    ("LpNormalization", "float32"): (emit_lp_normalization, _constants),
    ("Hardmax", "float32"): (emit_hardmax, _constants),
    ("Attention", "float32"): (emit_attention, _constants),
    ("ConvTranspose", "float32"): (emit_conv_transpose, _constants),
    ("Col2Im", "float32"): (emit_col2im, _data_only),
    ("CausalConvWithState", "float32"): (emit_causal_conv, _constants),
    ("RotaryEmbedding", "float32"): (emit_rotary, _constants),
    ("LinearAttention", "float32"): (emit_linear_attention, _constants),
    ("GridSample", "float32"): (emit_grid_sample, _constants),
    ("AffineGrid", "float32"): (emit_affine_grid, _data_only),
    ("Det", "float32"): (emit_det, _data_only),
    ("DeformConv", "float32"): (emit_deform_conv, _constants),
    **{("TensorScatter", dtype): (emit_tensor_scatter, _constants) for dtype in _CODE_TYPES},
    **{(op, "float32"): (emit_channel_norm, _constants)
       for op in ("InstanceNormalization", "GroupNormalization")},
    **{("GatherND", dtype): (emit_gather_nd, _constants) for dtype in _CODE_TYPES},
    **{("BitCast", dtype): (emit_bitcast, _data_only) for dtype in _CODE_TYPES},
    ("DynamicQuantizeLinear", "uint8"): (emit_dynamic_quantize, _no_weights),
    **{("Pow", dtype): (emit_power, _constants) for dtype in ("int32", "int64")},
    **{(op, "bool"): (emit_is_inf, _constants) for op in ("IsInf", "IsNaN")},
    **{(op, dtype): (emit_integer_unary, _constants) for op in ("BitwiseNot", "Clip")
       for dtype in ("int8", "uint8", "int32", "int64")},
    **{(op, "float32"): (emit_recurrent, _constants) for op in ("RNN", "GRU", "LSTM")},
    **{(op, dtype): (emit, _constants) for op, emit in (
        ("TopK", emit_top_k), ("OneHot", emit_one_hot), ("ScatterND", emit_scatter_nd))
       for dtype in _CODE_TYPES},
    **{(op, dtype): (emit_rearranged, _data_only) for op in REARRANGING for dtype in _CODE_TYPES},
    **{(op, dtype): (emit_known_output, _no_weights)
       for op in (*CONSTANT_OPERANDS, *SHAPE_ONLY) for dtype in _CODE_TYPES},
    **{("Gemm", dtype): (emit_gemm, _constants) for dtype in ("float32", "int32", "int64")},
    **{(op, "float32"): (emit_loss, _constants)
       for op in ("NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss")},
    **{("Trilu", dtype): (emit_trilu, _data_only) for dtype in _CODE_TYPES},
    **{(op, dtype): (emit_integer_extreme, _constants)
       for op in ("Max", "Min") for dtype in ("int8", "uint8", "int32", "int64")},
    **{(op, dtype): (emit, _no_weights)
       for op, emit in (("IntResizeBilinear", emit_int_resize_bilinear),
                        ("IntReduce", emit_int_reduce)) for dtype in ("int8", "uint8")},
    ("IntRescaledSum", "int8"): (emit_int_rescaled_sum, _no_weights),
    ("IntSquaredDifference", "int8"): (emit_int_squared_difference, _no_weights),
    ("IntL2Normalize", "int8"): (emit_int_l2_normalize, _no_weights),
    ("IntDiv", "int8"): (emit_int_div, _no_weights),
    ("IntLogSoftmax", "int8"): (emit_int_log_softmax, _no_weights),
    ("IntSVDF", "int8"): (emit_int_svdf, lambda n: {i: n.inputs[i].data for i in (1, 2, 3)}),
    ("IntLSTMStep", "int8"): (emit_int_lstm_step,
                              lambda n: {1: n.inputs[1].data, 2: n.inputs[2].data}),
}


# Kernels for what a target's instructions do best, tried before the table: (operator,
# whether the node and target suit it, emitter, weight preparer taking the target too).
SPECIALIZED: list[tuple[str, Callable[[Node, Target | None], bool], Callable[[Kernel], None],
                        Callable[..., dict[int, np.ndarray]]]] = [
    ("QLinearConv", dot_eligible, emit_qconv_dot, qconv_dot_weights),
    ("QLinearConv", lane_dot_eligible, emit_qconv_lanes, qconv_lanes_weights),
    ("QLinearConv", depthwise_dot_eligible, emit_qdepthwise_dot, qdepthwise_dot_weights),
    ("QLinearConv", im2col_eligible, emit_qconv_im2col, qconv_im2col_weights),
    ("FullyConnected", blocked_eligible, emit_fully_connected, fc_blocked_weights),
    ("QGemm", fc_dot_eligible, emit_qgemm_dot, qgemm_dot_weights),
    ("QGemm", fc_lanes_eligible, emit_qgemm_lanes, qgemm_lanes_weights),
    ("QLinearMatMul", fc_lanes_eligible, emit_qgemm_lanes, qgemm_lanes_weights),
]


_CONVOLUTIONS = ("Conv", "QLinearConv", "ConvInteger")
_POOLS = ("MaxPool", "AveragePool", "QLinearAveragePool")


def refuse_unsupported_geometry(node: Node) -> None:
    """Refuse a convolution or pooling whose kernel cannot run its shape or layout.

    Their emitters index NHWC images (a 1-D pool as one of height 1): another rank would fail
    inside them, another layout would compute something else.
    """
    if node.op in _CONVOLUTIONS and node.output.type.rank != 4:
        axes = node.output.type.rank - 2
        why = ("a 1-D convolution runs as a 2-D one after the lower_conv_1d pass, which this "
               "pipeline did not run") if axes == 1 else (
            f"a {axes}-D convolution has no kernel (Kiln compiles 1-D and 2-D convolutions)")
        raise KilnError(f"cannot generate {node.op} {node.name}: {why}")
    if node.op in _POOLS:
        rank = node.inputs[0].type.rank
        if rank not in (3, 4):
            raise KilnError(f"cannot generate {node.op} {node.name}: pooling over {rank - 2} "
                            "spatial axes has no kernel (Kiln compiles 1-D and 2-D pooling)")
        if node.attrs.get("layout") != "NHWC":
            raise KilnError(f"cannot generate {node.op} {node.name}: its kernel pools "
                            "channels-last (NHWC) tensors, after the to_nhwc pass, which this "
                            "pipeline did not run")


def _emit_nothing(k: Kernel) -> None:
    """A node whose every output is empty (a dimension of 0) writes nothing."""


def _pooled_in_general(node: Node) -> bool:
    """A float pooling the 2-D channels-last kernels do not take (another rank or layout)."""
    if node.output.type.dtype != "float32":
        return False
    if node.op in ("LpPool", "GlobalMaxPool", "GlobalLpPool"):
        return True
    if node.op not in ("MaxPool", "AveragePool"):
        return False
    return (node.inputs[0].type.rank not in (3, 4) or node.attrs.get("layout") != "NHWC"
            or len(node.outputs) > 1)  # MaxPool's indices


def lookup(node: Node, target: Target | None = None
           ) -> tuple[Callable[[Kernel], None], Prepare]:
    """The emitter of `node` on `target`, or a KilnError naming the operator and element type.

    The weight arrangement goes with the emitter, so both come from one choice.
    """
    if all(v is None or v.type.numel == 0 for v in node.outputs):
        return _emit_nothing, _with_operands(_no_weights)
    if _pooled_in_general(node):
        return emit_pool_nd, _with_operands(_no_weights)
    if runtime_weights(node):
        return emit_conv_direct, _with_operands(_constants)
    if runtime_integer_weights(node):
        return emit_conv_integer_direct, _with_operands(_constants)
    if runtime_b(node):
        return emit_qlinear_matmul_general, _with_operands(_constants)
    if general_parameters(node):
        return emit_quantize_general, _with_operands(_constants)
    if node.op == "Pow" and node.inputs[0].type.dtype != node.inputs[1].type.dtype:
        return emit_power, _with_operands(_constants)  # float base, integer exponent
    refuse_unsupported_geometry(node)
    refuse_runtime_parameters(node)
    for op, suits, emit, prepare in SPECIALIZED:
        if node.op == op and suits(node, target):
            return emit, _with_operands(functools.partial(prepare, target=target))
    dtype = node.output.type.dtype
    if node.op == "Gather" and not isinstance(node.inputs[1], Constant):
        return emit_gather_runtime, _with_operands(_data_only)
    try:
        emit, prepare = EMITTERS[(node.op, dtype)]
    except KeyError:
        raise KilnError(f"cannot generate {node.op} for {dtype} (node {node.name})") from None
    return emit, _with_operands(prepare)
