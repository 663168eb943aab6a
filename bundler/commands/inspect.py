"""`bundle inspect MODEL|DIR`: what the model is made of and where it will run, before shipping."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from bundler.bundle.folder import model_or_bundle, native_model
from bundler.console import Reporter
from bundler.errors import BundlerError, ModelError
from bundler.model.analysis import Analysis, analyse
from bundler.site.pages import human_bytes

TARGET_NAMES = {"webgpu": "WebGPU (onnxruntime-web)", "wasm": "WASM (onnxruntime-web)",
                "ort-mobile": "ORT Mobile / minimal build (CPU kernels)"}


def _dims(shape: list | None) -> str:
    return "rank unknown" if shape is None else "[" + ", ".join(map(str, shape)) + "]"


def print_analysis(analysis: Analysis, reporter: Reporter) -> None:
    data = analysis.to_json()
    model = data["model"]
    click.echo(f"{model['file']}: {human_bytes(model['bytes'])}, IR {model['ir_version']},"
               f" {data['nodes']} nodes ({data['subgraphs']} subgraphs),"
               f" {data['parameters']['count']} parameters")
    click.echo("opsets: " + ", ".join(
        f"{d['domain']} {d['version']}" + ("" if d["default"] else " (non-default)")
        for d in data["domains"]))
    reporter.table("Inputs and outputs", ["", "name", "type", "shape"],
                   [[role, s["name"], s["type"], _dims(s["shape"])]
                    for role in ("input", "output") for s in data[role + "s"]])
    reporter.table("Parameters", ["type", "count", "bytes"],
                   [[t, v["count"], human_bytes(v["bytes"])]
                    for t, v in data["parameters"]["by_dtype"].items()])
    reporter.table("Operators", ["operator", "nodes"], list(data["operators"].items()))
    for entry in data["external_data"]:
        click.echo(f"external data: {entry['file']} ({human_bytes(entry['bytes'])})")
    rows = []
    for target, entry in data["targets"].items():
        problems = [(kind, e) for kind in ("unsupported", "fallback") for e in entry[kind]]
        rows += [[TARGET_NAMES[target], "supported", "-", "-"]] if not problems else [
            [TARGET_NAMES[target], "unsupported" if kind == "unsupported" else "falls back to CPU",
             f"{e['op']} ({e['domain']} v{e['version']})", ", ".join(e["nodes"][:5])
             + (f" +{len(e['nodes']) - 5}" if len(e["nodes"]) > 5 else "")]
            for kind, e in problems]
    reporter.table(f"Targets (onnxruntime {data['runtime']['version']})",
                   ["target", "status", "operator", "nodes"], rows)
    for warning in analysis.warnings:
        reporter.warn(warning.text())


def _netron() -> Any:
    try:
        import netron
    except ImportError:
        raise BundlerError("netron is not installed; pip install netron (or open the model at"
                           " netron.app)") from None
    return netron


def inspect(source: Path, *, as_json: bool = False, html: Path | None = None,
            netron: bool = False, session: str | None = None,
            reporter: Reporter | None = None) -> Analysis:
    reporter = reporter or Reporter()
    viewer = _netron() if netron else None  # before any output: a missing viewer is an error
    model, manifest, variant = model_or_bundle(source, session=session)
    if manifest is not None and variant is not None and not as_json:
        inspected = manifest.session(session).name
        click.echo("sessions: " + ", ".join(
            f"{s.name} (inspected: {variant.name})" if s.name == inspected else s.name
            for s in manifest.sessions))
    if model.suffix == ".ort":
        raise ModelError(f"{model} is in ORT format, which bundle inspect does not read; inspect"
                         " the .onnx it was made from")
    # a model the build split into parts for static hosts, put back together meanwhile
    with native_model(source, manifest, model) as opened:
        analysis = analyse(opened)
        if as_json:
            click.echo(json.dumps(analysis.to_json(), indent=2))
        else:
            print_analysis(analysis, reporter)
        if html is not None:
            from bundler.model.inspect_page import render_page

            html.write_text(render_page(analysis), encoding="utf-8")
            reporter.info(f"Wrote {html}")
        if viewer is not None:
            viewer.start(str(opened))
            viewer.wait()  # serves the model until Ctrl-C
    return analysis
