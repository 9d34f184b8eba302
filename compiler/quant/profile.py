"""A profile: each float tensor's observed range and histogram, as a diffable, editable JSON.

The file records its schema, a hash of the graph it was measured on (the calibration graph of
`profiler`, whose tensors the quantizer sees), the data it came from, the histogram bin
count, and per tensor `min`, `max` and `histogram`. Users edit it by hand through two keys the
profiler writes empty: `overrides` ({tensor: {"min": .., "max": ..}}, which beat the measured
range) and `keep_float` (tensors to leave in float). A profile carried across a graph edit
(`compiler.quant.remap`) also lists under `stale` the ranges measured before the edit changed
what computes them. Keys are sorted and the layout is stable, so two profiles diff line by
line. Applying a profile to another graph is refused.
"""

from __future__ import annotations

import copy
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from compiler.errors import KilnError
from compiler.fileio import atomic_write_bytes
from compiler.ir.graph import Graph
from compiler.ir.hashing import graph_hash  # noqa: F401 (profiles are checked by it)

SCHEMA = "kiln-profile-1"


@dataclass
class TensorRange:
    """What profiling saw of one tensor."""

    min: float
    max: float
    histogram: list[int]


@dataclass
class Profile:
    """Ranges of a graph's float tensors, the graph's hash, and the user's edits."""

    graph_hash: str
    model: str
    data: dict
    bins: int
    tensors: dict[str, TensorRange]
    overrides: dict[str, dict[str, float]] = field(default_factory=dict)
    keep_float: list[str] = field(default_factory=list)
    equalized: bool = False  # measured on the graph after cross-layer equalization
    path: str = ""  # the file it was read from, for messages
    # Tensors whose range was measured before an edit changed what computes them.
    stale: list[str] = field(default_factory=list)

    def copy(self) -> Profile:
        """An independent copy (edits of either leave the other alone), fast for big profiles.

        `copy.deepcopy` walks every histogram count as an object: 40 ms for ResNet-8's profile
        at 2,048 bins, where copying each list takes a millisecond.
        """
        return Profile(self.graph_hash, self.model, copy.deepcopy(self.data), self.bins,
                       {name: TensorRange(r.min, r.max, list(r.histogram))
                        for name, r in self.tensors.items()},
                       {name: dict(edit) for name, edit in self.overrides.items()},
                       list(self.keep_float), self.equalized, self.path, list(self.stale))

    def range_of(self, tensor: str) -> tuple[float, float]:
        """The range quantization uses: an override's bounds, else the measured ones."""
        measured = self.tensors[tensor]
        edit = self.overrides.get(tensor, {})
        return float(edit.get("min", measured.min)), float(edit.get("max", measured.max))

    def set_override(self, tensor: str, low: float, high: float) -> None:
        """Quantize `tensor` over [low, high] whatever the calibration method finds."""
        if tensor not in self.tensors:
            raise KilnError(f"the profile has no tensor named {tensor!r}")
        if not (math.isfinite(low) and math.isfinite(high) and low <= high):
            raise KilnError(f"range [{low}, {high}] of {tensor!r} must be finite with "
                            f"min <= max")
        self.overrides[tensor] = {"min": float(low), "max": float(high)}

    def check_graph(self, graph: Graph, where: str = "") -> None:
        """Refuse a profile measured on another graph, saying so in one line."""
        where = where or self.path or "the profile"
        found = graph_hash(graph)
        # A Glow-format profile keeps 64 bits of the hash (Glow's field is a Hex64).
        if not self.graph_hash or not found.startswith(self.graph_hash):
            raise KilnError(f"{where} was measured on another graph (hash {self.graph_hash}, "
                            f"this model's is {found}): profile this model again")

    def to_json(self) -> dict:
        """The file's content: sorted, plain JSON types."""
        doc = {"schema": SCHEMA, "graph_hash": self.graph_hash, "model": self.model,
                "data": self.data, "bins": self.bins,
                "tensors": {name: {"min": r.min, "max": r.max, "histogram": r.histogram}
                            for name, r in sorted(self.tensors.items())},
                "overrides": {name: dict(sorted(v.items()))
                              for name, v in sorted(self.overrides.items())},
                "keep_float": sorted(self.keep_float), "equalized": self.equalized}
        if self.stale:  # only after an edit: a measured profile's file stays as it was
            doc["stale"] = sorted(self.stale)
        return doc

    def save(self, path: str | Path) -> None:
        """Write the JSON profile atomically (a crash never leaves half a file)."""
        text = json.dumps(self.to_json(), indent=1, sort_keys=True) + "\n"
        atomic_write_bytes(Path(path), text.encode())


def parse_profile(doc, where: str = "the profile") -> Profile:
    """A profile from its JSON document (a session holds one); KilnError when malformed."""
    try:
        return _parse(doc)
    except (KeyError, TypeError, ValueError) as exc:
        raise KilnError(f"{where} is not a Kiln profile: {exc}") from None


def load_profile(path: str | Path) -> Profile:
    """A JSON profile file, or one clear line saying what is wrong with it (KilnError)."""
    path = Path(path)
    try:
        doc = json.loads(path.read_text())
    except OSError as exc:
        raise KilnError(f"{path}: cannot read the profile ({exc.strerror or exc})") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise KilnError(f"{path}: not a JSON profile ({exc})") from None
    try:
        profile = _parse(doc)
    except (KeyError, TypeError, ValueError) as exc:
        raise KilnError(f"{path}: malformed profile: {exc}") from None
    profile.path = str(path)
    return profile


def _number(value, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(
            value):
        raise ValueError(f"{what} must be a finite number, not {value!r}")
    return float(value)


def _parse(doc) -> Profile:
    if not isinstance(doc, dict):
        raise TypeError("the file must hold a JSON object")
    if doc.get("schema") != SCHEMA:
        raise ValueError(f"schema {doc.get('schema')!r} is not {SCHEMA!r}")
    tensors = {}
    for name, entry in doc["tensors"].items():
        low = _number(entry["min"], f"tensor {name!r} min")
        high = _number(entry["max"], f"tensor {name!r} max")
        if low > high:
            raise ValueError(f"tensor {name!r} has min {low} above max {high}")
        counts = entry["histogram"]
        if not isinstance(counts, list) or not all(
                isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in counts):
            raise ValueError(f"tensor {name!r} histogram must be a list of counts")
        tensors[name] = TensorRange(low, high, counts)
    overrides = {}
    for name, edit in doc.get("overrides", {}).items():
        if name not in tensors:
            raise ValueError(f"override of {name!r}, a tensor the profile does not have")
        unknown = set(edit) - {"min", "max"}
        if unknown:
            raise ValueError(f"override of {name!r} has keys {sorted(unknown)}; only min and "
                             "max")
        overrides[name] = {k: _number(v, f"override of {name!r} {k}") for k, v in edit.items()}
        low, high = Profile("", "", {}, 0, tensors, overrides).range_of(name)
        if low > high:
            raise ValueError(f"override of {name!r} gives min {low} above max {high}")
    keep = doc.get("keep_float", [])
    if not isinstance(keep, list) or not all(isinstance(n, str) for n in keep):
        raise ValueError("keep_float must be a list of tensor names")
    missing = [n for n in keep if n not in tensors]
    if missing:
        raise ValueError(f"keep_float names tensors the profile does not have: {missing}")
    equalized = doc.get("equalized", False)
    if not isinstance(equalized, bool):
        raise ValueError("equalized must be true or false")
    stale = doc.get("stale", [])
    if not isinstance(stale, list) or not all(isinstance(n, str) and n in tensors
                                              for n in stale):
        raise ValueError("stale must be a list of the profile's tensor names")
    return Profile(str(doc["graph_hash"]), str(doc.get("model", "")), dict(doc.get("data", {})),
                   int(doc["bins"]), tensors, overrides, list(keep), equalized, stale=list(stale))
