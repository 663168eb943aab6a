"""Make a built folder deploy as it is to static hosts: no file over the host's size limit,
precompressed siblings, the host's config files, and the `files` table of bundle.json.

- A model or runtime file over `max_file_size` is split into `NAME.part0`, `NAME.part1`, ...
  (the whole is not shipped); bundle.fetch.mjs puts the parts back together and checks each
  part's sha256 and the whole's.
- Every text, `.wasm` and model file (or part) gets a `.br` and a `.gz` sibling where that is
  smaller. Both are deterministic (brotli has no timestamp; gzip is written with mtime 0 and no
  file name) and cached by content in the user cache, since the runtime files are the same in
  every build and brotli at its best quality takes seconds per megabyte. Model files over
  1 MiB are brotli'd at quality 9: their weights are near-random bytes, and quality 11 saved
  0.06-1 % of a model's bytes (MobileNetV2, YOLOv8n, BERT fp32 and int8) at 2-3 s of CPU per
  MB, 80-100x quality 9's time (4 minutes of an 85 MB GPT-2's build).
- The config files of the chosen hosts are written beside them (see registry.py).
"""

from __future__ import annotations

import contextlib
import dataclasses
import gzip
import hashlib
import os
import re
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import brotli

from bundler.errors import ConfigError
from bundler.files import FILES_MODULE
from bundler.hosting.headers import ENCODINGS, MANIFEST_FILE
from bundler.hosting.registry import CONFIG_FILES, HOST_NAMES, write_host_configs
from bundler.hosting.sizes import DEFAULT_MAX_FILE_SIZE
from bundler.manifest import Manifest, files_from_json, files_to_json
from bundler.modelio import sha256_of
from bundler.resources import resource
from bundler.runtime import cache_root

COI_WORKER = "coi-serviceworker.js"
SPLITTABLE = {".wasm", ".onnx", ".ort", ".data", ".bin"}
COMPRESSIBLE = SPLITTABLE | {".html", ".mjs", ".js", ".json", ".css", ".ts", ".svg", ".txt",
                             ".map"}
HEAVY_DIRS = ("models/", "runtime/")
_PART = re.compile(r"\.part\d+$")
_BROTLI_QUALITY = 11
_BROTLI_MODEL_QUALITY = 9
_MODEL_BEST_QUALITY_BYTES = 2**20  # model files up to this size are brotli'd at 11
_GZIP_LEVEL = 9


@dataclasses.dataclass(frozen=True)
class HostingOptions:
    max_file_size: int = DEFAULT_MAX_FILE_SIZE
    hosts: tuple[str, ...] = HOST_NAMES
    coi_worker: bool = True

    def to_json(self) -> dict[str, Any]:
        return {"max_file_size": self.max_file_size, "hosts": list(self.hosts),
                "coi_worker": self.coi_worker}

    @classmethod
    def from_json(cls, record: dict[str, Any] | None) -> HostingOptions:
        if record is None:
            return cls()
        return cls(record["max_file_size"], tuple(record["hosts"]), record["coi_worker"])


def compress(data: bytes, encoding: str, quality: int = _BROTLI_QUALITY) -> bytes:
    """The deterministic `br` (at `quality`) or `gzip` encoding of `data` (gzip: mtime 0, no
    file name)."""
    if encoding == "br":
        return brotli.compress(data, quality=quality)
    return gzip.compress(data, compresslevel=_GZIP_LEVEL, mtime=0)


def _brotli_quality(relative: str, size: int) -> int:
    if relative.startswith("models/") and size > _MODEL_BEST_QUALITY_BYTES:
        return _BROTLI_MODEL_QUALITY
    return _BROTLI_QUALITY


def _compressed(data: bytes, digest: str, encoding: str, quality: int) -> bytes:
    """compress(), remembered in the user cache by content (runtime files repeat in every build;
    brotli at quality 11 is slow)."""
    cached = cache_root() / "compressed" / f"{digest}.{encoding}{quality}-{_GZIP_LEVEL}"
    if cached.is_file():
        return cached.read_bytes()
    encoded = compress(data, encoding, quality)
    cached.parent.mkdir(parents=True, exist_ok=True)
    temporary = cached.with_name(f".{cached.name}.{os.getpid()}")
    temporary.write_bytes(encoded)
    temporary.replace(cached)
    return encoded


def _record(directory: Path, path: Path) -> dict[str, Any]:
    """{path, bytes, sha256} of a file, with `encodings` when a compressed sibling is smaller."""
    data = path.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    entry: dict[str, Any] = {"path": path.relative_to(directory).as_posix(),
                             "bytes": len(data), "sha256": digest}
    original_suffix = _PART.sub("", path.name)
    if Path(original_suffix).suffix.lower() not in COMPRESSIBLE or not data:
        return entry
    encodings = {}
    quality = _brotli_quality(entry["path"], len(data))
    for encoding, suffix in ENCODINGS.items():
        encoded = _compressed(data, digest, encoding, quality)
        if len(encoded) < len(data):
            sibling = path.with_name(path.name + suffix)
            sibling.write_bytes(encoded)
            encodings[encoding] = {"path": entry["path"] + suffix, "bytes": len(encoded)}
    if encodings:
        entry["encodings"] = encodings
    return entry


def _split(path: Path, limit: int) -> list[Path]:
    """Cut `path` into NAME.part0, NAME.part1, ... of at most `limit` bytes; the whole goes."""
    parts = []
    with path.open("rb") as stream:
        for index, block in enumerate(iter(lambda: stream.read(limit), b"")):
            part = path.with_name(f"{path.name}.part{index}")
            part.write_bytes(block)
            parts.append(part)
    path.unlink()
    return parts


def _served_files(directory: Path, skip: set[str]) -> list[Path]:
    """The files a browser may fetch, sorted: no bundle.json (written last), host configs,
    compressed siblings, or files already described (`skip`)."""
    found = []
    for path in sorted(directory.rglob("*")):
        relative = path.relative_to(directory).as_posix()
        if (not path.is_file() or relative in skip or relative in (MANIFEST_FILE, FILES_MODULE)
                or relative in CONFIG_FILES.values() or path.suffix in ENCODINGS.values()
                or any(part.startswith(".") for part in path.relative_to(directory).parts)):
            continue
        found.append(path)
    return found


def _describe(directory: Path, path: Path, options: HostingOptions) -> dict[str, Any]:
    size = path.stat().st_size
    if size <= options.max_file_size:
        return _record(directory, path)
    if path.suffix.lower() not in SPLITTABLE:
        raise ConfigError(f"{path.relative_to(directory)} is {size} bytes, over --max-file-size"
                          f" {options.max_file_size}, and only model and .wasm files are split")
    entry = {"path": path.relative_to(directory).as_posix(), "bytes": size,
             "sha256": sha256_of(path)}
    entry["parts"] = [_record(directory, part) for part in _split(path, options.max_file_size)]
    return entry


def owned_paths(entries: Iterable[dict[str, Any]]) -> set[str]:
    """Every path an entry of bundle.json's `files` stands for: itself, its parts, its siblings."""
    paths: set[str] = set()
    for entry in entries:
        paths.add(entry["path"])
        for part in entry.get("parts", []):
            paths |= owned_paths([part])
        paths |= {sibling["path"] for sibling in entry.get("encodings", {}).values()}
    return paths


@contextlib.contextmanager
def assembled(directory: Path, manifest: Manifest, relative: str) -> Iterator[Path]:
    """The file `relative` of a bundle for native use: itself, or when it was split, its parts
    put back together in a temporary file (a missing part: the path that does not exist)."""
    path = directory / relative
    entry = next((entry for entry in manifest.files or [] if entry.path == relative), None)
    parts = [directory / part.path for part in (entry and entry.parts) or []]
    if path.is_file() or not parts or not all(part.is_file() for part in parts):
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="onnx-bundler-") as folder:
        whole = Path(folder) / path.name
        with whole.open("wb") as stream:
            for part in parts:
                with part.open("rb") as source:
                    shutil.copyfileobj(source, stream)
        yield whole


def add_coi_worker(directory: Path, options: HostingOptions) -> None:
    if options.coi_worker:
        shutil.copyfile(resource("web") / COI_WORKER, directory / COI_WORKER)


def prepare(directory: Path, options: HostingOptions, reuse: Iterable[dict[str, Any]] = ()
            ) -> list[dict[str, Any]]:
    """Split, compress and describe every served file of `directory` and write the host
    configs; returns the `files` table as JSON. `reuse`: entries of files that are already
    split and compressed (with their parts and siblings)."""
    reused = list(reuse)
    skip = owned_paths(reused)
    entries = reused + [_describe(directory, path, options)
                        for path in _served_files(directory, skip)]
    entries.sort(key=lambda entry: entry["path"])
    write_host_configs(directory, entries, options.hosts)
    return entries


def publish(directory: Path, manifest: Manifest, options: HostingOptions,
            reuse: Iterable[dict[str, Any]] = ()) -> None:
    """prepare() the folder and record it in `manifest` (its `files` and `hosting`)."""
    manifest.files = files_from_json(prepare(directory, options, reuse))
    manifest.hosting = options.to_json()


def republish(directory: Path, manifest: Manifest) -> None:
    """publish() again after the pages were rendered anew; the models and runtime files that
    `manifest` already describes are kept as they are."""
    reuse = [entry for entry in files_to_json(manifest.files)
             if entry["path"].startswith(HEAVY_DIRS)]
    publish(directory, manifest, HostingOptions.from_json(manifest.hosting), reuse)
