"""The planted bugs, one module per area: each defines `PLANTS`, a tuple of `Plant`.

`tools/plant_bugs.py` runs them. A new feature adds its plants in its area's module (or a new
module here), so the audit grows with the code.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass


@dataclass(frozen=True)
class Plant:
    """One bug: replace `old` by `new` in `path`; then `tests` must fail."""

    name: str
    path: str
    old: str
    new: str
    tests: tuple[str, ...]
    why: str


def every_plant() -> tuple[Plant, ...]:
    """The plants of every module in this package, in module-name order."""
    plants: list[Plant] = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        plants += importlib.import_module(f"{__name__}.{info.name}").PLANTS
    return tuple(plants)
