"""`bundle export SOURCE --input NAME=D0,D1,...`: PyTorch -> validated ONNX (-> `--build`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from bundler.console import Reporter
from bundler.model.export import ExportReport, export, parse_input_shape, require_torch


def export_command(source: str, inputs: Sequence[str], output: Path, *, opset: int,
                   output_names: Sequence[str], static_batch: bool, batch_sizes: Sequence[int],
                   samples: int, rtol: float, atol: float, build_output: Path | None,
                   reporter: Reporter) -> ExportReport:
    require_torch()  # without PyTorch: the one line saying how to install it, before anything else
    shapes = [parse_input_shape(text, static_batch) for text in inputs]
    with reporter.step(f"Exporting {source} to {output} (opset {opset}) and validating it"):
        report = export(source, shapes, output, opset=opset, output_names=output_names,
                        batch_sizes=batch_sizes, samples=samples, rtol=rtol, atol=atol)
    dims = "; ".join(f"{name}: " + ", ".join(f"axis {axis} {dim}" for axis, dim in axes.items())
                     for name, axes in report.dynamic.items() if axes) or "none"
    sizes = sorted({check["batch"] for check in report.checks})
    reporter.info(f"Exported {output}: inputs {', '.join(report.inputs)} -> outputs"
                  f" {', '.join(report.outputs)}; dynamic dims {dims}")
    reporter.info(f"Validated against PyTorch on {len(report.checks)} random inputs at batch"
                  f" sizes {', '.join(map(str, sizes))}: worst abs error"
                  f" {report.worst_abs_error:.3g} (allclose rtol {rtol}, atol {atol})")
    if build_output is not None:
        from bundler.bundle.options import load_options
        from bundler.commands.build import build

        build(options=load_options(None, {"model": output, "output": build_output}),
              reporter=reporter)
    return report
