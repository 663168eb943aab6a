"""Native onnxruntime over an execution-provider priority list, for edge apps and `bundle run`.

    session = bundler.Session("dist/models/fp32.onnx", eps=["cuda", "cpu"])
    print(session.ep, [str(a) for a in session.providers_tried])
    outputs = session.run({"image": pixels})

Each EP in the list is tried in order and the first one this machine really has is used: it must
be compiled into the installed onnxruntime (`get_available_providers()`), a session must be
created with it, and that session must keep it (onnxruntime silently drops a listed provider
whose device or libraries are missing). CPU is always the last resort. Every skipped EP keeps
why: not installed, not available, or session creation failed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal

import numpy as np
import onnxruntime as ort

from bundler.bundle.modelio import session_options
from bundler.errors import ConfigError, ModelError, first_line

EP_PRIORITY = ("tensorrt", "cuda", "openvino", "directml", "rocm", "coreml", "nnapi", "qnn",
               "cpu")
PROVIDERS = {
    "tensorrt": "TensorrtExecutionProvider",
    "cuda": "CUDAExecutionProvider",
    "openvino": "OpenVINOExecutionProvider",
    "directml": "DmlExecutionProvider",
    "rocm": "ROCMExecutionProvider",
    "migraphx": "MIGraphXExecutionProvider",
    "coreml": "CoreMLExecutionProvider",
    "nnapi": "NnapiExecutionProvider",
    "qnn": "QNNExecutionProvider",
    "xnnpack": "XnnpackExecutionProvider",
    "azure": "AzureExecutionProvider",
    "cpu": "CPUExecutionProvider",
}
# The pip package whose onnxruntime has the EP compiled in (they replace the plain package).
PACKAGES = {
    "tensorrt": "onnxruntime-gpu (with TensorRT libraries)",
    "cuda": "onnxruntime-gpu",
    "openvino": "onnxruntime-openvino",
    "directml": "onnxruntime-directml (Windows)",
    "rocm": "onnxruntime-rocm",
    "migraphx": "onnxruntime-migraphx",
    "coreml": "onnxruntime on macOS/iOS",
    "nnapi": "onnxruntime-android",
    "qnn": "onnxruntime-qnn",
    "xnnpack": "an onnxruntime build with --use_xnnpack",
}
Outcome = Literal["used", "not installed", "not available", "session creation failed"]


@dataclasses.dataclass(frozen=True)
class Attempt:
    ep: str
    provider: str
    outcome: Outcome
    detail: str = ""

    def __str__(self) -> str:
        return f"{self.ep}: {self.outcome}" + (f" ({self.detail})" if self.detail else "")

    def to_json(self) -> dict[str, str]:
        return dataclasses.asdict(self)


def parse_eps(names: Sequence[str] | str) -> list[str]:
    """Short names (`cuda`) or onnxruntime's (`CUDAExecutionProvider`), in order; CPU is added
    last when missing, since it always has to be there to fall back on."""
    items = names.split(",") if isinstance(names, str) else list(names)
    by_provider = {provider.lower(): ep for ep, provider in PROVIDERS.items()}
    eps: list[str] = []
    for item in (i.strip().lower() for i in items if i.strip()):
        ep = item if item in PROVIDERS else by_provider.get(item)
        if ep is None:
            raise ConfigError(f"unknown execution provider {item!r}; use some of"
                              f" {', '.join(PROVIDERS)}")
        if ep not in eps:
            eps.append(ep)
    return eps if "cpu" in eps else [*eps, "cpu"]


class Session:
    """An onnxruntime session on the first EP of `eps` that works here (see the module doc).

    `provider_options` maps an EP to its onnxruntime provider options. With `whole_graph`, an
    accelerator that would leave some nodes to the CPU counts as failed (onnxruntime's
    `session.disable_cpu_ep_fallback`), so `ep` names the device that runs the whole model.
    `config`: session config entries for every EP (a bundle variant's `session_config`, e.g.
    int4 format=qdq's, as `bundle run` opens it).
    """

    def __init__(self, model: Path | str, eps: Sequence[str] | str = EP_PRIORITY, *,
                 provider_options: Mapping[str, Mapping[str, str]] | None = None,
                 whole_graph: bool = False, threads: int = 0,
                 config: Mapping[str, str] | None = None) -> None:
        self.model = Path(model)
        self.config = dict(config or {})
        if not self.model.is_file():
            raise ModelError(f"model not found: {self.model}")
        self.providers_tried: list[Attempt] = []
        available = set(ort.get_available_providers())
        for ep in parse_eps(eps):
            provider = PROVIDERS[ep]
            if provider not in available:
                self.providers_tried.append(Attempt(
                    ep, provider, "not installed",
                    f"onnxruntime {ort.__version__} here has no {provider}; install"
                    f" {PACKAGES.get(ep, 'a build with it')}"))
                continue
            # silent: its failures are reported as the skip reason
            options = session_options(config, threads)
            if whole_graph and ep != "cpu":
                options.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
            try:
                session = ort.InferenceSession(
                    str(self.model), options,
                    providers=[(provider, dict((provider_options or {}).get(ep, {})))])
            except Exception as error:  # noqa: BLE001 - onnxruntime raises unrelated types
                self.providers_tried.append(Attempt(ep, provider, "session creation failed",
                                                    first_line(error)))
                continue
            if session.get_providers()[0] != provider:
                self.providers_tried.append(Attempt(
                    ep, provider, "not available",
                    f"onnxruntime dropped it (no device or driver); the session had"
                    f" {', '.join(session.get_providers())}"))
                continue
            self.providers_tried.append(Attempt(ep, provider, "used"))
            self.ep = ep
            self.session = session
            return
        raise ModelError(f"{self.model}: no execution provider could run it; "
                         + "; ".join(map(str, self.providers_tried)))

    @property
    def skipped(self) -> list[Attempt]:
        return [attempt for attempt in self.providers_tried if attempt.outcome != "used"]

    @property
    def input_names(self) -> list[str]:
        return [value.name for value in self.session.get_inputs()]

    @property
    def output_names(self) -> list[str]:
        return [value.name for value in self.session.get_outputs()]

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        try:
            values = self.session.run(self.output_names, dict(feeds))
        except Exception as error:  # noqa: BLE001 - onnxruntime raises unrelated types
            raise ModelError(f"{self.model.name} on {self.ep}: {first_line(error)}") from None
        return dict(zip(self.output_names, values, strict=True))
