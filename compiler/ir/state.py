"""Persistent state: values a model keeps from one inference to the next (streaming models).

A TFLite resource variable (VAR_HANDLE, READ_VARIABLE, ASSIGN_VARIABLE, initialized once by
CALL_ONCE) becomes a pair in the graph: a state input, read where the model reads the variable,
and a state output, the value the model last assigned, which becomes the state input of the
next inference. The graph's metadata lists the pairs and each variable's initial value; every
other part of Kiln sees ordinary inputs and outputs. The interpreter feeds a state input its
initial value when the caller does not (one inference from the start); `Stream` carries the
state from one inference to the next, as a bundle does in its state region.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from compiler.ir.graph import Graph, Placeholder

STATE_KEY = "state"  # graph.metadata key: the list of state variables


@dataclass(frozen=True)
class StateVariable:
    """One variable: its name in the model, its state input, the output written back to it."""

    name: str
    input: str
    output: str | None  # None: never assigned, it keeps its initial value
    initial: np.ndarray


def declare(graph: Graph, name: str, state_input: str, output: str | None,
            initial: np.ndarray) -> None:
    """Record a state variable in the graph's metadata (JSON-friendly: lists and names)."""
    entry = {"name": name, "input": state_input, "output": output,
             "dtype": str(initial.dtype), "shape": list(initial.shape),
             "initial": np.asarray(initial).reshape(-1).tolist()}
    graph.metadata.setdefault(STATE_KEY, []).append(entry)


def variables(graph: Graph) -> list[StateVariable]:
    """The graph's state variables, in the order they were declared."""
    found = []
    for entry in graph.metadata.get(STATE_KEY, ()):
        initial = np.asarray(entry["initial"], entry["dtype"]).reshape(entry["shape"])
        found.append(StateVariable(entry["name"], entry["input"], entry["output"], initial))
    return found


def state_inputs(graph: Graph) -> set[str]:
    """Names of the graph inputs that are state, not data the caller gives."""
    return {v.input for v in variables(graph)}


def state_outputs(graph: Graph) -> set[str]:
    """Names of the graph outputs written back to state."""
    return {v.output for v in variables(graph) if v.output is not None}


def data_inputs(graph: Graph) -> list[Placeholder]:
    """The inputs a caller feeds: every graph input that is not state."""
    state = state_inputs(graph)
    return [p for p in graph.inputs if p.name not in state]


def initial_feeds(graph: Graph) -> dict[str, np.ndarray]:
    """Each state input's initial value, by input name."""
    return {v.input: v.initial for v in variables(graph)}


class Stream:
    """Inferences one after another, each starting from the state the previous one left.

    `run(feeds, evaluate)`: evaluate(feeds with state) -> outputs by name, for any engine (the
    interpreter, a compiled network); the state outputs become the next state inputs.
    """

    def __init__(self, graph: Graph):
        self.graph = graph
        self.state = initial_feeds(graph)

    def run(self, feeds: Mapping[str, np.ndarray], evaluate) -> dict[str, np.ndarray]:
        """One inference from the current state; its state outputs become the next state."""
        outputs = evaluate({**feeds, **self.state})
        for v in variables(self.graph):
            if v.output is not None:
                self.state[v.input] = outputs[v.output]
        return outputs
