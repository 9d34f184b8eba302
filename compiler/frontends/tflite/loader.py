"""Read a .tflite model into a Kiln graph, refusing bad files with one clear sentence.

The graph is NHWC from the start and its integer operators follow TFLite Micro's arithmetic
(the `tflite` requantization rule). Every unsupported builtin is listed at once, by name and
operator index.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Mapping
from pathlib import Path

from compiler.errors import KilnError, ModelError
from compiler.fileio import model_source
from compiler.frontends.source import SOURCE_OPS
from compiler.frontends.tflite.builder import Builder, tensor_type
from compiler.frontends.tflite.builtins import CONVERTERS
from compiler.frontends.tflite.checks import check_operator, check_version
from compiler.frontends.tflite.flatbuffer import read_model
from compiler.frontends.tflite.variables import finish as finish_variables
from compiler.ir.graph import Graph
from compiler.qmath.check import check_quantization
from compiler.qmath.requant import REQUANT_KEY

MAX_FILE_BYTES = 2**31  # flatbuffers address 2 GiB; larger models keep data outside


def load_tflite(source: str | os.PathLike | bytes,
                shapes: Mapping[str, tuple[int, ...]] | None = None,
                *, label: str | None = None) -> Graph:
    """Load a .tflite model from a path or raw bytes.

    `shapes` is accepted for symmetry with load_onnx; TFLite shapes are static, so a shape that
    differs from the file's is refused.

    Raises:
        ModelError: for anything wrong with the file, naming the file, the operator and the reason.
    """
    label, data, _ = model_source(source, label, MAX_FILE_BYTES, "the limit of a flatbuffer")
    where = "the model"
    try:
        model = read_model(data)
        graph = Graph(Path(label).stem or "model", opset=13)
        builder = Builder(model, graph)
        builder.convert = convert
        _add_inputs(builder, shapes or {})
        _check_supported(model)
        for op in model.operators:
            where = f"operator {op.label}"
            builder.op = op
            try:
                check_version(op)
                check_operator(model, op)
                convert(builder, op)
            except ModelError as exc:
                raise ModelError(exc.reason, node=exc.node or op.label) from None
            except KilnError as exc:
                raise ModelError(str(exc), node=op.label) from None
        builder.op = None
        where = "the graph's outputs"
        for index in model.outputs:
            if index not in builder.values:
                raise ModelError(f"graph output {model.tensors[index].name} is produced by no "
                                 "operator")
            graph.outputs.append(builder.values[index])
        finish_variables(builder)  # state outputs after the model's own
        check_quantization(graph)
        graph.metadata.update({"format": "tflite", "description": model.description,
                               "tflite_version": model.version, REQUANT_KEY: "tflite",
                               SOURCE_OPS: builder.sources})
        graph.next_id = max(len(graph.nodes), graph.next_id)
        return graph
    except ModelError as exc:
        raise exc.with_file(label) from None
    except KilnError as exc:
        raise ModelError(str(exc), file=label) from None
    except (ValueError, TypeError, KeyError, IndexError, AttributeError, OverflowError,
            UnicodeDecodeError, MemoryError, RecursionError, struct.error) as exc:
        raise ModelError(f"{where} is malformed: its offsets or sizes contradict the flatbuffer "
                         "format, so it cannot be read", file=label) from exc


def convert(builder: Builder, op) -> None:
    """Add the nodes of one operator (of the main subgraph or one IF or WHILE inlines)."""
    if op.builtin not in CONVERTERS:
        raise ModelError(f"{op.builtin} is an operator Kiln does not support yet")
    CONVERTERS[op.builtin](builder, op)


def _check_supported(model) -> None:
    missing = [op.label for op in model.operators if op.builtin not in CONVERTERS]
    if missing:
        shown = ", ".join(missing[:12]) + (f" and {len(missing) - 12} more" if len(missing) > 12
                                            else "")
        raise ModelError(f"{len(missing)} operator(s) Kiln does not support yet: {shown}")


def _add_inputs(builder: Builder, shapes: Mapping[str, tuple[int, ...]]) -> None:
    for index in builder.model.inputs:
        t = builder.model.tensors[index]
        if t.name in shapes and tuple(shapes[t.name]) != t.shape:
            raise ModelError(f"input {t.name} has the static shape {list(t.shape)}; "
                             f"--shape {list(shapes[t.name])} cannot change it")
        name = builder.graph.unique_name(t.name)
        builder.values[index] = builder.graph.add_input(name, tensor_type(t))
