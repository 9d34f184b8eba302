"""What a pass is: a named, categorized function of the graph that says what it did.

It may read the run's context (the requantization rule); a short docstring explains it.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from compiler.errors import KilnError
from compiler.ir.graph import Graph

# The kinds of transformation, in the order the docs list them.
CATEGORIES = ("simplify", "lower", "layout", "fuse", "codegen")


@dataclass(frozen=True)
class PassContext:
    """What a run tells its passes besides the graph.

    Attributes:
        requant: The requantization rule integer operators follow ("onnx" or "tflite"): the
            user's choice for this run, else the model's own.
    """

    requant: str = "onnx"


@dataclass
class PassResult:
    """What one run of a pass did.

    Attributes:
        changed: Whether it changed the graph.
        notes: What it tells the user about this run (which units stayed float, and why).
        rebases_numerics: It changes the arithmetic on purpose (float to integers): its outputs
            may differ from the model's by rounding, and later stages are compared to its own.
    """

    changed: bool
    notes: list[str] = field(default_factory=list)
    rebases_numerics: bool = False


# A pass takes the graph, and the context when it has a second parameter; it returns a
# PassResult, or a bool (changed) when it has nothing more to say.
PassFn = Callable[..., "bool | PassResult"]


class UnknownPassError(KilnError):
    """A pipeline or a command names a pass that is not registered."""


@dataclass(frozen=True)
class Pass:
    """One registered pass.

    Attributes:
        name: Unique name, used by pipelines, records and the CLI.
        category: One of CATEGORIES.
        fn: Rewrites the graph in place; returns a PassResult, or True only if it changed
            something.
    """

    name: str
    category: str
    fn: PassFn

    @property
    def doc(self) -> str:
        """The function's docstring: two or three sentences a student can follow."""
        return inspect.getdoc(self.fn) or ""

    @property
    def location(self) -> str:
        """`module.py:line` where the pass is defined, so a viewer can show its source."""
        code = self.fn.__code__
        return f"{Path(code.co_filename).name}:{code.co_firstlineno}"

    @property
    def takes_context(self) -> bool:
        """Whether the function has a second parameter, the run's PassContext."""
        return len(inspect.signature(self.fn).parameters) > 1

    def __call__(self, graph: Graph, context: PassContext = PassContext()) -> PassResult:
        """Run the pass on `graph` in place; what it did."""
        out = self.fn(graph, context) if self.takes_context else self.fn(graph)
        return out if isinstance(out, PassResult) else PassResult(bool(out))


_PASSES: dict[str, Pass] = {}


def register_pass(name: str, category: str) -> Callable[[PassFn], PassFn]:
    """Decorator registering `fn` as pass `name`; the function stays callable as it is."""
    if category not in CATEGORIES:
        raise ValueError(f"pass {name}: category {category!r} is not one of {CATEGORIES}")

    def decorate(fn: PassFn) -> PassFn:
        if name in _PASSES:
            raise ValueError(f"pass {name} registered twice")
        if not inspect.getdoc(fn):
            raise ValueError(f"pass {name} needs a docstring (the GUI and docs show it)")
        _PASSES[name] = Pass(name, category, fn)
        return fn
    return decorate


def get_pass(name: str) -> Pass:
    """The pass called `name`; UnknownPassError (one line, listing the known ones) otherwise."""
    try:
        return _PASSES[name]
    except KeyError:
        raise UnknownPassError(f"unknown pass {name!r} (known passes: "
                               f"{', '.join(sorted(_PASSES))})") from None


def all_passes() -> list[Pass]:
    """Every registered pass, by category then name."""
    return sorted(_PASSES.values(), key=lambda p: (CATEGORIES.index(p.category), p.name))
