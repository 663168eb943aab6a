"""Which operators each target's runtime has kernels for, from bundler/data/ops-<version>.json.

The data comes from onnxruntime-web's own operator docs (WebGPU) and onnxruntime's CPU kernel
registry (what the WASM build and ORT Mobile / minimal builds run) of the pinned version;
scripts/update_ops_data.py writes it and tests/test_ops_data.py checks it in the browser. Support
is per operator and opset (the node's schema version, as onnxruntime matches kernels), not per
element type.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from pathlib import Path
from typing import Literal

import onnx

from bundler.bundle.options import DEFAULT_RUNTIME_VERSION

DATA_DIR = Path(__file__).resolve().parent.parent / "data"
DEFAULT_DOMAIN = "ai.onnx"
ML_DOMAIN = "ai.onnx.ml"
TARGETS = ("webgpu", "wasm", "ort-mobile")
Status = Literal["supported", "fallback", "unsupported"]
# onnxruntime turns Constant nodes into initializers when it loads a model: no kernel runs them.
KERNEL_FREE = {(DEFAULT_DOMAIN, "Constant")}


@dataclasses.dataclass(frozen=True)
class OpSupport:
    runtime_version: str
    max_opset: dict[str, int]
    webgpu: dict[str, dict[str, list]]
    cpu: dict[str, dict[str, list]]
    sources: dict[str, str]

    @staticmethod
    def _has(table: dict[str, dict[str, list]], domain: str, op: str, version: int) -> bool:
        return any(low <= version and (high is None or version <= high)
                   for low, high in table.get(domain, {}).get(op, []))

    def status(self, target: str, domain: str, op: str, version: int) -> Status:
        """`version` is the node's schema version (see `schema_version`). An ONNX function op
        that no kernel takes (HardSwish on CPU) counts as supported: onnxruntime expands it."""
        if (domain, op) in KERNEL_FREE:
            return "supported"
        on_cpu = self._has(self.cpu, domain, op, version)
        if target == "webgpu":
            if self._has(self.webgpu, domain, op, version):
                return "supported"
            # The WebGPU build runs other nodes on its CPU EP, which has no ai.onnx.ml kernels.
            if on_cpu and domain != ML_DOMAIN:
                return "fallback"
        elif on_cpu:
            return "supported"
        return "supported" if not on_cpu and _expands(domain, op, version) else "unsupported"

    def claimed(self, target: str) -> dict[str, dict[str, list]]:
        """The kernel table a target runs on."""
        return self.webgpu if target == "webgpu" else self.cpu


@functools.cache
def load_support(version: str = DEFAULT_RUNTIME_VERSION) -> OpSupport:
    path = DATA_DIR / f"ops-{version}.json"
    if not path.is_file():
        known = sorted(p.stem.removeprefix("ops-") for p in DATA_DIR.glob("ops-*.json"))
        path = DATA_DIR / f"ops-{known[-1]}.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    return OpSupport(data["runtime"]["version"], data["max_opset"], data["webgpu"], data["cpu"],
                     data["sources"])


def _schema(domain: str, op: str, opset: int) -> onnx.defs.OpSchema | None:
    try:
        return onnx.defs.get_schema(op, opset, "" if domain == DEFAULT_DOMAIN else domain)
    except onnx.defs.SchemaError:
        return None


def _expands(domain: str, op: str, version: int) -> bool:
    schema = _schema(domain, op, version)
    return schema is not None and (schema.has_function or schema.has_context_dependent_function)


def schema_version(domain: str, op: str, opset: int) -> int:
    """The since-version of the op's schema at `opset` (what kernels are registered by); the
    opset itself when onnx does not know the op (contrib and custom domains)."""
    schema = _schema(domain, op, opset)
    return opset if schema is None else schema.since_version
