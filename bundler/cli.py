"""The `bundle` command: a thin click layer over the library (build, check_bundle, serve)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from bundler import __version__
from bundler.config import EXECUTION_PROVIDERS

_EP = click.Choice(EXECUTION_PROVIDERS)
# bundler.edge_session.EP_PRIORITY, repeated so `bundle --help` does not import onnxruntime.
EP_PRIORITY_NAMES = ("tensorrt", "cuda", "openvino", "directml", "rocm", "coreml", "nnapi", "qnn",
                     "cpu")
_DIM_HELP = "Size of a symbolic dim: NAME=VALUE, or INPUT:AXIS=VALUE for an unnamed one (repeat)."


def _options(config: Path | None, **flags: object):
    from bundler.config import load_options

    return load_options(config, flags)


def _reporter():
    from bundler.console import TerminalReporter

    return TerminalReporter()


@click.group()
@click.version_option(__version__, prog_name="onnx-bundler")
def main() -> None:
    """Ship an ONNX model to the browser: a static web app on onnxruntime-web."""


def _build_options(function):
    for option in reversed([
        click.option("--name", default=None,
                     help="Model name shown on the page and in bundle.json."),
        click.option("--config", type=click.Path(path_type=Path), default=None,
                     help="bundle.toml to read options from (default: ./bundle.toml if present)."),
        click.option("--runtime-version", default=None,
                     help="onnxruntime-web version from npm (default: the tested pin)."),
        click.option("--runtime-dir", default=None,
                     help="Use this onnxruntime-web dist/ or npm pack tarball (offline)."),
        click.option("--ep", "execution_providers", multiple=True,
                     help="Execution providers to ship, in order of preference (repeat)."),
        click.option("--dim", "dims", multiple=True, help=_DIM_HELP),
        click.option("--optimize/--no-optimize", default=None,
                     help="Graph optimisation (onnxslim + onnxruntime basic passes; default on)."),
        click.option("--fix-dim", "fix_dims", multiple=True,
                     help="Fix a symbolic dim in the shipped model: NAME=VALUE (repeat)."),
        click.option("--quantize", default=None,
                     help="fp32 (default), fp16, int8-weights, int8, int8-static, int4 or auto."),
        click.option("--variants", default=None,
                     help="Ship several variants: a comma list (with --quantize auto: the"
                          " candidates)."),
        click.option("--default-variant", default=None,
                     help="Variant load() picks: NAME, or per EP: webgpu=fp16,wasm=int8."),
        click.option("--calibration", default=None,
                     help=".npz with one array per input (samples on axis 0) for int8-static and"
                          " accuracy."),
        click.option("--calibration-method", default=None, help="minmax (default), percentile,"
                     " entropy."),
        click.option("--validation", default=None,
                     help=".npz of inputs to measure accuracy on (default: the calibration data)."),
        click.option("--max-error", default=None,
                     help="Accuracy budget for auto, e.g. cosine>=0.999,top1>=0.99."),
        click.option("--format", default=None, help="onnx (default) or ort (ORT format)."),
        click.option("--templates", default=None,
                     help="Folder of your own templates and files for the app (NAME.j2 is"
                          " rendered to NAME, other files are copied)."),
    ]):
        function = option(function)
    return function


def _flags(**flags: object) -> dict[str, object]:
    """Click gives () for a repeatable flag that was not used; None means 'not given'."""
    return {key: (None if value == () else value) for key, value in flags.items()}


@main.command()
@click.argument("model", required=False, type=click.Path(path_type=Path))
@click.option("-o", "--output", default=None, help="Output folder (default: dist).")
@_build_options
@click.option("--force", is_flag=True, help="Replace a non-empty output folder.")
@click.option("--verify/--no-verify", default=None,
              help="Check the bundle in headless Chromium against native onnxruntime (default).")
@click.option("--target", default=None,
              help="web (default: the browser app in dist/) or edge (.ort files for native"
                   " onnxruntime and a reduced-build config in edge/).")
def build(model, config, force, **flags):
    """Build MODEL (default: the shipped digits example) into a static web app folder."""
    from bundler.build import build as run_build

    options = _options(config, model=model, **_flags(**flags))
    run_build(options=options, force=force, reporter=_reporter())


@main.command()
@click.argument("directory", type=click.Path(path_type=Path))
@click.option("--ep", "eps", multiple=True, type=_EP, help="Execution provider to test (repeat).")
@click.option("--dim", "dims", multiple=True, help=_DIM_HELP)
@click.option("--report", type=click.Path(path_type=Path), default=None,
              help="Write the full report (comparisons, console output) as JSON here.")
@click.option("--fallback/--no-fallback", default=True,
              help="Also check that load() falls back to WASM without WebGPU (default).")
def test(directory, eps, dims, report, fallback):
    """Prove in headless Chromium that DIRECTORY's model computes what native onnxruntime does."""
    from bundler.config import parse_dims
    from bundler.conformance import REPORT_COLUMNS, check_bundle
    from bundler.errors import BundlerError

    reporter = _reporter()
    result = check_bundle(directory, execution_providers=eps or EXECUTION_PROVIDERS,
                          dims=parse_dims(dims), check_fallback=fallback, reporter=reporter)
    if report is not None:
        report.write_text(json.dumps(result.to_json(), indent=2) + "\n", encoding="utf-8")
    reporter.table(f"{directory}: browser vs native onnxruntime", REPORT_COLUMNS, result.rows())
    for url in result.external_requests:
        reporter.warn(f"the page requested {url}, outside the bundle's origin")
    if result.not_done is not None:
        raise BundlerError(f"cannot test: {result.not_done.reason}; pass {result.not_done.hint}")
    if result.problems:
        more = len(result.problems) - 1
        raise BundlerError(result.problems[0] + (f" (and {more} more problems)" if more else ""))
    if result.external_requests:
        raise BundlerError(f"the page made {len(result.external_requests)} request(s) outside"
                           f" 127.0.0.1, e.g. {result.external_requests[0]}")
    if not result.ok:
        raise BundlerError("the browser does not compute what native onnxruntime computes"
                           " (see the table above)")
    reporter.info("All checks passed.")


@main.command()
@click.argument("source", metavar="[MODEL | DIR]", required=False,
                type=click.Path(path_type=Path))
@_build_options
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on; 0.0.0.0 shares the page with the network.")
@click.option("--port", default=8000, show_default=True, type=click.IntRange(0, 65535),
              help="Port to listen on; 0 picks a free one.")
@click.option("--open", "open_browser", is_flag=True, help="Open the page in a browser.")
def serve(source, config, host, port, open_browser, **flags):
    """Build MODEL (default: bundle.toml's model, else the example) and serve it on HOST:PORT,
    rebuilding and reloading the page when the model, bundle.toml or --templates change. A built
    DIR is served as it is, reloading when it changes."""
    from bundler.serve import serve as run_serve

    run_serve(source, flags=_flags(**flags), config=config, host=host, port=port,
              open_browser=open_browser, reporter=_reporter())


@main.command("inspect")
@click.argument("source", metavar="MODEL|DIR", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the analysis as JSON.")
@click.option("--html", type=click.Path(path_type=Path), default=None,
              help="Also write a self-contained page with a graph view here.")
@click.option("--netron", is_flag=True, help="Open the model in Netron (pip install netron).")
def inspect_command(source, as_json, html, netron):
    """Opsets, inputs/outputs, parameters, operators and per-target support of MODEL (or of a
    bundle's default variant), with warnings for what will hurt and the fix to try."""
    from bundler.commands.inspect import inspect

    inspect(source, as_json=as_json, html=html, netron=netron, reporter=_reporter())


@main.command("run")
@click.argument("source", metavar="DIR|MODEL", type=click.Path(path_type=Path))
@click.option("--ep", "eps", default=",".join(EP_PRIORITY_NAMES), show_default=True,
              help="Execution providers to try, in order (CPU is always the last resort).")
@click.option("--input", "inputs", multiple=True,
              help="NAME=file.npy or NAME=VALUE (a number fills the shape; a JSON list); the"
                   " others get the build's seeded inputs (repeat).")
@click.option("--dim", "dims", multiple=True, help=_DIM_HELP)
@click.option("--variant", default=None, help="Variant of a bundle folder (default: its default).")
@click.option("--whole-graph", is_flag=True,
              help="Count an accelerator as failed when it would leave nodes to the CPU.")
@click.option("--save", type=click.Path(path_type=Path), default=None,
              help="Write the outputs to this .npz file.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def run_command(source, eps, inputs, dims, variant, whole_graph, save, as_json):
    """Run DIR's model (or MODEL) with native onnxruntime on the first execution provider this
    machine really has, say why earlier ones were skipped, and compare with the reference
    outputs recorded at build time."""
    from bundler.commands.run import run
    from bundler.config import parse_dims

    run(source, eps=eps, inputs=inputs, dims=parse_dims(dims), variant=variant, as_json=as_json,
        save=save, whole_graph=whole_graph, reporter=_reporter())


@main.command("export")
@click.argument("source", metavar="MODULE:FACTORY|FILE")
@click.option("--input", "inputs", multiple=True,
              help="Example input NAME=D0,D1,...[@dtype]; D is SIZE or DIMNAME:SIZE (dynamic)."
                   " Axis 0 is the dynamic batch (repeat per input).")
@click.option("-o", "--output", type=click.Path(path_type=Path), default=Path("model.onnx"),
              show_default=True, help="The ONNX file to write.")
@click.option("--opset", default=17, show_default=True, type=click.IntRange(7, 30))
@click.option("--output-names", default=None, help="Comma list of output names.")
@click.option("--static-batch", is_flag=True, help="Keep axis 0 fixed instead of dynamic.")
@click.option("--batch-sizes", default="1,3", show_default=True,
              help="Batch sizes to validate at (comma list).")
@click.option("--samples", default=3, show_default=True, type=click.IntRange(1, 100),
              help="Random inputs per batch size.")
@click.option("--rtol", default=1e-3, show_default=True, type=float)
@click.option("--atol", default=1e-4, show_default=True, type=float)
@click.option("--build", "then_build", is_flag=True, help="Then bundle build the exported model.")
@click.option("--build-output", type=click.Path(path_type=Path), default=Path("dist"),
              show_default=True, help="Output folder of --build.")
def export_cli(source, inputs, output, opset, output_names, static_batch, batch_sizes, samples,
               rtol, atol, then_build, build_output):
    """Export a PyTorch model (module:factory, a TorchScript file or a torch.export .pt2) to
    ONNX in eval mode with a dynamic batch, and validate it against PyTorch (np.allclose on
    random inputs at two batch sizes); a mismatch is an error. Needs onnx-bundler[torch]."""
    from bundler.commands.export import export_command
    from bundler.errors import ConfigError

    try:
        sizes = [int(size) for size in batch_sizes.split(",") if size.strip()]
    except ValueError:
        raise ConfigError(f"--batch-sizes {batch_sizes!r}: expected a comma list of integers,"
                          " e.g. 1,3") from None
    export_command(source, inputs, output, opset=opset,
                   output_names=[n.strip() for n in (output_names or "").split(",") if n.strip()],
                   static_batch=static_batch, batch_sizes=sizes, samples=samples, rtol=rtol,
                   atol=atol, build_output=build_output if then_build else None,
                   reporter=_reporter())
