"""Train Kiln's sample digits CNN with plain numpy and export it to ONNX.

Kiln needs a small, real, reproducible model to compile and test against without pulling in a
deep-learning framework. This script trains a tiny CNN on the 8x8 digits (the UCI set
scikit-learn ships, stored with its split in compiler/quant/digits.npz) with hand-written numpy
backprop (im2col convolutions, Adam), exports it with ``onnx.helper`` using readable node
names, checks it, and re-measures its held-out accuracy with onnxruntime so the shipped file
and its accuracy record always agree. A fixed seed makes every run write a
byte-identical ``digits_cnn.onnx``.

Usage:
    python tools/train_digits_cnn.py
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from compiler.quant.calibration_data import digits

HERE = Path(__file__).resolve().parents[1] / "app" / "resources" / "models"
ONNX_PATH = HERE / "digits_cnn.onnx"
JSON_PATH = HERE / "digits_cnn.json"

SEED = 0
EPOCHS = 30
BATCH_SIZE = 32
LEARNING_RATE = 3e-3
MIN_ACCURACY = 0.95
OPSET = 13
IR_VERSION = 7  # Minimum IR for opset 13; pinned so new onnx releases do not change the bytes.
INPUT_NAME = "image"
OUTPUT_NAME = "logits"
NUM_CLASSES = 10

# (name, in_channels, out_channels); every conv is 3x3, stride 1, pads 1, followed by Relu.
CONVS = (("conv1", 1, 8), ("conv2", 8, 16), ("conv3", 16, 16))
FC_IN = 16 * 4 * 4


def digits_split() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Return the fixed stratified train/test split of the digits data.

    Kept importable so tests measure accuracy on exactly the held-out samples used here.

    Returns:
        ``(x_train, x_test, y_train, y_test)``; x is float32 ``[N, 1, 8, 8]`` scaled to 0..1,
        y is int64 ``[N]``.
    """
    (x_train, y_train), (x_test, y_test) = digits("train"), digits("test")
    return x_train, x_test, y_train, y_test


def init_params(rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Create He-initialised weights so ReLU activations keep a sane scale from the start.

    Args:
        rng: Seeded generator; the only source of randomness for weights.

    Returns:
        Parameters in PyTorch layout (conv ``[F, C, 3, 3]``, fc ``[10, 256]``) in float64.
    """
    params: dict[str, np.ndarray] = {}
    for name, c_in, c_out in CONVS:
        fan_in = c_in * 9
        params[f"{name}.weight"] = rng.normal(0.0, np.sqrt(2.0 / fan_in), (c_out, c_in, 3, 3))
        params[f"{name}.bias"] = np.zeros(c_out)
    params["fc.weight"] = rng.normal(0.0, np.sqrt(1.0 / FC_IN), (NUM_CLASSES, FC_IN))
    params["fc.bias"] = np.zeros(NUM_CLASSES)
    return params


def im2col(x: np.ndarray) -> np.ndarray:
    """Unfold 3x3 pad-1 patches so a convolution becomes one matrix multiply.

    Args:
        x: Activations ``[N, C, H, W]``.

    Returns:
        Patches ``[N * H * W, C * 9]`` ordered (c, kh, kw) to match the weight layout.
    """
    n, c, h, w = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    windows = np.lib.stride_tricks.sliding_window_view(xp, (3, 3), axis=(2, 3))
    return windows.transpose(0, 2, 3, 1, 4, 5).reshape(n * h * w, c * 9)


def col2im(dcols: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Scatter patch gradients back onto the input, the adjoint of ``im2col``.

    Args:
        dcols: Gradient w.r.t. the patches, ``[N * H * W, C * 9]``.
        shape: The input shape ``(N, C, H, W)``.

    Returns:
        Gradient w.r.t. the input ``[N, C, H, W]``.
    """
    n, c, h, w = shape
    d = dcols.reshape(n, h, w, c, 3, 3).transpose(0, 3, 4, 5, 1, 2)
    dxp = np.zeros((n, c, h + 2, w + 2), dtype=dcols.dtype)
    for kh in range(3):
        for kw in range(3):
            dxp[:, :, kh : kh + h, kw : kw + w] += d[:, :, kh, kw]
    return dxp[:, :, 1:-1, 1:-1]


def conv_forward(x: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> tuple:
    """Apply a 3x3 pad-1 convolution, keeping the patches for the backward pass.

    Returns:
        ``(out [N, F, H, W], cache)``.
    """
    n, _, h, w = x.shape
    cols = im2col(x)
    out = cols @ weight.reshape(weight.shape[0], -1).T + bias
    return out.reshape(n, h, w, -1).transpose(0, 3, 1, 2), (cols, x.shape)


def conv_backward(dout: np.ndarray, weight: np.ndarray, cache: tuple) -> tuple:
    """Differentiate ``conv_forward`` by hand.

    Returns:
        ``(dx, dweight, dbias)``.
    """
    cols, x_shape = cache
    f = weight.shape[0]
    dflat = dout.transpose(0, 2, 3, 1).reshape(-1, f)
    dweight = (dflat.T @ cols).reshape(weight.shape)
    dbias = dflat.sum(axis=0)
    dx = col2im(dflat @ weight.reshape(f, -1), x_shape)
    return dx, dweight, dbias


def maxpool_forward(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Apply 2x2 stride-2 max pooling, remembering the winner of each window.

    Returns:
        ``(out [N, C, H/2, W/2], onehot)`` where ``onehot`` marks the single argmax per
        window, so ties route the gradient to one input exactly like a framework would.
    """
    n, c, h, w = x.shape
    win = x.reshape(n, c, h // 2, 2, w // 2, 2).transpose(0, 1, 2, 4, 3, 5)
    win = win.reshape(n, c, h // 2, w // 2, 4)
    arg = win.argmax(axis=-1)
    onehot = arg[..., None] == np.arange(4)
    return np.take_along_axis(win, arg[..., None], axis=-1)[..., 0], onehot


def maxpool_backward(dout: np.ndarray, onehot: np.ndarray) -> np.ndarray:
    """Route pooled gradients to the positions that won the max.

    Returns:
        Gradient w.r.t. the pooling input ``[N, C, H, W]``.
    """
    n, c, hp, wp, _ = onehot.shape
    dwin = onehot * dout[..., None]
    dwin = dwin.reshape(n, c, hp, wp, 2, 2).transpose(0, 1, 2, 4, 3, 5)
    return dwin.reshape(n, c, hp * 2, wp * 2)


def forward(params: dict[str, np.ndarray], x: np.ndarray) -> tuple[np.ndarray, dict]:
    """Run the network exactly as the exported ONNX graph does.

    Returns:
        ``(logits [N, 10], cache)`` with what ``backward`` needs.
    """
    cache: dict = {}
    h, cache["conv1"] = conv_forward(x, params["conv1.weight"], params["conv1.bias"])
    h = cache["relu1"] = np.maximum(h, 0.0)
    h, cache["conv2"] = conv_forward(h, params["conv2.weight"], params["conv2.bias"])
    h = cache["relu2"] = np.maximum(h, 0.0)
    h, cache["pool1"] = maxpool_forward(h)
    h, cache["conv3"] = conv_forward(h, params["conv3.weight"], params["conv3.bias"])
    h = cache["relu3"] = np.maximum(h, 0.0)
    flat = cache["flatten"] = h.reshape(h.shape[0], -1)
    return flat @ params["fc.weight"].T + params["fc.bias"], cache


def softmax_cross_entropy(logits: np.ndarray, y: np.ndarray) -> tuple[float, np.ndarray]:
    """Compute mean cross-entropy and its gradient w.r.t. the logits in one stable pass.

    Returns:
        ``(loss, dlogits)``.
    """
    shifted = logits - logits.max(axis=1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    n = logits.shape[0]
    loss = -log_probs[np.arange(n), y].mean()
    dlogits = np.exp(log_probs)
    dlogits[np.arange(n), y] -= 1.0
    return float(loss), dlogits / n


def backward(
    params: dict[str, np.ndarray], cache: dict, dlogits: np.ndarray
) -> dict[str, np.ndarray]:
    """Backpropagate the loss gradient through every layer in reverse order.

    Returns:
        Gradients keyed like ``params``.
    """
    grads: dict[str, np.ndarray] = {}
    grads["fc.weight"] = dlogits.T @ cache["flatten"]
    grads["fc.bias"] = dlogits.sum(axis=0)
    dh = (dlogits @ params["fc.weight"]).reshape(cache["relu3"].shape)
    for conv, relu in (("conv3", "relu3"), ("conv2", "relu2"), ("conv1", "relu1")):
        dh = dh * (cache[relu] > 0)
        dh, grads[f"{conv}.weight"], grads[f"{conv}.bias"] = conv_backward(
            dh, params[f"{conv}.weight"], cache[conv]
        )
        if conv == "conv3":
            dh = maxpool_backward(dh, cache["pool1"])
    return grads


def train(x: np.ndarray, y: np.ndarray, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Fit the network with mini-batch Adam and a cosine learning-rate decay.

    Training runs in float64 so the result does not hinge on float32 rounding; the weights
    are cast to float32 only at export.

    Args:
        x: Training images ``[N, 1, 8, 8]``.
        y: Training labels ``[N]``.
        rng: Seeded generator used for initialisation and shuffling.

    Returns:
        Trained parameters.
    """
    params = init_params(rng)
    x = x.astype(np.float64)
    m = {k: np.zeros_like(v) for k, v in params.items()}
    v = {k: np.zeros_like(p) for k, p in params.items()}
    beta1, beta2, eps = 0.9, 0.999, 1e-8
    steps_per_epoch = -(-len(x) // BATCH_SIZE)
    total_steps = EPOCHS * steps_per_epoch
    step = 0
    for epoch in range(EPOCHS):
        order = rng.permutation(len(x))
        epoch_loss = 0.0
        for start in range(0, len(x), BATCH_SIZE):
            idx = order[start : start + BATCH_SIZE]
            logits, cache = forward(params, x[idx])
            loss, dlogits = softmax_cross_entropy(logits, y[idx])
            grads = backward(params, cache, dlogits)
            step += 1
            lr = LEARNING_RATE * 0.5 * (1.0 + np.cos(np.pi * (step - 1) / total_steps))
            for k in params:  # Insertion order is fixed, so updates are deterministic.
                m[k] = beta1 * m[k] + (1.0 - beta1) * grads[k]
                v[k] = beta2 * v[k] + (1.0 - beta2) * grads[k] ** 2
                m_hat = m[k] / (1.0 - beta1**step)
                v_hat = v[k] / (1.0 - beta2**step)
                params[k] -= lr * m_hat / (np.sqrt(v_hat) + eps)
            epoch_loss += loss * len(idx)
        if epoch % 5 == 4 or epoch == EPOCHS - 1:
            print(f"epoch {epoch + 1:3d}/{EPOCHS}  loss {epoch_loss / len(x):.4f}")
    return params


def build_model(params: dict[str, np.ndarray]) -> onnx.ModelProto:
    """Express the trained network as an opset-13 ONNX graph with readable names.

    Names follow ``conv1`` / ``conv1.weight`` so compiler diagnostics and generated C symbols
    are easy to trace back to the layer they came from.

    Args:
        params: Trained parameters from ``train``.

    Returns:
        A checked ``ModelProto`` with no time stamps or other run-dependent fields.
    """
    initializers = [
        numpy_helper.from_array(np.ascontiguousarray(value, dtype=np.float32), name)
        for name, value in params.items()
    ]
    nodes = []
    prev = INPUT_NAME
    for i, (name, _, _) in enumerate(CONVS, start=1):
        nodes.append(
            helper.make_node(
                "Conv",
                [prev, f"{name}.weight", f"{name}.bias"],
                [f"{name}_out"],
                name=name,
                kernel_shape=[3, 3],
                pads=[1, 1, 1, 1],
                strides=[1, 1],
            )
        )
        nodes.append(helper.make_node("Relu", [f"{name}_out"], [f"relu{i}_out"], name=f"relu{i}"))
        prev = f"relu{i}_out"
        if name == "conv2":
            nodes.append(
                helper.make_node(
                    "MaxPool",
                    [prev],
                    ["pool1_out"],
                    name="pool1",
                    kernel_shape=[2, 2],
                    strides=[2, 2],
                )
            )
            prev = "pool1_out"
    nodes.append(helper.make_node("Flatten", [prev], ["flatten_out"], name="flatten", axis=1))
    nodes.append(
        helper.make_node(
            "Gemm",
            ["flatten_out", "fc.weight", "fc.bias"],
            [OUTPUT_NAME],
            name="fc",
            alpha=1.0,
            beta=1.0,
            transB=1,
        )
    )
    graph = helper.make_graph(
        nodes,
        "digits_cnn",
        [helper.make_tensor_value_info(INPUT_NAME, TensorProto.FLOAT, [1, 1, 8, 8])],
        [helper.make_tensor_value_info(OUTPUT_NAME, TensorProto.FLOAT, [1, NUM_CLASSES])],
        initializer=initializers,
        doc_string="8x8 digit classifier: 3x(Conv3x3+Relu) with a 2x2 MaxPool, then Gemm.",
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET)],
        producer_name="kiln-train-digits",
        doc_string=(
            "Kiln sample model: a small CNN classifying scikit-learn's 8x8 digits (load_digits). "
            "Input 'image' is float32 [1,1,8,8] with pixels scaled to 0..1 (raw value / 16); "
            "output 'logits' is float32 [1,10], unnormalised class scores for digits 0-9. "
            # The script's first home, kept so that a rerun gives the committed bytes.
            f"Trained with numpy (seed {SEED}) by resources/models/train_digits_cnn.py."
        ),
    )
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model, full_check=True)
    return model


def onnx_accuracy(path: Path, x: np.ndarray, y: np.ndarray) -> float:
    """Measure accuracy of the exported file itself, one sample at a time as on a device.

    Args:
        path: ONNX file to evaluate.
        x: Images ``[N, 1, 8, 8]`` float32.
        y: Labels ``[N]``.

    Returns:
        Fraction of samples whose argmax logit equals the label.
    """
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(
        str(path), sess_options=options, providers=["CPUExecutionProvider"]
    )
    correct = 0
    for image, label in zip(x, y, strict=True):
        (logits,) = session.run([OUTPUT_NAME], {INPUT_NAME: image[None]})
        correct += int(np.argmax(logits[0]) == label)
    return correct / len(y)


def main() -> int:
    """Train, export, verify and record the sample model.

    Returns:
        Process exit code: 0 on success, 1 if the exported model misses ``MIN_ACCURACY``.
    """
    x_train, x_test, y_train, y_test = digits_split()
    rng = np.random.default_rng(SEED)
    t0 = time.perf_counter()
    params = train(x_train, y_train, rng)
    print(f"training took {time.perf_counter() - t0:.1f} s")

    model = build_model(params)
    ONNX_PATH.write_bytes(model.SerializeToString(deterministic=True))
    accuracy = onnx_accuracy(ONNX_PATH, x_test, y_test)
    print(f"onnxruntime held-out accuracy: {accuracy:.4f} on {len(y_test)} samples")

    record = {
        "accuracy": round(accuracy, 4),
        "test_size": len(y_test),
        "seed": SEED,
        "input": INPUT_NAME,
        "output": OUTPUT_NAME,
    }
    JSON_PATH.write_text(json.dumps(record, indent=2) + "\n")
    if accuracy < MIN_ACCURACY:
        print(f"accuracy {accuracy:.4f} is below the required {MIN_ACCURACY}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
