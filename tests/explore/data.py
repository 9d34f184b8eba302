"""Labelled data sets for exploring the MLPerf Tiny float models, written as .npz (x, y).

The models come without their data sets, so the labels are the float model's own top-1 on
held-out inputs drawn like the calibration ones (as the quantizer bench draws them): a point's
accuracy is then its top-1 agreement with float on inputs it was not calibrated on. Drawn
inputs the float model itself hesitates on (its two best classes within `MARGIN` of each
other in probability) are left out: a label that flips on any rounding measures noise, and no
tool would keep a point within half a point of float on them (NNCF then reverts every layer).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from compiler.codegen.host import HostNet
from compiler.driver import Options, compilation
from compiler.frontends.load import load_model

HELD_OUT = 64
MARGIN = 0.2  # least gap between the float model's two best probabilities on a held-out input


def _kws(shared: Path, rng, count: int) -> np.ndarray:
    quant = load_model(shared / "tflite" / "kws_ref_model.tflite").inputs[0].type.quant
    q = np.load(shared / "inputs" / "kws_input_int8_1x49x10x1.npy").astype(np.float32)
    real = (q - quant.zero_point[0]) * np.float32(quant.scale[0])
    return np.stack([(np.roll(real, int(rng.integers(-6, 7)), axis=1)
                      + rng.standard_normal(real.shape) * 0.3 * quant.scale[0])[0]
                     for _ in range(count)]).astype(np.float32)


def _resnet(rng, count: int) -> np.ndarray:
    coarse = rng.uniform(0, 255, (count, 4, 4, 3))
    return np.repeat(np.repeat(coarse, 8, axis=1), 8, axis=2).astype(np.float32)


def _outputs(graph, samples: np.ndarray) -> np.ndarray:
    """The float model's first output for each sample (compiled host code)."""
    net = HostNet(compilation(graph).net(Options("host")))
    try:
        rows = []
        for sample in samples:
            net.set_inputs({graph.inputs[0].name: sample[None]})
            net.call()
            rows.append(np.array(net.output_views()[graph.outputs[0].name]).reshape(-1))
    finally:
        net.close()
    return np.stack(rows)


def labelled_sets(name: str, shared: Path, folder: Path, held_out: int = HELD_OUT
                  ) -> tuple[Path, Path, Path]:
    """(model, calibration .npz, held-out .npz with the float model's top-1 as labels)."""
    model = shared / "onnx" / f"{name}.onnx"
    graph = load_model(model)
    draw = {"kws_ref_model_float32": lambda rng, n: _kws(shared, rng, n),
            "pretrainedResnet": _resnet}[name]
    calib = draw(np.random.default_rng(0), 32)
    drawn = draw(np.random.default_rng(1), 3 * held_out)
    outputs = _outputs(graph, drawn)
    top = np.sort(outputs, axis=1)
    clear = np.flatnonzero(top[:, -1] - top[:, -2] >= MARGIN)[:held_out]
    assert len(clear) == held_out, f"only {len(clear)} clear held-out inputs for {name}"
    held, labels = drawn[clear], outputs[clear].argmax(axis=1)
    calib_path, held_path = folder / f"{name}_calib.npz", folder / f"{name}_eval.npz"
    np.savez(calib_path, x=calib)
    np.savez(held_path, x=held, y=labels)
    return model, calib_path, held_path
