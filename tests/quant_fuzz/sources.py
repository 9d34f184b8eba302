"""Where the campaign's mutants come from: one deterministic factory per source.

`make_mutant(source, index, seed)` always gives the same model for the same three values, so
a failure is named by its label ("qdq-17.onnx") and the seed, and rebuilt by
`python -m tests.test_quant_fuzz replay qdq-17`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache

import numpy as np
import onnx
from onnx import TensorProto

from tests.conftest import SHARED_MODELS
from tests.quant_fuzz.mutations import MLPERF_MUTATIONS, mutate
from tests.quant_fuzz.qdq import qdq_graph
from tests.quant_fuzz.qoperator import qoperator_graph
from tests.quant_fuzz.tflite_models import built_model, byte_mutant, field_mutant

ONNX_MODELS = ("ad01_int8", "kws_ref_model")
TFLITE_MODELS = ("ad01_int8", "kws_ref_model")
# Every source with a number of its own (part of each mutant's seed, so adding a source never
# changes the others' mutants).
SOURCE_IDS = {"qop": 1, "qdq": 2, "ad01_int8": 3, "kws_ref_model": 4, "tflite-built": 5,
              "tflite-bytes": 6, "tflite-shared": 7}
SHARED_SOURCES = {"ad01_int8", "kws_ref_model", "tflite-shared"}
TFLITE_SOURCES = {"tflite-built", "tflite-bytes", "tflite-shared"}
_GEMM_LIKE = {"Conv", "MatMul", "Gemm", "QLinearConv", "QLinearMatMul", "QGemm"}


@dataclass
class Mutant:
    """One model of the campaign, with what is needed to run it and to judge the result.

    Attributes:
        source: The source it comes from (a key of SOURCE_IDS).
        index: Its number in the source (with the campaign's seed, enough to rebuild it).
        fmt: "onnx" or "tflite".
        data: The file's bytes.
        how: What was built and how it was mutated, one line.
        feeds: Values for graph inputs that stand for a former constant (else random inputs).
        oracle: "ort" (node for node), "ort-qdq" (onnxruntime's integer path) or "tflm".
        u8s8: It may multiply uint8 activations (onnxruntime's u8s8 kernels may saturate).
        overflow: Its int32 accumulators may overflow (biases near the limits), where C code
            wraps and every runtime may answer differently.
        must_refuse: Why the specifications forbid the model (a mutation made it so), or "".
    """

    source: str
    index: int
    fmt: str
    data: bytes
    how: str
    feeds: dict = field(default_factory=dict)
    oracle: str = "ort"
    u8s8: bool = False
    overflow: bool = False
    must_refuse: str = ""

    @property
    def extreme(self) -> bool:
        """Whether it was given scales far outside what quantizers write (1e-40, 1e30...)."""
        return "extreme scale" in self.how

    @property
    def label(self) -> str:
        """The file name errors must name."""
        return f"{self.source}-{self.index}.{self.fmt}"


def _rng(seed: int, source: str, index: int) -> np.random.Generator:
    return np.random.default_rng([seed, SOURCE_IDS[source], index])


def _u8s8(model: onnx.ModelProto) -> bool:
    """Whether uint8 data may reach a convolution or matrix product (a cautious guess)."""
    graph = model.graph
    uint8 = any(v.type.tensor_type.elem_type == TensorProto.UINT8
                for v in [*graph.input, *graph.output]) or any(
        t.data_type == TensorProto.UINT8 for t in graph.initializer)
    return uint8 and any(n.op_type in _GEMM_LIKE for n in graph.node)


def _built_onnx(source: str, index: int, seed: int) -> Mutant:
    rng = _rng(seed, source, index)
    model, builder = (qoperator_graph if source == "qop" else qdq_graph)(rng)
    feeds = dict(builder.feeds)
    done, invalid = [], ""
    if rng.random() < 0.55:
        done, invalid = mutate(model, rng, feeds, 1 if rng.random() < 0.7 else 2)
    how = "; ".join(builder.notes) + (" | mutated: " + "; ".join(done) if done else "")
    overflow = "int32 limits" in how
    return Mutant(source, index, "onnx", model.SerializeToString(), how, feeds,
                  "ort" if source == "qop" else "ort-qdq", _u8s8(model), overflow, invalid)


@cache
def shared_bytes(folder: str, name: str) -> bytes | None:
    """A model of the shared folder, read once (None when it is not there)."""
    path = SHARED_MODELS / folder / name
    return path.read_bytes() if path.exists() else None


def _mlperf_onnx(source: str, index: int, seed: int) -> Mutant:
    rng = _rng(seed, source, index)
    model = onnx.load_from_string(shared_bytes("onnx", f"{source}.onnx"))
    feeds: dict = {}
    done, invalid = ([], "") if index == 0 else mutate(model, rng, feeds,
                                                       int(rng.integers(1, 3)),
                                                       MLPERF_MUTATIONS)
    how = "MLPerf Tiny model" + (" | mutated: " + "; ".join(done) if done else "")
    return Mutant(source, index, "onnx", model.SerializeToString(), how, feeds, "ort-qdq",
                  False, "int32 limits" in how, invalid)


def _tflite(source: str, index: int, seed: int) -> Mutant:
    rng = _rng(seed, source, index)
    if source == "tflite-shared":
        name = TFLITE_MODELS[index % len(TFLITE_MODELS)]
        data, notes = shared_bytes("tflite", f"{name}.tflite"), [f"MLPerf Tiny {name}"]
    else:
        data, notes = built_model(rng)
    done, invalid = [], ""
    if source == "tflite-bytes" or (source == "tflite-shared" and rng.random() < 0.4):
        data, done = byte_mutant(data, rng)
    elif source == "tflite-shared" or rng.random() < 0.7:
        data, done, invalid = field_mutant(data, rng)
    how = "; ".join(notes) + (" | mutated: " + "; ".join(done) if done else "")
    return Mutant(source, index, "tflite", data, how, {}, "tflm", False,
                  "int32 limits" in how, invalid)


def make_mutant(source: str, index: int, seed: int = 0) -> Mutant:
    """The `index`-th mutant of `source` in the campaign seeded `seed`."""
    if source in ("qop", "qdq"):
        return _built_onnx(source, index, seed)
    if source in ONNX_MODELS:
        return _mlperf_onnx(source, index, seed)
    return _tflite(source, index, seed)


def source_available(source: str) -> bool:
    """Whether the models a source mutates are here (the shared folder's, for some)."""
    if source in ONNX_MODELS:
        return shared_bytes("onnx", f"{source}.onnx") is not None
    if source == "tflite-shared":
        return all(shared_bytes("tflite", f"{n}.tflite") is not None for n in TFLITE_MODELS)
    return True
