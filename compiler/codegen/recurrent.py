"""RNN, GRU and LSTM as ONNX defines them: every direction, activation, clip and layout.

One direction at a time, one step at a time, one batch item at a time, as compiler/ops/
recurrent.py's reference steps: the gates' pre-activations (X W^T + H R^T + both biases, GRU's
hidden gate after its reset gate), clipped, activated; the new hidden state goes to a scratch
row until every unit has read the old one, the cell state updates in place. Items past their
sequence length stand still and write no output; a reversed item starts at its own last step.
The states and gates are small stack scratch (batch x gates x hidden floats).
"""

from __future__ import annotations

from llvmlite import ir

from compiler.codegen.elementwise import intrinsic, max_of, min_of
from compiler.codegen.kernel import I32, Kernel

F32 = ir.FloatType()
_GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
_DEFAULTS = {"RNN": ("Tanh",), "GRU": ("Sigmoid", "Tanh"), "LSTM": ("Sigmoid", "Tanh", "Tanh")}
# name -> (default alpha, default beta); None: the activation takes no such parameter.
_PARAMETERS = {"relu": (None, None), "tanh": (None, None), "sigmoid": (None, None),
               "affine": (1.0, 0.0), "leakyrelu": (0.01, None), "thresholdedrelu": (1.0, None),
               "scaledtanh": (1.0, 1.0), "hardsigmoid": (0.2, 0.5), "elu": (1.0, None),
               "softsign": (None, None), "softplus": (None, None)}
_DIRECTIONS = {"forward": 1, "reverse": 1, "bidirectional": 2}


def _activations(node) -> list[tuple[str, float, float]]:
    """(name, alpha, beta) per activation slot and direction, parameters consumed in order."""
    names = [n.lower() for n in (node.attrs["activations"] or ())] or \
        [n.lower() for n in _DEFAULTS[node.op]] * _DIRECTIONS[node.attrs["direction"]]
    alphas = list(node.attrs["activation_alpha"] or ())
    betas = list(node.attrs["activation_beta"] or ())
    out = []
    for name in names:
        alpha, beta = _PARAMETERS[name]
        a = alphas.pop(0) if alpha is not None and alphas else alpha
        b = betas.pop(0) if beta is not None and betas else beta
        out.append((name, a, b))
    return out


def _activate(k: Kernel, spec: tuple[str, float, float], x: ir.Value) -> ir.Value:
    b = k.b
    name, alpha, beta = spec

    def c(v):
        return F32(float(v))

    if name == "relu":
        return max_of(k, x, c(0))
    if name == "tanh":
        return intrinsic(k, "tanh", x)
    if name == "sigmoid":
        return b.fdiv(c(1), b.fadd(c(1), intrinsic(k, "exp", b.fneg(x))))
    if name == "affine":
        return b.fadd(b.fmul(c(alpha), x), c(beta))
    if name == "leakyrelu":
        return b.select(b.fcmp_ordered("<", x, c(0)), b.fmul(c(alpha), x), x)
    if name == "thresholdedrelu":
        return b.select(b.fcmp_ordered(">", x, c(alpha)), x, c(0))
    if name == "scaledtanh":
        return b.fmul(c(alpha), intrinsic(k, "tanh", b.fmul(c(beta), x)))
    if name == "hardsigmoid":
        return min_of(k, max_of(k, b.fadd(b.fmul(c(alpha), x), c(beta)), c(0)), c(1))
    if name == "elu":
        return b.select(b.fcmp_ordered("<", x, c(0)),
                        b.fmul(c(alpha), b.fsub(intrinsic(k, "exp", x), c(1))), x)
    if name == "softsign":
        return b.fdiv(x, b.fadd(c(1), intrinsic(k, "fabs", x)))
    # softplus: log(1 + e^x) without overflow
    return b.fadd(max_of(k, x, c(0)), intrinsic(k, "log", b.fadd(
        c(1), intrinsic(k, "exp", b.fneg(intrinsic(k, "fabs", x))))))


def emit_recurrent(k: Kernel) -> None:
    """Y, Y_h (and LSTM's Y_c), those the node asks for."""
    node, b = k.node, k.b
    op, a = node.op, node.attrs
    x_shape = node.inputs[0].type.shape
    batch_first = a["layout"] == 1
    steps, batch = (x_shape[1], x_shape[0]) if batch_first else x_shape[:2]
    features = x_shape[2]
    dirs, hidden = node.inputs[2].type.shape[0], node.inputs[2].type.shape[2]
    gates = _GATES[op]
    args = list(k.args) + [None] * (8 - len(k.args))
    x, w, r, bias, lengths, h0, c0, peep = args[:8]
    outs = list(k.outs) + [None] * (3 - len(k.outs))
    y, y_h, y_c = outs[:3]
    specs = _activations(node)
    per = len(_DEFAULTS[op])
    clip = a["clip"]
    h = k.alloca_array(F32, batch * hidden)
    c = k.alloca_array(F32, batch * hidden)
    fresh = k.alloca_array(F32, batch * hidden)
    pre = k.alloca_array(F32, gates * hidden)
    total = k.alloca(F32)

    def state_at(d, i, j):  # (dirs, batch, hidden) or (batch, dirs, hidden)
        return (k.index((i, dirs * hidden), (d, hidden), (j, 1)) if batch_first
                else k.index((d, batch * hidden), (i, hidden), (j, 1)))

    def dot(row_ptr, row, length, vector):
        b.store(F32(0.0), total)
        with k.loop(length) as m:
            b.store(b.fadd(b.load(total), b.fmul(k.load(row_ptr, k.index((row, length), (m, 1))),
                                                  vector(m))), total)
        return b.load(total)

    def clipped(v):
        if clip is None:
            return v
        return min_of(k, max_of(k, v, F32(-clip)), F32(clip))

    if y is not None:
        with k.loop(steps * dirs * batch * hidden) as i:
            k.store(F32(0.0), y, i)
    for d in range(dirs):
        reverse = a["direction"] == "reverse" or d == 1
        fns = specs[d * per:(d + 1) * per]
        w_d = b.gep(w, [I32(d * gates * hidden * features)])
        r_d = b.gep(r, [I32(d * gates * hidden * hidden)])
        with k.loop(batch) as i, k.loop(hidden) as j:
            at = k.index((i, hidden), (j, 1))
            k.store(k.load(h0, state_at(I32(d), i, j)) if h0 is not None else F32(0.0), h, at)
            k.store(k.load(c0, state_at(I32(d), i, j)) if c0 is not None else F32(0.0), c, at)

        def bias_of(row, second, d=d):
            if bias is None:
                return F32(0.0)
            start = d * 2 * gates * hidden + second * gates * hidden
            return k.load(bias, b.add(I32(start), row))

        with k.loop(steps) as s, k.loop(batch) as i:
            length = I32(steps)
            if lengths is not None:
                length = k.load(lengths, i)
            live = b.icmp_signed("<", s, length)
            t = b.sub(b.sub(length, I32(1)), s) if reverse else s
            t = b.select(live, t, I32(0))

            def x_at(m, t=t, i=i):
                return k.load(x, k.index((i, steps * features), (t, features), (m, 1))
                              if batch_first else
                              k.index((t, batch * features), (i, features), (m, 1)))

            def h_at(m, i=i):
                return k.load(h, k.index((i, hidden), (m, 1)))

            with k.loop(gates * hidden) as g:
                value = b.fadd(dot(w_d, g, features, x_at), bias_of(g, 0))
                if op != "GRU":
                    value = b.fadd(b.fadd(value, dot(r_d, g, hidden, h_at)), bias_of(g, 1))
                k.store(value, pre, g)
            if op == "GRU":  # update and reset gates first: the hidden gate reads the reset
                with k.loop(2 * hidden) as g:
                    value = b.fadd(b.fadd(k.load(pre, g), dot(r_d, g, hidden, h_at)),
                                   bias_of(g, 1))
                    k.store(_activate(k, fns[0], clipped(value)), pre, g)
            with k.loop(hidden) as j:
                at = k.index((i, hidden), (j, 1))
                old_h = k.load(h, at)
                if op == "RNN":
                    new = _activate(k, fns[0], clipped(k.load(pre, j)))
                elif op == "GRU":
                    z = k.load(pre, j)
                    reset = k.load(pre, b.add(j, I32(hidden)))
                    row = b.add(j, I32(2 * hidden))
                    if a["linear_before_reset"]:
                        recur = b.fmul(reset, b.fadd(dot(r_d, row, hidden, h_at),
                                                     bias_of(row, 1)))
                    else:
                        def reset_h(m, i=i):
                            return b.fmul(k.load(pre, b.add(m, I32(hidden))), h_at(m))
                        recur = b.fadd(dot(r_d, row, hidden, reset_h), bias_of(row, 1))
                    cand = _activate(k, fns[1], clipped(b.fadd(k.load(pre, row), recur)))
                    new = b.fadd(b.fmul(b.fsub(F32(1.0), z), cand), b.fmul(z, old_h))
                else:
                    old_c = k.load(c, at)

                    def peephole(slot, cell, j=j, d=d):
                        if peep is None:
                            return F32(0.0)
                        start = d * 3 * hidden + slot * hidden
                        return b.fmul(k.load(peep, b.add(j, I32(start))), cell)
                    gate_i = _activate(k, fns[0], clipped(b.fadd(k.load(pre, j),
                                                                 peephole(0, old_c))))
                    gate_f = _activate(k, fns[0], clipped(b.fadd(
                        k.load(pre, b.add(j, I32(2 * hidden))), peephole(2, old_c))))
                    if a["input_forget"]:
                        gate_f = b.fsub(F32(1.0), gate_i)
                    cell_in = _activate(k, fns[1], clipped(k.load(pre, b.add(j, I32(3 * hidden)))))
                    new_c = b.fadd(b.fmul(gate_f, old_c), b.fmul(gate_i, cell_in))
                    gate_o = _activate(k, fns[0], clipped(b.fadd(
                        k.load(pre, b.add(j, I32(hidden))), peephole(1, new_c))))
                    new = b.fmul(gate_o, _activate(k, fns[2], new_c))
                    k.store(b.select(live, new_c, old_c), c, at)
                k.store(b.select(live, new, old_h), fresh, at)
            with k.loop(hidden) as j:
                at = k.index((i, hidden), (j, 1))
                k.store(k.load(fresh, at), h, at)
                if y is not None:
                    place = (k.index((i, steps * dirs * hidden), (t, dirs * hidden), (j, 1),
                                     base=d * hidden) if batch_first else
                             k.index((t, dirs * batch * hidden), (i, hidden), (j, 1),
                                     base=d * batch * hidden))
                    current = k.load(y, place)
                    k.store(b.select(live, k.load(h, at), current), y, place)
        with k.loop(batch) as i, k.loop(hidden) as j:
            at = k.index((i, hidden), (j, 1))
            if y_h is not None:
                k.store(k.load(h, at), y_h, state_at(I32(d), i, j))
            if y_c is not None:
                k.store(k.load(c, at), y_c, state_at(I32(d), i, j))
