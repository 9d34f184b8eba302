"""int8 TFLite models for the hostile-model campaign: built here, then mutated by field or byte.

Built models are short chains of int8 builtins written with `tests.tflite.writer` (CONV_2D,
DEPTHWISE_CONV_2D, FULLY_CONNECTED, ADD, MUL, the pools, SOFTMAX, LOGISTIC, RESHAPE, MEAN,
PAD, CONCATENATION) with the parameters TFLite Micro accepts, extreme ones now and then.
Field-level mutations read any .tflite (built or MLPerf's) into the schema's object API (the
generated schema inside the tflite-micro wheel), change one field and write it back; byte-level
ones flip, set, cut, delete and splice bytes as `tests/tflite/test_tflite_fuzz.py` does.
"""

from __future__ import annotations

import struct

import numpy as np

from tests.quant_fuzz.mutations import is_extreme
from tests.quant_fuzz.qoperator import EXTREME_SCALES, INT32_EDGES
from tests.tflite.writer import Model, Op, T, write

SAME, VALID = 0, 1


class TBuilder:
    """Tensors and operators of one int8 model being built."""

    def __init__(self, rng: np.random.Generator):
        self.rng = rng
        self.tensors: list[T] = []
        self.ops: list[Op] = []
        self.inputs: list[int] = []
        self.notes: list[str] = []

    def chance(self, p: float) -> bool:
        return bool(self.rng.random() < p)

    def pick(self, options):
        return options[int(self.rng.integers(len(options)))]

    def scale(self) -> float:
        if self.chance(0.05):
            self.notes.append("extreme scale")
            return float(np.float32(self.pick(EXTREME_SCALES[:3] + EXTREME_SCALES[5:])))
        return float(np.float32(self.rng.uniform(0.004, 0.2)))

    def tensor(self, shape, scale=None, zp=None, data=None, dtype="int8", **quant) -> int:
        zp = int(self.rng.integers(-128, 128)) if zp is None else zp
        scale = self.scale() if scale is None else scale
        self.tensors.append(T(f"t{len(self.tensors)}", tuple(int(d) for d in shape), dtype,
                              data, scale=quant.pop("scales", [scale]),
                              zero_point=quant.pop("zero_points", [zp]), **quant))
        return len(self.tensors) - 1

    def weights(self, shape, axis: int, count: int) -> tuple[int, list]:
        scales = [self.scale() for _ in range(count)]
        data = self.rng.integers(-127, 128, shape)
        return self.tensor(shape, data=data, scales=scales, zero_points=[0] * count,
                           axis=axis), scales

    def bias(self, count: int, scales: list, x: int) -> int:
        values = self.rng.integers(-3000, 3000, count)
        if self.chance(0.12):
            self.notes.append("bias near the int32 limits")
            values = np.where(self.rng.random(count) < 0.6,
                              self.rng.choice(INT32_EDGES, count), values)
        in_scale = self.tensors[x].scale[0]
        return self.tensor((count,), data=values.astype(np.int32), dtype="int32",
                           scales=[float(np.float32(in_scale * s)) for s in scales],
                           zero_points=[0] * count)

    def shape(self, index: int) -> tuple:
        return self.tensors[index].shape

    def op(self, builtin: str, inputs, options=None, out_shape=None, scale=None, zp=None,
           same_as: int | None = None) -> int:
        if same_as is not None:
            scale, zp = self.tensors[same_as].scale[0], self.tensors[same_as].zero_point[0]
        y = self.tensor(out_shape, scale, zp)
        self.ops.append(Op(builtin, list(inputs), [y], options))
        self.notes.append(builtin)
        return y


def _window(b: TBuilder, h: int, w: int, kernel: tuple[int, int], dilation: int = 1):
    padding, stride = b.pick([SAME, VALID]), int(b.rng.integers(1, 3))
    if padding == SAME:
        return padding, stride, (-(-h // stride), -(-w // stride))
    eff = [(k - 1) * dilation + 1 for k in kernel]
    out = ((h - eff[0]) // stride + 1, (w - eff[1]) // stride + 1)
    return (padding, stride, out) if min(out) >= 1 else (SAME, stride,
                                                         (-(-h // stride), -(-w // stride)))


def conv(b: TBuilder, x: int) -> int | None:
    _, h, w, c = b.shape(x)
    depthwise = b.chance(0.4)
    k = (int(b.rng.integers(1, 4)), int(b.rng.integers(1, 4)))
    padding, stride, (oh, ow) = _window(b, h, w, k)
    activation = b.pick([0, 1, 3])
    if depthwise:
        m = int(b.rng.integers(1, 3))
        wt, scales = b.weights((1, *k, c * m), 3, c * m)
        options = ("DepthwiseConv2DOptions", {
            "Padding": padding, "StrideH": stride, "StrideW": stride, "DepthMultiplier": m,
            "FusedActivationFunction": activation, "DilationHFactor": 1, "DilationWFactor": 1})
        cout, builtin = c * m, "DEPTHWISE_CONV_2D"
    else:
        cout = int(b.rng.integers(1, 7))
        wt, scales = b.weights((cout, *k, c), 0, cout)
        options = ("Conv2DOptions", {"Padding": padding, "StrideH": stride, "StrideW": stride,
                                     "FusedActivationFunction": activation,
                                     "DilationHFactor": 1, "DilationWFactor": 1})
        builtin = "CONV_2D"
    return b.op(builtin, [x, wt, b.bias(cout, scales, x)], options, (1, oh, ow, cout))


def fully_connected(b: TBuilder, x: int) -> int | None:
    depth = int(np.prod(b.shape(x)[1:]))
    units = int(b.rng.integers(1, 9))
    count = units if b.chance(0.4) else 1
    wt, scales = b.weights((units, depth), 0, count)
    bias = b.bias(units, scales * units if count == 1 else scales, x) if b.chance(0.8) else -1
    return b.op("FULLY_CONNECTED", [x, wt, bias], ("FullyConnectedOptions", {
        "FusedActivationFunction": b.pick([0, 1])}), (1, units))


def binary(b: TBuilder, x: int) -> int | None:
    shape = b.shape(x)
    other_shape = b.pick([shape, (1,) * (len(shape) - 1) + (shape[-1],)])
    data = b.rng.integers(-128, 128, other_shape) if b.chance(0.5) else None
    other = b.tensor(other_shape, data=data)
    if data is None:
        b.inputs.append(other)
    builtin = b.pick(["ADD", "MUL"])
    options = ("AddOptions" if builtin == "ADD" else "MulOptions",
               {"FusedActivationFunction": b.pick([0, 1])})
    return b.op(builtin, [x, other], options, shape)


def pool(b: TBuilder, x: int) -> int | None:
    _, h, w, c = b.shape(x)
    k = (int(b.rng.integers(1, min(h, 3) + 1)), int(b.rng.integers(1, min(w, 3) + 1)))
    padding, stride, (oh, ow) = _window(b, h, w, k)
    builtin = b.pick(["AVERAGE_POOL_2D", "MAX_POOL_2D"])
    return b.op(builtin, [x], ("Pool2DOptions", {
        "Padding": padding, "StrideH": stride, "StrideW": stride, "FilterHeight": k[0],
        "FilterWidth": k[1], "FusedActivationFunction": 0}), (1, oh, ow, c), same_as=x)


def activation(b: TBuilder, x: int) -> int | None:
    builtin = b.pick(["SOFTMAX", "LOGISTIC"])
    options = ("SoftmaxOptions", {"Beta": 1.0}) if builtin == "SOFTMAX" else None
    return b.op(builtin, [x], options, b.shape(x), scale=1 / 256, zp=-128)


def reshape(b: TBuilder, x: int) -> int | None:
    flat = (1, int(np.prod(b.shape(x)[1:])))
    shape = b.tensor((2,), data=np.array(flat, np.int32), dtype="int32", scales=None,
                     zero_points=None)
    return b.op("RESHAPE", [x, shape], None, flat, same_as=x)


def mean(b: TBuilder, x: int) -> int | None:
    _, _, _, c = b.shape(x)
    axes = b.tensor((2,), data=np.array([1, 2], np.int32), dtype="int32", scales=None,
                    zero_points=None)
    return b.op("MEAN", [x, axes], ("ReducerOptions", {"KeepDims": True}), (1, 1, 1, c))


def pad(b: TBuilder, x: int) -> int | None:
    _, h, w, c = b.shape(x)
    p = b.rng.integers(0, 3, (4, 2))
    p[0] = p[3] = 0
    pads = b.tensor((4, 2), data=p.astype(np.int32), dtype="int32", scales=None,
                    zero_points=None)
    return b.op("PAD", [x, pads], None, (1, h + p[1].sum(), w + p[2].sum(), c), same_as=x)


def concat(b: TBuilder, x: int) -> int | None:
    shape = b.shape(x)
    extra = (*shape[:-1], int(b.rng.integers(1, 4)))
    q = b.tensors[x]
    other = b.tensor(extra, q.scale[0], q.zero_point[0], data=b.rng.integers(-128, 128, extra))
    return b.op("CONCATENATION", [x, other], ("ConcatenationOptions", {
        "Axis": len(shape) - 1}), (*shape[:-1], shape[-1] + extra[-1]), same_as=x)


IMAGE = [conv, conv, conv, pool, binary, activation, mean, pad, concat, fully_connected,
         reshape]
ROWS = [fully_connected, fully_connected, binary, activation, concat]


def built_model(rng: np.random.Generator) -> tuple[bytes, list[str]]:
    """A chain of one to three int8 builtins (see the module docstring)."""
    b = TBuilder(rng)
    if b.chance(0.7):
        x = b.tensor((1, int(rng.integers(1, 9)), int(rng.integers(1, 9)),
                      int(rng.integers(1, 5))))
    else:
        x = b.tensor((1, int(rng.integers(1, 17))))
    b.inputs.insert(0, x)
    for _ in range(int(rng.integers(1, 4))):
        for _attempt in range(4):
            y = b.pick(IMAGE if len(b.shape(x)) == 4 else ROWS)(b, x)
            if y is not None:
                x = y
                break
    return write(Model(b.tensors, b.ops, b.inputs, [x])), b.notes


# -- field-level mutations, on the schema's object API ---------------------------------------

def _schema():
    from tflite_micro.tensorflow.lite.micro.python import schema_py_generated

    return schema_py_generated


def read(data: bytes):
    """The model as the schema's mutable objects (ModelT)."""
    fb = _schema()
    return fb.ModelT.InitFromObj(fb.Model.GetRootAsModel(data, 0))


def pack(model) -> bytes:
    import flatbuffers

    builder = flatbuffers.Builder(1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


def _quantized(sub):
    return [t for t in sub.tensors if t.quantization is not None
            and t.quantization.scale is not None and len(t.quantization.scale)]


def _builtin(model, op) -> int:
    code = model.operatorCodes[op.opcodeIndex]
    return max(code.builtinCode, code.deprecatedBuiltinCode)


def f_quant(model, sub, rng) -> tuple[str, str] | None:
    tensors = _quantized(sub)
    if not tensors:
        return None
    t = tensors[int(rng.integers(len(tensors)))]
    q = t.quantization
    kind, note = int(rng.integers(4)), ""
    if kind == 0:
        q.scale = np.full(len(q.scale), rng.choice([0.0, -0.5, np.nan, np.inf, 1e-40, 1e30]),
                          np.float32)
        note = " (extreme scale)" if is_extreme(q.scale[0]) else ""
    elif kind == 1:
        q.zeroPoint = np.full(len(q.scale), rng.choice([-129, 128, 255, -300, 5]), np.int64)
    elif kind == 2:
        q.scale = np.resize(np.asarray(q.scale, np.float32), len(q.scale) + 1)
    else:
        q.quantizedDimension = int(rng.choice([-1, 3, 4, 9]))
    return (f"quantization of tensor {t.name.decode(errors='replace')} changed ({kind})"
            f"{note}", "")


def f_fc_zero_point(model, sub, rng) -> tuple[str, str] | None:
    fc = [op for op in sub.operators if _builtin(model, op) == 9 and len(op.inputs) > 1]
    if not fc:
        return None
    t = sub.tensors[fc[int(rng.integers(len(fc)))].inputs[1]]
    if t.quantization is None or t.quantization.zeroPoint is None:
        return None
    t.quantization.zeroPoint = np.full(len(t.quantization.zeroPoint), 3, np.int64)
    return (f"FULLY_CONNECTED weights {t.name.decode(errors='replace')} given zero point 3",
            "FULLY_CONNECTED weights with a non-zero zero point")


def f_version(model, sub, rng) -> tuple[str, str] | None:
    code = model.operatorCodes[int(rng.integers(len(model.operatorCodes)))]
    code.version = 99
    return f"opcode {max(code.builtinCode, code.deprecatedBuiltinCode)} version 99", \
        "an operator version no TFLite kernel has"


def f_bias(model, sub, rng) -> tuple[str, str] | None:
    found = [t for t in sub.tensors if t.type == 2 and model.buffers[t.buffer].data is not None
             and len(model.buffers[t.buffer].data) >= 4]
    if not found:
        return None
    t = found[int(rng.integers(len(found)))]
    values = np.frombuffer(bytes(model.buffers[t.buffer].data), np.int32).copy()
    values[rng.random(values.size) < 0.6] = rng.choice(INT32_EDGES)
    model.buffers[t.buffer].data = np.frombuffer(values.tobytes(), np.uint8)
    return f"int32 tensor {t.name.decode(errors='replace')} pushed to the int32 limits", ""


def f_weights(model, sub, rng) -> tuple[str, str] | None:
    found = [t for t in sub.tensors if t.type == 9 and model.buffers[t.buffer].data is not None
             and len(model.buffers[t.buffer].data)]
    if not found:
        return None
    t = found[int(rng.integers(len(found)))]
    data = np.asarray(model.buffers[t.buffer].data, np.uint8).copy()
    data[...] = 0x80 if rng.random() < 0.3 else rng.integers(0, 256, data.size)
    model.buffers[t.buffer].data = data
    return f"int8 constant {t.name.decode(errors='replace')} replaced", ""


def f_shape(model, sub, rng) -> tuple[str, str] | None:
    t = sub.tensors[int(rng.integers(len(sub.tensors)))]
    if t.shape is None or not len(t.shape):
        return None
    shape = np.asarray(t.shape, np.int32).copy()
    shape[int(rng.integers(shape.size))] = int(rng.choice([0, 1, 2, 3, -1, 100]))
    t.shape = shape
    return f"shape of {t.name.decode(errors='replace')} set to {shape.tolist()}", ""


def f_type(model, sub, rng) -> tuple[str, str] | None:
    t = sub.tensors[int(rng.integers(len(sub.tensors)))]
    was, t.type = t.type, int(rng.choice([0, 2, 3, 7, 9]))
    return f"type of {t.name.decode(errors='replace')} {was} -> {t.type}", ""


def f_option(model, sub, rng) -> tuple[str, str] | None:
    ops = [op for op in sub.operators if op.builtinOptions is not None]
    if not ops:
        return None
    options = ops[int(rng.integers(len(ops)))].builtinOptions
    fields = [k for k, v in vars(options).items() if isinstance(v, (int, float))]
    if not fields:
        return None
    key = fields[int(rng.integers(len(fields)))]
    value = getattr(options, key)
    if isinstance(value, bool):
        setattr(options, key, not value)
    elif isinstance(value, int):
        setattr(options, key, int(rng.choice([-1, 0, 2, 5, 7, 99])))
    else:
        setattr(options, key, float(rng.choice([0.0, -1.0, np.inf])))
    return f"option {key} of {type(options).__name__} set to {getattr(options, key)}", ""


def f_index(model, sub, rng) -> tuple[str, str] | None:
    op = sub.operators[int(rng.integers(len(sub.operators)))]
    if op.inputs is None or not len(op.inputs):
        return None
    inputs = np.asarray(op.inputs, np.int32).copy()
    inputs[int(rng.integers(inputs.size))] = int(rng.choice([-1, len(sub.tensors), 0, 1]))
    op.inputs = inputs
    return f"operator input index set to {inputs.tolist()}", ""


def f_builtin(model, sub, rng) -> tuple[str, str] | None:
    code = model.operatorCodes[int(rng.integers(len(model.operatorCodes)))]
    code.builtinCode = code.deprecatedBuiltinCode = int(rng.choice([0, 1, 3, 4, 9, 22, 25, 32]))
    return f"an opcode set to builtin {code.builtinCode}", ""


FIELD_MUTATIONS = [f_quant, f_quant, f_fc_zero_point, f_version, f_bias, f_weights, f_shape,
                   f_type, f_option, f_option, f_index, f_builtin]


def field_mutant(data: bytes, rng: np.random.Generator) -> tuple[bytes, list[str], str]:
    """One or two field mutations of `data`; the bytes, what was done and why it is invalid.

    A combination the schema's writer cannot encode (a value out of its field's range) is
    drawn again.
    """
    for _attempt in range(5):
        model = read(data)
        sub = model.subgraphs[0]
        done, invalid, wanted = [], "", int(rng.integers(1, 3))
        for _ in range(8):
            if len(done) == wanted or invalid:
                break
            mutation = FIELD_MUTATIONS[int(rng.integers(len(FIELD_MUTATIONS)))]
            try:
                result = mutation(model, sub, rng)
            except (IndexError, TypeError, AttributeError, ValueError):
                result = None  # an earlier mutation broke what this one reads
            if result is not None:
                done.append(result[0])
                invalid = invalid or result[1]
        try:
            return pack(model), done, invalid
        except (TypeError, ValueError, OverflowError, struct.error):
            continue
    return data, [], ""


def _constant_bytes(data: bytes) -> tuple[int, int] | None:
    """(offset, length) of the largest constant buffer of a readable model, else None."""
    try:
        model = read(data)
        largest = max((bytes(np.asarray(b.data, np.uint8)) for b in model.buffers
                       if b.data is not None), key=len, default=b"")
    except Exception:  # an unreadable model has no buffer to aim at
        return None
    offset = data.find(largest) if len(largest) >= 4 else -1
    return (offset, len(largest)) if offset >= 0 else None


def byte_mutant(data: bytes, rng: np.random.Generator) -> tuple[bytes, list[str]]:
    """One to four byte-level edits of `data`.

    Half the time only flips and sets, aimed at the constants' bytes now and then, which keep
    the model readable; else truncations, deletions and splices too, which mostly break it.
    """
    region = _constant_bytes(data) if rng.random() < 0.3 else None
    kinds = ["flip", "set"] if region or rng.random() < 0.4 else \
        ["flip", "set", "truncate", "delete", "splice"]
    data = bytearray(data)
    done = []
    for _ in range(int(rng.integers(1, 5))):
        if not data:
            break
        kind = kinds[int(rng.integers(len(kinds)))]
        pos = int(rng.integers(len(data)))
        if region is not None:
            pos = region[0] + int(rng.integers(region[1]))
        if kind == "flip":
            data[pos] ^= 1 << int(rng.integers(8))
        elif kind == "set":
            data[pos] = int(rng.choice([0x00, 0xFF, 0x7F, 0x80, 0x01, 0x10]))
        elif kind == "truncate":
            del data[pos:]
        elif kind == "delete":
            del data[pos:pos + int(rng.integers(1, 17))]
        else:
            data[pos:pos] = rng.integers(0, 256, int(rng.integers(1, 17)), np.uint8).tobytes()
        done.append(f"{kind} at {pos}")
    return bytes(data), done
