"""The `bundle` command: a thin click layer over the library (bundler.build, check_bundle, serve)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from bundler import __version__
from bundler.config import EXECUTION_PROVIDERS

_EP = click.Choice(EXECUTION_PROVIDERS)
_DIM_HELP = "Size of a symbolic dim: NAME=VALUE, or INPUT:AXIS=VALUE for an unnamed one (repeat)."


def _options(config: Path | None, **flags: object):
    from bundler.config import find_config, load_config, merge

    path = find_config(config, Path.cwd())
    return merge(load_config(path) if path else {}, flags)


def _reporter():
    from bundler.console import TerminalReporter

    return TerminalReporter()


@click.group()
@click.version_option(__version__, prog_name="onnx-bundler")
def main() -> None:
    """Ship an ONNX model to the browser: a static web app on onnxruntime-web."""


def _build_options(function):
    for option in reversed([
        click.option("-o", "--output", type=click.Path(path_type=Path), default=None,
                     help="Output folder (default: dist)."),
        click.option("--name", default=None, help="Model name shown on the page and in bundle.json."),
        click.option("--config", type=click.Path(path_type=Path), default=None,
                     help="bundle.toml to read options from (default: ./bundle.toml if present)."),
        click.option("--runtime-version", default=None,
                     help="onnxruntime-web version from npm (default: the tested pin)."),
        click.option("--runtime-dir", type=click.Path(path_type=Path), default=None,
                     help="Use this onnxruntime-web dist/ or npm pack tarball (offline)."),
        click.option("--ep", "eps", multiple=True, type=_EP,
                     help="Execution providers to ship, in order of preference (repeat)."),
        click.option("--dim", "dims", multiple=True, help=_DIM_HELP),
    ]):
        function = option(function)
    return function


def _flags(output, name, runtime_version, runtime_dir, eps, dims) -> dict[str, object]:
    from bundler.config import parse_dims

    return {
        "output": output, "name": name, "runtime_version": runtime_version,
        "runtime_dir": runtime_dir.resolve() if runtime_dir else None,
        "execution_providers": tuple(eps) or None, "dims": parse_dims(dims) or None,
    }


@main.command()
@click.argument("model", required=False, type=click.Path(path_type=Path))
@_build_options
@click.option("--force", is_flag=True, help="Replace a non-empty output folder.")
@click.option("--verify/--no-verify", default=None,
              help="Check the bundle in headless Chromium against native onnxruntime (default).")
def build(model, output, name, config, runtime_version, runtime_dir, eps, dims, force, verify):
    """Build MODEL (default: the shipped digits example) into a static web app folder."""
    from bundler.build import build as run_build

    flags = _flags(output, name, runtime_version, runtime_dir, eps, dims)
    options = _options(config, model=model, verify=verify, **flags)
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
@click.argument("model", required=False, type=click.Path(path_type=Path))
@_build_options
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8000, show_default=True, type=int)
@click.option("--open", "open_browser", is_flag=True, help="Open the page in a browser.")
def serve(model, output, name, config, runtime_version, runtime_dir, eps, dims, host, port,
          open_browser):
    """Build MODEL into a temporary folder and serve it, rebuilding and reloading on change."""
    from bundler.serve import serve as run_serve

    flags = _flags(output, name, runtime_version, runtime_dir, eps, dims)
    options = _options(config, model=model, verify=False, **flags)
    run_serve(options, host=host, port=port, open_browser=open_browser, reporter=_reporter())
