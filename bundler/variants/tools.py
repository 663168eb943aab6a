"""Helpers the kind modules share: quiet quantizers, stable node names, the 2 GB limit."""

from __future__ import annotations

import contextlib
import io
import logging
from collections.abc import Iterator
from pathlib import Path

import onnx

from bundler.bundle.modelio import PROTOBUF_LIMIT, model_bytes


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """The quantizers print progress and log advice to the root logger; keep the CLI clean."""
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            yield
    finally:
        root.setLevel(level)


def name_nodes(model: onnx.ModelProto) -> None:
    """Give unnamed nodes stable names: the quantizers exclude nodes by name."""
    taken = {node.name for node in model.graph.node}
    for index, node in enumerate(model.graph.node):
        if not node.name:
            node.name = fresh_name(f"{node.op_type}_{index}", taken)


def fresh_name(name: str, taken: set[str]) -> str:
    """`name`, or `name_1`, `name_2`, … if taken; the result is added to `taken`."""
    candidate, suffix = name, 1
    while candidate in taken:
        candidate, suffix = f"{name}_{suffix}", suffix + 1
    taken.add(candidate)
    return candidate


def is_large(path: Path) -> bool:
    """Over protobuf's 2 GB: the model must be written with external data."""
    return model_bytes(path) >= PROTOBUF_LIMIT
