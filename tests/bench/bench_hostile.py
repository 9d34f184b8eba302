"""Benchmark: what hostile and huge models cost Kiln, each measured in a fresh process.

Prints the peak resident memory of `kiln inspect` on a few-KB model pointing at an 8 GiB
(sparse) external data file and on a 4 GiB ConstantOfShape (goal: under 200 MB, refused with
one line), and the time and peak memory of `kiln memory` and `kiln compile --target host` on a
20,000-node Conv/Relu chain (goal: compile under 5 s and 1 GB).
Run `python tests/bench/bench_hostile.py` from the project root.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # for tests.* when run as a script

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from tests.deep_models import conv_relu_chain  # noqa: E402
from tests.peak import measure_kiln  # noqa: E402


def _external_8gib(folder: Path) -> Path:
    with open(folder / "weights.bin", "wb") as handle:
        handle.truncate(8 << 30)
    tensor = TensorProto(name="W", data_type=TensorProto.FLOAT, dims=[2 << 30])
    tensor.data_location = TensorProto.EXTERNAL
    for key, value in (("location", "weights.bin"), ("length", str(8 << 30))):
        entry = tensor.external_data.add()
        entry.key, entry.value = key, value
    graph = helper.make_graph([helper.make_node("Identity", ["W"], ["y"], name="take_w")],
                              "external", [], [helper.make_tensor_value_info(
                                  "y", TensorProto.FLOAT, [2 << 30])], [tensor])
    path = folder / "external_8gib.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def _constant_of_shape_4gib(folder: Path) -> Path:
    shape = numpy_helper.from_array(np.array([1 << 30], np.int64), "shape")
    node = helper.make_node("ConstantOfShape", ["shape"], ["y"], name="huge_fill",
                            value=numpy_helper.from_array(np.array([1.0], np.float32)))
    graph = helper.make_graph([node], "fill", [], [helper.make_tensor_value_info(
        "y", TensorProto.FLOAT, None)], [shape])
    path = folder / "constant_of_shape_4gib.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def main() -> int:
    """Print one line per case; exit 1 when a goal is missed."""
    missed = 0
    with tempfile.TemporaryDirectory(prefix="kiln-hostile-") as tmp:
        folder = Path(tmp)
        for path in (_external_8gib(folder), _constant_of_shape_4gib(folder)):
            code, seconds, mb, err = measure_kiln(["inspect", str(path)])
            ok = code == 2 and mb < 200
            missed += not ok
            print(f"inspect {path.name:28} exit {code}  {seconds:6.2f} s  peak {mb:7.1f} MB  "
                  f"{'ok' if ok else 'MISSED (goal: refused, < 200 MB)'}\n    {err}")
        chain = folder / "chain_20000.onnx"
        start = time.perf_counter()
        onnx.save(conv_relu_chain(20000), chain)
        print(f"built a 20,000-node Conv/Relu chain in {time.perf_counter() - start:.1f} s")
        for command in (["inspect", str(chain)], ["memory", str(chain), "--json"],
                        ["compile", str(chain), "--target", "host", "-o",
                         str(folder / "bundle")]):
            code, seconds, mb, err = measure_kiln(command)
            goal = command[0] != "compile" or (seconds < 5 and mb < 1024)
            missed += code != 0 or not goal
            print(f"{command[0]:8} chain_20000.onnx  exit {code}  {seconds:6.2f} s  peak "
                  f"{mb:7.1f} MB  {'ok' if goal and code == 0 else 'MISSED (goal: < 5 s, < 1 GB)'}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
