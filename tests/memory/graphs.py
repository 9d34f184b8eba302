"""Small graphs for the memory tests, built with the pass tests' Builder."""

from __future__ import annotations

import numpy as np

from compiler.ir import Graph
from tests.passes.util import Builder


def residual_block() -> Graph:
    """x -> Conv+Relu (a) -> Conv+Relu (b) -> Conv (c); Add(a, c) with Relu -> Conv: ResNet."""
    b = Builder("residual")
    x = b.input("x", (1, 8, 8, 4))
    w = b.weights(4, 4, 3, 3, name="w")

    def conv(v, activation=""):
        return b.node("Conv", [v, w], kernel_shape=[3, 3], pads=[1, 1, 1, 1], layout="NHWC",
                      activation=activation)

    a = conv(x, "Relu")
    c = conv(conv(a, "Relu"))
    return b.build(conv(b.node("Add", [a, c], activation="Relu")))


def view_chain() -> Graph:
    """Relu -> Reshape -> Sigmoid, Concat with another Relu, Tanh in place, Reshape out."""
    b = Builder("views")
    x = b.input("x", (1, 16))
    r = b.node("Relu", [x])
    s = b.node("Reshape", [r, b.ints([1, 4, 4], name="shape")])
    t = b.node("Sigmoid", [s])
    u = b.node("Relu", [b.node("Reshape", [x, b.ints([1, 4, 4], name="shape2")])])
    cat = b.node("Concat", [t, u], axis=1)
    return b.build(b.node("Reshape", [b.node("Tanh", [cat]), b.ints([1, 32], name="flat")]))


def random_dag(choices: list[int], seed: int = 0) -> Graph:
    """A random DAG of element-wise ops, Adds, (nested) Concats, Reshapes and MatMuls."""
    rng = np.random.default_rng(seed)
    b = Builder("random")
    values = [b.input("x", (1, 8))]
    for k, c in enumerate(choices):
        # Half the time extend the newest value: chains are where in-place ops fire.
        pick = values[-1] if rng.random() < 0.5 else values[int(rng.integers(len(values)))]
        kind = c % 6
        if kind == 0:
            values.append(b.node("Relu", [pick]))
        elif kind == 1:
            other = values[int(rng.integers(len(values)))]
            if other.type.shape == pick.type.shape:
                values.append(b.node("Add", [pick, other]))
        elif kind == 2:
            values.append(b.node("Concat", [b.node("Sigmoid", [pick]), b.node("Tanh", [pick])],
                                 axis=1))
        elif kind == 3:
            n = int(np.prod(pick.type.shape))
            values.append(b.node("Reshape", [pick, b.ints([1, n], name=f"s{k}")]))
        elif kind == 5 and pick.type.shape[-1] <= 64:
            inner = b.node("Concat", [b.node("Tanh", [pick]), b.node("Relu", [pick])], axis=-1)
            values.append(b.node("Concat", [b.node("Sigmoid", [pick]), inner], axis=-1))
        else:
            w = b.weights(8, pick.type.shape[-1], name=f"w{k}")
            values.append(b.node("MatMul", [pick, b.const(np.asarray(w.data).T.copy(),
                                                          name=f"wt{k}")]))
    used = {id(v) for n in b.graph.nodes for v in n.inputs}
    outs = [v for v in values[1:] if id(v) not in used] or values[-1:]
    return b.build(*outs)
