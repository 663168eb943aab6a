"""onnx-bundler: ship an ONNX model to the browser as a static web app on onnxruntime-web.

Library use mirrors the CLI:

    import bundler
    manifest = bundler.build("model.onnx", bundler.BuildOptions(output=Path("dist")))
    report = bundler.check_bundle(Path("dist"))
    bundler.serve(Path("model.onnx"), port=8000)  # until Ctrl-C
    assert bundler.doctor("https://example.org/app/").ok  # a deployment, over HTTP
    session = bundler.Session("dist/models/fp32.onnx", eps=["cuda", "cpu"])  # native, edge apps
    figures = bundler.bench(Path("dist"), execution_providers=["wasm"]).to_json()  # speed
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from bundler.bundle.options import BuildOptions
    from bundler.commands.bench import bench
    from bundler.commands.build import build
    from bundler.commands.doctor import doctor
    from bundler.commands.serve import serve
    from bundler.edge.session import Session
    from bundler.verify.conformance import check_bundle

# Public name -> the module that defines it. No public name is also a submodule of `bundler`, so
# importing a module never replaces a function here.
_LAZY = {
    "bench": "bundler.commands.bench",
    "build": "bundler.commands.build",
    "BuildOptions": "bundler.bundle.options",
    "check_bundle": "bundler.verify.conformance",
    "doctor": "bundler.commands.doctor",
    "Session": "bundler.edge.session",
    "serve": "bundler.commands.serve",
}


def __getattr__(name: str) -> Any:
    # Imported on first use: `bundle --help` should not pay for onnx and onnxruntime.
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'bundler' has no attribute {name!r}")


__all__ = ["BuildOptions", "Session", "__version__", "bench", "build", "check_bundle", "doctor",
           "serve"]
