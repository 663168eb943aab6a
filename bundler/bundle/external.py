"""A shipped model that keeps its weights in external data files: the graph file plus one or
several data files, each with a content-hashed name (`models/fp32.1a2b3c4d.data`).

The graph names each data file by its `location`; here that is the data file's own (hashed) name
beside the graph, so native onnxruntime opens the shipped graph as it is, and bundle.mjs hands
each file to onnxruntime-web as `externalData: [{ path: <file name>, data }]` (the runtime
matches `path` against the location string the graph names).

Also the weights of a model past 2 GB (modelio.is_large) handled without holding them all:
read a block at a time (read_blocks), written by a variant as they are made (StreamedWeights,
repack), its shapes inferred without them (infer_shapes), and the graph run natively beside
its data files (graph_beside).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Collection, Iterable, Iterator, Mapping
from pathlib import Path
from types import TracebackType
from typing import BinaryIO

import onnx

from bundler.bundle.files import hashed_name
from bundler.bundle.modelio import (
    external_locations,
    load_tensor,
    read_model,
    save_model,
    sha256_of,
)
from bundler.errors import ModelError

# Tensors under this size stay inline in the graph (onnx's own default threshold).
INLINE_BELOW = 1024
# The page holds each data file in one Uint8Array, and a multi-GB buffer is where browsers fail
# first: a data file past this is cut, between tensors, into files of at most this (a tensor
# larger than it gets a file of its own).
DATA_FILE_BYTES = 2**30
ALIGN = 64  # each tensor's offset in a file that was cut (typed-array views need alignment)
COPY_BLOCK = 16 * 2**20


def _entries(tensor: onnx.TensorProto) -> dict[str, str]:
    return {entry.key: entry.value for entry in tensor.external_data}


def _set_entries(tensor: onnx.TensorProto, values: dict[str, str]) -> None:
    del tensor.external_data[:]
    for key, value in values.items():
        tensor.external_data.add(key=key, value=value)


def _copy_range(source: Path, offset: int, length: int, target: BinaryIO) -> None:
    with source.open("rb") as stream:
        stream.seek(offset)
        while length > 0:
            block = stream.read(min(COPY_BLOCK, length))
            if not block:
                raise OSError(f"{source} ends before byte {offset + length}")
            target.write(block)
            length -= len(block)


def _cut(model: onnx.ModelProto, location: str, source: Path, stem: Path,
         limit: int) -> list[Path]:
    """Cut the data file `location` (at `source`) into `stem.0.data`, `stem.1.data`, … of at
    most `limit` bytes each, tensor by tensor in file order, re-pointing each tensor at its copy;
    returns the files written (unhashed names)."""
    tensors = sorted(
        (tensor for tensor in onnx.external_data_helper._get_all_tensors(model)
         if tensor.data_location == onnx.TensorProto.EXTERNAL
         and _entries(tensor).get("location") == location),
        key=lambda tensor: int(_entries(tensor).get("offset", 0)))
    files: list[Path] = []
    stream: BinaryIO | None = None
    used = 0
    try:
        for tensor in tensors:
            entries = _entries(tensor)
            offset = int(entries.get("offset", 0))
            length = int(entries.get("length", source.stat().st_size - offset))
            start = -used % ALIGN + used
            if stream is None or (start + length > limit and used):
                if stream is not None:
                    stream.close()
                files.append(stem.with_name(f"{stem.name}.{len(files)}.data"))
                stream = files[-1].open("wb")
                start = 0
            stream.write(bytes(start - stream.tell()))  # alignment padding
            _copy_range(source, offset, length, stream)
            used = start + length
            _set_entries(tensor, {**entries, "location": files[-1].name, "offset": str(start),
                                  "length": str(length)})
    finally:
        if stream is not None:
            stream.close()
    return files


def _set_locations(model: onnx.ModelProto, renamed: dict[str, str]) -> None:
    for tensor in onnx.external_data_helper._get_all_tensors(model):
        for entry in tensor.external_data:
            if entry.key == "location" and entry.value in renamed:
                entry.value = renamed[entry.value]


def ship_external(src: Path, dst: Path, max_data_bytes: int = DATA_FILE_BYTES) -> list[Path]:
    """Write `src` to `dst` with its weights in hashed data files beside it; returns them.

    A `src` that already keeps its weights external is copied file by file, the graph read
    without its weights (so a model over protobuf's 2 GB is never serialized whole), a data file
    past `max_data_bytes` cut between tensors into several; a `src` with inline weights (under
    2 GB, as it parsed) has them moved to one data file.
    """
    model = read_model(src, load_weights=False)
    sources = {location: src.parent / location for location in external_locations(model)}
    written: set[Path] = set()  # files made here (renamed, not copied, to their hashed names)
    if not sources:
        data = dst.with_name(dst.stem + ".data")
        data.unlink(missing_ok=True)  # onnx appends to an existing data file
        onnx.save_model(read_model(src), dst, save_as_external_data=True,
                        all_tensors_to_one_file=True, location=data.name,
                        size_threshold=INLINE_BELOW)
        if not data.exists():  # no tensor large enough: the weights stay inline
            return []
        model = read_model(dst, load_weights=False)
        sources, written = {data.name: data}, {data}
    for location, path in list(sources.items()):
        if path.stat().st_size > max_data_bytes:
            stem = dst.with_name(f"{dst.stem}.cut{len(written)}")
            del sources[location]
            for part in _cut(model, location, path, stem, max_data_bytes):
                sources[part.name], written = part, written | {part}
            if path in written:
                path.unlink()
    renamed: dict[str, str] = {}
    data_files: list[Path] = []
    for index, (location, path) in enumerate(sorted(sources.items())):
        stem = dst.stem if len(sources) == 1 else f"{dst.stem}.{index}"
        target = dst.with_name(hashed_name(f"{stem}.data", sha256_of(path)))
        if path in written:
            path.rename(target)
        else:
            shutil.copyfile(path, target)
        renamed[location] = target.name
        data_files.append(target)
    _set_locations(model, renamed)
    onnx.save_model(model, dst)  # the graph alone: its tensors point at the data files
    for file in data_files:  # onnx creates data files private (0600): a web server must read them
        file.chmod(dst.stat().st_mode & 0o777)
    return data_files


def save_sharing(primary: onnx.ModelProto, dst: Path,
                 others: Mapping[Path, onnx.ModelProto]) -> None:
    """Write `primary` to `dst` with its weights (INLINE_BELOW bytes or more) in one data file
    beside it (`int4.onnx.data`, replaced), and each of `others` (another graph over the same
    weights: int4 format=per-ep's WebGPU form) to its path, each tensor it has exactly as
    `primary` has it pointing at the same bytes of that file, the rest inline: one copy of the
    weights, whichever graph is fetched. The models are left pointing at the file."""
    data = dst.with_name(dst.name + ".data")
    data.unlink(missing_ok=True)  # onnx appends to an existing data file
    tensors = {tensor.name: tensor.SerializeToString() for tensor in primary.graph.initializer}
    shared = {path: {tensor.name for tensor in model.graph.initializer
                     if tensors.get(tensor.name) == tensor.SerializeToString()}
              for path, model in others.items()}
    onnx.save_model(primary, str(dst), save_as_external_data=True, all_tensors_to_one_file=True,
                    location=data.name, size_threshold=INLINE_BELOW)
    written = external_tensors(dst)
    for path, model in others.items():
        for tensor in model.graph.initializer:
            if tensor.name in shared[path] and tensor.name in written:
                point_at(tensor, written[tensor.name])
        save_model(model, path)


def external_tensors(path: Path) -> dict[str, onnx.TensorProto]:
    """The initializers of the model at `path` whose bytes lie in external data, by name (their
    bytes not read)."""
    return {tensor.name: tensor for tensor in read_model(path, load_weights=False).graph.initializer
            if tensor.data_location == onnx.TensorProto.EXTERNAL}


def point_at(tensor: onnx.TensorProto, placed: onnx.TensorProto) -> None:
    """Make `tensor` read its bytes where `placed` (a tensor in external data) reads them."""
    tensor.ClearField("raw_data")
    tensor.data_location = onnx.TensorProto.EXTERNAL
    del tensor.external_data[:]
    tensor.external_data.extend(placed.external_data)


def read_blocks(tensor: onnx.TensorProto, base_dir: Path, size: int) -> Iterator[bytes]:
    """The bytes of a tensor in external data, read from `base_dir` `size` at a time, so that a
    weight can be converted and written without ever being held whole. Where they are is taken
    now: the tensor may be pointed elsewhere before the blocks are read."""
    info = onnx.external_data_helper.ExternalDataInfo(tensor)
    name, offset, length = tensor.name, info.offset or 0, info.length

    def blocks() -> Iterator[bytes]:
        # onnx's own opener: it refuses a location outside base_dir, as loading the tensor does
        handle = onnx.external_data_helper._open_external_data_fd(
            str(base_dir), info.location, name, read_only=True)
        with os.fdopen(handle, "rb") as stream:
            left = os.fstat(handle).st_size - offset if length is None else length
            stream.seek(offset)
            while left > 0:
                block = stream.read(min(size, left))
                if not block:
                    raise ModelError(f"{base_dir / info.location} ends before the data of"
                                     f" {name!r} does")
                left -= len(block)
                yield block
    return blocks()


@contextlib.contextmanager
def graph_beside(model: onnx.ModelProto, data_dir: Path) -> Iterator[Path]:
    """`model` (its weights inline, or naming data files in `data_dir`) written to a file of its
    own in `data_dir`, where onnxruntime finds the data files it names without a copy of them
    (a large model's are gigabytes); the file is removed after."""
    handle, name = tempfile.mkstemp(prefix="bundler-", suffix=".onnx", dir=data_dir)
    os.close(handle)
    path = Path(name)
    try:
        save_model(model, path)
        yield path
    finally:
        path.unlink(missing_ok=True)
        path.with_name(path.name + ".data").unlink(missing_ok=True)


def infer_shapes(model: onnx.ModelProto) -> onnx.ModelProto:
    """onnx's shape inference on a model read without its weights (a copy with value infos comes
    back), the bytes of the weights it holds inline (INLINE_BELOW or more: a tied head's copy a
    kind made, the table it was read from) set aside while it runs: onnx serializes the model,
    which past protobuf's 2 GB it cannot, and infers from their types and dims, as it does from
    the file of a model whose weights are in external data."""
    tensors = list(onnx.external_data_helper._get_initializer_tensors(model))
    held = {index: tensor.raw_data for index, tensor in enumerate(tensors)
            if tensor.HasField("raw_data") and tensor.ByteSize() >= INLINE_BELOW}
    for index in held:
        tensors[index].ClearField("raw_data")
    try:
        inferred = onnx.shape_inference.infer_shapes(model)
    finally:
        for index, data in held.items():
            tensors[index].raw_data = data
    copies = list(onnx.external_data_helper._get_initializer_tensors(inferred))
    for index, data in held.items():
        copies[index].raw_data = data
    return inferred



class StreamedWeights:
    """The weights of a variant made from a large model (modelio.is_large), written to one data
    file beside its graph (`int4.onnx.data`) as they are made, so that the model in memory holds
    only the tensors not yet written and no protobuf past 2 GB is ever serialized.

    The model starts read without its weights (its tensors name data files in `source_dir`);
    the kind reads each weight when it needs it (modelio.load_tensor), `offload` moves what it
    made to the file (`write`: what it makes a block at a time), and `finish` moves the weights
    it left as they were, one at a time, then writes the graph alone.
    """

    def __init__(self, model: onnx.ModelProto, graph: Path, source_dir: Path) -> None:
        self.graph, self.source_dir = graph, source_dir
        self.data = graph.with_name(graph.name + ".data")
        if self.data.name in external_locations(model) and (
                self.data.resolve() == (source_dir / self.data.name).resolve()):
            raise ModelError(f"{source_dir / self.data.name}: a data file of the model has the"
                             " name the variant's own takes; rename it")
        self._stream: BinaryIO = self.data.open("wb")
        self._used = 0

    def __enter__(self) -> StreamedWeights:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self._stream.close()

    def _append(self, tensor: onnx.TensorProto) -> None:
        self.write(tensor, [tensor.raw_data], len(tensor.raw_data))

    def write(self, tensor: onnx.TensorProto, blocks: Iterable[bytes], length: int) -> None:
        """Write the tensor's values, `length` bytes given a block at a time (made as they are
        read, so that a weight is never held whole), to the file, and point the tensor at them;
        under INLINE_BELOW bytes they go into the graph instead."""
        if length < INLINE_BELOW:
            tensor.raw_data = b"".join(blocks)
            tensor.data_location = onnx.TensorProto.DEFAULT
            del tensor.external_data[:]
            return
        start = -self._used % ALIGN + self._used
        self._stream.write(bytes(start - self._used))  # alignment padding
        written = 0
        for block in blocks:
            self._stream.write(block)
            written += len(block)
        if written != length:
            raise ModelError(f"{tensor.name!r}: {written} bytes made where {length} were due")
        self._used = start + length
        _set_entries(tensor, {"location": self.data.name, "offset": str(start),
                              "length": str(length)})
        tensor.data_location = onnx.TensorProto.EXTERNAL
        tensor.ClearField("raw_data")

    def offload(self, model: onnx.ModelProto, keep: Collection[str] = ()) -> None:
        """Move every initializer the model holds (of INLINE_BELOW bytes or more) to the file,
        but those named in `keep` (read, still to be rewritten: written now, they would ship
        as dead bytes)."""
        for tensor in onnx.external_data_helper._get_initializer_tensors(model):
            if (tensor.data_location != onnx.TensorProto.EXTERNAL and tensor.name not in keep
                    and len(tensor.raw_data) >= INLINE_BELOW):
                self._append(tensor)

    def finish(self, model: onnx.ModelProto) -> None:
        """Move the weights still read from the source's data files to the file, one at a time
        (smaller ones inline), and write the graph."""
        for tensor in onnx.external_data_helper._get_initializer_tensors(model):
            if tensor.data_location == onnx.TensorProto.EXTERNAL and not any(
                    entry.key == "location" and entry.value == self.data.name
                    for entry in tensor.external_data):
                load_tensor(tensor, self.source_dir)
                if len(tensor.raw_data) >= INLINE_BELOW:
                    self._append(tensor)
        self._stream.close()
        if not self._used:  # every weight under INLINE_BELOW: the graph holds them
            self.data.unlink()
        onnx.save_model(model, self.graph)  # the graph alone: its weights are in the file


def repack(graph: Path, model: onnx.ModelProto) -> None:
    """Write `model`, read from `graph` (a variant StreamedWeights wrote) without its weights and
    changed since, back to `graph`, its data file rewritten with only the tensors it still names:
    the bytes of those it dropped would otherwise ship unread."""
    data = graph.with_name(graph.name + ".data")
    parts = _cut(model, data.name, data, graph.with_name(graph.name + ".repacked"),
                 data.stat().st_size) if data.exists() else []
    data.unlink(missing_ok=True)
    if parts:
        parts[0].rename(data)
        _set_locations(model, {parts[0].name: data.name})
    onnx.save_model(model, graph)
