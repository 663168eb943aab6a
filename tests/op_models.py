"""One-node ONNX models, one per operator type, for checking the operator support data.

`CASES` spans ops the WebGPU docs claim (elementwise, conv, reductions, gathers, scatter, resize,
a contrib op), ops they do not (so the WebGPU EP must hand them to its CPU EP), a function op
without a CPU kernel (HardSwish) and an ai.onnx.ml op (the WebGPU build has none). Each model has
fixed shapes and runs in native onnxruntime; `feeds(case)` gives seeded inputs.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F, I32, I64, B = TensorProto.FLOAT, TensorProto.INT32, TensorProto.INT64, TensorProto.BOOL
_NUMPY = {F: np.float32, I32: np.int32, I64: np.int64, B: np.bool_}


@dataclasses.dataclass(frozen=True)
class OpCase:
    op: str
    inputs: tuple[tuple[int, tuple[int, ...]], ...]  # (element type, shape) of each graph input
    outputs: tuple[int, ...] = (F,)
    attributes: dict[str, Any] = dataclasses.field(default_factory=dict)
    constants: tuple[np.ndarray, ...] = ()  # initializers, after the graph inputs
    domain: str = ""
    opset: int = 17

    @property
    def name(self) -> str:
        return self.op if not self.domain else f"{self.domain}.{self.op}"

    def model(self) -> onnx.ModelProto:
        names = [f"x{i}" for i in range(len(self.inputs) + len(self.constants))]
        outputs = [f"y{i}" for i in range(len(self.outputs))]
        node = helper.make_node(self.op, names, outputs, name=f"the_{self.op}",
                                domain=self.domain, **self.attributes)
        constants = names[len(self.inputs):]
        graph = helper.make_graph(
            [node], self.op,
            [helper.make_tensor_value_info(n, t, s)
             for n, (t, s) in zip(names, self.inputs, strict=False)],
            [helper.make_tensor_value_info(n, t, None)
             for n, t in zip(outputs, self.outputs, strict=True)],
            initializer=[numpy_helper.from_array(c, n)
                         for n, c in zip(constants, self.constants, strict=True)])
        opsets = [helper.make_opsetid("", self.opset)]
        if self.domain:
            opsets.append(helper.make_opsetid(self.domain, 1))
        return helper.make_model(graph, opset_imports=opsets, ir_version=8)

    def save(self, directory: Path) -> Path:
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"{self.name}.onnx"
        onnx.save_model(self.model(), path)
        return path


def feeds(case: OpCase, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    result = {}
    for index, (element, shape) in enumerate(case.inputs):
        if element == B:
            value = rng.integers(0, 2, shape).astype(np.bool_)
        elif element in (I32, I64):
            value = rng.integers(1, 8, shape).astype(_NUMPY[element])
        else:
            value = (rng.random(shape) * 2 - 1).astype(np.float32)
        result[f"x{index}"] = value
    return result


def _i64(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.int64)


X = ((F, (2, 3)),)
XY = ((F, (2, 3)), (F, (2, 3)))
CASES = [
    # Claimed by onnxruntime-web 1.31.1's WebGPU docs.
    OpCase("Abs", X),
    OpCase("Add", XY),
    OpCase("Tanh", X),
    OpCase("Erf", X),
    OpCase("HardSigmoid", X),
    OpCase("MatMul", ((F, (2, 3)), (F, (3, 4)))),
    OpCase("Conv", ((F, (1, 2, 5, 5)),), constants=(np.full((3, 2, 3, 3), 0.1, np.float32),)),
    OpCase("Softmax", ((F, (2, 5)),), attributes={"axis": -1}),
    OpCase("Gather", ((F, (5, 3)),), constants=(_i64(4, 0),)),
    OpCase("Transpose", ((F, (2, 3, 4)),), attributes={"perm": [2, 0, 1]}),
    OpCase("CumSum", X, constants=(np.array(1, dtype=np.int64),)),
    OpCase("LayerNormalization", ((F, (2, 4)),),
           constants=(np.ones(4, np.float32), np.zeros(4, np.float32))),
    OpCase("Where", ((B, (2, 3)), (F, (2, 3)), (F, (2, 3)))),
    OpCase("Einsum", ((F, (2, 3)), (F, (3, 4))), attributes={"equation": "ij,jk->ik"}),
    OpCase("Pad", X, constants=(_i64(0, 1, 0, 2),)),
    OpCase("ArgMax", ((F, (2, 5)),), outputs=(I64,), attributes={"axis": 1}),
    OpCase("ReduceMean", X, attributes={"axes": [1]}),
    OpCase("DepthToSpace", ((F, (1, 4, 2, 2)),), attributes={"blocksize": 2}),
    OpCase("GatherND", ((F, (2, 2)),), constants=(np.array([[1], [0]], np.int64),)),
    OpCase("ScatterND", ((F, (4,)),),
           constants=(np.array([[2]], np.int64), np.array([5.0], np.float32))),
    OpCase("Tile", X, constants=(_i64(2, 1),)),
    OpCase("Expand", ((F, (1, 3)),), constants=(_i64(2, 3),)),
    OpCase("Gelu", X, domain="com.microsoft"),
    OpCase("Neg", X),
    OpCase("Clip", X, constants=(np.array(-0.5, np.float32), np.array(0.5, np.float32))),
    OpCase("Cast", X, outputs=(I32,), attributes={"to": I32}),
    OpCase("Shape", X, outputs=(I64,)),
    OpCase("Reshape", X, constants=(_i64(3, 2),)),
    OpCase("GatherElements", X, attributes={"axis": 1},
           constants=(np.array([[0, 2, 1], [1, 0, 0]], np.int64),)),
    OpCase("ConvTranspose", ((F, (1, 2, 3, 3)),),
           constants=(np.full((2, 3, 2, 2), 0.1, np.float32),)),
    OpCase("AveragePool", ((F, (1, 2, 4, 4)),), attributes={"kernel_shape": [2, 2]}),
    OpCase("InstanceNormalization", ((F, (1, 2, 3)),),
           constants=(np.ones(2, np.float32), np.zeros(2, np.float32))),
    OpCase("DequantizeLinear", ((I32, (2, 3)),),
           constants=(np.array(0.1, np.float32), np.array(1, np.int32))),
    # Not claimed: the WebGPU EP leaves these to its CPU EP.
    OpCase("Mod", ((I32, (2, 3)), (I32, (2, 3))), outputs=(I32,)),
    OpCase("TopK", ((F, (2, 5)),), outputs=(F, I64), constants=(_i64(2),)),
    OpCase("Round", X),
    OpCase("Sign", X),
    OpCase("Max", XY),
    OpCase("Softplus", X),
    OpCase("Hardmax", X),
    OpCase("Trilu", ((F, (3, 3)),)),
    OpCase("PRelu", X, constants=(np.full(3, 0.25, np.float32),)),
    OpCase("IsNaN", X, outputs=(B,)),
    OpCase("NonZero", X, outputs=(I64,)),
    OpCase("LRN", ((F, (1, 3, 2, 2)),), attributes={"size": 3}),
    OpCase("Selu", X),
    OpCase("Identity", X),
    OpCase("Min", XY),
    OpCase("Sum", XY),
    OpCase("Mean", XY),
    OpCase("Softsign", X),
    OpCase("SpaceToDepth", ((F, (1, 1, 4, 4)),), attributes={"blocksize": 2}),
    OpCase("Celu", X),
    OpCase("LogSoftmax", X),
    OpCase("And", ((B, (2, 3)), (B, (2, 3))), outputs=(B,)),
    OpCase("ScatterElements", X, attributes={"axis": 1}, constants=(np.array([[0, 2]], np.int64),
                                            np.array([[9.0, 8.0]], np.float32))),
    OpCase("QuantizeLinear", X, outputs=(TensorProto.UINT8,),
           constants=(np.array(0.01, np.float32), np.array(128, np.uint8))),
    # A function op with no CPU kernel (onnxruntime expands it) and an ai.onnx.ml op.
    OpCase("HardSwish", X),
    OpCase("Normalizer", X, attributes={"norm": "L2"}, domain="ai.onnx.ml"),
]
