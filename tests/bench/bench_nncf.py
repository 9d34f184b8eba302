"""Benchmark: `kiln explore` against NNCF's `quantize_with_accuracy_control`, on Cortex-M7.

Both tools get the same float ONNX file, calibration samples, labelled validation samples,
metric (top-1 accuracy) and bound (an absolute drop of at most 0.005, `--max-drop 0.5`):
- digits CNN: scikit-learn's digits, the training split to calibrate, the held-out split;
- the same CNN with conv1's channel 0 scaled by 1000 and conv2's inputs from it by 1/1000
  (the same float function; plain int8 falls apart, NNCF reverts conv2 to float);
- KWS and ResNet-8 (float): the samples `tests/explore/data.py` builds as bench_quantizer.py
  draws them, each held-out input labelled with the float model's top-1, those it hesitates on
  left out (the tests of `kiln explore` use the same sets).
NNCF 3.4's ONNX backend quantizes with accuracy control (its validation function runs
onnxruntime); its QDQ model is then compiled by Kiln for cortex-m7 like any file: instructions
of one inference counted under QEMU, flash and RAM of the bundle, the Conv/Gemm/MatMul nodes
Kiln still computes in float, accuracy from Kiln's compiled host code and from onnxruntime.
Kiln's side is `kiln explore` on two Ray workers, its best feasible point by instructions.
Goal, per model: Kiln's point keeps no more layers float than NNCF and runs fewer instructions.

NNCF runs in a child process whose home is a temporary folder and whose telemetry is off:
importing it writes under ~/intel otherwise. Install it with `pip install 'kiln[bench]'`.
Run `python tests/bench/bench_nncf.py` from the project root (`--models`, `--trials`).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # for compiler.* and tests.* when run as a script

SHARED = ROOT.parent / "shared" / "models"
SAMPLE = ROOT / "app" / "resources" / "models" / "digits_cnn.onnx"
MODELS = ("digits_cnn", "digits_scaled", "kws_ref_model_float32", "pretrainedResnet")
MAX_DROP = 0.005  # absolute, in accuracy (half a point)
HELD_OUT = 400  # KWS and ResNet-8 validation samples: one miss is a quarter of the bound
TRIALS = 24
WEIGHTED = ("Conv", "Gemm", "MatMul", "ConvTranspose")


# -- the data both tools get ---------------------------------------------------------------

def _save(path: Path, samples: np.ndarray, labels: np.ndarray | None = None) -> Path:
    arrays = {"x": samples} if labels is None else {"x": samples, "y": labels}
    np.savez(path, **arrays)
    return path


def _float_top1(model: Path, name: str, samples: np.ndarray) -> np.ndarray:
    import onnxruntime as ort

    session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    return np.array([int(np.argmax(session.run(None, {name: x[None]})[0])) for x in samples])


def prepare(name: str, folder: Path) -> tuple[Path, Path, Path]:
    """(float model, calibration .npz, labelled validation .npz) for `name`."""
    from compiler.frontends.load import load_model
    from compiler.quant.calibration_data import load_calibration

    if name.startswith("digits"):
        model = SAMPLE
        if name == "digits_scaled":
            from tests.helpers import hard_digits_model

            model = folder / "digits_scaled.onnx"
            onnx.save(hard_digits_model(), model)
        graph = load_model(model)
        calib, held = (load_calibration(f"digits:{part}", graph) for part in ("train", "test"))
        return (model, _save(folder / f"{name}_calib.npz", calib.samples),
                _save(folder / f"{name}_eval.npz", held.samples, held.labels))
    from tests.explore.data import labelled_sets

    return labelled_sets(name, SHARED, folder, HELD_OUT)


# -- NNCF, in a child process ----------------------------------------------------------------

def nncf_child(model: str, calib: str, evaluation: str, output: str) -> None:
    """Quantize with NNCF's accuracy control (this process: the child's entry point)."""
    import nncf
    import onnxruntime as ort

    float_model = onnx.load(model)
    inits = {i.name for i in float_model.graph.initializer}
    name = next(i.name for i in float_model.graph.input if i.name not in inits)
    samples = np.load(calib)["x"]
    with np.load(evaluation) as held:
        items = list(zip(held["x"], held["y"]))

    def validate(quantized, data):
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        session = ort.InferenceSession(quantized.SerializeToString(), options,
                                       providers=["CPUExecutionProvider"])
        right = [float(np.argmax(session.run(None, {name: x[None]})[0]) == y) for x, y in data]
        return float(np.mean(right)), right

    start = time.perf_counter()
    quantized = nncf.quantize_with_accuracy_control(
        float_model, nncf.Dataset([{name: x[None]} for x in samples]), nncf.Dataset(items),
        validate, max_drop=MAX_DROP, drop_type=nncf.DropType.ABSOLUTE,
        subset_size=len(samples))
    seconds = time.perf_counter() - start
    onnx.save(quantized, output)
    print(json.dumps({"seconds": seconds, "accuracy": validate(quantized, items)[0],
                      "nncf": nncf.__version__}))


def run_nncf(model: Path, calib: Path, evaluation: Path, output: Path) -> dict:
    """NNCF's figures ({"seconds", "accuracy", "log"}), its model written to `output`."""
    with tempfile.TemporaryDirectory(prefix="kiln-nncf-home-") as home:
        env = {**os.environ, "HOME": home, "NNCF_CI": "1"}  # telemetry off, ~/intel aside
        done = subprocess.run([sys.executable, __file__, "--nncf-child", str(model), str(calib),
                               str(evaluation), str(output)], env=env, capture_output=True,
                              text=True, cwd=ROOT)
    if done.returncode != 0:
        raise RuntimeError(f"NNCF failed on {model.name}: {done.stderr.strip()[-2000:]}")
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    figures["log"] = [line for line in (done.stdout + done.stderr).splitlines()
                      if "nncf" in line.lower() and ("Revert" in line or "drop" in line)]
    return figures


def nncf_float_layers(path: Path) -> list[str]:
    """Conv/Gemm/MatMul nodes of NNCF's file whose weight is no DequantizeLinear of integers.

    The integers are an int8 initializer, or a QuantizeLinear of weights that are themselves
    dequantized (KWS's float file stores int8 weights).
    """
    model = onnx.load(path)
    integers = {i.name for i in model.graph.initializer
                if i.data_type in (onnx.TensorProto.INT8, onnx.TensorProto.UINT8)}
    integers |= {n.output[0] for n in model.graph.node if n.op_type == "QuantizeLinear"}
    dequantized = {n.output[0] for n in model.graph.node
                   if n.op_type == "DequantizeLinear" and n.input[0] in integers}
    return [n.name for n in model.graph.node
            if n.op_type in WEIGHTED and n.input[1] not in dequantized]


def _ort_accuracy(path: Path, evaluation: Path) -> float:
    with np.load(evaluation) as held:
        x, y = held["x"], held["y"]
    model = onnx.load(path)
    inits = {i.name for i in model.graph.initializer}
    name = next(i.name for i in model.graph.input if i.name not in inits)
    return float(np.mean(_float_top1(path, name, x) == y))


def kiln_figures(path: Path, evaluation: Path) -> dict:
    """A QDQ file compiled by Kiln for cortex-m7: instructions, flash, RAM, float layers."""
    from compiler.codegen.bundle import footprint
    from compiler.codegen.sizes import object_sizes
    from compiler.driver import Options, compilation
    from compiler.explore.measure import INPUT_SEED, float_layer_count
    from compiler.frontends.load import load_model
    from compiler.mcu.counting import inference_instructions
    from compiler.quant.accuracy import answers
    from compiler.quant.calibration_data import load_calibration

    graph = load_model(path)
    compiled = compilation(graph)
    net = compiled.net(Options("cortex-m7"))
    flash, ram = footprint(net, object_sizes(net.object))
    return {"instructions": inference_instructions(net, INPUT_SEED), "flash": flash, "ram": ram,
            "float_layers": float_layer_count(compiled.final),
            "accuracy": answers(graph, load_calibration(evaluation, graph)).accuracy}


# -- Kiln --------------------------------------------------------------------------------------

def run_kiln(model: Path, calib: Path, evaluation: Path, folder: Path, trials: int,
             executor) -> dict:
    """`kiln explore`'s best feasible point by instructions, and the run's figures."""
    from compiler.explore.engine import Exploration
    from compiler.explore.problem import ProblemSpec

    spec = ProblemSpec(str(model), str(calib), str(evaluation), "cortex-m7", None, MAX_DROP)
    start = time.perf_counter()
    record = Exploration(spec, folder / f"{model.stem}_EXPLORE.json", trials, seed=0,
                         population=8, executor=executor, fresh=True).run()
    seconds = time.perf_counter() - start
    if "instructions" not in record.best:
        return {"seconds": seconds, "float_score": record.float_score, "feasible": False}
    trial = record.trials[record.best["instructions"]]
    m = trial.result["measurement"]
    control = record.trials[0].result.get("measurement")
    return {"seconds": seconds, "float_score": record.float_score, "feasible": True,
            "number": trial.number, "accuracy": m["score"], "instructions": m["instructions"],
            "flash": m["flash"], "ram": m["ram"], "float_layers": m["float_layers"],
            "config": trial.config, "control": control,
            "first_feasible_seconds": record.first_feasible_seconds}


# -- the table ---------------------------------------------------------------------------------

def _row(who: str, accuracy: float, floats: str, f: dict, seconds: float) -> str:
    return (f"  {who:22} {100 * accuracy:>8.2f}% {floats:>12} {f['instructions']:>13,} "
            f"{f['flash']:>9,} {f['ram']:>8,} {seconds:>8.1f}")


def compare(name: str, folder: Path, trials: int, executor) -> bool:
    """Print one model's table; whether Kiln meets the goal on it."""
    model, calib, evaluation = prepare(name, folder)
    quantized = folder / f"{name}_nncf.onnx"
    theirs = run_nncf(model, calib, evaluation, quantized)
    reverted = nncf_float_layers(quantized)
    compiled = kiln_figures(quantized, evaluation)
    ort_accuracy = _ort_accuracy(quantized, evaluation)
    ours = run_kiln(model, calib, evaluation, folder, trials, executor)
    with np.load(evaluation) as held:
        count = len(held["y"])
    print(f"\n{name} ({count} validation samples, float accuracy "
          f"{100 * ours['float_score']:.2f} %, bound {100 * MAX_DROP:g} points)")
    print(f"  {'':22} {'accuracy':>9} {'float layers':>12} {'instructions':>13} "
          f"{'flash':>9} {'RAM':>8} {'time s':>8}")
    print(_row("NNCF, compiled by Kiln", compiled["accuracy"],
               f"{len(reverted)} ({compiled['float_layers']})", compiled, theirs["seconds"]))
    print(f"  {'':22} onnxruntime: {100 * ort_accuracy:.2f} %; NNCF kept float: "
          f"{', '.join(reverted) or 'none'}")
    if not ours["feasible"]:
        print(f"  Kiln: no feasible point in {trials} trials ({ours['seconds']:.1f} s)")
        return False
    print(_row(f"Kiln best (#{ours['number']})", ours["accuracy"],
               str(ours["float_layers"]), ours, ours["seconds"]))
    if ours["control"]:
        c = ours["control"]
        print(f"  {'':22} accuracy control's point: {100 * c['score']:.2f} %, "
              f"{c['float_layers']} float, {c['instructions']:,} instructions")
    print(f"  {'':22} {_summary(ours['config'])}")
    ratio = ours["instructions"] / compiled["instructions"]
    fewer_float = ours["float_layers"] <= len(reverted)
    faster = ours["instructions"] < compiled["instructions"]
    print(f"  instructions Kiln / NNCF: {ratio:.3f}; no more float layers: "
          f"{'yes' if fewer_float else 'NO'}; fewer instructions: {'yes' if faster else 'NO'}")
    return fewer_float and faster


def _summary(config: dict) -> str:
    from compiler.explore.config import Config

    return Config.from_json(config).summary()


def main(argv: list[str] | None = None) -> int:
    """Compare on every model found; exit 1 when Kiln misses the goal on one."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="*", default=list(MODELS), choices=MODELS)
    parser.add_argument("--trials", type=int, default=TRIALS)
    parser.add_argument("--nncf-child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.nncf_child:
        nncf_child(*args.nncf_child)
        return 0
    from compiler.explore.executors import RayExecutor
    from compiler.harness.host_bench import cpu_model
    from compiler.mcu import firmware

    missing = firmware.missing_tools()
    if importlib.util.find_spec("nncf") is None:  # only the child imports it (telemetry)
        missing = [*missing, "nncf (pip install 'kiln[bench]')"]
    if missing:
        print(f"bench_nncf: skipped, {' and '.join(missing)} not found")
        return 1
    models = [m for m in args.models
              if m.startswith("digits") or (SHARED / "onnx" / f"{m}.onnx").exists()]
    print(f"Kiln explore against NNCF accuracy control on cortex-m7; CPU: {cpu_model()}")
    met = True
    executor = RayExecutor(workers=2)
    try:
        with tempfile.TemporaryDirectory(prefix="kiln-bench-nncf-") as folder:
            for name in models:
                met &= compare(name, Path(folder), args.trials, executor)
    finally:
        executor.close()
    print("\ngoal (Kiln's best feasible point: no more float layers than NNCF and fewer "
          "instructions, on every model):", "met" if met else "MISSED")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
