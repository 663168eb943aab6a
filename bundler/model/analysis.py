"""What a model is made of and what will hurt where it ships (the core of `bundle inspect`).

`analyse(path)` reads the model without its weights (sizes come from the tensors' dims) and
returns an `Analysis`: opsets and domains, inputs and outputs, parameters by element type, the
operator histogram (subgraphs and local functions included), external data, per-target support
(WebGPU, WASM, ORT Mobile) with node names, and warnings, each with the fix to try.
`model_warnings(path)` is the part `bundle build` prints before it builds.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from bundler.bundle.modelio import TYPE_NAMES, model_bytes, model_files, read_model, tensor_dims
from bundler.model.compat import limits_for
from bundler.model.dim_expressions import implied_by
from bundler.model.opsupport import DEFAULT_DOMAIN, TARGETS, OpSupport, load_support, schema_version

SCHEMA_VERSION = 1
PROTOBUF_LIMIT = 2**31 - 1
# WebGPU's default maxStorageBufferBindingSize: a larger Gather table cannot be bound at once.
WEBGPU_BINDING_LIMIT = 128 * 2**20
MAX_NAMES = 5
GATHER_OPS = {"Gather", "GatherElements", "GatherND"}
SHAPE_OPS = {"Shape", "Size"}


@dataclasses.dataclass(frozen=True)
class NodeRef:
    name: str  # the node's name, or "<op #index>" for an unnamed one
    op: str
    domain: str  # "ai.onnx" for the default domain
    version: int  # the schema version kernels are matched by
    graph: str  # "" for the main graph, else e.g. "loop_body" or "function MyFn"


@dataclasses.dataclass(frozen=True)
class ModelWarning:
    code: str
    message: str
    fix: str

    def text(self) -> str:
        return f"{self.message}; try: {self.fix}"

    def to_json(self) -> dict[str, str]:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class Analysis:
    info: dict[str, Any]
    nodes: list[NodeRef]
    parameters: dict[str, dict[str, int]]
    warnings: list[ModelWarning]
    targets: dict[str, dict[str, Any]]
    graphs: list[dict[str, Any]]  # per graph: name and its nodes (for the page's graph view)

    def to_json(self) -> dict[str, Any]:
        total = {"count": sum(v["count"] for v in self.parameters.values()),
                 "bytes": sum(v["bytes"] for v in self.parameters.values())}
        return {**self.info, "parameters": {**total, "by_dtype": self.parameters},
                "targets": self.targets, "warnings": [w.to_json() for w in self.warnings]}


def _op_key(domain: str, op: str) -> str:
    return op if domain == DEFAULT_DOMAIN else f"{domain}.{op}"


def _subgraphs(node: onnx.NodeProto) -> Iterator[tuple[str, onnx.GraphProto]]:
    for attribute in node.attribute:
        if attribute.type == onnx.AttributeProto.GRAPH:
            yield attribute.name, attribute.g
        for index, graph in enumerate(attribute.graphs):
            yield f"{attribute.name}[{index}]", graph


class _Walker:
    """Every node of the model: the main graph, subgraphs (If/Loop/Scan bodies), and the bodies
    of model-local functions (onnxruntime inlines them, so their nodes are what runs)."""

    def __init__(self, model: onnx.ModelProto) -> None:
        self.functions = {(f.domain, f.name): f for f in model.functions}
        self.histogram: collections.Counter[str] = collections.Counter()
        self.nodes: list[NodeRef] = []
        self.graphs: list[dict[str, Any]] = []
        self.tensors: list[onnx.TensorProto] = []
        self.values: list[onnx.ValueInfoProto] = []
        self.casts_to_double = 0
        self._seen_functions: set[tuple[str, str]] = set()
        opsets = {e.domain or DEFAULT_DOMAIN: e.version for e in model.opset_import}
        self._walk_nodes(model.graph.node, opsets, "", model.graph)

    def _walk_nodes(self, nodes: Any, opsets: dict[str, int], where: str,
                    graph: onnx.GraphProto | None) -> None:
        listed = []
        if graph is not None:
            self.tensors += list(graph.initializer)
            self.tensors += [s.values for s in graph.sparse_initializer]
            self.values += [*graph.input, *graph.output, *graph.value_info]
        for index, node in enumerate(nodes):
            domain = node.domain or DEFAULT_DOMAIN
            name = node.name or f"<{node.op_type} #{index}>"
            self.histogram[_op_key(domain, node.op_type)] += 1
            listed.append({"name": name, "op": _op_key(domain, node.op_type),
                           "inputs": list(node.input), "outputs": list(node.output)})
            for attribute in node.attribute:
                if attribute.type == onnx.AttributeProto.TENSOR:
                    self.tensors.append(attribute.t)
                if node.op_type == "Cast" and attribute.name == "to" and attribute.i == 11:
                    self.casts_to_double += 1
            function = self.functions.get((node.domain, node.op_type))
            if function is not None:
                if (node.domain, node.op_type) not in self._seen_functions:
                    self._seen_functions.add((node.domain, node.op_type))
                    inner = {**opsets, **{e.domain or DEFAULT_DOMAIN: e.version
                                          for e in function.opset_import}}
                    self._walk_nodes(function.node, inner, f"function {function.name}", None)
                continue
            version = schema_version(domain, node.op_type, opsets.get(domain, 1))
            self.nodes.append(NodeRef(name, node.op_type, domain, version, where))
            for label, subgraph in _subgraphs(node):
                self._walk_nodes(subgraph.node, opsets,
                                 f"{where + '/' if where else ''}{name}.{label}", subgraph)
        self.graphs.append({"name": where or "main", "nodes": listed})


def _dtype_name(data_type: int) -> str:
    return TYPE_NAMES.get(data_type) or onnx.TensorProto.DataType.Name(data_type).lower()


def _tensor_size(tensor: onnx.TensorProto) -> tuple[int, int]:
    """(element count, bytes) from the dims, so external weights need not be read."""
    count = int(np.prod(tensor.dims, dtype=np.int64)) if tensor.dims else 1
    if tensor.data_type == onnx.TensorProto.STRING:
        return count, sum(len(s) for s in tensor.string_data)
    try:
        itemsize = onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type).itemsize
    except (KeyError, TypeError):
        itemsize = 1  # 4-bit and float8 types
    if tensor.data_type in (onnx.TensorProto.INT4, onnx.TensorProto.UINT4):
        return count, (count + 1) // 2
    return count, count * itemsize


def tensor_bytes(model: onnx.ModelProto) -> list[int]:
    """The bytes of each constant tensor of `model` (initializers and Constant values, in
    subgraphs and functions too), from their dims and types: external data is never read."""
    return [_tensor_size(tensor)[1] for tensor in _Walker(model).tensors]


def _parameters(tensors: list[onnx.TensorProto]) -> dict[str, dict[str, int]]:
    by_type: dict[str, dict[str, int]] = {}
    for tensor in tensors:
        count, size = _tensor_size(tensor)
        entry = by_type.setdefault(_dtype_name(tensor.data_type), {"count": 0, "bytes": 0})
        entry["count"] += count
        entry["bytes"] += size
    return dict(sorted(by_type.items()))


def _names(items: list[str]) -> str:
    more = len(items) - MAX_NAMES
    return ", ".join(items[:MAX_NAMES]) + (f" and {more} more" if more > 0 else "")


def _targets(nodes: list[NodeRef], support: OpSupport) -> dict[str, dict[str, Any]]:
    result = {}
    for target in TARGETS:
        found: dict[str, dict[tuple[str, str, int], list[str]]] = {"unsupported": {},
                                                                   "fallback": {}}
        for node in nodes:
            status = support.status(target, node.domain, node.op, node.version)
            if status != "supported":
                found[status].setdefault((node.domain, node.op, node.version), []).append(
                    f"{node.graph}/{node.name}" if node.graph else node.name)
        entries = {kind: [{"op": op, "domain": domain, "version": version, "nodes": names}
                          for (domain, op, version), names in sorted(groups.items())]
                   for kind, groups in found.items()}
        status = ("unsupported" if entries["unsupported"]
                  else "falls back" if entries["fallback"] else "supported")
        result[target] = {"status": status, **entries}
    return result


def _warnings(model: onnx.ModelProto, walker: _Walker, info: dict[str, Any],
              support: OpSupport) -> list[ModelWarning]:
    warnings = []
    doubles = [v.name for v in walker.values
               if v.type.tensor_type.elem_type == onnx.TensorProto.DOUBLE]
    doubles += [t.name or "<constant>" for t in walker.tensors
                if t.data_type == onnx.TensorProto.DOUBLE]
    if doubles or walker.casts_to_double:
        where = _names(list(dict.fromkeys(doubles))) or f"{walker.casts_to_double} Cast nodes"
        warnings.append(ModelWarning(
            "fp64", f"float64 tensors ({where}): WebGPU has no float64, so those nodes run on"
            " CPU or fail, and they double the bytes",
            "export in float32 (model.float() in PyTorch; dtype=np.float32 in the converter)"))
    initializers = {t.name: t for t in walker.tensors if t.name}
    big = sorted({name for graph in walker.graphs for node in graph["nodes"]
                  if node["op"] in GATHER_OPS and node["inputs"]
                  and (name := node["inputs"][0]) in initializers
                  and _tensor_size(initializers[name])[1] > WEBGPU_BINDING_LIMIT})
    if big:
        warnings.append(ModelWarning(
            "huge-gather", f"Gather table {_names(big)} is over 128 MiB, WebGPU's default"
            " storage-buffer binding limit",
            "--quantize int8-weights (4x smaller) or a smaller vocabulary/embedding"))
    if info["model"]["bytes"] > PROTOBUF_LIMIT:
        warnings.append(ModelWarning(
            "over-2gb", f"the model is {info['model']['bytes'] / 2**30:.1f} GiB: over protobuf's"
            " 2 GB limit and too big for the browser's 32-bit WASM heap",
            "quantize it before the build (bundle build makes fp32 only past 2 GB; int4 with"
            " onnxruntime's MatMulNBitsQuantizer), keep its weights in external data files of"
            " under ~1 GB each, or ship it natively (--target edge keeps external data)"))
    named = {d for spec in info["inputs"] for d in spec["shape"] or () if isinstance(d, str)}
    symbolic = sorted(d for d in named if not implied_by(d, named))  # a + b follows from a, b
    if symbolic and SHAPE_OPS & set(walker.histogram):
        flags = " ".join(f"--fix-dim {d if d != '?' else 'INPUT:AXIS'}=VALUE" for d in symbolic)
        warnings.append(ModelWarning(
            "symbolic-dims", f"symbolic dims {_names(symbolic)} feed shape computations"
            " (Shape/Size nodes), which keeps them from being folded and fused",
            f"{flags} when the app uses one size"))
    newest = support.max_opset.get(DEFAULT_DOMAIN, 0)
    opset = info["opsets"].get(DEFAULT_DOMAIN, 0)
    if opset > newest:
        warnings.append(ModelWarning(
            "opset", f"opset {opset} is newer than onnxruntime {support.runtime_version} knows"
            f" (up to {newest})",
            f"export with opset_version={newest} or onnx.version_converter.convert_version(model,"
            f" {newest})"))
    limits = limits_for(support.runtime_version)
    if limits is not None and model.ir_version > limits.ir_version:
        warnings.append(ModelWarning(
            "ir-version", f"IR version {model.ir_version}: onnxruntime-web"
            f" {support.runtime_version} accepts up to {limits.ir_version}",
            f"bundle build lowers it (set model.ir_version = {limits.ir_version} before saving"
            " for other tools)"))
    return warnings


def analyse(path: Path, runtime_version: str | None = None) -> Analysis:
    model = read_model(path, load_weights=False)
    support = load_support(runtime_version) if runtime_version else load_support()
    walker = _Walker(model)
    opsets = {entry.domain or DEFAULT_DOMAIN: entry.version for entry in model.opset_import}
    initializers = {tensor.name for tensor in model.graph.initializer}
    domains = collections.Counter(node.domain for node in walker.nodes)
    info: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "model": {"file": path.name, "bytes": model_bytes(path), "ir_version": model.ir_version,
                  "producer": " ".join(filter(None, [model.producer_name,
                                                     model.producer_version]))},
        "runtime": {"package": "onnxruntime-web", "version": support.runtime_version,
                    "sources": support.sources},
        "opsets": opsets,
        "domains": [{"domain": domain, "version": version, "default": domain == DEFAULT_DOMAIN,
                     "nodes": domains.get(domain, 0)}
                    for domain, version in sorted(opsets.items())],
        "inputs": [_io(v) for v in model.graph.input if v.name not in initializers],
        "outputs": [_io(v) for v in model.graph.output],
        "nodes": sum(walker.histogram.values()),
        "subgraphs": len(walker.graphs) - 1,
        "operators": dict(sorted(walker.histogram.items())),
        "external_data": [{"file": file.name, "bytes": file.stat().st_size}
                          for file in model_files(path)[1:]],
    }
    return Analysis(info, walker.nodes, _parameters(walker.tensors),
                    _warnings(model, walker, info, support), _targets(walker.nodes, support),
                    walker.graphs[::-1])


def _io(value: onnx.ValueInfoProto) -> dict[str, Any]:
    """An input or output as bundle.json writes it; non-tensors (a ZipMap's sequence of maps)
    and types onnxruntime-web lacks are described, not refused: inspect reports, build decides."""
    kind = value.type.WhichOneof("value")
    if kind != "tensor_type":
        return {"name": value.name, "type": (kind or "unknown").removesuffix("_type"),
                "shape": None, "symbolic": []}
    tensor = value.type.tensor_type
    shape = tensor_dims(tensor)
    return {"name": value.name, "type": _dtype_name(tensor.elem_type),
            "shape": None if shape is None else list(shape),
            "symbolic": [d for d in shape or () if isinstance(d, str)]}


def model_warnings(path: Path) -> list[ModelWarning]:
    """What `bundle build` warns about before building (the same as `bundle inspect`)."""
    return analyse(path).warnings
