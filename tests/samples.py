"""The real sample inputs of the MLPerf Tiny int8 models, as the int8 tensors they take."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np


def int8_sample(name: str, shape, folder: Path, quantization: Callable[[], tuple[float, int]]
                ) -> np.ndarray:
    """The sample of model `name` (KWS and ResNet-8 ship int8 ones; VWW and AD are quantized
    with the (scale, zero point) `quantization` gives), shaped `shape`."""
    inputs = folder / "inputs"
    if name == "kws_ref_model":
        return np.load(inputs / "kws_input_int8_1x49x10x1.npy").reshape(shape)
    if name == "pretrainedResnet_quant":  # the int8 model takes value - 128
        image = np.load(inputs / "ic_inputs_uint8_Nx32x32x3.npy")[:1].astype(np.int16) - 128
        return image.astype(np.int8).reshape(shape)
    scale, zp = quantization()
    real = (np.load(inputs / "vww_inputs_float_Nx96x96x3.npy")[:1] if name == "vww_96_int8"
            else np.load(inputs / "ad_input_float32.npy")[:640])
    q = np.rint(real.astype(np.float32) / np.float32(scale)) + zp
    return np.clip(q, -128, 127).astype(np.int8).reshape(shape)
