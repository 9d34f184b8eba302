"""ONNX operator breadth: onnxruntime and Kiln on ONNX's node cases of Kiln's element types.

A case counts when every graph input and output is a tensor of an element type Kiln supports
(float32, int8, uint8, int32, int64, bool). Each engine passes a case when all of its data sets
agree with the expected outputs under onnx.backend.test's tolerance: onnxruntime (one thread,
every optimization), Kiln's reference interpreter, and Kiln compiled for the host (the pass
pipeline, the code generator, the object loaded in process). Parameter-like inputs are bound
for Kiln as the conformance test binds them (see test_onnx_backend).

`python -m tests.conformance.breadth [--compiled]` prints the counts and, per operator, the
cases onnxruntime passes and Kiln does not.
"""

from __future__ import annotations

import argparse
import collections
import warnings
from dataclasses import dataclass

import numpy as np
import onnx
from onnx.backend.test.runner import Runner, _normalize_tensor

from tests.conformance.test_onnx_backend import CASES, bind_parameters, run_case

KILN_TYPES = frozenset({onnx.TensorProto.FLOAT, onnx.TensorProto.INT8, onnx.TensorProto.UINT8,
                        onnx.TensorProto.INT32, onnx.TensorProto.INT64, onnx.TensorProto.BOOL})


def of_kiln_types(model: onnx.ModelProto) -> bool:
    """True when every graph input and output is a tensor of an element type Kiln supports."""
    for value in (*model.graph.input, *model.graph.output):
        kind = value.type.WhichOneof("value")
        if kind != "tensor_type" or value.type.tensor_type.elem_type not in KILN_TYPES:
            return False
    return True


SELECTED = sorted(name for name, case in CASES.items() if of_kiln_types(case.model))


def _check(expected, outputs, case) -> None:
    Runner.assert_similar_outputs([_normalize_tensor(e) for e in expected], list(outputs),
                                  rtol=case.rtol, atol=case.atol)


def passes_onnxruntime(name: str) -> bool:
    """Whether onnxruntime loads and runs the case and matches every expected output."""
    import onnxruntime as ort

    case = CASES[name]
    options = ort.SessionOptions()
    options.log_severity_level = 4
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    try:
        session = ort.InferenceSession(case.model.SerializeToString(), options,
                                       providers=["CPUExecutionProvider"])
        for inputs, expected in case.data_sets:
            feeds = {i.name: _normalize_tensor(a) for i, a in zip(session.get_inputs(), inputs)}
            _check(expected, session.run(None, feeds), case)
    except Exception:  # noqa: BLE001 - any failure of the engine is a case it does not pass
        return False
    return True


def passes_interpreter(name: str) -> bool:
    """Whether Kiln loads the case and its reference interpreter matches every output."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            run_case(name)
    except Exception:  # noqa: BLE001
        return False
    return True


def passes_compiled(name: str) -> bool:
    """Whether Kiln compiles the case for the host and the object matches every output."""
    from compiler.codegen.host import HostNet
    from compiler.driver import compile_graph
    from compiler.frontends.onnx import load_onnx
    from compiler.passes.runner import run_pipeline

    case = CASES[name]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for inputs, expected in case.data_sets:
                model, feeds = bind_parameters(case.model, list(inputs))
                graph = run_pipeline(load_onnx(model), snapshots=False).graph
                runner = HostNet(compile_graph(graph, "host", name="net"))
                try:
                    named = {v.name: np.asarray(a) for v, a in zip(graph.inputs, feeds)}
                    outs = runner.run(named)
                finally:
                    runner.close()
                _check(expected, [outs[v.name] for v in graph.outputs], case)
    except Exception:  # noqa: BLE001
        return False
    return True


@dataclass
class Census:
    """Which selected cases each engine passes."""

    onnxruntime: set[str]
    interpreter: set[str]
    compiled: set[str] | None

    def summary(self) -> str:
        compiled = "" if self.compiled is None else \
            f"; Kiln compiled for the host {len(self.compiled)}"
        return (f"ONNX node cases of Kiln's element types: {len(SELECTED)}; onnxruntime passes "
                f"{len(self.onnxruntime)}, Kiln's interpreter {len(self.interpreter)}{compiled}")


def take(compiled: bool = False) -> Census:
    """Run every selected case through each engine."""
    ort_passed = {n for n in SELECTED if passes_onnxruntime(n)}
    kiln_passed = {n for n in SELECTED if passes_interpreter(n)}
    built = {n for n in sorted(kiln_passed) if passes_compiled(n)} if compiled else None
    return Census(ort_passed, kiln_passed, built)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compiled", action="store_true",
                        help="also compile each case the interpreter passes for the host")
    census = take(parser.parse_args().compiled)
    missing = collections.Counter()
    for name in census.onnxruntime - census.interpreter:
        ops = sorted({n.op_type for n in CASES[name].model.graph.node})
        missing["+".join(ops) if len(ops) < 4 else name] += 1
    for what, count in missing.most_common():
        print(f"onnxruntime only: {count:3d}  {what}")
    print(census.summary())


if __name__ == "__main__":
    main()
