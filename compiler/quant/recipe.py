"""A quantization recipe: everything that turns one float model into its integer graph.

The profile (measured ranges, hand-set ranges, tensors kept float, equalization), the
calibration method, the schema, the rounding rule, per-channel or per-tensor weights, the
layers whose weights stay float and the bias corrections, plus the content hash of the float
graph it applies to. It is the one way to quantize: the command line, the export, every panel
and the sessions build a recipe and call `quantize_with`, so two views of "the int8 model"
can only differ if their recipes do. Its JSON form is versioned and checked on load, so a
bundle's build file can rebuild the same integer graph in another process.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import PurePosixPath, PureWindowsPath

import numpy as np

import compiler.quant.quantize as quantize
from compiler.errors import KilnError
from compiler.ir.graph import Graph
from compiler.qmath.requant import MODES
from compiler.quant.calibrate import METHODS, SCHEMAS
from compiler.quant.profile import Profile, graph_hash, parse_profile

FORMAT = "kiln-recipe"
VERSION = 1


@dataclass(frozen=True, eq=False)
class QuantRecipe:
    """How a float model becomes int8; `quantize_with` applies it.

    The profile is the recipe's own copy (`of_profile` copies it), so later edits of the
    profile it came from change nothing here.
    """

    profile: Profile
    method: str = "minmax"
    percentile: float = 99.99
    schema: str = "tflite"
    requant: str = "tflite"
    per_channel: bool = True
    keep_float: tuple[str, ...] = ()  # beyond the profile's own keep_float
    float_weights: tuple[str, ...] = ()  # Conv, Gemm, MatMul nodes computing in float
    corrections: dict[str, np.ndarray] = field(default_factory=dict)  # node -> bias addition
    model_hash: str = ""  # graph_hash of the float graph ("" when unknown: not checked)

    @classmethod
    def of_profile(cls, profile: Profile, model: Graph | str | None = None, **choices
                   ) -> QuantRecipe:
        """A recipe on a copy of `profile` for `model` (the float graph, or its hash) if given."""
        corrections = {str(k): np.asarray(v, np.float64).copy()
                       for k, v in (choices.pop("corrections", None) or {}).items()}
        for key in ("keep_float", "float_weights"):
            if key in choices:
                choices[key] = tuple(choices[key])
        return cls(profile.copy(), corrections=corrections,
                   model_hash=model if isinstance(model, str) else
                   graph_hash(model) if model is not None else "", **choices)

    @property
    def options(self) -> quantize.Options:
        """The quantizer's options for this recipe (the only place they are built)."""
        return quantize.Options(method=self.method, percentile=self.percentile,
                                schema=self.schema, requant=self.requant,
                                keep_float=self.keep_float, float_weights=self.float_weights,
                                per_channel=self.per_channel)

    def but(self, **changes) -> QuantRecipe:
        """This recipe with some choices changed (the profile shared: it is never edited)."""
        return replace(self, **changes)

    def check_model(self, graph: Graph, where: str = "the recipe") -> None:
        """Refuse a recipe made for another float graph, or naming what this one lacks."""
        if self.model_hash and graph_hash(graph) != self.model_hash:
            raise KilnError(f"{where} is for another model (hash {self.model_hash}, this "
                            f"model's is {graph_hash(graph)})")
        nodes = {n.name for n in graph.nodes}
        missing = sorted(set(self.float_weights) - nodes) + sorted(set(self.corrections) - nodes)
        if missing:
            raise KilnError(f"{where} names layers the model does not have: {missing}")

    # -- the JSON form ---------------------------------------------------------------------------

    def to_json(self, portable: bool = False) -> dict:
        """The recipe as plain, sorted JSON types (float64 values round-trip exactly).

        `portable` (a bundle's build file) names the calibration data by its file name alone.
        """
        profile = self.profile.to_json()
        return {"format": FORMAT, "version": VERSION, "model_hash": self.model_hash,
                "method": self.method, "percentile": self.percentile, "schema": self.schema,
                "requant": self.requant, "per_channel": self.per_channel,
                "keep_float": sorted(self.keep_float),
                "float_weights": sorted(self.float_weights),
                "corrections": {k: [float(x) for x in np.asarray(v).reshape(-1)]
                                for k, v in sorted(self.corrections.items())},
                "profile": _portable(profile) if portable else profile}


def _portable(profile: dict) -> dict:
    """The profile's JSON with its data source as a bare name.

    A bundle's build file goes into a firmware repository: the folder the developer
    calibrated from says nothing there, and names a path of their machine.
    """
    data = dict(profile.get("data") or {})
    source = data.get("source")
    if isinstance(source, str):
        data["source"] = PureWindowsPath(PurePosixPath(source).name).name
    return {**profile, "data": data}


def quantize_with(graph: Graph, recipe: QuantRecipe) -> Graph:
    """The QDQ graph `recipe` makes of the float `graph` (KilnError if it is another's)."""
    recipe.check_model(graph)
    return quantize.quantize(graph, recipe.profile.copy(), recipe.options,
                             recipe.corrections or None)


def parse_recipe(doc, where: str = "the recipe") -> QuantRecipe:
    """A recipe from its JSON form, checked; KilnError saying what is wrong in one sentence."""
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise KilnError(f"{where} is not a Kiln quantization recipe")
    version = doc.get("version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise KilnError(f"{where} has no format version")
    if version > VERSION:
        raise KilnError(f"{where} has format version {version}, written by a newer Kiln; this "
                        f"one reads version {VERSION}")
    try:
        return _parse(doc, where)
    except (KeyError, TypeError, ValueError) as exc:
        reason = f"no {exc} entry" if isinstance(exc, KeyError) else str(exc)
        raise KilnError(f"{where} is malformed: {reason}") from None


def _choice(doc: dict, key: str, allowed) -> str:
    value = doc[key]
    if value not in allowed:
        raise ValueError(f"{key} {value!r} is not one of {', '.join(allowed)}")
    return value


def _names(doc: dict, key: str) -> tuple[str, ...]:
    value = doc.get(key, [])
    if not isinstance(value, list) or not all(isinstance(n, str) for n in value):
        raise ValueError(f"{key} must be a list of names")
    return tuple(value)


def _parse(doc: dict, where: str) -> QuantRecipe:
    profile = parse_profile(doc["profile"], f"{where}'s profile")
    percentile = doc.get("percentile", 99.99)
    if isinstance(percentile, bool) or not isinstance(percentile, (int, float)) or not (
            0 < percentile <= 100):
        raise ValueError(f"percentile {percentile!r} is not in (0, 100]")
    per_channel = doc.get("per_channel", True)
    if not isinstance(per_channel, bool):
        raise ValueError("per_channel must be true or false")
    keep = _names(doc, "keep_float")
    unknown = [n for n in keep if n not in profile.tensors]
    if unknown:
        raise ValueError(f"keep_float names tensors its profile does not have: {unknown}")
    corrections = doc.get("corrections", {})
    if not isinstance(corrections, dict):
        raise ValueError("corrections must map layers to lists of numbers")
    parsed = {}
    for node, values in corrections.items():
        if not isinstance(values, list) or not all(
                isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
                for x in values):
            raise ValueError(f"the correction of {node!r} is not a list of finite numbers")
        parsed[str(node)] = np.asarray(values, np.float64)
    model_hash = doc.get("model_hash", "")
    if not isinstance(model_hash, str):
        raise ValueError("model_hash must be a string")
    return QuantRecipe(profile, _choice(doc, "method", METHODS), float(percentile),
                       _choice(doc, "schema", SCHEMAS), _choice(doc, "requant", MODES),
                       per_channel, keep, _names(doc, "float_weights"), parsed, model_hash)
