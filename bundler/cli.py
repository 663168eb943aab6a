"""The `bundle` command: a thin click layer over the commands in bundler.commands.

The build options are not written here: each click option is made from its declaration in
bundler.options, so the flags, bundle.toml and the library can never disagree.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from bundler import __version__
from bundler.options import EXECUTION_PROVIDERS, OPTIONS


def _click_option(key: str) -> Callable[[Callable], Callable]:
    declared = OPTIONS[key]
    return click.option(*declared.flags(key), key, default=None, multiple=declared.repeatable,
                        help=declared.help)


def _build_options(function: Callable) -> Callable:
    for key in reversed([key for key, declared in OPTIONS.items()
                         if declared.on_command_line and key != "output"]):
        function = _click_option(key)(function)
    return click.option("--config", type=click.Path(path_type=Path), default=None,
                        help="bundle.toml to read options from (default: ./bundle.toml if"
                             " present).")(function)


def _given(flags: dict[str, Any]) -> dict[str, Any]:
    """Click gives () for a repeatable flag that was not used; None means 'not given'."""
    return {key: (None if value == () else value) for key, value in flags.items()}


def _reporter():
    from bundler.console import TerminalReporter

    return TerminalReporter()


@click.group()
@click.version_option(__version__, prog_name="onnx-bundler")
def main() -> None:
    """Ship an ONNX model to the browser: a static web app on onnxruntime-web."""


@main.command()
@click.argument("model", required=False, type=click.Path(path_type=Path))
@_click_option("output")
@_build_options
@click.option("--force", is_flag=True, help="Replace a non-empty output folder.")
def build(model: Path | None, config: Path | None, force: bool, **flags: Any) -> None:
    """Build MODEL (default: the shipped digits example) into a static web app folder."""
    from bundler.commands.build import build as run_build
    from bundler.options import load_options

    options = load_options(config, {**_given(flags), "model": model})
    run_build(options=options, force=force, reporter=_reporter())


@main.command()
@click.argument("directory", type=click.Path(path_type=Path))
@_click_option("execution_providers")
@_click_option("dims")
@click.option("--report", type=click.Path(path_type=Path), default=None,
              help="Write the full report (comparisons, console output) as JSON here.")
@click.option("--fallback/--no-fallback", default=True,
              help="Also check that load() falls back to WASM without WebGPU (default).")
def test(directory: Path, execution_providers: tuple[str, ...], dims: tuple[str, ...],
         report: Path | None, fallback: bool) -> None:
    """Prove in headless Chromium that DIRECTORY's model computes what native onnxruntime does."""
    from bundler.commands.test import check
    from bundler.options import flag_of, validate

    flags = _given({"execution_providers": execution_providers, "dims": dims})
    given = validate({key: value for key, value in flags.items() if value is not None}, Path.cwd(),
                     spelling=flag_of)
    check(directory, execution_providers=given.get("execution_providers", EXECUTION_PROVIDERS),
          dims=given.get("dims"), report=report, check_fallback=fallback, reporter=_reporter())


@main.command()
@click.argument("source", metavar="[MODEL | DIR]", required=False,
                type=click.Path(path_type=Path))
@_build_options
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on; 0.0.0.0 shares the page with the network.")
@click.option("--port", default=8000, show_default=True, type=click.IntRange(0, 65535),
              help="Port to listen on; 0 picks a free one.")
@click.option("--open", "open_browser", is_flag=True, help="Open the page in a browser.")
def serve(source: Path | None, config: Path | None, host: str, port: int, open_browser: bool,
          **flags: Any) -> None:
    """Build MODEL (default: bundle.toml's model, else the example) and serve it on HOST:PORT,
    rebuilding and reloading the page when the model, bundle.toml or --templates change. A built
    DIR is served as it is, reloading when it changes."""
    from bundler.commands.serve import serve as run_serve

    run_serve(source, flags=_given(flags), config=config, host=host, port=port,
              open_browser=open_browser, reporter=_reporter())
