"""The original model's own runtime, for validation's X-cross row.

ONNX files run in onnxruntime (one thread, `session.qdqisint8allowed=1`); int8 `.tflite`
files in the tflite-micro interpreter, TFLite Micro's own kernels; float ones in LiteRT. A
runtime that is not installed is said in one sentence, and the row is left out.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from compiler.errors import KilnError


class NoReference(KilnError):
    """The original model's runtime is not installed here."""


def reference_name(model: Path, integer_inputs: bool) -> str:
    """Which runtime runs `model`: onnxruntime, tflite-micro or LiteRT."""
    if model.suffix.lower() == ".onnx":
        return "onnxruntime"
    return "tflite-micro" if integer_inputs else "LiteRT"


def reference_outputs(model: Path, feeds: list[dict[str, np.ndarray]],
                      input_names: list[str], output_count: int
                      ) -> tuple[str, list[list[np.ndarray]]]:
    """The runtime's name and its outputs (in the model's order) for each feed."""
    integer = any(np.asarray(v).dtype.kind in "iu" for f in feeds[:1] for v in f.values())
    name = reference_name(model, integer)
    if name == "onnxruntime":
        return name, _onnxruntime(model, feeds)
    if name == "tflite-micro":
        return name, _tflite_micro(model, feeds, input_names, output_count)
    return name, _litert(model, feeds, input_names)


def _onnxruntime(model: Path, feeds: list[dict[str, np.ndarray]]) -> list[list[np.ndarray]]:
    try:
        import onnxruntime as ort
    except ImportError:
        raise NoReference("onnxruntime is not installed (pip install onnxruntime)") from None
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.qdqisint8allowed", "1")
    try:
        session = ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
        names = [i.name for i in session.get_inputs()]
        return [[np.asarray(o) for o in session.run(None, {n: f[n] for n in names})]
                for f in feeds]
    except Exception as exc:  # onnxruntime raises its own exception types
        raise NoReference(f"onnxruntime cannot run {model.name}: {str(exc)[:200]}") from None


def _tflite_micro(model: Path, feeds: list[dict[str, np.ndarray]], input_names: list[str],
                  output_count: int) -> list[list[np.ndarray]]:
    try:
        from tflite_micro.python.tflite_micro import runtime
    except ImportError:
        raise NoReference("the tflite-micro interpreter is not installed "
                          "(pip install tflite-micro)") from None
    try:
        interpreter = runtime.Interpreter.from_bytes(model.read_bytes(), arena_size=8 << 20)
        results = []
        for feed in feeds:
            for i, name in enumerate(input_names):
                interpreter.set_input(feed[name], i)
            interpreter.invoke()
            results.append([np.array(interpreter.get_output(i)) for i in range(output_count)])
        return results
    except Exception as exc:
        raise NoReference(f"tflite-micro cannot run {model.name}: {str(exc)[:200]}") from None


def _litert(model: Path, feeds: list[dict[str, np.ndarray]], input_names: list[str]
            ) -> list[list[np.ndarray]]:
    try:
        from ai_edge_litert.interpreter import Interpreter
    except ImportError:
        raise NoReference("LiteRT is not installed (pip install ai-edge-litert)") from None
    try:
        interpreter = Interpreter(model_path=str(model), num_threads=1)
        interpreter.allocate_tensors()
        inputs = interpreter.get_input_details()
        outputs = interpreter.get_output_details()
        results = []
        for feed in feeds:
            for detail, name in zip(inputs, input_names):
                interpreter.set_tensor(detail["index"], feed[name].reshape(detail["shape"]))
            interpreter.invoke()
            results.append([np.array(interpreter.get_tensor(d["index"])) for d in outputs])
        return results
    except Exception as exc:
        raise NoReference(f"LiteRT cannot run {model.name}: {str(exc)[:200]}") from None
