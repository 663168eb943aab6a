"""ONNX's own backend test models (shipped in the onnx package, with inputs and expected outputs)
as a corpus: the cases, their data, building them, and judging a page's outputs.

`cases()` lists the models, `build_all()` builds each one with the library API into one parent
folder, `judge()` compares a page's outputs with the suite's expected ones, and
onnx_corpus_browser.run_all() runs them in Chromium. Used by benchmarks/onnx_backend_corpus.py and
tests/test_onnx_backend_corpus.py.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import os
import shutil
import time
import traceback
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

import bundler
from bundler.bundle.modelio import NUMPY_TYPES, TYPE_NAMES
from bundler.errors import BundlerError, first_line
from bundler.site.runtime import BUILDS
from bundler.verify.browser import BrowserSettings
from bundler.verify.conformance import compare
from bundler.verify.tolerance import tolerance_for

CATEGORIES = ("pytorch-converted", "pytorch-operator", "simple")
BUNDLES_DIR = "bundles"
HAND_DIR = "hand"


@dataclasses.dataclass(frozen=True)
class Case:
    category: str
    name: str
    folder: Path

    @property
    def key(self) -> str:
        return f"{self.category}/{self.name}"

    @property
    def model(self) -> Path:
        return self.folder / "model.onnx"


def data_root() -> Path:
    return Path(onnx.__file__).parent / "backend" / "test" / "data"


def cases(categories: Sequence[str] = CATEGORIES, root: Path | None = None) -> list[Case]:
    """Every case folder with a model.onnx under root/<category> (by default the onnx
    package's test data), sorted by category and name."""
    root = root or data_root()
    return [Case(category, folder.name, folder)
            for category in categories
            for folder in sorted((root / category).iterdir())
            if (folder / "model.onnx").is_file()]


@dataclasses.dataclass(frozen=True)
class Tensor:
    """An input or expected output: `type` is onnxruntime-web's name for the element type."""

    name: str
    type: str
    value: np.ndarray  # of str objects for string tensors


@dataclasses.dataclass(frozen=True)
class DataSet:
    inputs: tuple[Tensor, ...]
    outputs: tuple[Tensor, ...]


def _read_tensor(path: Path, name: str) -> Tensor:
    proto = onnx.TensorProto()
    proto.ParseFromString(path.read_bytes())
    kind = TYPE_NAMES[proto.data_type]
    array = numpy_helper.to_array(proto)
    if kind == "string":
        array = np.vectorize(lambda item: item.decode("utf-8") if isinstance(item, bytes)
                             else str(item), otypes=[object])(array)
    return Tensor(name, kind, array)


def data_sets(case: Case) -> list[DataSet]:
    """The suite's inputs and expected outputs; input_K / output_K are the graph's K-th input
    (initializers left out: IR 3 models list their weights as inputs too) and output."""
    graph = onnx.load(str(case.model), load_external_data=False).graph
    weights = {tensor.name for tensor in graph.initializer}
    inputs = [value.name for value in graph.input if value.name not in weights]
    outputs = [value.name for value in graph.output]
    found = []
    for folder in sorted(case.folder.glob("test_data_set_*")):
        found.append(DataSet(
            tuple(_read_tensor(folder / f"input_{k}.pb", name) for k, name in enumerate(inputs)),
            tuple(_read_tensor(folder / f"output_{k}.pb", name) for k, name in enumerate(outputs)),
        ))
    return found


# --- building ---------------------------------------------------------------------------------

@dataclasses.dataclass
class Built:
    case: Case
    status: str  # "built", "refused" (a BundlerError: one line for the user) or "crashed" (a bug)
    line: str = ""
    seconds: float = 0.0


def _link_duplicates(bundle: Path, seen: dict[tuple[str, str], Path]) -> None:
    """Hard-link runtime files identical to one an earlier bundle has: 140 copies of the same
    45 MB runtime would be 6 GB of disk for nothing. (The browser still fetches each by its own
    URL, as it would from separate sites.)"""
    runtime = bundle / "runtime"
    for path in sorted(file for file in runtime.rglob("*") if file.is_file()):
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        first = seen.setdefault((str(path.relative_to(runtime)), digest), path)
        if first != path:
            path.unlink()
            os.link(first, path)


def build_all(selected: Sequence[Case], root: Path, runtime_dir: Path, *,
              optimize: bool = True) -> list[Built]:
    """Build every case into root/bundles/<category>/<name> in this interpreter."""
    results = []
    seen: dict[tuple[str, str], Path] = {}
    for case in selected:
        output = root / BUNDLES_DIR / case.category / case.name
        started = time.perf_counter()
        try:
            bundler.build(case.model, bundler.BuildOptions(
                output=output, runtime_dir=runtime_dir, verify=False, optimize=optimize))
            result = Built(case, "built")
            _link_duplicates(output, seen)
        except BundlerError as error:
            result = Built(case, "refused", str(error.message))
        except Exception as error:  # noqa: BLE001 - anything else is a bug, recorded as such
            last = traceback.extract_tb(error.__traceback__)[-1]
            result = Built(case, "crashed", f"{type(error).__name__}: {error} (at"
                                            f" {Path(last.filename).name}:{last.lineno})")
        result.seconds = time.perf_counter() - started
        results.append(result)
    return results


def stage_hand_page(root: Path, selected: Sequence[Case], runtime_dir: Path) -> None:
    """What the hand-written page needs in the served folder: the runtime files as they come
    from npm and the original model files."""
    runtime = root / HAND_DIR / "runtime"
    runtime.mkdir(parents=True, exist_ok=True)
    for runtime_build in BUILDS.values():
        for name in (runtime_build.module, *runtime_build.files):
            if not (runtime / name).exists():
                shutil.copyfile(runtime_dir / name, runtime / name)
    for case in selected:
        target = root / HAND_DIR / case.category / case.name / "model.onnx"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(case.model, target)


# --- judging ----------------------------------------------------------------------------------

@dataclasses.dataclass
class Run:
    """One page's attempt at a case: `page` is "bundle" or "hand"; `mode` "default" (load()
    with no options) or "forced" (executionProviders: [the browser's EP]); `ep` what it ran on."""

    case: Case
    page: str
    browser: str
    mode: str
    outcome: str  # "matched", "mismatched", "errored", "not built", "not run"
    ep: str | None = None
    detail: str = ""
    worst_normalized_error: float | None = None
    seconds: float = 0.0  # load(), or the session's creation, and the runs


def encode(tensor: Tensor) -> dict[str, Any]:
    """A tensor as the page takes it: base64 bytes, or a list for strings."""
    array = tensor.value
    data = (array.ravel().tolist() if tensor.type == "string"
            else base64.b64encode(np.ascontiguousarray(array).tobytes()).decode("ascii"))
    return {"type": tensor.type, "dims": list(array.shape), "data": data}  # 0-d stays 0-d


def decode(encoded: dict[str, Any]) -> np.ndarray:
    if encoded["type"] == "string":
        return np.array(encoded["data"], dtype=object).reshape(encoded["dims"])
    data = np.frombuffer(base64.b64decode(encoded["data"]), dtype=NUMPY_TYPES[encoded["type"]])
    return data.reshape(encoded["dims"])


def judge(expected: Sequence[DataSet], result: dict[str, Any], settings: BrowserSettings
          ) -> tuple[str, str, float | None]:
    """(outcome, detail, worst normalised error) of one page's result: floats within the
    tolerances of the EP that ran, integers, booleans and strings exactly."""
    if "error" in result:
        return "errored", first_line(result["error"]), None
    tolerance = tolerance_for("browser", "fp32", result["ep"], settings)
    worst = 0.0
    for data_set, got in zip(expected, result["outputs"], strict=True):
        for want in data_set.outputs:
            if want.name not in got:
                return "errored", f"output {want.name!r} missing from the page's outputs", None
            actual = decode(got[want.name])
            if not np.issubdtype(want.value.dtype, np.floating):
                if actual.shape != want.value.shape or not np.array_equal(actual, want.value):
                    return "mismatched", (
                        f"{want.name}: {actual.ravel()[:6].tolist()} (shape {list(actual.shape)})"
                        f" != expected {want.value.ravel()[:6].tolist()}"
                        f" (shape {list(want.value.shape)})"), None
                continue
            check = compare(want.name, actual, want.value, tolerance)
            if not check.passed:
                return "mismatched", (f"{want.name}: worst abs error {check.max_abs_error:.3g}"
                                      f" {check.note}").rstrip(), check.max_normalized_error
            worst = max(worst, check.max_normalized_error)
    return "matched", "", worst


def bundle_losses(runs: Sequence[Run]) -> Iterator[tuple[Run, Run]]:
    """(hand run, bundle run) pairs where the hand-written page matched and the bundle (default
    or forced load() in the same browser) did not."""
    hand = {(run.case.key, run.browser): run for run in runs if run.page == "hand"}
    for run in runs:
        if run.page == "bundle" and run.outcome != "matched":
            baseline = hand.get((run.case.key, run.browser))
            if baseline is not None and baseline.outcome == "matched":
                yield baseline, run
