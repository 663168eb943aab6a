"""Small ONNX models built in code for the tests.

Each builder `NAME(directory)` writes `directory/NAME.onnx` (plus any external data file) and
returns its path. Weights come from a fixed seed, so every call writes the same model. All of
them pass onnx.checker and run in onnxruntime CPU; `ALL` maps each name to its builder.

    multi_io                 x f32[batch,4], ids i64[batch,3], mask i32[batch,3]
                             -> y f32[batch,2], count i32[batch]
    scalar_input             x f32[3], scale f32[], step i64[] -> y f32[3]
    conv_stack               image f32[batch,3,16,16] -> scores f32[batch,5],
                             embedding f32[batch,3]
    symbolic_hw              image f32[1,3,height,width] -> features f32[1,2,out_h,out_w]
                             (fails in onnxruntime below 3x3)
    if_subgraph              x f32[batch,4], flag bool[] -> y f32[batch,4]
    loop_subgraph            x f32[4], trip i64[] -> y f32[4] = x + min(trip, 8)
    external_data            x f32[batch,64] -> y f32[batch,64], weight in external_data.weights
    ml_classifier            features i32[batch,4] -> label i64[batch],
                             probabilities seq(map(i64, f32))
    ml_classifier_no_zipmap  features i32[batch,4] -> label i64[batch], probabilities f32[batch,3]
    recurrent_state          input f32[batch,samples], state f32[2,batch,8], sr i64[]
                             -> output f32[batch,1], stateN f32[2,batch,8]

Outside `ALL`:

    external_several         x f32[batch,32] -> y f32[batch,16], its three weights in three
                             external data files, two of them in a subfolder
    hostile_names            HOSTILE_INPUT f32[1,4] -> HOSTILE_OUTPUT f32[1,4] (HTML for names;
                             it tests the demo page, not the runtime)
    heavy_conv               image f32[1,16,192,192] -> features f32[1,16] (twelve 3x3 convs:
                             about 2 GFLOP a run, too slow for every EP test)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import GraphProto, NodeProto, TensorProto, ValueInfoProto, helper, numpy_helper

F32, I32, I64, BOOL = TensorProto.FLOAT, TensorProto.INT32, TensorProto.INT64, TensorProto.BOOL
ML_DOMAIN = "ai.onnx.ml"
Shape = Sequence[int | str] | None


def _io(name: str, elem_type: int, shape: Shape) -> ValueInfoProto:
    return helper.make_tensor_value_info(name, elem_type, shape)


def _const(name: str, value: Any, dtype: type = np.float32) -> TensorProto:
    return numpy_helper.from_array(np.asarray(value, dtype=dtype), name)


def _weights(seed: int, **shapes: tuple[int, ...]) -> list[TensorProto]:
    """Float32 initializers drawn from one seeded generator, in the order given."""
    rng = np.random.default_rng(seed)
    return [_const(name, rng.normal(0, 0.5, shape)) for name, shape in shapes.items()]


def _graph(
    name: str,
    nodes: list[NodeProto],
    inputs: list[ValueInfoProto],
    outputs: list[ValueInfoProto],
    initializer: Sequence[TensorProto] = (),
) -> GraphProto:
    return helper.make_graph(nodes, name, inputs, outputs, initializer=list(initializer))


def _save(graph: GraphProto, directory: Path, ml: bool = False, full_check: bool = True,
          **save_kwargs: Any) -> Path:
    """Wrap `graph` in an opset 17, IR 8 model, check it (`full_check`: its declared shapes
    too), write `directory/<graph.name>.onnx`."""
    opsets = [helper.make_opsetid("", 17)]
    if ml:
        opsets.append(helper.make_opsetid(ML_DOMAIN, 3))
    model = helper.make_model(
        graph, opset_imports=opsets, ir_version=8, producer_name="onnx-bundler tests"
    )
    onnx.checker.check_model(model, full_check=full_check)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{graph.name}.onnx"
    if "location" in save_kwargs:
        # onnx appends to an existing external data file, so a rebuild would grow it.
        (directory / save_kwargs["location"]).unlink(missing_ok=True)
    onnx.save_model(model, path, **save_kwargs)
    return path


def multi_io(directory: Path) -> Path:
    """y = tanh(x @ w + b) + sum over the 3 ids of embedding[ids]; count = row sums of mask."""
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["xw"]),
        helper.make_node("Add", ["xw", "b"], ["pre"]),
        helper.make_node("Tanh", ["pre"], ["dense"]),
        helper.make_node("Gather", ["embedding", "ids"], ["gathered"], axis=0),
        helper.make_node("ReduceSum", ["gathered", "axis1"], ["pooled"], keepdims=0),
        helper.make_node("Add", ["dense", "pooled"], ["y"]),
        helper.make_node("ReduceSum", ["mask", "axis1"], ["count"], keepdims=0),
    ]
    weights = _weights(1, w=(4, 2), b=(2,), embedding=(8, 2))
    graph = _graph(
        "multi_io",
        nodes,
        [
            _io("x", F32, ["batch", 4]),
            _io("ids", I64, ["batch", 3]),
            _io("mask", I32, ["batch", 3]),
        ],
        [_io("y", F32, ["batch", 2]), _io("count", I32, ["batch"])],
        [*weights, _const("axis1", [1], np.int64)],
    )
    return _save(graph, directory)


def scalar_input(directory: Path) -> Path:
    """y = x * scale + float(step), with 0-d `scale` and `step`."""
    nodes = [
        helper.make_node("Mul", ["x", "scale"], ["scaled"]),
        helper.make_node("Cast", ["step"], ["step_f"], to=F32),
        helper.make_node("Add", ["scaled", "step_f"], ["y"]),
    ]
    graph = _graph(
        "scalar_input",
        nodes,
        [_io("x", F32, [3]), _io("scale", F32, []), _io("step", I64, [])],
        [_io("y", F32, [3])],
    )
    return _save(graph, directory)


def conv_stack(directory: Path) -> Path:
    """Conv -> Relu -> Resize 2x -> GlobalAveragePool -> Flatten, then Gemm -> Softmax (`scores`)
    and MatMul (`embedding`)."""
    nodes = [
        helper.make_node("Conv", ["image", "conv.w", "conv.b"], ["conv"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["conv"], ["relu"]),
        helper.make_node("Resize", ["relu", "", "scales"], ["resized"], mode="linear"),
        helper.make_node("GlobalAveragePool", ["resized"], ["pooled"]),
        helper.make_node("Flatten", ["pooled"], ["flat"]),
        helper.make_node("Gemm", ["flat", "fc.w", "fc.b"], ["logits"], transB=1),
        helper.make_node("Softmax", ["logits"], ["scores"], axis=1),
        helper.make_node("MatMul", ["flat", "proj"], ["embedding"]),
    ]
    weights = _weights(2, **{"conv.w": (4, 3, 3, 3), "conv.b": (4,), "fc.w": (5, 4), "fc.b": (5,)})
    graph = _graph(
        "conv_stack",
        nodes,
        [_io("image", F32, ["batch", 3, 16, 16])],
        [_io("scores", F32, ["batch", 5]), _io("embedding", F32, ["batch", 3])],
        [*weights, *_weights(3, proj=(4, 3)), _const("scales", [1, 1, 2, 2])],
    )
    return _save(graph, directory)


def symbolic_hw(directory: Path) -> Path:
    """A detector-like 3x3 stride-2 unpadded Conv + Relu over symbolic height and width."""
    nodes = [
        helper.make_node("Conv", ["image", "w", "b"], ["conv"], strides=[2, 2]),
        helper.make_node("Relu", ["conv"], ["features"]),
    ]
    graph = _graph(
        "symbolic_hw",
        nodes,
        [_io("image", F32, [1, 3, "height", "width"])],
        [_io("features", F32, [1, 2, "out_h", "out_w"])],
        _weights(4, w=(2, 3, 3, 3), b=(2,)),
    )
    return _save(graph, directory)


def _branch(name: str, op: str, operand: float, shape: Shape) -> GraphProto:
    """A subgraph computing `op(x, operand)` on the enclosing graph's `x`."""
    nodes = [
        helper.make_node("Constant", [], [f"{name}_operand"], value=_const("v", operand)),
        helper.make_node(op, ["x", f"{name}_operand"], [f"{name}_y"]),
    ]
    return _graph(name, nodes, [], [_io(f"{name}_y", F32, shape)])


def if_subgraph(directory: Path) -> Path:
    """y = x * 2 if flag else x - 1."""
    shape = ["batch", 4]
    node = helper.make_node(
        "If",
        ["flag"],
        ["y"],
        then_branch=_branch("then", "Mul", 2, shape),
        else_branch=_branch("else", "Sub", 1, shape),
    )
    graph = _graph(
        "if_subgraph",
        [node],
        [_io("x", F32, shape), _io("flag", BOOL, [])],
        [_io("y", F32, shape)],
    )
    return _save(graph, directory)


def loop_subgraph(directory: Path) -> Path:
    """y = x + min(trip, 8): a Loop adding 1 per iteration, its cond stopping it after 8."""
    body = _graph(
        "body",
        [
            helper.make_node("Constant", [], ["one_f"], value=_const("v", 1)),
            helper.make_node("Constant", [], ["one_i"], value=_const("v", 1, np.int64)),
            helper.make_node("Constant", [], ["cap"], value=_const("v", 8, np.int64)),
            helper.make_node("Add", ["x_in", "one_f"], ["x_out"]),
            helper.make_node("Add", ["i", "one_i"], ["next_i"]),
            helper.make_node("Less", ["next_i", "cap"], ["cond_out"]),
        ],
        [_io("i", I64, []), _io("cond_in", BOOL, []), _io("x_in", F32, [4])],
        [_io("cond_out", BOOL, []), _io("x_out", F32, [4])],
    )
    graph = _graph(
        "loop_subgraph",
        [helper.make_node("Loop", ["trip", "keep_going", "x"], ["y"], body=body)],
        [_io("x", F32, [4]), _io("trip", I64, [])],
        [_io("y", F32, [4])],
        [_const("keep_going", True, np.bool_)],
    )
    return _save(graph, directory)


def external_data(directory: Path) -> Path:
    """y = x @ w, with the [64, 64] weight stored in `external_data.weights` next to the model."""
    graph = _graph(
        "external_data",
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        [_io("x", F32, ["batch", 64])],
        [_io("y", F32, ["batch", 64])],
        _weights(5, w=(64, 64)),
    )
    return _save(
        graph,
        directory,
        save_as_external_data=True,
        all_tensors_to_one_file=True,
        location="external_data.weights",
        size_threshold=0,
    )


def external_several(directory: Path) -> Path:
    """y = (x @ w1 + b1) @ w2, each weight in its own external data file: the locations
    `external_several.w1.bin`, `weights/b1.bin` and `weights/w2.bin` (the exporters' layout
    for large models: several `.onnx_data` files, some in a folder)."""
    weights = _weights(6, w1=(32, 32), b1=(32,), w2=(32, 16))
    graph = _graph(
        "external_several",
        [helper.make_node("MatMul", ["x", "w1"], ["h"]),
         helper.make_node("Add", ["h", "b1"], ["a"]),
         helper.make_node("MatMul", ["a", "w2"], ["y"])],
        [_io("x", F32, ["batch", 32])],
        [_io("y", F32, ["batch", 16])],
        weights,
    )
    path = _save(graph, directory)  # checked with its weights inline, then moved out
    model = onnx.load(str(path))
    locations = ["external_several.w1.bin", "weights/b1.bin", "weights/w2.bin"]
    for tensor, location in zip(model.graph.initializer, locations, strict=True):
        (directory / location).unlink(missing_ok=True)  # onnx appends to an existing file
        (directory / location).parent.mkdir(parents=True, exist_ok=True)
        onnx.external_data_helper.set_external_data(tensor, location)
    onnx.save_model(model, path)
    return path


def _classifier(directory: Path, name: str, zipmap: bool) -> Path:
    """A skl2onnx-style 3-class LinearClassifier on int32 features."""
    rng = np.random.default_rng(6)
    nodes = [
        helper.make_node("Cast", ["features"], ["features_f"], to=F32),
        helper.make_node(
            "LinearClassifier",
            ["features_f"],
            ["label", "scores" if zipmap else "probabilities"],
            domain=ML_DOMAIN,
            classlabels_ints=[0, 1, 2],
            coefficients=rng.normal(0, 0.5, 12).astype(np.float32).tolist(),
            intercepts=rng.normal(0, 0.5, 3).astype(np.float32).tolist(),
            post_transform="SOFTMAX",
        ),
    ]
    if zipmap:
        nodes.append(
            helper.make_node(
                "ZipMap",
                ["scores"],
                ["probabilities"],
                domain=ML_DOMAIN,
                classlabels_int64s=[0, 1, 2],
            )
        )
        map_type = helper.make_map_type_proto(I64, helper.make_tensor_type_proto(F32, []))
        probabilities = helper.make_value_info(
            "probabilities", helper.make_sequence_type_proto(map_type)
        )
    else:
        probabilities = _io("probabilities", F32, ["batch", 3])
    graph = _graph(
        name,
        nodes,
        [_io("features", I32, ["batch", 4])],
        [_io("label", I64, ["batch"]), probabilities],
    )
    return _save(graph, directory, ml=True)


def ml_classifier(directory: Path) -> Path:
    """LinearClassifier + ZipMap: `probabilities` is a sequence of {class: probability} maps."""
    return _classifier(directory, "ml_classifier", zipmap=True)


def ml_classifier_no_zipmap(directory: Path) -> Path:
    """LinearClassifier alone: `probabilities` is a float32 [batch, 3] tensor."""
    return _classifier(directory, "ml_classifier_no_zipmap", zipmap=False)


def recurrent_state(directory: Path) -> Path:
    """A voice-activity-detector shape: a per-row feature (mean at sr 16000, else max) updates
    the two-layer state; `output` is a sigmoid read-out of the new top layer."""
    features = ["batch", 1]

    def feature_branch(name: str, reduce: str, gain: float) -> GraphProto:
        nodes = [
            helper.make_node(reduce, ["input"], [f"{name}_reduced"], axes=[1], keepdims=1),
            helper.make_node("Constant", [], [f"{name}_gain"], value=_const("v", gain)),
            helper.make_node("Mul", [f"{name}_reduced", f"{name}_gain"], [f"{name}_feature"]),
        ]
        return _graph(name, nodes, [], [_io(f"{name}_feature", F32, features)])

    nodes = [
        helper.make_node("Equal", ["sr", "sr_16k"], ["is_16k"]),
        helper.make_node(
            "If",
            ["is_16k"],
            ["feature"],
            then_branch=feature_branch("at_16k", "ReduceMean", 1.0),
            else_branch=feature_branch("other_sr", "ReduceMax", 0.5),
        ),
        helper.make_node("MatMul", ["feature", "w_in"], ["drive"]),
        helper.make_node("Mul", ["state", "decay"], ["kept"]),
        helper.make_node("Add", ["kept", "drive"], ["pre_state"]),
        helper.make_node("Tanh", ["pre_state"], ["stateN"]),
        helper.make_node("Gather", ["stateN", "top"], ["top_state"], axis=0),
        helper.make_node("MatMul", ["top_state", "w_out"], ["logit"]),
        helper.make_node("Add", ["logit", "b_out"], ["pre_output"]),
        helper.make_node("Sigmoid", ["pre_output"], ["output"]),
    ]
    constants = [
        _const("sr_16k", 16000, np.int64),
        _const("top", 1, np.int64),
        _const("decay", [[[0.9]], [[0.5]]]),
    ]
    graph = _graph(
        "recurrent_state",
        nodes,
        [
            _io("input", F32, ["batch", "samples"]),
            _io("state", F32, [2, "batch", 8]),
            _io("sr", I64, []),
        ],
        [_io("output", F32, features), _io("stateN", F32, [2, "batch", 8])],
        [*_weights(7, w_in=(1, 8), w_out=(8, 1), b_out=(1,)), *constants],
    )
    return _save(graph, directory)


def misdeclared_output(directory: Path) -> Path:
    """A CRNN text recognizer's tail, as a pip-shipped OCR model has it: a bidirectional LSTM
    over `seq` steps, per-step logits reshaped back to [seq, batch, vocab] from the runtime
    shape, while the output is declared [1, seqlen]. onnxslim folds that Reshape to the declared
    shape ([1, seq * vocab]): the optimiser must catch the changed result."""
    hidden, features, vocab = 4, 8, 6
    n = helper.make_node
    nodes = [
        n("LSTM", ["x", "W", "R", "B"], ["steps"], direction="bidirectional", hidden_size=hidden),
        n("Transpose", ["steps"], ["by_step"], perm=[0, 2, 1, 3]),
        n("Reshape", ["by_step", "flat"], ["joined"]),
        n("Shape", ["joined"], ["size"]),
        *(n("Gather", ["size", f"axis{k}"], [f"size{k}"], axis=0) for k in range(3)),
        n("Mul", ["size0", "size1"], ["rows"]),
        n("Unsqueeze", ["rows", "axes"], ["rows1"]),
        n("Unsqueeze", ["size2", "axes"], ["width1"]),
        n("Concat", ["rows1", "width1"], ["table"], axis=0),
        n("Reshape", ["joined", "table"], ["table_rows"]),
        n("Gemm", ["table_rows", "head", "head_bias"], ["logits"], transB=1),
        n("Unsqueeze", ["size0", "axes"], ["seq1"]),
        n("Unsqueeze", ["size1", "axes"], ["batch1"]),
        n("Concat", ["seq1", "batch1", "rest"], ["back"], axis=0),
        n("Reshape", ["logits", "back"], ["y"]),
    ]
    constants = [_const("flat", [0, 0, -1], np.int64), _const("axes", [0], np.int64),
                 _const("rest", [-1], np.int64),
                 *(_const(f"axis{k}", k, np.int64) for k in range(3))]
    weights = _weights(11, W=(2, 4 * hidden, features), R=(2, 4 * hidden, hidden),
                       B=(2, 8 * hidden), head=(vocab, 2 * hidden), head_bias=(vocab,))
    graph = _graph("misdeclared_output", nodes, [_io("x", F32, ["seq", 1, features])],
                   [_io("y", F32, [1, "seqlen"])], [*weights, *constants])
    return _save(graph, directory, full_check=False)  # its declared output shape is wrong


def wide_dense(directory: Path) -> Path:
    """y = tanh(x @ w1) @ w2 with a 5 MB w1: big enough to be split into parts (not in ALL)."""
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["hidden"]),
        helper.make_node("Tanh", ["hidden"], ["activated"]),
        helper.make_node("MatMul", ["activated", "w2"], ["y"]),
    ]
    graph = _graph("wide_dense", nodes, [_io("x", F32, [1, 256])], [_io("y", F32, [1, 8])],
                   _weights(11, w1=(256, 5120), w2=(5120, 8)))
    return _save(graph, directory)


def zeros_table(directory: Path, count: int = 30_000_000) -> Path:
    """y = sum(w * x) with a [count] float32 w of zeros: 120 MB by default that compress to almost
    nothing, for the memory limits load() checks before downloading (not in ALL)."""
    nodes = [helper.make_node("Mul", ["w", "x"], ["scaled"]),
             helper.make_node("ReduceSum", ["scaled"], ["y"], keepdims=1)]
    graph = _graph("zeros_table", nodes, [_io("x", F32, [1])], [_io("y", F32, [1])],
                   [numpy_helper.from_array(np.zeros(count, np.float32), "w")])
    return _save(graph, directory)


def heavy_conv(directory: Path) -> Path:
    """Twelve 16->16 3x3 Conv + Relu over 192x192, then GlobalAveragePool and Flatten: small
    weights, much compute (a run takes well over 50 ms in WASM: a long task when it runs on the
    page)."""
    layers = 12
    nodes, current = [], "image"
    for layer in range(layers):
        nodes += [
            helper.make_node("Conv", [current, f"w{layer}", f"b{layer}"], [f"conv{layer}"],
                             pads=[1, 1, 1, 1]),
            helper.make_node("Relu", [f"conv{layer}"], [f"relu{layer}"]),
        ]
        current = f"relu{layer}"
    nodes += [helper.make_node("GlobalAveragePool", [current], ["pooled"]),
              helper.make_node("Flatten", ["pooled"], ["features"])]
    shapes = {}
    for layer in range(layers):
        shapes[f"w{layer}"], shapes[f"b{layer}"] = (16, 16, 3, 3), (16,)
    graph = _graph("heavy_conv", nodes, [_io("image", F32, [1, 16, 192, 192])],
                   [_io("features", F32, [1, 16])], _weights(7, **shapes))
    return _save(graph, directory)


# A model file is untrusted input: names a page must show as text, never parse as HTML.
HOSTILE_INPUT = "<img src=x onerror=alert(1)>"
HOSTILE_OUTPUT = '"><img src=y onerror=alert(2)><b>'


def hostile_names(directory: Path) -> Path:
    """HOSTILE_OUTPUT = Relu(HOSTILE_INPUT)."""
    nodes = [helper.make_node("Relu", [HOSTILE_INPUT], [HOSTILE_OUTPUT])]
    graph = _graph("hostile_names", nodes, [_io(HOSTILE_INPUT, F32, [1, 4])],
                   [_io(HOSTILE_OUTPUT, F32, [1, 4])])
    return _save(graph, directory)


ALL: dict[str, Callable[[Path], Path]] = {
    builder.__name__: builder
    for builder in (
        multi_io,
        scalar_input,
        conv_stack,
        symbolic_hw,
        if_subgraph,
        loop_subgraph,
        external_data,
        ml_classifier,
        ml_classifier_no_zipmap,
        recurrent_state,
    )
}
