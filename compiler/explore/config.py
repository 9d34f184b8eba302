"""One point of the exploration: how to quantize and how to compile, hashable and in JSON.

A configuration names what a user can set by hand in the workbench and the export dialog:
the tensors kept float (and the weighted layers reading them, which then compute in float),
the calibration method of every other tensor, cross-layer equalization, bias correction, the
schema, per-channel or per-tensor weights, and the compile options that change cost on the
target. Its key is a hash of its canonical JSON, so a measured point is never measured again.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, replace

from compiler.errors import KilnError
from compiler.quant.calibrate import METHODS, SCHEMAS


@dataclass(frozen=True)
class Config:
    """A quantization and compile configuration (every tuple sorted, so equal means equal)."""

    keep_float: tuple[str, ...] = ()
    float_weights: tuple[str, ...] = ()  # Conv, Gemm, MatMul nodes computing in float
    method: str = "minmax"  # the calibration method of every tensor not in `methods`
    methods: tuple[tuple[str, str], ...] = ()  # (tensor, method) where it differs
    equalize: bool = False
    bias_correction: bool = False
    schema: str = "tflite"
    per_channel: bool = True
    io_in_arena: bool = False  # inputs and outputs share the activation arena
    disabled_lowering: tuple[str, ...] = ()
    lean_weights: bool | None = None  # DSP cores: int8 weights as bytes (True) or int16 pairs
    inline_kernels: bool = True

    def __post_init__(self) -> None:
        if self.method not in METHODS or any(m not in METHODS for _, m in self.methods):
            raise KilnError(f"a calibration method is not one of {', '.join(METHODS)}")
        if self.schema not in SCHEMAS:
            raise KilnError(f"schema {self.schema!r} is not one of {', '.join(SCHEMAS)}")

    def normalized(self) -> Config:
        """The same configuration with sorted tuples and no method equal to the default."""
        methods = tuple(sorted((t, m) for t, m in self.methods
                               if m != self.method and t not in self.keep_float))
        return replace(self, keep_float=tuple(sorted(set(self.keep_float))),
                       float_weights=tuple(sorted(set(self.float_weights))), methods=methods,
                       disabled_lowering=tuple(sorted(set(self.disabled_lowering))))

    def to_json(self) -> dict:
        """Plain JSON (lists for tuples, methods as an object)."""
        doc = asdict(self.normalized())
        doc["methods"] = dict(doc["methods"])
        for key in ("keep_float", "float_weights", "disabled_lowering"):
            doc[key] = list(doc[key])
        return doc

    @classmethod
    def from_json(cls, doc: dict) -> Config:
        """The configuration `to_json` wrote (KilnError naming a wrong field)."""
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(doc) - known)
        if unknown:
            raise KilnError(f"a configuration has unknown fields: {', '.join(unknown)}")
        try:
            values = dict(doc)
            values["methods"] = tuple(sorted(dict(doc.get("methods", {})).items()))
            for key in ("keep_float", "float_weights", "disabled_lowering"):
                values[key] = tuple(doc.get(key, ()))
            return cls(**values).normalized()
        except (TypeError, ValueError, AttributeError) as exc:
            raise KilnError(f"a configuration is malformed: {exc}") from None

    def key(self) -> str:
        """A hash of the canonical JSON: equal configurations share it."""
        text = json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def summary(self) -> str:
        """A few words for a tooltip or a table row."""
        parts = [f"{len(self.keep_float)} float" if self.keep_float else "all int8",
                 self.method + (f" (+{len(self.methods)} others)" if self.methods else ""),
                 self.schema, "per-channel" if self.per_channel else "per-tensor"]
        parts += [word for flag, word in ((self.equalize, "CLE"),
                                          (self.bias_correction, "bias corr."),
                                          (self.io_in_arena, "I/O in arena"),
                                          (not self.inline_kernels, "kernels apart"))
                  if flag]
        if self.lean_weights is not None:
            parts.append("int8 weights" if self.lean_weights else "int16 pairs")
        if self.disabled_lowering:
            parts.append("no " + ", ".join(self.disabled_lowering))
        return ", ".join(parts)
