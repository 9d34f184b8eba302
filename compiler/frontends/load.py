"""Open a model file of either format Kiln reads, chosen by its content rather than its name."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from compiler.errors import ModelError
from compiler.frontends.onnx import load_onnx
from compiler.frontends.tflite import load_tflite
from compiler.frontends.tflite.flatbuffer import IDENTIFIER
from compiler.ir.graph import Graph

# What File > Open offers, and the suffixes a drop onto the window accepts.
MODEL_SUFFIXES = (".onnx", ".tflite")


def is_tflite(head: bytes) -> bool:
    """Whether the first bytes of a file are a TFLite flatbuffer's (identifier TFL3 at 4..8)."""
    return head[4:8] == IDENTIFIER


def load_model(source: str | os.PathLike | bytes,
               shapes: Mapping[str, tuple[int, ...]] | None = None,
               *, label: str | None = None) -> Graph:
    """An ONNX or TFLite model as a Kiln graph (ModelError, naming the file, otherwise)."""
    if isinstance(source, (bytes, bytearray)):
        named = (label or "").lower().endswith(".tflite")
        loader = load_tflite if named or is_tflite(bytes(source[:8])) else load_onnx
        return loader(bytes(source), shapes, label=label)
    path = Path(source)
    try:
        with path.open("rb") as f:
            head = f.read(8)
    except OSError:
        head = b""  # the ONNX loader names what is wrong with the path
    except ValueError as exc:  # e.g. an embedded NUL in the name
        raise ModelError(f"cannot open the file ({exc})", file=label or path.name) from None
    # A file named .tflite is read as one, so a damaged one is reported as a damaged TFLite file.
    named = path.suffix.lower() == ".tflite"
    loader = load_tflite if named or is_tflite(head) else load_onnx
    return loader(path, shapes, label=label)
