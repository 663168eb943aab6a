"""Regenerate bundler/data/ops-<version>.json: the operators each target's runtime has kernels for.

    python scripts/update_ops_data.py WEB_PACKAGE_DIR

- WebGPU: the table in onnxruntime-web's own docs/webgpu-operators.md, read from the npm package of
  the pinned version (WEB_PACKAGE_DIR, e.g. ~/.cache/onnx-bundler/runtime/onnxruntime-web-1.31.1/
  lib/node_modules/onnxruntime-web).
- CPU (what the WASM build and ORT Mobile / minimal builds run): the kernel registry of native
  onnxruntime of the same version, the registry onnxruntime's docs/OperatorKernels.md is generated
  from. Run this with that onnxruntime version importable (`pip download onnxruntime==VERSION`,
  unzip, put it first on PYTHONPATH); the script refuses another version.
- max_opset: the newest ai.onnx / ai.onnx.ml opset that native onnxruntime of that version loads.

tests/test_ops_data.py checks a sample of the claims in headless Chromium.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import onnx
import onnxruntime as ort
from onnx import TensorProto, helper
from onnxruntime.capi import _pybind_state

OPEN_END = 2147483647
_ROW = re.compile(r"^\|\s*(?P<op>\w+)\s*\|\s*(?P<opsets>[^|]+)\|")
_DOMAIN = re.compile(r"(?P<domain>[\w.]+)\((?P<ranges>[^)]*)\)")
INTERNAL_DOMAINS = {"com.ms.internal.nhwc"}  # the EP's own layout rewrite, not in user models
# The docs are generated from the JSEP kernel list, but the WebGPU build (ort.webgpu.min.mjs) runs
# the native C++ WebGPU EP, which has more kernels. tests/test_ops_data.py found these ai.onnx ops
# running on WebGPU with CPU fallback disabled (measured at their opset-17 schema version, so the
# claim starts there).
MEASURED_WEBGPU = ("And", "Identity", "Max", "Min", "PRelu", "ScatterElements", "Softplus",
                   "TopK", "Trilu")
MEASURED_AT_OPSET = 17


def _ranges(text: str) -> list[list[int | None]]:
    """'7-12,13,14+' -> [[7, 12], [13, 13], [14, None]]."""
    ranges: list[list[int | None]] = []
    for part in text.split(","):
        part = part.strip()
        if part.endswith("+"):
            ranges.append([int(part[:-1]), None])
        elif "-" in part:
            low, high = part.split("-")
            ranges.append([int(low), int(high)])
        else:
            ranges.append([int(part), int(part)])
    return ranges


def webgpu_table(docs: Path) -> dict[str, dict[str, list]]:
    table: dict[str, dict[str, list]] = {}
    for line in docs.read_text(encoding="utf-8").splitlines():
        row = _ROW.match(line)
        if not row or row["op"] == "Operator":
            continue
        for entry in _DOMAIN.finditer(row["opsets"]):
            if entry["domain"] not in INTERNAL_DOMAINS:
                table.setdefault(entry["domain"], {})[row["op"]] = _ranges(entry["ranges"])
    for op in MEASURED_WEBGPU:
        since = onnx.defs.get_schema(op, MEASURED_AT_OPSET, "").since_version
        table.setdefault("ai.onnx", {}).setdefault(op, []).append([since, None])
    return table


def cpu_table() -> dict[str, dict[str, list]]:
    table: dict[str, dict[str, list]] = {}
    for kernel in _pybind_state.get_all_opkernel_def():
        if kernel.provider != "CPUExecutionProvider":
            continue
        low, high = kernel.version_range
        ranges = table.setdefault(kernel.domain or "ai.onnx", {}).setdefault(kernel.op_name, [])
        entry = [low, None if high >= OPEN_END else high]
        if entry not in ranges:
            ranges.append(entry)
    return {domain: {op: sorted(r, key=lambda x: x[0]) for op, r in sorted(ops.items())}
            for domain, ops in sorted(table.items())}


def _loads(domain: str, version: int) -> bool:
    op, inputs = ("Identity", ["x"]) if domain == "" else ("Normalizer", ["x"])
    node = helper.make_node(op, inputs, ["y"], domain=domain)
    graph = helper.make_graph([node], "probe", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [1, 2])], [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                                                         [1, 2])])
    opsets = [helper.make_opsetid("", 17 if domain else version)]
    if domain:
        opsets.append(helper.make_opsetid(domain, version))
    model = helper.make_model(graph, opset_imports=opsets, ir_version=8)
    try:
        ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    except Exception:  # noqa: BLE001 - any refusal means "not this opset"
        return False
    return True


def max_opset(domain: str, start: int) -> int:
    version = start
    while _loads(domain, version + 1):
        version += 1
    return version


def main() -> None:
    package = Path(sys.argv[1])
    version = json.loads((package / "package.json").read_text())["version"]
    if ort.__version__ != version:
        sys.exit(f"native onnxruntime {ort.__version__} is importable; this needs {version}")
    data = {
        "runtime": {"package": "onnxruntime-web", "version": version},
        "sources": {
            "webgpu": f"onnxruntime-web {version} docs/webgpu-operators.md, plus ops measured on"
                      f" its WebGPU build: {', '.join(MEASURED_WEBGPU)}",
            "cpu": f"onnxruntime {version} CPU kernel registry (as in docs/OperatorKernels.md)",
        },
        "max_opset": {"ai.onnx": max_opset("", 17), "ai.onnx.ml": max_opset("ai.onnx.ml", 3)},
        "webgpu": webgpu_table(package / "docs" / "webgpu-operators.md"),
        "cpu": cpu_table(),
        "onnx": onnx.__version__,
    }
    target = Path(__file__).resolve().parent.parent / "bundler" / "data" / f"ops-{version}.json"
    target.parent.mkdir(exist_ok=True)
    target.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {target}")


if __name__ == "__main__":
    main()
