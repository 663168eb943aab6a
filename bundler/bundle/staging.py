"""The output folder of a build (web or edge), written atomically: the stages write into a
temporary folder beside it, and only a complete build is moved into place."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from bundler.bundle.layout import MANIFEST_FILE
from bundler.bundle.manifest import made_by_us
from bundler.errors import ConfigError
from bundler.interrupts import interrupted, signals_held


def check_output(output: Path, model: Path, force: bool, manifest: str = MANIFEST_FILE) -> None:
    """Refuse an `output` a build must not replace: a file, the model's folder, the current
    folder, or (without `force`) a non-empty folder whose `manifest` this tool did not write."""
    if output.exists() and not output.is_dir():
        raise ConfigError(f"output {output} is a file; give a folder with -o")
    if not output.is_dir() or not any(output.iterdir()):
        return
    if model.resolve().is_relative_to(output.resolve()) or output.resolve() == Path.cwd():
        raise ConfigError(f"refusing to replace {output}: it holds the model or is the current"
                          " folder; choose another -o")
    if not force and not made_by_us(output, manifest):
        raise ConfigError(f"{output} is not empty and was not made by bundle build; pass --force"
                          " to replace it, or choose another -o")


@contextlib.contextmanager
def staging_folder(output: Path) -> Iterator[Path]:
    """A temporary folder beside `output` (same file system, so the final move is a rename)."""
    created = [p for p in [output.parent, *output.parent.parents] if not p.exists()]
    output.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{output.name}.", suffix=".tmp", dir=output.parent))
    staging.chmod(0o755)  # mkdtemp makes it private; a static host must be able to read it
    try:
        yield staging
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        for folder in created:  # nearest first: leave nothing behind a failed build
            with contextlib.suppress(OSError):
                folder.rmdir()
        raise


def move_into_place(staging: Path, output: Path) -> None:
    """Two renames and the removal of the old build; a signal waits until they are done, so an
    interrupt leaves either the old build or the new one, and no folder beside them. A build
    that was interrupted before (a library having caught the KeyboardInterrupt) replaces nothing."""
    with signals_held():
        if interrupted():
            raise KeyboardInterrupt
        old = None
        if output.exists():
            old = output.with_name(f".{output.name}.old-{staging.name}")
            output.rename(old)
        staging.rename(output)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
