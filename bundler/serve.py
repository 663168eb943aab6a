"""`bundle serve`: build, serve with live reload, rebuild when the model or bundle.toml changes.

Builds go into a temporary folder (or -o); a failed rebuild is reported and the last good build
stays served. The page is served cross-origin isolated, as `bundle test` serves it.
"""

from __future__ import annotations

import dataclasses
import mimetypes
import tempfile
from pathlib import Path

from livereload import Server

from bundler.build import build
from bundler.config import CONFIG_FILE_NAME, BuildOptions
from bundler.console import Reporter
from bundler.errors import BundlerError
from bundler.resources import example_model
from bundler.server import ISOLATION_HEADERS


def serve(
    options: BuildOptions,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    open_browser: bool = False,
    reporter: Reporter | None = None,
) -> None:
    reporter = reporter or Reporter()
    mimetypes.add_type("text/javascript", ".mjs")
    mimetypes.add_type("application/wasm", ".wasm")
    with tempfile.TemporaryDirectory(prefix="bundle-serve-") as scratch:
        explicit_output = options.output != BuildOptions().output
        output = Path(options.output) if explicit_output else Path(scratch) / "site"
        options = dataclasses.replace(options, output=output)
        build(options=options, force=True, reporter=reporter)

        def rebuild() -> None:
            try:
                build(options=options, force=True, reporter=reporter)
            except BundlerError as error:
                reporter.warn(f"rebuild failed, still serving the last good build: {error}")

        server = Server()
        for name, value in ISOLATION_HEADERS.items():
            server.setHeader(name, value)
        server.setHeader("Cache-Control", "no-store")
        watched = [Path(options.model or example_model())]
        if Path(CONFIG_FILE_NAME).is_file():
            watched.append(Path(CONFIG_FILE_NAME))
        for path in watched:
            server.watch(str(path), rebuild)
        reporter.info(f"Serving {output} at http://{host}:{port}/ (Ctrl+C to stop)")
        server.serve(host=host, port=port, root=str(output), open_url_delay=0 if open_browser
                     else None, restart_delay=0)
