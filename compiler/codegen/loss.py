"""NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss: one pass over the targets.

Scores are (N, C, D...) with the classes on axis 1 and labels (N, D...). Per target position the
label picks a class (an ignored label counts for nothing: weight 0, its class read as 0), the
softmax cross-entropy first takes the log-softmax over the classes (max, sum of exponentials,
log; written out as the second output when the node has it), and the loss is minus the picked
log-probability times the class weight. `none` stores each, `sum` adds them up, `mean` divides
by the summed weights (0 when every target is ignored), as compiler/ops/loss.py does.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir

from compiler.codegen.elementwise import intrinsic, max_of
from compiler.codegen.kernel import FAST, I32, Kernel

F32 = ir.FloatType()


def emit_loss(k: Kernel) -> None:
    """Either loss over every target position, reduced as the node says."""
    node, b = k.node, k.b
    shape = node.inputs[0].type.shape
    batch, classes = shape[0], shape[1]
    depth = int(np.prod(shape[2:], dtype=np.int64))
    softmax = node.op == "SoftmaxCrossEntropyLoss"
    reduction = node.attrs["reduction"]
    ignored = node.attrs["ignore_index"]
    weights = k.args[2] if len(node.inputs) > 2 and node.inputs[2] is not None else None
    total, weight_sum, top, exps = (k.alloca(F32) for _ in range(4))
    b.store(F32(0.0), total)
    b.store(F32(0.0), weight_sum)
    with k.loop(batch) as n, k.loop(depth) as d:
        def score(c):
            return k.index((n, classes * depth), (c, depth), (d, 1))

        label = k.load(k.args[1], k.index((n, depth), (d, 1)))
        label = b.trunc(label, I32) if label.type.width > 32 else label
        counted = (b.icmp_signed("!=", label, I32(ignored)) if ignored is not None
                   else ir.Constant(ir.IntType(1), 1))
        inside = b.and_(b.icmp_signed(">=", label, I32(0)),
                        b.icmp_signed("<", label, I32(classes)))
        safe = b.select(b.and_(counted, inside), label, I32(0))
        picked = k.load(k.args[0], score(safe))
        if softmax:
            b.store(F32(float("-inf")), top)
            with k.loop(classes) as c:
                b.store(max_of(k, k.load(k.args[0], score(c)), b.load(top)), top)
            b.store(F32(0.0), exps)
            with k.loop(classes) as c:
                e = intrinsic(k, "exp", b.fsub(k.load(k.args[0], score(c)), b.load(top)))
                b.store(b.fadd(b.load(exps), e, flags=FAST), exps)
            shift = b.fadd(b.load(top), intrinsic(k, "log", b.load(exps)))
            if len(k.outs) > 1:
                with k.loop(classes) as c:
                    k.store(b.fsub(k.load(k.args[0], score(c)), shift), k.outs[1], score(c))
            picked = b.fsub(picked, shift)
        weight = k.load(weights, safe) if weights is not None else F32(1.0)
        weight = b.select(counted, weight, F32(0.0))
        loss = b.fmul(b.fneg(picked), weight)
        if reduction == "none":
            k.store(loss, k.outs[0], k.index((n, depth), (d, 1)))
        else:
            b.store(b.fadd(b.load(total), loss), total)
            b.store(b.fadd(b.load(weight_sum), weight), weight_sum)
    if reduction == "sum":
        k.store(b.load(total), k.outs[0], I32(0))
    elif reduction == "mean":
        divisor = b.load(weight_sum)
        mean = b.fdiv(b.load(total), divisor)
        k.store(b.select(b.fcmp_ordered("==", divisor, F32(0.0)), F32(0.0), mean), k.outs[0],
                I32(0))
