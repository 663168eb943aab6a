"""The publish stages: the folder made ready for static hosts (bundler.hosting.publish), each
file split and compressed once per build. The model and runtime files go first, since the
browser check fetches them as a host would serve them; the pages and other small files go in
one pass once they are rendered, which also writes the host configs."""

from __future__ import annotations

import dataclasses
from collections.abc import Collection
from pathlib import Path

from bundler.bundle.manifest import FileEntry
from bundler.console import Reporter
from bundler.hosting.publish import (
    HostingOptions,
    add_coi_worker,
    prepare,
    prepare_heavy,
    withdraw,
)


@dataclasses.dataclass(frozen=True)
class Published:
    """bundle.json's `files` table as far as it is made."""

    files: tuple[FileEntry, ...]


def heavy(staging: Path, hosting: HostingOptions, reporter: Reporter) -> Published:
    """The models and runtime split and compressed (and the cross-origin-isolation worker added,
    which the pages register)."""
    add_coi_worker(staging, hosting)
    with reporter.step("Splitting and compressing for static hosts"):
        return Published(tuple(prepare_heavy(staging, hosting)))


def again(staging: Path, hosting: HostingOptions, published: Published, gone: Collection[str],
          reporter: Reporter) -> Published:
    """`published` without the files `gone` (deleted), with the heavy files new since it split
    and compressed (a variant auto ships instead of one that failed the final check)."""
    with reporter.step("Splitting and compressing the variant shipped instead"):
        return Published(tuple(prepare_heavy(staging, hosting,
                                             withdraw(staging, published.files, gone))))


def finish(staging: Path, hosting: HostingOptions, published: Published) -> Published:
    """Every other file compressed and listed beside the `published` ones; the host configs
    written."""
    return Published(tuple(prepare(staging, hosting, reuse=published.files)))
