"""A variant's memory record (bundler.variants.footprint): tensor sizes from dims and types, never
from the weights, and the documented heap and peak estimates."""

from pathlib import Path

from bundler.variants.footprint import HEAP_MARGIN, footprint
from tests import models


def test_sizes_come_from_dims_without_reading_external_data(tmp_path: Path) -> None:
    path = models.external_data(tmp_path)
    (tmp_path / "external_data.weights").unlink()  # the record must not need the weights
    memory = footprint(path, model_bytes=1000)
    assert memory.largest_tensor == memory.weights == 64 * 64 * 4
    assert memory.heap == 1000 + HEAP_MARGIN
    assert memory.peak == 1000 + memory.heap


def test_constants_in_subgraphs_count_and_the_largest_is_the_largest(tmp_path: Path) -> None:
    branches = footprint(models.if_subgraph(tmp_path), model_bytes=500)
    assert (branches.largest_tensor, branches.weights) == (4, 8)  # two float32 scalars
    wide = footprint(models.wide_dense(tmp_path), model_bytes=500)
    assert wide.largest_tensor == 256 * 5120 * 4
    assert wide.weights == (256 * 5120 + 5120 * 8) * 4
