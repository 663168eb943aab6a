"""The `bundle` command: a thin click layer over the library (build, check_bundle, serve)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from bundler import __version__
from bundler.config import EXECUTION_PROVIDERS

_EP = click.Choice(EXECUTION_PROVIDERS)
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
        click.option("--max-file-size", default=None,
                     help="Split model and .wasm files bigger than this into parts (default"
                          " 25MiB, Cloudflare Pages' limit)."),
        click.option("--coi-worker/--no-coi-worker", default=None,
                     help="Ship coi-serviceworker.js, which gives threads where the host cannot"
                          " set COOP/COEP (default on)."),
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
@click.option("--host", "hosts", default=None,
              type=click.Choice(["netlify", "cloudflare", "vercel", "github-pages", "s3", "nginx",
                                 "all"]),
              help="Write the config files of this static host only (default: all).")
@click.option("--force", is_flag=True, help="Replace a non-empty output folder.")
@click.option("--verify/--no-verify", default=None,
              help="Check the bundle in headless Chromium against native onnxruntime (default).")
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


@main.command()
@click.argument("url")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--max-file-size", default="25MiB", show_default=True,
              help="Largest file the host accepts (Cloudflare Pages: 25MiB).")
def doctor(url, as_json, max_file_size):
    """Check a deployed bundle at URL over HTTP, as a browser would fetch it: types, bytes,
    encodings, cache headers, sizes, cross-origin isolation, real 404s. Exits 1 on a problem
    that breaks loading or makes it download more than it must."""
    from bundler.commands.doctor import COLUMNS
    from bundler.commands.doctor import doctor as run_doctor
    from bundler.errors import ConfigError
    from bundler.hosting import parse_size

    try:
        limit = parse_size(max_file_size)
    except ValueError as error:
        raise ConfigError(f"--max-file-size: {error}") from None
    reporter = _reporter()
    report = run_doctor(url, limit, reporter=reporter if not as_json else None)
    if as_json:
        click.echo(json.dumps(report.to_json(), indent=2))
    else:
        reporter.table(f"{report.url} (host: {report.host})", COLUMNS, report.rows)
        if report.problems:
            reporter.table("Problems", ("Severity", "Files", "Problem", "Fix"),
                           report.grouped_problems())
        errors = sum(problem.severity == "error" for problem in report.problems)
        reporter.info(f"{errors} error(s), {len(report.problems) - errors} warning(s)"
                      if report.problems else "No problems found.")
    if not report.ok:
        raise SystemExit(1)
