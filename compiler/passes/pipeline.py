"""The pass pipeline as data: an ordered list of pass configurations, saved and loaded as JSON."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from compiler.errors import KilnError
from compiler.fileio import atomic_write_bytes
from compiler.passes.base import UnknownPassError, get_pass

MODES = ("once", "fixpoint")
FORMAT = "kiln-pipeline"
VERSION = 1


class PipelineError(KilnError):
    """A pipeline file or description that cannot be used."""


@dataclass
class PassConfig:
    """One entry of a pipeline.

    Attributes:
        name: The registered pass.
        enabled: A disabled entry is skipped (and not recorded).
        mode: "once", or "fixpoint": run again while it changes the graph, up to max_iterations.
        max_iterations: Bound of a fixpoint run (a pass that never settles is a bug, not a hang).
        note: Why the entry sits where it does; docs and the GUI show it.
    """

    name: str
    enabled: bool = True
    mode: str = "once"
    max_iterations: int = 16
    note: str = ""

    def to_json(self) -> dict:
        """The entry as saved in a pipeline file."""
        return {"name": self.name, "enabled": self.enabled, "mode": self.mode,
                "max_iterations": self.max_iterations, "note": self.note}

    @classmethod
    def from_json(cls, data, where: str) -> PassConfig:
        """An entry read from a file, checked; `where` prefixes error messages."""
        if not isinstance(data, dict):
            raise PipelineError(f"{where}: an entry must be an object with a \"name\"")
        unknown = set(data) - {"name", "enabled", "mode", "max_iterations", "note"}
        if unknown:
            raise PipelineError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
        name = data.get("name")
        if not isinstance(name, str):
            raise PipelineError(f"{where}: \"name\" must be the name of a pass")
        try:
            get_pass(name)
        except UnknownPassError as exc:
            raise PipelineError(f"{where}: {exc}") from None
        config = cls(name, data.get("enabled", True), data.get("mode", "once"),
                     data.get("max_iterations", 16), data.get("note", ""))
        if not isinstance(config.enabled, bool):
            raise PipelineError(f"{where}: \"enabled\" must be true or false")
        if config.mode not in MODES:
            raise PipelineError(f"{where}: \"mode\" must be \"once\" or \"fixpoint\", not "
                                f"{config.mode!r}")
        if (not isinstance(config.max_iterations, int) or isinstance(config.max_iterations, bool)
                or config.max_iterations < 1):
            raise PipelineError(f"{where}: \"max_iterations\" must be a positive integer")
        if not isinstance(config.note, str):
            raise PipelineError(f"{where}: \"note\" must be a string")
        return config


REQUANT_MODES = ("onnx", "tflite")


@dataclass
class Pipeline:
    """Ordered pass configurations, and the options every pass of the run sees.

    `requant` overrides the requantization rule the front end chose for integer operators
    (onnx: as onnxruntime; tflite: as TFLite Micro); None keeps the model's.
    """

    passes: list[PassConfig] = field(default_factory=list)
    requant: str | None = None

    def __iter__(self):
        return iter(self.passes)

    def __len__(self) -> int:
        return len(self.passes)

    def enabled(self) -> list[PassConfig]:
        """The entries that run, in order."""
        return [p for p in self.passes if p.enabled]

    def stage_index(self, stage: str) -> int:
        """Position among the enabled entries of `stage`.

        A stage is a pass name (its first run) or `name#k` (its k-th run, counted from 1).
        """
        name, _, nth = stage.partition("#")
        count = int(nth) if nth.isdigit() and int(nth) > 0 else None
        if nth and count is None:
            raise PipelineError(f"stage {stage!r}: the part after # must be a run number from 1")
        seen = 0
        for index, config in enumerate(self.enabled()):
            if config.name == name:
                seen += 1
                if seen == (count or 1):
                    return index
        names = ", ".join(dict.fromkeys(c.name for c in self.enabled()))
        runs = f" runs {seen} time(s)" if seen else " is not in the pipeline"
        raise PipelineError(f"stage {stage!r}: pass {name!r}{runs} (passes: {names})")

    def to_json(self) -> dict:
        """The document a pipeline file holds."""
        doc = {"format": FORMAT, "version": VERSION, "passes": [p.to_json() for p in self]}
        if self.requant is not None:
            doc["requant"] = self.requant
        return doc

    @classmethod
    def from_json(cls, data, where: str = "pipeline") -> Pipeline:
        """A pipeline from its document, every entry checked."""
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise PipelineError(f"{where}: not a Kiln pipeline (expected an object with "
                                f"\"format\": \"{FORMAT}\")")
        if data.get("version") != VERSION:
            raise PipelineError(f"{where}: pipeline version {data.get('version')!r} is not "
                                f"supported (this Kiln reads version {VERSION})")
        entries = data.get("passes")
        if not isinstance(entries, list):
            raise PipelineError(f"{where}: \"passes\" must be a list")
        requant = data.get("requant")
        if requant is not None and requant not in REQUANT_MODES:
            raise PipelineError(f"{where}: \"requant\" must be one of "
                                f"{', '.join(REQUANT_MODES)}, not {requant!r}")
        return cls([PassConfig.from_json(e, f"{where}: entry {i + 1}")
                    for i, e in enumerate(entries)], requant)


def save_pipeline(pipeline: Pipeline, path: str | os.PathLike) -> None:
    """Write `pipeline` to `path` as JSON (atomically)."""
    text = json.dumps(pipeline.to_json(), indent=2) + "\n"
    atomic_write_bytes(path, text.encode("utf-8"))


def load_pipeline(path: str | os.PathLike) -> Pipeline:
    """Read a pipeline file; PipelineError (one line) for anything wrong with it."""
    where = f"pipeline file {os.fspath(path)}"
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PipelineError(f"{where}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise PipelineError(f"{where}: cannot read it ({exc})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise PipelineError(f"{where}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    return Pipeline.from_json(data, where)


def _step(name: str, note: str, mode: str = "once") -> PassConfig:
    return PassConfig(name, mode=mode, note=note)


def default_pipeline() -> Pipeline:
    """Kiln's pipeline: clean up, fold, lower, go channels-last, then fuse.

    Each entry's note says why it sits where it does.
    """
    return Pipeline([
        _step("remove_identity", "first, so every later pattern sees a value's real producer"),
        _step("fold_constant_layout", "reshaped or transposed weights become plain constants "
                                      "before anything looks for constant weights"),
        _step("fold_constants", "weights built by nodes (ConstantOfShape, DequantizeLinear, "
                                "Shape arithmetic) become constants"),
        _step("to_integer", "while every Dequantize/Quantize pair is still beside its "
                            "operator: quantized units become integer operators"),
        _step("lower_reshapes", "Squeeze/Unsqueeze/Flatten become Reshape, so one rule handles "
                                "all of them from here on"),
        _step("merge_reshapes", "collapse the Reshape chains that lowering exposed"),
        _step("remove_noops", "drop the Reshapes that now do nothing, and exporters' no-ops"),
        _step("slice_of_concat", "a Slice of one joined input reads that input: an unrolled "
                                 "recurrent layer's unread steps die at the next dce"),
        _step("lower_sum", "residual Sums become Adds, which activations fuse into"),
        _step("lower_fully_connected", "before fold_batchnorm, which folds into "
                                       "FullyConnected as well as Conv"),
        _step("fold_batchnorm", "before lower_batchnorm: folding costs nothing at run time"),
        _step("lower_batchnorm", "the BatchNormalizations left (no Conv before them) become "
                                 "Mul and Add"),
        _step("merge_affine", "to a fixed point: the scale/shift pairs lowering left merge "
                              "before they move through the layout passes", "fixpoint"),
        _step("lower_global_pool", "before to_nhwc, so the AveragePool goes channels-last too"),
        _step("dce", "drop what lowering replaced, so to_nhwc converts only live nodes"),
        _step("to_nhwc", "after lowering: every spatial operator left goes channels-last"),
        _step("cse", "merge the identical Transposes to_nhwc put on a shared input"),
        _step("sink_transposes", "to a fixed point: each sink can expose a pair to cancel",
              "fixpoint"),
        _step("fold_transpose_into_fc", "a Transpose stuck before a classifier's flatten goes "
                                        "into its weights"),
        _step("transpose_to_reshape", "Transposes that move only size-1 axes become Reshapes"),
        _step("merge_reshapes", "collapse the Reshapes that sinking and the previous pass left"),
        _step("remove_noops", "drop Reshapes that now do nothing"),
        _step("lower_channel_shuffle", "a channel shuffle left between two Reshapes is a "
                                       "Gather on channels, not a Transpose"),
        _step("merge_pad", "on the final NHWC graph, a Pad right before a Conv or pool"),
        _step("fold_channel_affine", "per-channel scales and bias Adds into the Conv or "
                                     "FullyConnected before them, before activations fuse"),
        _step("merge_clips", "one Clip per chain of clamps, before it fuses"),
        _step("fuse_activations", "after the affine folds, so Conv, bias and Relu are one node"),
        _step("fuse_elementwise", "after fuse_activations, which fuses into Conv, "
                                  "FullyConnected and Add first"),
        _step("merge_fully_connected", "last fusion: siblings merge once their activations are "
                                       "fused"),
        _step("lower_conv_1d", "after every fusion has seen a 1-D convolution whole: the kernels "
                               "run it as an image of one row"),
        _step("cse", "merge duplicates the fusions made identical"),
        _step("dce", "remove every node the passes replaced, and unused weights"),
    ])
