"""What a pass is: a named, categorized function `graph -> changed?` with a short docstring."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from compiler.errors import KilnError
from compiler.ir.graph import Graph

# The kinds of transformation, in the order the docs list them.
CATEGORIES = ("simplify", "lower", "layout", "fuse", "codegen")

PassFn = Callable[[Graph], bool]


class UnknownPassError(KilnError):
    """A pipeline or a command names a pass that is not registered."""


@dataclass(frozen=True)
class Pass:
    """One registered pass.

    Attributes:
        name: Unique name, used by pipelines, records and the CLI.
        category: One of CATEGORIES.
        fn: Rewrites the graph in place; returns True only if it changed something.
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

    def __call__(self, graph: Graph) -> bool:
        """Run the pass on `graph` in place; True if it changed anything."""
        return bool(self.fn(graph))


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
