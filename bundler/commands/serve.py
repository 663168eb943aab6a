"""`bundle serve`: the dev server. Builds the model, serves the build and, when the model,
bundle.toml, the template folder or the sample data change, rebuilds and reloads the open pages.
Given a built folder instead of a model, it serves that folder and reloads when it changes; given
an export folder (optimum's, with config.json), it builds it like a model and rebuilds when any
file in it changes.

Each build goes into its own folder under a temporary one and the server is pointed at it only when
it is complete, so a page never loads a half-written build; a failed rebuild leaves the last good
one served and is shown in the terminal and over the page. A change of the templates alone renders
the pages again without rebuilding the model.

The watcher polls file stats (mtime in ns, size, inode): replacing a file by a rename, or writing
it twice within a second, is seen, and a change is acted on only once the files stop changing.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import tempfile
import threading
import time
import webbrowser
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from bundler.bundle import manifest as manifest_file
from bundler.bundle.layout import MANIFEST_FILE
from bundler.bundle.manifest import Manifest
from bundler.bundle.modelio import model_files
from bundler.bundle.options import CONFIG_FILE_NAME, BuildOptions, load_options
from bundler.commands.build import build, rerender, summary
from bundler.console import Reporter
from bundler.errors import BundlerError, ConfigError
from bundler.interrupts import interrupted, signals_interrupt
from bundler.resources import example_model
from bundler.server.bundle_server import BundleServer, LiveReload, bind, running

POLL_SECONDS = 0.25
EP_HINT = ("open it in a WebGPU browser (Chrome or Edge 113+) for the GPU path; other browsers"
           " run it on WASM")

Snapshot = dict[str, tuple[int, int, int]]


def snapshot(paths: Iterable[Path]) -> Snapshot:
    """(mtime_ns, size, inode) of every file at or under `paths`; hidden files left out."""
    state: Snapshot = {}
    for path in paths:
        if path.is_dir():
            for folder, subfolders, files in os.walk(path):
                subfolders[:] = [name for name in subfolders if not name.startswith(".")]
                for name in files:
                    if not name.startswith("."):
                        _record(state, Path(folder) / name)
        else:
            _record(state, path)
    return state


def _record(state: Snapshot, path: Path) -> None:
    with contextlib.suppress(OSError):
        status = path.stat()
        state[str(path)] = (status.st_mtime_ns, status.st_size, status.st_ino)


def changed_paths(before: Snapshot, after: Snapshot) -> list[str]:
    return sorted(path for path in before.keys() | after.keys()
                  if before.get(path) != after.get(path))


def wait_for_change(watched: Callable[[], list[Path]], seen: Snapshot) -> tuple[Snapshot,
                                                                                list[str]]:
    """Block until the watched files differ from `seen` and then hold still for one poll."""
    while True:
        time.sleep(POLL_SECONDS)
        if interrupted():  # a signal whose KeyboardInterrupt a library caught: stop all the same
            raise KeyboardInterrupt
        current = snapshot(watched())
        if current == seen:
            continue
        while (settled := snapshot(watched())) != current:
            current = settled
            time.sleep(POLL_SECONDS)
        return current, changed_paths(seen, current)


class _ServedFolder:
    """A built folder, served as it is; pages reload when it changes."""

    failure = "the folder is not a valid bundle now"

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def watched(self) -> list[Path]:
        return [self.folder]

    def start(self, reporter: Reporter) -> Path:
        return self.folder

    def rebuild(self, changed: list[str], reporter: Reporter) -> tuple[Path, str]:
        return self.folder, summary(manifest_file.load(self.folder))


@dataclasses.dataclass
class _Builds:
    """Builds of the model, one folder per generation under `scratch`."""

    failure: ClassVar[str] = "rebuild failed, still serving the last good build"

    source: Path | None
    flags: Mapping[str, Any]
    config: Path | None
    scratch: Path
    options: BuildOptions | None = None
    model_and_data_files: list[Path] = dataclasses.field(default_factory=list)
    generation: int = 0
    model_dirty: bool = True
    outputs: list[Path] = dataclasses.field(default_factory=list)
    warnings: set[str] = dataclasses.field(default_factory=set)

    @property
    def model(self) -> Path:
        return Path(self.source or (self.options and self.options.model) or example_model())

    def watched(self) -> list[Path]:
        options = self.options or BuildOptions()
        paths = [self.config or Path.cwd() / CONFIG_FILE_NAME, self.model,
                 *self.model_and_data_files]
        paths += [path for path in (options.templates, options.calibration, options.validation)
                  if path is not None]
        return list(dict.fromkeys(paths))

    def _next_output(self) -> Path:
        self.generation += 1
        return self.scratch / f"build-{self.generation}"

    def start(self, reporter: Reporter) -> Path:
        self._build_reporting([], reporter, quiet=False)
        return self.outputs[-1]

    def rebuild(self, changed: list[str], reporter: Reporter) -> tuple[Path, str]:
        manifest = self._build_reporting(changed, reporter, quiet=True)
        return self.outputs[-1], summary(manifest)

    def _build_reporting(self, changed: list[str], reporter: Reporter, quiet: bool
                         ) -> Manifest:
        build_reporter = _BuildReporter(reporter, self.warnings, quiet)
        manifest = self._build(changed, build_reporter)
        self.warnings = build_reporter.warnings
        return manifest

    def _build(self, changed: list[str], reporter: Reporter) -> Manifest:
        templates = self.options.templates if self.options else None
        only_templates = bool(changed) and templates is not None and all(
            Path(path).is_relative_to(templates) for path in changed)
        if only_templates and not self.model_dirty and self.outputs:
            output = self._next_output()
            manifest = rerender(self.outputs[-1], output, templates)
        else:
            self.model_dirty = True
            options = load_options(self.config, {**self.flags, "model": self.source})
            self.options = options  # watch what this configuration names, even if it fails
            output = self._next_output()
            # The web app whatever bundle.toml's target says: an edge folder has no page.
            manifest = build(options=dataclasses.replace(options, output=output, verify=False,
                                                         target="web"),
                             force=True, reporter=reporter)
            # An export folder is watched whole (its own entry in watched()).
            self.model_and_data_files = [] if self.model.is_dir() else model_files(self.model)
            self.model_dirty = False
        self.outputs.append(output)
        for old in self.outputs[:-2]:  # the one before stays for requests still in flight
            shutil.rmtree(old, ignore_errors=True)
        del self.outputs[:-2]
        return manifest


class _BuildReporter(Reporter):
    """Passes a build's output on, leaving out the warnings the previous build gave too;
    `quiet` (for rebuilds, which print one summary line) passes on only the warnings."""

    def __init__(self, reporter: Reporter, previous_warnings: set[str], quiet: bool) -> None:
        self.reporter = reporter
        self.previous_warnings = previous_warnings
        self.warnings: set[str] = set()
        self.quiet = quiet

    def warn(self, message: str) -> None:
        self.warnings.add(message)
        if message not in self.previous_warnings:
            self.reporter.warn(message)

    def info(self, message: str) -> None:
        if not self.quiet:
            self.reporter.info(message)

    @contextlib.contextmanager
    def step(self, message: str) -> Iterator[None]:
        if self.quiet:
            yield
        else:
            with self.reporter.step(message):
                yield

    def table(self, title: str, columns: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
        if not self.quiet:
            self.reporter.table(title, columns, rows)


def _is_export_folder(folder: Path) -> bool:
    """An optimum / transformers.js export folder, which serve builds, rather than a built one."""
    return (folder / "config.json").is_file() and not (folder / MANIFEST_FILE).exists()


def _check_bundle_folder(folder: Path) -> None:
    try:
        manifest_file.load(folder)
    except BundlerError:
        raise ConfigError(f"{folder} is not a built bundle (no valid bundle.json) nor an export"
                          " folder (no config.json); build it first with bundle build MODEL -o"
                          " FOLDER, or pass the model file or export folder") from None


def serve(
    source: Path | None = None,
    *,
    flags: Mapping[str, Any] | None = None,
    config: Path | None = None,
    host: str = "127.0.0.1",
    port: int = 8000,
    open_browser: bool = False,
    reporter: Reporter | None = None,
) -> None:
    """Serve `source` (a model, a built folder, or None: bundle.toml's model or the example) until
    interrupted. `flags` are build options as `load_options` takes them."""
    reporter = reporter or Reporter()
    flags = dict(flags or {})
    serving_folder = (source is not None and Path(source).is_dir()
                      and not _is_export_folder(Path(source)))
    if serving_folder:
        _check_bundle_folder(Path(source))
        given = sorted(key for key, value in flags.items() if value is not None)
        if given:
            raise ConfigError(f"build options ({', '.join(given)}) do not apply to a built"
                              f" folder; pass the model file instead of {source}")
    live = LiveReload()
    with signals_interrupt(), tempfile.TemporaryDirectory(prefix="bundle-serve-") as scratch:
        site: _ServedFolder | _Builds = (
            _ServedFolder(Path(source)) if serving_folder
            else _Builds(Path(source) if source else None, flags, config, Path(scratch)))
        with bind(host, port, Path(scratch), live, log_refusal=reporter.warn) as server:
            try:
                server.root = site.start(reporter)
                _serve_until_interrupted(server, live, site, reporter, host, open_browser)
            except KeyboardInterrupt:
                reporter.info("Stopped.")


def _serve_until_interrupted(server: BundleServer, live: LiveReload, site: _ServedFolder | _Builds,
                             reporter: Reporter, host: str, open_browser: bool) -> None:
    with running(server):
        url = server.url
        # what the files are before the server says it serves: an edit made as soon as it has
        # said so (an editor's, a test's) is a change, not the starting point
        seen = snapshot(site.watched())
        reporter.info(f"Serving on {url} ({EP_HINT}). Ctrl-C stops.")
        if host not in ("127.0.0.1", "localhost", "::1"):
            reporter.warn(f"listening on {host}: other machines on the network can load this page")
        if open_browser:
            threading.Thread(target=webbrowser.open, args=(url,), daemon=True).start()
        while True:
            seen, changed = wait_for_change(site.watched, seen)
            what = ", ".join(Path(path).name for path in changed[:3]) + (
                f" and {len(changed) - 3} more" if len(changed) > 3 else "")
            started = time.monotonic()
            try:
                with reporter.step(f"{what} changed: rebuilding"):
                    server.root, line = site.rebuild(changed, reporter)
            except Exception as error:  # the server must outlive any failed rebuild
                message = (error.message if isinstance(error, BundlerError)
                           else f"{type(error).__name__}: {error}")
                reporter.warn(f"{site.failure}: {message}")
                live.failed(message)
            else:
                pages = live.listeners
                live.new_build()
                reporter.info(f"{what} changed: {line} ({time.monotonic() - started:.1f} s;"
                              f" reloading {pages} page{'s' if pages != 1 else ''})")
            # A new configuration can name other files: start watching those as they are now,
            # but keep the old state of the rest, so a change made during the build is not lost.
            seen = {path: seen.get(path, state)
                    for path, state in snapshot(site.watched()).items()}
