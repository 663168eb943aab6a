"""Make a built folder deploy as it is to static hosts: no file over the host's size limit,
precompressed siblings, the host's config files, and the `files` table of bundle.json.

- A model or runtime file over `max_file_size` is split into `NAME.part0`, `NAME.part1`, ...
  (the whole is not shipped); bundle.fetch.mjs puts the parts back together and checks each
  part's sha256 and the whole's.
- Every text, `.wasm` and model file (or part) gets a `.br` and a `.gz` sibling where that is
  smaller; a model file (or part) with float weights also a `.planes.gz` (bundle.json's
  `packed`: its floats as byte planes, bundler.bundle.planes), which bundle.mjs fetches instead
  where it is smaller still. All are deterministic (brotli has no timestamp; gzip is written
  with mtime 0 and no file name); the `.br` and `.gz` are cached by content in the user
  cache, since the runtime files are the same in every build and brotli at its best quality
  takes seconds per megabyte. Model files over
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
import threading
import zlib
from collections.abc import Collection, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import brotli

from bundler.bundle.codec import to_json
from bundler.bundle.layout import (
    COI_WORKER,
    COMPRESSIBLE,
    ENCODINGS,
    HEAVY_DIRS,
    MODELS_DIR,
    SPLITTABLE,
    UNLISTED,
)
from bundler.bundle.manifest import Encoded, FileEntry, FilePiece, Hosting, Manifest, Packed
from bundler.bundle.modelio import large_threshold, sha256_of
from bundler.bundle.planes import Run, float_runs, pack, runs_within
from bundler.errors import ConfigError
from bundler.hosting.registry import CONFIG_FILES, HOST_NAMES, write_host_configs
from bundler.hosting.sizes import DEFAULT_MAX_FILE_SIZE
from bundler.resources import resource
from bundler.site.runtime import cache_root

_PART = re.compile(r"\.part\d+$")
PACKED_SUFFIX = ".planes.gz"
_BROTLI_QUALITY = 11
_BROTLI_MODEL_QUALITY = 9
_MODEL_BEST_QUALITY_BYTES = 2**20  # model files up to this size are brotli'd at 11
# A model file (or each part of one) past the large-model size (modelio.large_threshold) is read
# in blocks, never whole, and compressed only where a fast pass over its first MiB saves at least
# _PAYS of it: gigabytes of weights that barely compress would cost minutes of brotli for
# nothing; zeros or repetitive data stay cheap. Its siblings are not cached (gigabytes each).
_PROBE_BYTES = 2**20
_PAYS = 0.02
_GZIP_LEVEL = 9
_THREADS_BYTES = 2**30  # the pieces held whole at once, at most (_describe)
# The compressed siblings kept in the user cache: the least recently used go past this size
# (a day of builds left 5.9 GB there before it had a bound).
CACHE_ENV = "BUNDLER_COMPRESSED_CACHE_BYTES"
_CACHE_BYTES = 2 * 2**30


@dataclasses.dataclass(frozen=True)
class HostingOptions:
    max_file_size: int = DEFAULT_MAX_FILE_SIZE
    hosts: tuple[str, ...] = HOST_NAMES
    coi_worker: bool = True

    def record(self) -> Hosting:
        """bundle.json's `hosting`."""
        return Hosting(self.max_file_size, list(self.hosts), self.coi_worker)

    @classmethod
    def of(cls, record: Hosting | None) -> HostingOptions:
        if record is None:
            return cls()
        return cls(record.max_file_size, tuple(record.hosts), record.coi_worker)


def compress(data: bytes, encoding: str, quality: int = _BROTLI_QUALITY) -> bytes:
    """The deterministic `br` (at `quality`) or `gzip` encoding of `data` (gzip: mtime 0, no
    file name)."""
    if encoding == "br":
        return brotli.compress(data, quality=quality)
    return gzip.compress(data, compresslevel=_GZIP_LEVEL, mtime=0)


def _brotli_quality(relative: str, size: int) -> int:
    if relative.startswith(MODELS_DIR) and size > _MODEL_BEST_QUALITY_BYTES:
        return _BROTLI_MODEL_QUALITY
    return _BROTLI_QUALITY


def _compressed(data: bytes, digest: str, encoding: str, quality: int) -> bytes:
    """compress(), remembered in the user cache by content (runtime files repeat in every build;
    brotli at quality 11 is slow)."""
    cached = _cache_folder() / f"{digest}.{encoding}{quality}-{_GZIP_LEVEL}"
    with contextlib.suppress(FileNotFoundError):  # absent, or pruned by another build meanwhile
        encoded = cached.read_bytes()
        os.utime(cached)  # used: the last to be pruned
        return encoded
    encoded = compress(data, encoding, quality)
    cached.parent.mkdir(parents=True, exist_ok=True)
    # per process and thread: two pieces of the same bytes may be compressed at once
    temporary = cached.with_name(f".{cached.name}.{os.getpid()}.{threading.get_ident()}")
    temporary.write_bytes(encoded)
    temporary.replace(cached)
    return encoded


def _cache_folder() -> Path:
    return cache_root() / "compressed"


def _cache_limit() -> int:
    given = os.environ.get(CACHE_ENV, "")
    try:
        limit = int(given) if given else _CACHE_BYTES
    except ValueError:
        limit = -1
    if limit < 0:
        raise ConfigError(f"${CACHE_ENV} is {given!r}; give a number of bytes (0 keeps nothing)")
    return limit


def prune_cache() -> None:
    """The compressed siblings in the user cache, least recently used first, removed until they
    fit $BUNDLER_COMPRESSED_CACHE_BYTES (2 GiB by default)."""
    limit = _cache_limit()
    kept = []
    for path in _cache_folder().glob("[!.]*"):  # a dot-file is another build's, being written
        with contextlib.suppress(FileNotFoundError):
            kept.append((path.stat(), path))
    total = sum(stat.st_size for stat, _ in kept)
    for stat, path in sorted(kept, key=lambda item: (item[0].st_mtime_ns, item[1].name)):
        if total <= limit:
            break
        path.unlink(missing_ok=True)
        total -= stat.st_size


def _pays(sample: bytes) -> bool:
    """Whether compressing is worth it, judged by a fast brotli pass over the first MiB."""
    sample = sample[:_PROBE_BYTES]
    return len(brotli.compress(sample, quality=1)) < len(sample) * (1 - _PAYS)


def _encode_stream(path: Path, sibling: Path, encoding: str, quality: int) -> None:
    """compress() of the file at `path` into `sibling`, block by block (brotli: the same bytes;
    gzip: a valid stream, deterministic too)."""
    with path.open("rb") as source, sibling.open("wb") as out:
        if encoding == "br":
            compressor = brotli.Compressor(quality=quality)
            for block in iter(lambda: source.read(1 << 24), b""):
                out.write(compressor.process(block))
            out.write(compressor.finish())
            return
        with gzip.GzipFile(filename="", mode="wb", fileobj=out, compresslevel=_GZIP_LEVEL,
                           mtime=0) as encoder:
            shutil.copyfileobj(source, encoder, 1 << 24)


def _streamed(directory: Path, path: Path) -> FileEntry:
    """_record for a file (or part) of a model past the large-model size, never held whole: its
    sha256 and siblings are made block by block, the siblings only where _pays says so."""
    relative = path.relative_to(directory).as_posix()
    size = path.stat().st_size
    with path.open("rb") as stream:
        start = stream.read(_PROBE_BYTES)
    encodings = {}
    if Path(_PART.sub("", path.name)).suffix.lower() in COMPRESSIBLE and size and _pays(start):
        for encoding, suffix in ENCODINGS.items():
            sibling = path.with_name(path.name + suffix)
            _encode_stream(path, sibling, encoding, _brotli_quality(relative, size))
            if sibling.stat().st_size < size:
                encodings[encoding] = Encoded(relative + suffix, sibling.stat().st_size)
            else:
                sibling.unlink()
    return FileEntry(relative, size, sha256_of(path), encodings=encodings or None)


def _gzip_rle(data: bytes) -> bytes:
    """A gzip stream of `data` with zlib's run-length strategy: on float planes 0.4 % smaller
    than level 9's default and 15x faster (a Whisper-tiny encoder's 32.8 MB: 0.2 s against 3.3)
    — the planes' values repeat in runs, not in the phrases LZ77 looks for. No mtime or name:
    the bytes depend on `data` alone."""
    encoder = zlib.compressobj(_GZIP_LEVEL, zlib.DEFLATED, 16 + zlib.MAX_WBITS, 9, zlib.Z_RLE)
    return encoder.compress(data) + encoder.flush()


def _packed(path: Path, relative: str, data: bytes, runs: list[Run], fetched: int
            ) -> Packed | None:
    """The packed sibling of a model file (or part) with float `runs`, written where it is
    smaller than the `fetched` bytes it replaces."""
    encoded = _gzip_rle(pack(data, runs))
    if len(encoded) >= fetched:
        return None
    path.with_name(path.name + PACKED_SUFFIX).write_bytes(encoded)
    return Packed(relative + PACKED_SUFFIX, len(encoded), runs)


def _record(directory: Path, path: Path, probe: bool = False, runs: list[Run] | None = None
            ) -> FileEntry:
    """The path, bytes and sha256 of a file (or part), with `encodings` when a compressed sibling
    is smaller (`probe`: it belongs to a large model, see _streamed) and `packed` when the
    float `runs` of a model's piece pay for theirs."""
    if probe:
        return _streamed(directory, path)
    data = path.read_bytes()  # a whole file at most max_file_size, or one part of a larger one
    digest = hashlib.sha256(data).hexdigest()
    relative = path.relative_to(directory).as_posix()
    original_suffix = _PART.sub("", path.name)
    encodings = {}
    if Path(original_suffix).suffix.lower() in COMPRESSIBLE and data:
        quality = _brotli_quality(relative, len(data))
        for encoding, suffix in ENCODINGS.items():
            encoded = _compressed(data, digest, encoding, quality)
            if len(encoded) < len(data):
                path.with_name(path.name + suffix).write_bytes(encoded)
                encodings[encoding] = Encoded(relative + suffix, len(encoded))
    fetched = encodings["gzip"].bytes if "gzip" in encodings else len(data)
    return FileEntry(relative, len(data), digest, encodings=encodings or None,
                     packed=_packed(path, relative, data, runs, fetched) if runs else None)


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
        if (not path.is_file() or relative in skip or relative in UNLISTED
                or relative in CONFIG_FILES.values() or path.suffix in ENCODINGS.values()
                or any(part.startswith(".") for part in path.relative_to(directory).parts)):
            continue
        found.append(path)
    return found


def _describe(directory: Path, paths: list[Path], options: HostingOptions) -> list[FileEntry]:
    """The entries of `paths`, in their order: each file over `max_file_size` split first, then
    every file or part recorded on a pool of threads (brotli, zlib and hashlib release the GIL;
    one after the other, the parts of a 300 MB model's int4 took 44 % of its build)."""
    # (whole, pieces, probe, float runs of each piece)
    planned: list[tuple[FileEntry | None, list[Path], bool, list[list[Run]]]] = []
    for path in paths:
        size = path.stat().st_size
        # Only a model's files take the large-model path. The runtime's and the pages' are never
        # past protobuf's 2 GB, but are past a lowered $BUNDLER_LARGE_MODEL_BYTES, and streamed
        # they were brotli'd at quality 11 anew in every build, uncached: the same ~45 MB of wasm
        # each time, minutes of CPU (4.6 of a 60 MB model's 4.8-minute build, loaded machine).
        model = path.relative_to(directory).as_posix().startswith(MODELS_DIR)
        probe = size > large_threshold() and model
        # found before a split, in the whole file (the runs of a large model's data files, in
        # external data, are not looked for: its pieces are streamed)
        runs = float_runs(path) if model and not probe and path.suffix == ".onnx" else []
        if size <= options.max_file_size:
            planned.append((None, [path], probe, [runs]))
            continue
        if path.suffix.lower() not in SPLITTABLE:
            raise ConfigError(f"{path.relative_to(directory)} is {size} bytes, over"
                              f" --max-file-size {options.max_file_size}, and only model and"
                              " .wasm files are split")
        whole = FileEntry(path.relative_to(directory).as_posix(), size, sha256_of(path))
        limit = options.max_file_size
        pieces = _split(path, limit)
        planned.append((whole, pieces, probe, [runs_within(runs, index * limit, (index + 1) * limit)
                                               for index in range(len(pieces))]))
    # each thread holds one piece (a file or part, at most max_file_size) read whole
    workers = max(1, min(os.cpu_count() or 1, _THREADS_BYTES // options.max_file_size))
    entries = []
    pool = ThreadPoolExecutor(workers)
    try:
        records = pool.map(lambda piece: _record(directory, *piece),
                           [(piece, probe, piece_runs) for _, pieces, probe, runs in planned
                            for piece, piece_runs in zip(pieces, runs, strict=True)])
        for whole, pieces, _, _ in planned:
            recorded = [next(records) for _ in pieces]
            if whole is None:
                entries += recorded
            else:
                whole.parts = recorded
                entries.append(whole)
    finally:
        # interrupted (Ctrl-C, SIGTERM) or failed: the pieces under way finish before the
        # staging folder is removed, the others are not started
        pool.shutdown(cancel_futures=True)
    return entries


def owned_paths(entries: Iterable[FilePiece]) -> set[str]:
    """Every path an entry of bundle.json's `files` stands for: itself, its parts, its siblings."""
    paths: set[str] = set()
    for entry in entries:
        paths.add(entry.path)
        paths |= owned_paths(getattr(entry, "parts", None) or [])
        paths |= {sibling.path for sibling in (entry.encodings or {}).values()}
        if entry.packed:
            paths.add(entry.packed.path)
    return paths


def parts_of(directory: Path, manifest: Manifest, relative: str) -> list[Path]:
    """The parts the build split the file `relative` into for static hosts (none: not split)."""
    entry = next((entry for entry in manifest.files or [] if entry.path == relative), None)
    return [directory / part.path for part in (entry and entry.parts) or []]


def _data_of(manifest: Manifest, relative: str) -> list[str]:
    """The external data files of the variant one of whose graphs is `relative` (none:
    inline)."""
    return next((variant.data or [] for session in manifest.sessions
                 for variant in session.variants
                 if relative in variant.graph_files()), [])


@contextlib.contextmanager
def assembled(directory: Path, manifest: Manifest, relative: str) -> Iterator[Path]:
    """The file `relative` of a bundle for native use: itself, or when it or one of its
    external data files was split, all of them put back together in a temporary folder (the
    graph names its data files by their names, so they go side by side there). A missing part:
    the path that does not exist."""
    files = [relative, *_data_of(manifest, relative)]
    path = directory / relative
    split = {name: parts_of(directory, manifest, name) for name in files
             if not (directory / name).is_file()}
    if not split or not all(parts and all(part.is_file() for part in parts)
                            for parts in split.values()):
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="onnx-bundler-") as folder:
        for name in files:
            whole = Path(folder) / Path(name).name
            with whole.open("wb") as stream:
                for part in split.get(name) or [directory / name]:
                    with part.open("rb") as source:
                        shutil.copyfileobj(source, stream)
        yield Path(folder) / path.name


def add_coi_worker(directory: Path, options: HostingOptions) -> None:
    if options.coi_worker:
        shutil.copyfile(resource("web") / COI_WORKER, directory / COI_WORKER)


def prepare_heavy(directory: Path, options: HostingOptions, reuse: Iterable[FileEntry] = ()
                  ) -> list[FileEntry]:
    """Split, compress and describe the model and runtime files of `directory` (HEAVY_DIRS): a
    build does this before its browser check (again for a variant auto ships instead, `reuse`
    the ones done), and lists them with prepare()'s `reuse`."""
    reused = list(reuse)
    entries = reused + _describe(directory, [
        path for path in _served_files(directory, owned_paths(reused))
        if path.relative_to(directory).as_posix().startswith(HEAVY_DIRS)], options)
    return sorted(entries, key=lambda entry: entry.path)


def withdraw(directory: Path, entries: Iterable[FileEntry], paths: Collection[str]
             ) -> list[FileEntry]:
    """`entries` without those of `paths` (a variant auto no longer ships), whose files, parts
    and compressed siblings are deleted."""
    gone = [entry for entry in entries if entry.path in paths]
    for path in owned_paths(gone):
        (directory / path).unlink(missing_ok=True)
    return [entry for entry in entries if entry.path not in paths]


def prepare(directory: Path, options: HostingOptions, reuse: Iterable[FileEntry] = ()
            ) -> list[FileEntry]:
    """Split, compress and describe every served file of `directory` and write the host
    configs; returns bundle.json's `files` table. `reuse`: entries of files that are already
    split and compressed (with their parts and siblings)."""
    reused = list(reuse)
    skip = owned_paths(reused)
    entries = reused + _describe(directory, _served_files(directory, skip), options)
    entries.sort(key=lambda entry: entry.path)
    write_host_configs(directory, to_json(entries), options.hosts)
    prune_cache()
    return entries
