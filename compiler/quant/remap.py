"""Carry a profile across a graph edit: ranges and the user's choices follow their tensors.

A profile describes one calibration graph (`profiler.calibration_graph`). When the user edits
the model, the ranges of tensors that still exist stay worth keeping, and the hand-tuned ones
must never be lost, but the file must describe the edited graph (its hash) or the quantizer
refuses it. `remap_profile` matches each tensor of the edited graph to the one it was before:

1. by what computes it (operators, attributes, weights and inputs, names aside): a renamed
   tensor, or one whose producer was renamed, is the same tensor and its range still holds;
2. by its producer (operator and provenance, the ids of the source nodes, or the input's
   position): the same node, but something upstream of it or one of its attributes changed,
   so its range was measured on other values and is marked stale;
3. by name, for a tensor nothing above claimed (stale too).

A tensor matched by none is new and has no range ("not profiled"); the old tensors nobody
took are removed with their overrides. The result carries the edited graph's hash, so the
quantizer, the saved file and a recovered session all accept it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np

from compiler.ir.graph import Constant, Graph, Value
from compiler.quant.profile import Profile, graph_hash
from compiler.quant.profiler import profiled_tensors


@dataclass(frozen=True)
class Remap:
    """A profile carried to an edited graph, and what happened to each tensor."""

    profile: Profile  # the edited graph's: its hash, the carried ranges and the user's edits
    carried: dict[str, str] = field(default_factory=dict)  # new tensor -> the old one
    stale: list[str] = field(default_factory=list)  # ranges measured before the edit
    unprofiled: list[str] = field(default_factory=list)  # new tensors without a range
    removed: list[str] = field(default_factory=list)  # old tensors gone, edits with them
    modified: bool = False  # False: the same graph, the profile is an unchanged copy


def tensor_signatures(graph: Graph) -> dict[str, str]:
    """Tensor name -> a digest of what computes it; equal digests mean equal values.

    Names play no part (a rename keeps the digest); operators, attributes, constant payloads
    and the input's position and type do.
    """
    digests: dict[int, str] = {}

    def digest_of(value: Value | None) -> str:
        if value is None:
            return "-"
        known = digests.get(id(value))
        if known is None and isinstance(value, Constant):
            data = np.ascontiguousarray(value.data)
            known = digests[id(value)] = _digest(
                f"const {data.shape} {data.dtype}".encode(), data.tobytes())
        return known or "?"

    for index, value in enumerate(graph.inputs):
        digests[id(value)] = _digest(f"input {index} {value.type.shape} {value.type.dtype}"
                                     .encode())
    for node in graph.nodes:  # in topological order: inputs are known before their users
        attrs = sorted((k, repr(v)) for k, v in node.attrs.items())
        sources = [digest_of(v) for v in node.inputs]
        for index, value in enumerate(node.outputs):
            digests[id(value)] = _digest(f"{node.op} {attrs} {sources} {index}".encode())
    return {v.name: digests[id(v)] for v in graph.values() if id(v) in digests}


def _digest(*parts: bytes) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part)
    return h.hexdigest()[:32]


def _producer_keys(graph: Graph) -> dict[str, tuple]:
    """Tensor name -> its producer's identity, which survives edits elsewhere in the graph."""
    keys: dict[str, tuple] = {v.name: ("input", i) for i, v in enumerate(graph.inputs)}
    for node in graph.nodes:
        for index, value in enumerate(node.outputs):
            keys[value.name] = (node.op, tuple(node.provenance), index)
    return keys


def remap_profile(profile: Profile, old: Graph, new: Graph) -> Remap:
    """`profile` (measured on calibration graph `old`) carried to calibration graph `new`.

    Both graphs are calibration graphs (`calibration_graph(graph, profile.equalized)`).
    The argument is left untouched; the result is a new profile (overrides and keep-float
    lists its own) sharing the measured `TensorRange` records.
    """
    wanted = profiled_tensors(new)
    old_sigs, new_sigs = tensor_signatures(old), tensor_signatures(new)
    by_sig: dict[str, list[str]] = {}
    for name in profile.tensors:
        if name in old_sigs:
            by_sig.setdefault(old_sigs[name], []).append(name)
    old_keys = {key: name for name, key in _producer_keys(old).items() if name in profile.tensors}
    new_keys = _producer_keys(new)
    carried: dict[str, str] = {}
    stale: set[str] = set()
    for name in wanted:  # 1. the same computation: the range still holds
        same = by_sig.get(new_sigs.get(name, ""), [])
        if same:
            carried[name] = name if name in same else same[0]
            if carried[name] in profile.stale:
                stale.add(name)
    for name in wanted:  # 2. the same producer, fed or set otherwise
        source = old_keys.get(new_keys.get(name))
        if name not in carried and source is not None:
            carried[name] = source
            stale.add(name)
    taken = set(carried.values())
    for name in wanted:  # 3. the same name, for a tensor nothing else claimed
        if name not in carried and name in profile.tensors and name not in taken:
            carried[name] = name
            stale.add(name)
    # Measured records are shared, not copied: nothing mutates them, and the undo history may
    # keep a profile per edit (a histogram is thousands of counts per tensor).
    tensors = {name: profile.tensors[carried[name]] for name in wanted if name in carried}
    overrides = {name: dict(profile.overrides[source]) for name, source in carried.items()
                 if source in profile.overrides}
    kept = set(profile.keep_float)
    result = Profile(graph_hash(new), profile.model, dict(profile.data), profile.bins, tensors,
                     overrides, [n for n in tensors if carried[n] in kept], profile.equalized,
                     stale=[n for n in tensors if n in stale])
    used = set(carried.values())
    # Compared field by field, not as two JSON documents of every histogram on each edit.
    modified = (result.graph_hash != profile.graph_hash
                or set(tensors) != set(profile.tensors)
                or any(new_name != old_name for new_name, old_name in carried.items())
                or overrides != profile.overrides
                or sorted(result.keep_float) != sorted(profile.keep_float)
                or sorted(result.stale) != sorted(profile.stale))
    return Remap(result, carried, result.stale, [n for n in wanted if n not in tensors],
                 [n for n in profile.tensors if n not in used], modified)


def unprofiled(profile: Profile, base: Graph) -> list[str]:
    """The tensors of calibration graph `base` that `profile` has no range for."""
    return [name for name in profiled_tensors(base) if name not in profile.tensors]


def carry_edits(source: Profile, target: Profile) -> list[str]:
    """Copy the user's overrides and keep-float choices of `source` into `target`.

    For a new measurement of the same graph (Re-profile): what the user tuned by hand stays.
    Only tensors `target` has are carried; returns their names.
    """
    carried = [name for name in source.overrides if name in target.tensors]
    for name in carried:
        target.overrides[name] = dict(source.overrides[name])
    floats = [name for name in source.keep_float if name in target.tensors]
    target.keep_float = list(dict.fromkeys([*target.keep_float, *floats]))
    return list(dict.fromkeys([*carried, *floats]))
