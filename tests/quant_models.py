"""Small ONNX models with structured (trained or low-rank) weights, built in code for the tests.

Accuracy metrics only mean something when the weights do: the MLP is trained for a few steps on a
Gaussian-mixture task; the transformer block and the CNN get low-rank / smooth weights whose
channel scales spread over 1.5 decades (so per-channel quantization visibly matters) and a
classifier head fitted by ridge regression on their features, so argmax is a real decision.
Each builder writes the model to the path given and returns it; `*_feeds` give matching inputs.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
FLOAT = TensorProto.FLOAT


def _save(graph: onnx.GraphProto, path: Path) -> Path:
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="tests"
    )
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, path)
    return path


def _init(name: str, array: np.ndarray) -> onnx.TensorProto:
    return numpy_helper.from_array(np.ascontiguousarray(array, dtype=np.float32), name)


def _low_rank(rng: np.random.Generator, rows: int, cols: int, rank: int) -> np.ndarray:
    """Low-rank signal plus a little noise, with column scales spread over ~1.5 decades."""
    w = rng.standard_normal((rows, rank)) @ rng.standard_normal((rank, cols)) / np.sqrt(rows * rank)
    w += 0.05 * rng.standard_normal((rows, cols)) / np.sqrt(rows)
    w *= np.logspace(-0.75, 0.75, cols)[rng.permutation(cols)]
    return w.astype(np.float32)


# --- MLP classifier (MatMul + Add, trained) --------------------------------------------------

MLP_FEATURES = 64
MLP_CLASSES = 10


def mixture_samples(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Samples of the MLP's task: 10 Gaussian clusters in 64-d (centres fixed by seed 1234)."""
    centres = np.random.default_rng(1234).standard_normal((MLP_CLASSES, MLP_FEATURES)) * 1.5
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, MLP_CLASSES, n)
    x = centres[labels] + rng.standard_normal((n, MLP_FEATURES)) * 1.5
    return x.astype(np.float32), labels


def _train_mlp(hidden: int, steps: int = 30, lr: float = 0.1) -> list[np.ndarray]:
    x, y = mixture_samples(256, seed=0)
    rng = np.random.default_rng(0)
    sizes = [MLP_FEATURES, hidden, hidden, MLP_CLASSES]
    ws = [
        (rng.standard_normal((a, b)) * np.sqrt(2.0 / a)).astype(np.float32)
        for a, b in itertools.pairwise(sizes)
    ]
    bs = [np.zeros(b, np.float32) for b in sizes[1:]]
    onehot = np.eye(MLP_CLASSES, dtype=np.float32)[y]
    for _ in range(steps):
        acts = [x]
        for i, (w, b) in enumerate(zip(ws, bs, strict=True)):
            z = acts[-1] @ w + b
            acts.append(np.maximum(z, 0) if i < len(ws) - 1 else z)
        p = np.exp(acts[-1] - acts[-1].max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        grad = (p - onehot) / len(x)
        for i in reversed(range(len(ws))):
            gw, gb = acts[i].T @ grad, grad.sum(0)
            if i:
                grad = (grad @ ws[i].T) * (acts[i] > 0)
            ws[i] -= lr * gw
            bs[i] -= lr * gb
    return [a for pair in zip(ws, bs, strict=True) for a in pair]


def mlp_classifier(path: Path, hidden: int = 256) -> Path:
    """[batch, 64] -> 3 MatMul+Add layers (ReLU) -> logits [batch, 10]; symbolic batch."""
    params = _train_mlp(hidden)
    nodes, inits, prev = [], [], "x"
    for i in range(3):
        w, b = params[2 * i], params[2 * i + 1]
        inits += [_init(f"fc{i}.weight", w), _init(f"fc{i}.bias", b)]
        nodes.append(helper.make_node("MatMul", [prev, f"fc{i}.weight"], [f"mm{i}"], f"fc{i}_mm"))
        out = "logits" if i == 2 else f"add{i}"
        nodes.append(helper.make_node("Add", [f"mm{i}", f"fc{i}.bias"], [out], f"fc{i}_add"))
        if i < 2:
            nodes.append(helper.make_node("Relu", [out], [f"relu{i}"], f"relu{i}"))
            prev = f"relu{i}"
    graph = helper.make_graph(
        nodes,
        "mlp",
        [helper.make_tensor_value_info("x", FLOAT, ["batch", MLP_FEATURES])],
        [helper.make_tensor_value_info("logits", FLOAT, ["batch", MLP_CLASSES])],
        inits,
    )
    return _save(graph, path)


def mlp_feeds(n: int = 8, batch: int = 16, seed: int = 100) -> list[dict[str, np.ndarray]]:
    return [{"x": mixture_samples(batch, seed + i)[0]} for i in range(n)]


# --- heads fitted on the features (so argmax is a real, balanced decision) ------------------


def _features(graph: onnx.GraphProto, feature: str, feeds: dict[str, np.ndarray]) -> np.ndarray:
    import onnxruntime as ort

    probe = onnx.GraphProto()
    probe.CopyFrom(graph)
    del probe.output[:]
    probe.output.append(helper.make_empty_tensor_value_info(feature))
    model = helper.make_model(probe, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 8
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run([feature], feeds)[0]


def _ridge_head(features: np.ndarray, labels: np.ndarray, classes: int) -> tuple[np.ndarray, ...]:
    """Ridge-regression classifier on centred features, as (weight [F, C], bias [C])."""
    mean = features.mean(0)
    z = features - mean
    targets = 10 * (np.eye(classes)[labels] - 1 / classes)
    ridge = len(z) * z.var(0).mean() * np.eye(z.shape[1])
    w = np.linalg.solve(z.T @ z + ridge, z.T @ targets)
    return w.astype(np.float32), (-mean @ w).astype(np.float32)


# --- transformer-ish block (MatMul heavy, K multiple of 32) ---------------------------------

D_MODEL = 128
D_FF = 512
TF_CLASSES = 16
_TF_LABELS = np.random.default_rng(77).standard_normal((D_MODEL, TF_CLASSES))


def sequences(n: int, seq: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Token sequences and their label: argmax of a fixed projection of the mean token."""
    x = np.random.default_rng(seed).standard_normal((n, seq, D_MODEL)).astype(np.float32)
    return x, (x.mean(1) @ _TF_LABELS).argmax(1)


def transformer_block(path: Path) -> Path:
    """x [batch, seq, 128] -> pre-LN attention + ReLU FFN -> mean over seq -> scores [batch, 16]."""
    rng = np.random.default_rng(7)
    inits = [
        _init("ln1.scale", 1 + 0.1 * rng.standard_normal(D_MODEL)),
        _init("ln1.bias", 0.1 * rng.standard_normal(D_MODEL)),
        _init("ln2.scale", 1 + 0.1 * rng.standard_normal(D_MODEL)),
        _init("ln2.bias", 0.1 * rng.standard_normal(D_MODEL)),
        _init("attn_scale", np.array(1 / np.sqrt(D_MODEL))),
        _init("ff1.bias", 0.1 * rng.standard_normal(D_FF)),
        _init("ff2.bias", 0.1 * rng.standard_normal(D_MODEL)),
    ]
    # gains keep attention soft and the residual branches moderate, as in a trained block
    for name, (k, n, gain) in {
        "q": (D_MODEL, D_MODEL, 0.5),
        "k": (D_MODEL, D_MODEL, 0.5),
        "v": (D_MODEL, D_MODEL, 0.5),
        "o": (D_MODEL, D_MODEL, 0.5),
        "ff1": (D_MODEL, D_FF, 1.0),
        "ff2": (D_FF, D_MODEL, 0.5),
    }.items():
        inits.append(_init(f"{name}.weight", gain * _low_rank(rng, k, n, rank=16)))

    def node(op: str, inputs: list[str], output: str, **attrs: object) -> onnx.NodeProto:
        return helper.make_node(op, inputs, [output], output, **attrs)

    nodes = [
        node("LayerNormalization", ["x", "ln1.scale", "ln1.bias"], "ln1", axis=-1),
        node("MatMul", ["ln1", "q.weight"], "q"),
        node("MatMul", ["ln1", "k.weight"], "k"),
        node("MatMul", ["ln1", "v.weight"], "v"),
        node("Transpose", ["k"], "kt", perm=[0, 2, 1]),
        node("MatMul", ["q", "kt"], "scores_raw"),
        node("Mul", ["scores_raw", "attn_scale"], "attn_logits"),
        node("Softmax", ["attn_logits"], "probs", axis=-1),
        node("MatMul", ["probs", "v"], "ctx"),
        node("MatMul", ["ctx", "o.weight"], "attn_out"),
        node("Add", ["x", "attn_out"], "res1"),
        node("LayerNormalization", ["res1", "ln2.scale", "ln2.bias"], "ln2", axis=-1),
        node("MatMul", ["ln2", "ff1.weight"], "ff1_mm"),
        node("Add", ["ff1_mm", "ff1.bias"], "ff1"),
        node("Relu", ["ff1"], "ff1_act"),
        node("MatMul", ["ff1_act", "ff2.weight"], "ff2_mm"),
        node("Add", ["ff2_mm", "ff2.bias"], "ff2"),
        node("Add", ["res1", "ff2"], "res2"),
        node("ReduceMean", ["res2"], "pooled", axes=[1], keepdims=0),
    ]
    graph = helper.make_graph(
        nodes,
        "transformer_block",
        [helper.make_tensor_value_info("x", FLOAT, ["batch", "seq", D_MODEL])],
        [helper.make_tensor_value_info("scores", FLOAT, ["batch", TF_CLASSES])],
        inits,
    )
    x, labels = sequences(512, 16, seed=0)
    w, b = _ridge_head(_features(graph, "pooled", {"x": x}), labels, TF_CLASSES)
    graph.initializer.extend([_init("head.weight", w), _init("head.bias", b)])
    graph.node.extend(
        [
            node("MatMul", ["pooled", "head.weight"], "head_mm"),
            node("Add", ["head_mm", "head.bias"], "scores"),
        ]
    )
    return _save(graph, path)


def transformer_feeds(n: int = 8, batch: int = 8, seq: int = 16, seed: int = 200) -> list[dict]:
    return [{"x": sequences(batch, seq, seed + i)[0]} for i in range(n)]


# --- Conv classifier -------------------------------------------------------------------------

IMAGE = 16
CNN_CLASSES = 10


def images(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Blurred noise plus a linear gradient; the label is the gradient's direction in 10 sectors."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:IMAGE, 0:IMAGE] / IMAGE - 0.5
    noise = rng.standard_normal((n, 3, IMAGE + 2, IMAGE + 2))
    blurred = sum(noise[:, :, i : i + IMAGE, j : j + IMAGE] for i in range(3) for j in range(3))
    angle = rng.uniform(-np.pi, np.pi, n)
    colour = rng.uniform(0.5, 1.5, (n, 3, 1, 1))
    ramp = np.cos(angle)[:, None, None] * xx + np.sin(angle)[:, None, None] * yy
    x = blurred / 6 + 2 * colour * ramp[:, None]
    labels = ((angle + np.pi) / (2 * np.pi) * CNN_CLASSES).astype(int) % CNN_CLASSES
    return x.astype(np.float32), labels


def _smooth_filters(rng: np.random.Generator, out_ch: int, in_ch: int, k: int) -> np.ndarray:
    """Oriented ramps (gradient detectors) plus noise, with output-channel scales spread."""
    yy, xx = np.mgrid[-1 : 1 : k * 1j, -1 : 1 : k * 1j]
    angles = rng.uniform(0, 2 * np.pi, (out_ch, in_ch, 1, 1))
    w = np.cos(angles) * xx + np.sin(angles) * yy + 0.2 * rng.standard_normal((out_ch, in_ch, k, k))
    w *= np.logspace(-0.75, 0.75, out_ch)[rng.permutation(out_ch)][:, None, None, None]
    return (w / np.sqrt(in_ch * k * k)).astype(np.float32)


def conv_classifier(path: Path) -> Path:
    """image [batch, 3, 16, 16] -> 3x (Conv+ReLU), stride-2 convs -> GAP -> Gemm -> [batch, 10]."""
    rng = np.random.default_rng(3)
    chans = [3, 32, 64, 128]
    nodes, inits, prev = [], [], "image"
    for i, (cin, cout) in enumerate(itertools.pairwise(chans)):
        inits += [
            _init(f"conv{i}.weight", _smooth_filters(rng, cout, cin, 3)),
            _init(f"conv{i}.bias", 0.05 * rng.standard_normal(cout)),
        ]
        nodes.append(
            helper.make_node(
                "Conv",
                [prev, f"conv{i}.weight", f"conv{i}.bias"],
                [f"conv{i}"],
                f"conv{i}",
                kernel_shape=[3, 3],
                pads=[1, 1, 1, 1],
                strides=[1 if i == 0 else 2] * 2,
            )
        )
        nodes.append(helper.make_node("Relu", [f"conv{i}"], [f"relu{i}"], f"relu{i}"))
        prev = f"relu{i}"
    nodes += [
        helper.make_node("GlobalAveragePool", [prev], ["gap"], "gap"),
        helper.make_node("Flatten", ["gap"], ["flat"], "flatten"),
    ]
    graph = helper.make_graph(
        nodes,
        "cnn",
        [helper.make_tensor_value_info("image", FLOAT, ["batch", 3, IMAGE, IMAGE])],
        [helper.make_tensor_value_info("logits", FLOAT, ["batch", CNN_CLASSES])],
        inits,
    )
    x, labels = images(1024, seed=0)
    w, b = _ridge_head(_features(graph, "flat", {"image": x}), labels, CNN_CLASSES)
    graph.initializer.extend([_init("fc.weight", w.T), _init("fc.bias", b)])
    graph.node.append(
        helper.make_node("Gemm", ["flat", "fc.weight", "fc.bias"], ["logits"], "fc", transB=1)
    )
    return _save(graph, path)


def image_feeds(n: int = 8, batch: int = 8, seed: int = 300) -> list[dict[str, np.ndarray]]:
    return [{"image": images(batch, seed + i)[0]} for i in range(n)]


# --- edge cases --------------------------------------------------------------------------------


def odd_k_matmul(path: Path) -> Path:
    """x [batch, 20] @ W [20, 12]: no MatMul whose K is a multiple of 32 (int4 not applicable)."""
    rng = np.random.default_rng(5)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"], "mm")],
        "odd_k",
        [helper.make_tensor_value_info("x", FLOAT, ["batch", 20])],
        [helper.make_tensor_value_info("y", FLOAT, ["batch", 12])],
        [_init("w", _low_rank(rng, 20, 12, rank=4))],
    )
    return _save(graph, path)


def odd_k_feeds(n: int = 4, seed: int = 400) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [{"x": rng.standard_normal((3, 20)).astype(np.float32)} for _ in range(n)]


def positions_by_range(path: Path) -> Path:
    """x [batch, seq, 8] + table[Range(Shape(x)[1])] -> MatMul; folds only once seq is fixed."""
    rng = np.random.default_rng(6)
    i64 = {"one": np.array(1, np.int64), "zero": np.array(0, np.int64)}
    graph = helper.make_graph(
        [
            helper.make_node("Shape", ["x"], ["shape"], "shape"),
            helper.make_node("Gather", ["shape", "one"], ["seq"], "seq", axis=0),
            helper.make_node("Range", ["zero", "seq", "one"], ["ids"], "ids"),
            helper.make_node("Gather", ["table", "ids"], ["positions"], "positions", axis=0),
            helper.make_node("Add", ["x", "positions"], ["h"], "add_positions"),
            helper.make_node("MatMul", ["h", "w"], ["y"], "mm"),
        ],
        "positions_by_range",
        [helper.make_tensor_value_info("x", FLOAT, ["batch", "seq", 8])],
        [helper.make_tensor_value_info("y", FLOAT, ["batch", "seq", 4])],
        [_init("table", 0.1 * rng.standard_normal((64, 8))), _init("w", _low_rank(rng, 8, 4, 2))]
        + [numpy_helper.from_array(v, k) for k, v in i64.items()],
    )
    return _save(graph, path)


def positional_table(path: Path) -> Path:
    """x [batch, seq, 8] + a position table exported with 16 rows: seq can only be 16 (or 1)."""
    rng = np.random.default_rng(8)
    graph = helper.make_graph(
        [
            helper.make_node("Add", ["x", "positions"], ["h"], "add_positions"),
            helper.make_node("MatMul", ["h", "w"], ["y"], "mm"),
        ],
        "positional_table",
        [helper.make_tensor_value_info("x", FLOAT, ["batch", "seq", 8])],
        [helper.make_tensor_value_info("y", FLOAT, ["batch", "seq", 4])],
        [
            _init("positions", 0.1 * rng.standard_normal((1, 16, 8))),
            _init("w", _low_rank(rng, 8, 4, rank=2)),
        ],
    )
    return _save(graph, path)


def unused_input(path: Path) -> Path:
    """y = relu(x); input `mask` is declared but unused (onnxslim would drop it)."""
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"], "relu")],
        "unused_input",
        [
            helper.make_tensor_value_info("x", FLOAT, ["batch", 4]),
            helper.make_tensor_value_info("mask", FLOAT, ["batch", 4]),
        ],
        [helper.make_tensor_value_info("y", FLOAT, ["batch", 4])],
    )
    return _save(graph, path)


def grouped_upsampler(path: Path) -> Path:
    """features [batch, 8, 8, 8] -> grouped ConvTranspose x2 (with bias) -> ReLU -> Resize x2 ->
    1x1 Conv -> image [batch, 3, 32, 32]. Per-channel QDQ cannot rescale the grouped bias."""
    rng = np.random.default_rng(9)
    graph = helper.make_graph(
        [
            helper.make_node(
                "ConvTranspose",
                ["x", "up.weight", "up.bias"],
                ["up"],
                "up",
                kernel_shape=[2, 2],
                strides=[2, 2],
                group=2,
            ),
            helper.make_node("Relu", ["up"], ["up_act"], "up_act"),
            helper.make_node("Resize", ["up_act", "", "scales"], ["big"], "resize", mode="linear"),
            helper.make_node("Conv", ["big", "out.weight", "out.bias"], ["image"], "out"),
        ],
        "grouped_upsampler",
        [helper.make_tensor_value_info("x", FLOAT, ["batch", 8, 8, 8])],
        [helper.make_tensor_value_info("image", FLOAT, ["batch", 3, 32, 32])],
        [
            _init("up.weight", _smooth_filters(rng, 8, 8, 2).reshape(8, 8, 2, 2)[:, :8:2]),
            _init("up.bias", 0.05 * rng.standard_normal(8)),
            _init("scales", np.array([1, 1, 2, 2])),
            _init("out.weight", _smooth_filters(rng, 3, 8, 1)),
            _init("out.bias", 0.05 * rng.standard_normal(3)),
        ],
    )
    return _save(graph, path)


def upsampler_feeds(n: int = 4, seed: int = 500) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [{"x": rng.standard_normal((2, 8, 8, 8)).astype(np.float32)} for _ in range(n)]


def fp16_overflow(path: Path) -> Path:
    """x [batch, 64] @ W with |x @ W| ~ 1e5, scaled back by 1e-5: finite in fp32, Inf in fp16."""
    rng = np.random.default_rng(10)
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "w"], ["big"], "mm"),
            helper.make_node("Mul", ["big", "shrink"], ["y"], "shrink"),
        ],
        "fp16_overflow",
        [helper.make_tensor_value_info("x", FLOAT, ["batch", 64])],
        [helper.make_tensor_value_info("y", FLOAT, ["batch", 32])],
        [_init("w", 3e4 * _low_rank(rng, 64, 32, rank=8)), _init("shrink", np.array(1e-5))],
    )
    return _save(graph, path)


def fp16_overflow_feeds(n: int = 2, seed: int = 600) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [{"x": rng.standard_normal((4, 64)).astype(np.float32)} for _ in range(n)]
