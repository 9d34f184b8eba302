"""Schedule spaces as data: the knobs each kernel family's generator takes, and workloads.

A kernel's schedule changes how its loops are laid out, never what it computes: every knob's
every value gives the same int32 sums and the same requantized bytes, so a tuner may pick any
configuration and the result stays exact. A kernel with no schedule (or a knob left out)
takes the generator's hand-chosen default, which is what an untuned build always ran.

A *workload* is what a kernel's code depends on: the operator, the shapes and element types
of its tensors, the window, the quantization class (per channel or per tensor, the rounding
rule, zero points) and the target. Two layers with one workload, in one model or two, run the
same code for the same schedule, so one measurement serves both.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np

from compiler.codegen.table import lookup
from compiler.codegen.targets import DotProduct, Target
from compiler.ir.graph import Constant, Node


@dataclass(frozen=True)
class Knob:
    """One choice a generator makes: its name, the values it takes, the first the default."""

    name: str
    values: tuple
    meaning: str


TAPS = Knob("taps", ("default", "unrolled", "loops"),
            "the inside window's taps emitted one by one, or as loops")
BORDER_TAPS = Knob("border_taps", ("loops", "unrolled"),
                   "the border pixels' taps, each with its own bounds test, emitted one by one")
DEPTH = Knob("depth", ("default", "unrolled", "loop2", "loop1"),
             "a tap's depth (or a row's) as straight-line dot products, or a loop of two or one "
             "words (chunks) a trip")
WEIGHTS = Knob("weights", ("default", "int16_pairs", "int8"),
               "DSP weights stored as SMLAD's int16 pairs (fewer instructions) or as int8 "
               "bytes unpacked by SXTB16 (half the flash)")
WEIGHT_BASE = Knob("weight_base", ("default", "opaque", "constant"),
                   "the filters read from a register LLVM cannot rebase, or from the "
                   "constant's address")
VECTORS = Knob("vectors", ("default", 1, 2, 4, 8),
               "output-channel vectors one pixel keeps in registers (hosts)")
BLOCK = Knob("block", ("default", 2, 8),
              "output channels per block sharing each input word (4 by default)")
CHAINS = Knob("chains", ("default", 1, 2, 4, 8),
              "independent accumulator chains per vector (hosts)")

# Kernel family -> its knobs, by the emitter that generates it.
FAMILIES: dict[str, tuple[Knob, ...]] = {
    "convolution": (TAPS, BORDER_TAPS, DEPTH, WEIGHTS, WEIGHT_BASE, BLOCK),
    "convolution_im2col": (DEPTH, WEIGHTS, BLOCK),
    "depthwise": (TAPS, BORDER_TAPS, WEIGHTS),
    "fully_connected": (DEPTH, WEIGHTS, WEIGHT_BASE),
    "convolution_lanes": (TAPS, BORDER_TAPS, VECTORS, CHAINS),
}
_EMITTER_FAMILY = {
    "emit_qconv_dot": "convolution",
    "emit_qconv_im2col": "convolution_im2col",
    "emit_qdepthwise_dot": "depthwise",
    "emit_qgemm_dot": "fully_connected",
    "emit_qconv_lanes": "convolution_lanes",
}


def family_of(emitter) -> str:
    """The kernel family of an emitter function ("" for one without a schedule space)."""
    return _EMITTER_FAMILY.get(getattr(emitter, "__name__", ""), "")


def knobs_for(family: str, target: Target) -> tuple[Knob, ...]:
    """The knobs that mean something for `family` on `target` (weight layout: DSP only)."""
    knobs = FAMILIES.get(family, ())
    if target.int8_dot is not DotProduct.DSP:
        knobs = tuple(k for k in knobs if k not in (WEIGHTS, WEIGHT_BASE))
    if target.int8_dot is DotProduct.SCALAR:
        knobs = tuple(k for k in knobs if k is not DEPTH)
    if family == "depthwise" and not target.mcu:  # a host pairs the inside window's taps
        knobs = tuple(k for k in knobs if k is not BORDER_TAPS)
    return knobs


def clean(schedule: Mapping | None, family: str, target: Target) -> dict:
    """The knobs of `schedule` that `family` on `target` takes, with values it knows.

    Defaults are dropped, so a schedule equal to the default is the empty one (the same
    code, the same shape key) and unknown names or values are ignored.
    """
    if not schedule:
        return {}
    known = {k.name: k for k in knobs_for(family, target)}
    layout = "int8" if target.lean_weights else "int16_pairs"  # what the target stores
    return {name: value for name, value in sorted(schedule.items())
            if name in known and value in known[name].values
            and value != known[name].values[0] and not (name == "weights" and value == layout)}


def frozen(schedule: Mapping) -> tuple:
    """A schedule as a hashable, ordered tuple (part of a kernel's shape key)."""
    return tuple(sorted(schedule.items()))


def _tensor(value) -> list:
    if value is None:
        return []
    return [value.type.dtype, list(value.type.shape)]


def _class(node: Node) -> dict:
    """The quantization facts a kernel's code depends on, not the values themselves."""
    facts = {"requant": node.attrs.get("requant", "onnx")}
    if node.op in ("QLinearConv", "QGemm"):
        scale = node.inputs[4]
        facts["per_channel"] = bool(scale is not None and np.asarray(scale.data).size > 1)
        zw = node.inputs[5]
        facts["weight_zero_point"] = bool(zw is not None and np.asarray(zw.data).any())
        facts["no_weight_minus_128"] = bool(isinstance(node.inputs[3], Constant)
                                            and np.asarray(node.inputs[3].data).min() > -128)
    return facts


_ATTRS = ("kernel_shape", "strides", "pads", "dilations", "group", "activation",
          "output_range", "transB", "auto_pad")


def workload(node: Node, fused_add: Node | None, family: str, target: Target) -> dict:
    """What a kernel's code depends on, as plain data (the tuning log's `workload`)."""
    attrs = {a: node.attrs[a] for a in _ATTRS if a in node.attrs}
    return {"op": node.op, "family": family, "target": target.name,
            "inputs": [_tensor(v) for v in node.inputs[:1]],
            "weights": _tensor(node.inputs[3]) if len(node.inputs) > 3 else [],
            "output": _tensor(node.output), "attrs": json.loads(json.dumps(attrs, default=str)),
            "quantization": _class(node), "fused_add": fused_add is not None}


def workload_key(description: Mapping) -> str:
    """A workload's short, stable name: family, operator and a hash of the description."""
    text = json.dumps(description, sort_keys=True, separators=(",", ":"))
    return f"{description['family']}:{hashlib.sha256(text.encode()).hexdigest()[:16]}"


def candidates(family: str, target: Target) -> list[dict]:
    """Every configuration of `family` on `target` (the default first, as {})."""
    configs: list[dict] = [{}]
    for knob in knobs_for(family, target):
        configs = [dict(c, **({knob.name: v} if i else {}))
                   for c in configs for i, v in enumerate(knob.values)]
    seen, unique = set(), []
    for config in configs:
        key = frozen(clean(config, family, target))
        if key not in seen:
            seen.add(key)
            unique.append(dict(key))
    return unique


def kernel_schedule(node: Node, add: Node | None, target: Target,
                    schedules: Mapping[str, Mapping]) -> tuple[str, dict, dict, Target]:
    """(workload key, description, knobs, target) of `node`'s kernel under `schedules`.

    The key is "" for a kernel without a schedule space. A tuned DSP weight layout becomes
    the kernel's own target (`Target.lean_weights`), which its weights and code both read.
    """
    family = family_of(lookup(node, target)[0])
    if not family:
        return "", {}, {}, target
    description = workload(node, add, family, target)
    key = workload_key(description)
    knobs = clean(schedules.get(key), family, target)
    if "weights" in knobs:
        target = replace(target, lean_weights=knobs["weights"] == "int8")
    return key, description, knobs, target
