"""Train the example digits CNN in numpy and export it as `bundler/example/digits.onnx`.

The model classifies scikit-learn's bundled 8x8 handwritten digits (no download). Training is
hand-written numpy (im2col convolutions, Adam) and fully seeded, so a rerun on the same machine
writes the same bytes. Before anything is written the exported graph is checked with
onnx.checker and run in onnxruntime against the numpy forward pass.

    python scripts/train_digits.py [--out-dir bundler/example]
"""

from __future__ import annotations

import argparse
import io
import time
import zipfile
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from numpy.lib.stride_tricks import sliding_window_view
from onnx import TensorProto, helper, numpy_helper
from sklearn.datasets import load_digits

SEED = 0
EPOCHS = 40
BATCH = 32
LEARNING_RATE = 0.005
TEST_FRACTION = 0.2
CALIBRATION_SAMPLES = 64
TARGET_TEST_ACCURACY = 0.95
MAX_ORT_DIFF = 1e-5

Params = dict[str, np.ndarray]


def conv_forward(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """3x3 convolution, stride 1, pad 1 (NCHW). Returns the output and the im2col matrix."""
    n, c, h, wd = x.shape
    windows = sliding_window_view(np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1))), (3, 3), (2, 3))
    cols = windows.transpose(0, 2, 3, 1, 4, 5).reshape(n * h * wd, c * 9)
    out = cols @ w.reshape(len(w), -1).T + b
    return out.reshape(n, h, wd, -1).transpose(0, 3, 1, 2), cols


def conv_backward(
    grad: np.ndarray, cols: np.ndarray, w: np.ndarray, input_shape: tuple[int, ...]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Gradients of conv_forward with respect to its input, weight and bias."""
    n, c, h, wd = input_shape
    grad_flat = grad.transpose(0, 2, 3, 1).reshape(n * h * wd, -1)
    grad_w = (grad_flat.T @ cols).reshape(w.shape)
    grad_cols = (grad_flat @ w.reshape(len(w), -1)).reshape(n, h, wd, c, 3, 3)
    grad_padded = np.zeros((n, c, h + 2, wd + 2), dtype=grad.dtype)
    for i in range(3):
        for j in range(3):
            grad_padded[:, :, i : i + h, j : j + wd] += grad_cols[..., i, j].transpose(0, 3, 1, 2)
    return grad_padded[:, :, 1:-1, 1:-1], grad_w, grad_flat.sum(axis=0)


def pool_forward(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """2x2 max pool, stride 2. Returns the output and the argmax of each window."""
    n, c, h, w = x.shape
    windows = x.reshape(n, c, h // 2, 2, w // 2, 2).transpose(0, 1, 2, 4, 3, 5)
    windows = windows.reshape(n, c, h // 2, w // 2, 4)
    # argmax routes each window's gradient to exactly one input, even where ReLU left ties at 0.
    argmax = windows.argmax(axis=-1)[..., None]
    return np.take_along_axis(windows, argmax, axis=-1)[..., 0], argmax


def pool_backward(grad: np.ndarray, argmax: np.ndarray) -> np.ndarray:
    n, c, h2, w2 = grad.shape
    windows = np.zeros((n, c, h2, w2, 4), dtype=grad.dtype)
    np.put_along_axis(windows, argmax, grad[..., None], axis=-1)
    windows = windows.reshape(n, c, h2, w2, 2, 2).transpose(0, 1, 2, 4, 3, 5)
    return windows.reshape(n, c, h2 * 2, w2 * 2)


def softmax(logits: np.ndarray) -> np.ndarray:
    exp = np.exp(logits - logits.max(axis=1, keepdims=True))
    return exp / exp.sum(axis=1, keepdims=True)


def forward(params: Params, x: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Probabilities for images `x` [N, 1, 8, 8], plus what backward() needs."""
    conv1, cols1 = conv_forward(x, params["conv1.weight"], params["conv1.bias"])
    relu1 = np.maximum(conv1, 0)
    pool1, argmax1 = pool_forward(relu1)
    conv2, cols2 = conv_forward(pool1, params["conv2.weight"], params["conv2.bias"])
    relu2 = np.maximum(conv2, 0)
    pool2, argmax2 = pool_forward(relu2)
    flat = pool2.reshape(len(x), -1)
    probabilities = softmax(flat @ params["fc.weight"].T + params["fc.bias"])
    cache = {
        "x": x,
        "cols1": cols1,
        "relu1": relu1,
        "argmax1": argmax1,
        "pool1": pool1,
        "cols2": cols2,
        "relu2": relu2,
        "argmax2": argmax2,
        "pool2": pool2,
        "flat": flat,
    }
    return probabilities, cache


def backward(
    params: Params, cache: dict[str, np.ndarray], probabilities: np.ndarray, labels: np.ndarray
) -> Params:
    """Gradients of the mean cross-entropy loss."""
    grad_logits = probabilities.copy()
    grad_logits[np.arange(len(labels)), labels] -= 1
    grad_logits /= len(labels)
    grads = {
        "fc.weight": grad_logits.T @ cache["flat"],
        "fc.bias": grad_logits.sum(axis=0),
    }
    grad = (grad_logits @ params["fc.weight"]).reshape(cache["pool2"].shape)
    grad = pool_backward(grad, cache["argmax2"]) * (cache["relu2"] > 0)
    grad, grads["conv2.weight"], grads["conv2.bias"] = conv_backward(
        grad, cache["cols2"], params["conv2.weight"], cache["pool1"].shape
    )
    grad = pool_backward(grad, cache["argmax1"]) * (cache["relu1"] > 0)
    _, grads["conv1.weight"], grads["conv1.bias"] = conv_backward(
        grad, cache["cols1"], params["conv1.weight"], cache["x"].shape
    )
    return grads


def init_params(rng: np.random.Generator) -> Params:
    def he(*shape: int) -> np.ndarray:
        return rng.normal(0, np.sqrt(2 / np.prod(shape[1:])), shape)

    return {
        "conv1.weight": he(8, 1, 3, 3),
        "conv1.bias": np.zeros(8),
        "conv2.weight": he(16, 8, 3, 3),
        "conv2.bias": np.zeros(16),
        "fc.weight": he(10, 64),
        "fc.bias": np.zeros(10),
    }


def train(rng: np.random.Generator, images: np.ndarray, labels: np.ndarray) -> Params:
    """Adam on mini-batches, in float64; the caller casts the result to float32."""
    params = init_params(rng)
    moment1 = {k: np.zeros_like(v) for k, v in params.items()}
    moment2 = {k: np.zeros_like(v) for k, v in params.items()}
    beta1, beta2, eps = 0.9, 0.999, 1e-8
    step = 0
    for _ in range(EPOCHS):
        order = rng.permutation(len(images))
        for start in range(0, len(order), BATCH):
            batch = order[start : start + BATCH]
            probabilities, cache = forward(params, images[batch])
            grads = backward(params, cache, probabilities, labels[batch])
            step += 1
            for k, g in grads.items():
                moment1[k] = beta1 * moment1[k] + (1 - beta1) * g
                moment2[k] = beta2 * moment2[k] + (1 - beta2) * g * g
                m_hat = moment1[k] / (1 - beta1**step)
                v_hat = moment2[k] / (1 - beta2**step)
                params[k] -= LEARNING_RATE * m_hat / (np.sqrt(v_hat) + eps)
    return params


def accuracy(params: Params, images: np.ndarray, labels: np.ndarray) -> float:
    return float((forward(params, images)[0].argmax(axis=1) == labels).mean())


def export(params: Params, doc_string: str) -> onnx.ModelProto:
    conv = {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}
    pool = {"kernel_shape": [2, 2], "strides": [2, 2]}
    nodes = [
        helper.make_node(
            "Conv", ["image", "conv1.weight", "conv1.bias"], ["conv1"], "conv1", **conv
        ),
        helper.make_node("Relu", ["conv1"], ["relu1"], "relu1"),
        helper.make_node("MaxPool", ["relu1"], ["pool1"], "pool1", **pool),
        helper.make_node(
            "Conv", ["pool1", "conv2.weight", "conv2.bias"], ["conv2"], "conv2", **conv
        ),
        helper.make_node("Relu", ["conv2"], ["relu2"], "relu2"),
        helper.make_node("MaxPool", ["relu2"], ["pool2"], "pool2", **pool),
        helper.make_node("Flatten", ["pool2"], ["flat"], "flatten", axis=1),
        helper.make_node("Gemm", ["flat", "fc.weight", "fc.bias"], ["logits"], "fc", transB=1),
        helper.make_node("Softmax", ["logits"], ["probabilities"], "softmax", axis=1),
    ]
    graph = helper.make_graph(
        nodes,
        "digits",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["batch", 1, 8, 8])],
        [helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, ["batch", 10])],
        initializer=[numpy_helper.from_array(v, k) for k, v in params.items()],
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 17)],
        ir_version=8,
        producer_name="onnx-bundler train_digits.py",
        doc_string=doc_string,
    )
    onnx.checker.check_model(model, full_check=True)
    return model


def save_npz(path: Path, **arrays: np.ndarray) -> None:
    """Like np.savez, but with fixed zip timestamps so reruns write identical bytes."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as archive:
        for name, array in arrays.items():
            buffer = io.BytesIO()
            np.lib.format.write_array(buffer, array, allow_pickle=False)
            archive.writestr(
                zipfile.ZipInfo(f"{name}.npy", (1980, 1, 1, 0, 0, 0)), buffer.getvalue()
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out-dir",
        type=Path,
        default=Path(__file__).resolve().parent.parent / "bundler" / "example",
        help="where digits.onnx and digits_calibration.npz are written (default: %(default)s)",
    )
    args = parser.parse_args()

    started = time.perf_counter()
    digits = load_digits()
    images = (digits.images / 16).reshape(-1, 1, 8, 8)
    labels = digits.target.astype(np.int64)
    rng = np.random.default_rng(SEED)
    # Shuffled before the split: the unshuffled tail is drawn from a shifted distribution
    # (this model scores ~94% on it against ~98% on a random hold-out).
    order = rng.permutation(len(images))
    split = int(len(images) * (1 - TEST_FRACTION))
    train_idx, test_idx = order[:split], order[split:]
    train_x, test_x = images[train_idx], images[test_idx].astype(np.float32)
    train_y, test_y = labels[train_idx], labels[test_idx]

    params = {k: v.astype(np.float32) for k, v in train(rng, train_x, train_y).items()}
    train_accuracy = accuracy(params, train_x.astype(np.float32), train_y)
    test_accuracy = accuracy(params, test_x, test_y)
    print(f"train accuracy {train_accuracy:.4f} ({split} images)")
    print(f"test accuracy  {test_accuracy:.4f} ({len(test_x)} held-out images)")
    if test_accuracy < TARGET_TEST_ACCURACY:
        raise SystemExit(f"test accuracy {test_accuracy:.4f} is below {TARGET_TEST_ACCURACY}")

    model = export(
        params,
        "Handwritten digit classifier (0-9) for scikit-learn's 8x8 digits dataset. "
        "Input `image`: float32 [batch, 1, 8, 8], grey levels scaled to [0, 1] (ink is 1). "
        "Output `probabilities`: float32 [batch, 10], softmax over digits 0-9. "
        "Conv(1->8, 3x3) -> Relu -> MaxPool 2x2 -> Conv(8->16, 3x3) -> Relu -> MaxPool 2x2 -> "
        f"Gemm(64->10) -> Softmax. Trained on {split} images, test accuracy "
        f"{test_accuracy:.4f} on {len(test_x)} held-out images.",
    )
    data = model.SerializeToString()
    session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    (ort_probabilities,) = session.run(None, {"image": test_x})
    diff = float(np.abs(ort_probabilities - forward(params, test_x)[0]).max())
    print(f"onnxruntime vs numpy max abs diff {diff:.2e}")
    if diff >= MAX_ORT_DIFF:
        raise SystemExit(f"onnxruntime disagrees with numpy by {diff:.2e}")

    args.out_dir.mkdir(parents=True, exist_ok=True)
    model_path = args.out_dir / "digits.onnx"
    model_path.write_bytes(data)
    save_npz(
        args.out_dir / "digits_calibration.npz",
        image=test_x[:CALIBRATION_SAMPLES],
        label=test_y[:CALIBRATION_SAMPLES],
    )
    print(f"wrote {model_path} ({len(data)} bytes) in {time.perf_counter() - started:.1f}s")


if __name__ == "__main__":
    main()
