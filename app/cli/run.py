"""`kiln run`: a model run by the reference interpreter, or compiled for this host."""

from __future__ import annotations

import io
import json
from collections.abc import Sequence

import numpy as np

from app.cli.args import (
    UsageError,
    Warnings,
    add_model_args,
    add_pipeline_arg,
    add_profile_arg,
    compilation_of,
    load_graph,
    parse_input,
    writable_file,
)
from compiler.errors import KilnError


def add_parser(sub) -> None:
    """The `run` command's arguments."""
    run = sub.add_parser("run", help="run a model with the reference interpreter or compiled")
    add_model_args(run)
    run.add_argument("--input", action="append", metavar="NAME=FILE.npy",
                     help="an input tensor (inputs not given get a seeded random tensor)")
    run.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default 0)")
    run.add_argument("--engine", choices=["reference", "compiled"], default="reference",
                     help="the reference interpreter (default), or the model compiled for this "
                          "host and run as a bundle")
    run.add_argument("-o", "--output", metavar="OUT.npz", help="write the outputs to an npz file")
    run.add_argument("--stage", default=None, metavar="STAGE",
                     help="run the graph as loaded ('loaded'), after the whole default pipeline "
                          "('final'), after the named pass (NAME, or NAME#K for its K-th run), "
                          "or after the first N passes (to bisect a miscompile); default: the "
                          "model's own answer, the graph as loaded for a float model and the "
                          "integer graph for a quantized one (its Quantize/Dequantize pairs run "
                          "in float only approximate its rule)")
    run.add_argument("--json", action="store_true",
                     help="print one JSON document: each output's type, shape and values")
    run.add_argument("--dequantize", action="store_true",
                     help="also print quantized (int8/uint8) outputs as real values, "
                          "scale x (q - zero_point)")
    add_pipeline_arg(run)
    add_profile_arg(run)


def run(args) -> int:
    """`kiln run`."""
    from compiler.interpreter import run
    from compiler.qmath.explain import real_value_formula

    if args.output:
        writable_file(args.output)
    graph = load_graph(args)
    feeds = _read_inputs(graph, args.input or [], args.seed)
    if args.engine == "compiled":
        if args.stage is not None:
            raise UsageError("--stage applies to the reference engine only; the compiled engine "
                             "always runs the final graph")
        outputs = _run_compiled(compilation_of(args, graph), feeds)
    else:
        compiled = compilation_of(args, graph)
        if args.stage is None and compiled.reference is not graph and not args.json:
            print(f"the integer graph (after to_integer, {_rule_of(compiled)} rule), as the "
                  "compiled code computes it")
        graph = compiled.reference if args.stage is None else compiled.stage(args.stage)
        outputs = run(graph, feeds)
    quant = {v.name: v.type.quant for v in graph.outputs}
    if args.output:
        _write_outputs(args.output, outputs)
    if args.json:
        print(json.dumps({"engine": args.engine, "outputs": {
            name: {"dtype": array.dtype.name, "shape": list(array.shape),
                   "values": array.reshape(-1).tolist(),
                   "argmax": int(np.argmax(array)) if array.size else None}
            for name, array in outputs.items()}, "written": args.output}))
        return 0
    for name, array in outputs.items():
        flat = array.reshape(-1)
        preview = np.array2string(flat[:8], precision=5, separator=", ")
        more = " ..." if flat.size > 8 else ""
        line = f"{name}: {array.dtype.name}{list(array.shape)} {preview}{more}"
        if array.ndim >= 1 and array.size > 1 and array.shape[0] == 1:
            line += f"  argmax={int(np.argmax(flat))}"
        print(line)
        q = quant.get(name)
        if args.dequantize and q is not None and len(q.scale) == 1:
            real = np.float32(q.scale[0]) * (flat[:8].astype(np.float32) - q.zero_point[0])
            print(f"  {real_value_formula(q)}: "
                  f"{np.array2string(real, precision=5, separator=', ')}{more}")
    if args.output:
        Warnings(args).say(f"wrote {args.output}")
    return 0


def _read_inputs(graph, specs: Sequence[str], seed: int) -> dict[str, np.ndarray]:
    from compiler.inputs import random_inputs

    feeds = random_inputs(graph, seed)
    by_name = {v.name: v for v in graph.inputs}
    for spec in specs:
        name, path = parse_input(spec)
        if name not in by_name:
            raise UsageError(f"--input {name}: the model has no input of that name (inputs are: "
                             f"{', '.join(by_name)})")
        try:
            array = np.load(path, allow_pickle=False)
        except FileNotFoundError:
            raise UsageError(f"--input {name}: no such file {str(path)!r}") from None
        except (OSError, ValueError) as exc:
            raise UsageError(f"--input {name}: {str(path)!r} is not a readable .npy file "
                             f"({exc})") from None
        if not isinstance(array, np.ndarray):
            raise UsageError(f"--input {name}: {str(path)!r} holds several arrays; give a .npy")
        want = by_name[name].type
        if array.dtype.name != want.dtype:
            if not np.can_cast(array.dtype, want.dtype, casting="same_kind"):
                raise UsageError(f"--input {name}: {str(path)!r} holds {array.dtype.name}, the "
                                 f"model wants {want.dtype}")
            array = _converted_input(name, path, array, want.dtype)
        if tuple(array.shape) != want.shape:
            raise UsageError(f"--input {name}: {str(path)!r} has shape {list(array.shape)}, the "
                             f"model wants {list(want.shape)}")
        feeds[name] = array
    return feeds


def _converted_input(name: str, path, array: np.ndarray, dtype: str) -> np.ndarray:
    """`array` as the model's element type, refused when a value does not survive the change.

    numpy wraps an int64 200 to int8 -56 and turns a float64 1e39 into float32 infinity, both
    silently; the model would then compute on values the file does not hold.
    """
    target = np.dtype(dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        converted = array.astype(target)
    if target.kind in "iu":
        info = np.iinfo(target)
        bad, limit = (array < info.min) | (array > info.max), \
            f"outside {dtype}'s range [{info.min}, {info.max}]"
    elif target.kind == "f" and array.dtype.kind in "fiu":
        bad, limit = np.isfinite(array) & ~np.isfinite(converted), \
            f"beyond {dtype}'s largest value {np.finfo(target).max:g}"
    else:
        return converted
    if bad.any():
        at = np.unravel_index(int(np.argmax(bad)), array.shape)
        raise UsageError(f"--input {name}: {str(path)!r} holds {array[at]} at "
                         f"{[int(i) for i in at]}, {limit}")
    return converted


def _write_outputs(path: str, outputs: dict[str, np.ndarray]) -> None:
    """The outputs as an npz file, written atomically."""
    from compiler.fileio import atomic_write_bytes

    buffer = io.BytesIO()
    np.savez(buffer, **outputs)
    try:
        atomic_write_bytes(path, buffer.getvalue())
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror}") from None


def _rule_of(compiled) -> str:
    """The requantization rule a compilation's integer operators follow, as the user names it."""
    from compiler.qmath.requant import REQUANT_KEY

    return {"tflite": "TFLite Micro's", "onnx": "onnxruntime's"}.get(
        compiled.final.metadata.get(REQUANT_KEY), "onnxruntime's")


def _run_compiled(compiled, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Outputs of the final graph compiled for this host, written as a bundle and loaded back."""
    import tempfile

    from compiler.codegen.host import HostNet

    with tempfile.TemporaryDirectory(prefix="kiln-run-") as folder:
        compiled.bundle(folder)
        hosted = HostNet.from_bundle(folder)
        try:
            outputs = hosted.run(feeds)
        finally:
            hosted.close()
    missing = [v.name for v in compiled.graph.outputs if v.name not in outputs]
    if missing:
        raise KilnError(f"the compiled network lost output {missing[0]}")
    return {v.name: outputs[v.name] for v in compiled.graph.outputs}
