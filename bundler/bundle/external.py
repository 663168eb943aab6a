"""A shipped model that keeps its weights in external data files: the graph file plus one or
several data files, each with a content-hashed name (`models/fp32.1a2b3c4d.data`).

The graph names each data file by its `location`; here that is the data file's own (hashed) name
beside the graph, so native onnxruntime opens the shipped graph as it is, and bundle.mjs hands
each file to onnxruntime-web as `externalData: [{ path: <file name>, data }]` (the runtime
matches `path` against the location string the graph names).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import onnx

from bundler.bundle.files import hashed_name
from bundler.bundle.modelio import external_locations, read_model, sha256_of

# Tensors under this size stay inline in the graph (onnx's own default threshold).
INLINE_BELOW = 1024


def _set_locations(model: onnx.ModelProto, renamed: dict[str, str]) -> None:
    for tensor in onnx.external_data_helper._get_all_tensors(model):
        for entry in tensor.external_data:
            if entry.key == "location" and entry.value in renamed:
                entry.value = renamed[entry.value]


def ship_external(src: Path, dst: Path) -> list[Path]:
    """Write `src` to `dst` with its weights in hashed data files beside it; returns them.

    A `src` that already keeps its weights external is copied file by file, the graph read
    without its weights (so a model over protobuf's 2 GB is never serialized whole); a `src`
    with inline weights (under 2 GB, as it parsed) has them moved to one data file.
    """
    model = read_model(src, load_weights=False)
    sources = {location: src.parent / location for location in external_locations(model)}
    written: Path | None = None
    if not sources:
        written = dst.with_name(dst.stem + ".data")
        written.unlink(missing_ok=True)  # onnx appends to an existing data file
        onnx.save_model(read_model(src), dst, save_as_external_data=True,
                        all_tensors_to_one_file=True, location=written.name,
                        size_threshold=INLINE_BELOW)
        if not written.exists():  # no tensor large enough: the weights stay inline
            return []
        model = read_model(dst, load_weights=False)
        sources = {written.name: written}
    renamed: dict[str, str] = {}
    data: list[Path] = []
    for index, (location, path) in enumerate(sorted(sources.items())):
        stem = dst.stem if len(sources) == 1 else f"{dst.stem}.{index}"
        target = dst.with_name(hashed_name(f"{stem}.data", sha256_of(path)))
        if path == written:
            path.rename(target)
        else:
            shutil.copyfile(path, target)
        renamed[location] = target.name
        data.append(target)
    _set_locations(model, renamed)
    onnx.save_model(model, dst)  # the graph alone: its tensors point at the data files
    for file in data:  # onnx creates data files private (0600): a web server must read them
        file.chmod(dst.stat().st_mode & 0o777)
    return data
