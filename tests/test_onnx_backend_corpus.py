"""ONNX's own backend test models (onnx/backend/test/data in the onnx package) as a corpus.

Every model either builds or is refused with one clear line naming what it uses that cannot run;
and on a representative subset, the bundle, loaded in Chromium with and without WebGPU, computes
the suite's expected outputs wherever a hand-written onnxruntime-web page does, and never returns
wrong numbers. benchmarks/onnx_backend_corpus.py runs the whole corpus in the browser.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import onnx
import pytest

from bundler.bundle.modelio import walk_nodes
from bundler.verify.browser import BrowserSettings

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))  # the engine

from onnx_corpus import Case, build_all, bundle_losses, cases, stage_hand_page  # noqa: E402
from onnx_corpus_browser import BROWSERS, run_all  # noqa: E402

# What a refusal may name besides an operator of the model: a feature of the file itself.
FEATURES = ("IR version", "opset", "sequence", "map", "optional", "sparse", "string", "training",
            "element type")
# One of each kind: convolution, an index input (Embedding: Gather), an opset onnxruntime no
# longer implements (AveragePool-1), integer inputs and outputs compared exactly, sequence
# operators with scalar index inputs, a shape input (Expand), float64 with SplitToSequence, and
# string tensors (the WebGPU build has no StringNormalizer, so load() must fall back to WASM).
SUBSET = (
    "pytorch-converted/test_Conv2d",
    "pytorch-converted/test_Embedding",
    "pytorch-converted/test_AvgPool2d",
    "pytorch-operator/test_operator_non_float_params",
    "simple/test_sequence_model1",
    "simple/test_expand_shape_model3",
    "simple/test_sequence_model7",
    "simple/test_strnorm_model_nostopwords_nochangecase",
)
ALL_CASES = cases()


def _names_what_it_lacks(line: str, case: Case) -> bool:
    model = onnx.load(str(case.model), load_external_data=False)
    operators = {node.op_type for node in walk_nodes(model.graph)}
    domains = {node.domain for node in walk_nodes(model.graph) if node.domain}
    words = set(re.findall(r"[A-Za-z][\w.]*", line))
    return bool(words & (operators | domains)) or any(f in line for f in FEATURES)


def test_the_corpus_is_the_one_shipped_with_onnx() -> None:
    counts = {category: sum(c.category == category for c in ALL_CASES)
              for category in ("pytorch-converted", "pytorch-operator", "simple")}
    assert counts == {"pytorch-converted": 82, "pytorch-operator": 35, "simple": 23}, counts


@pytest.mark.parametrize("case", ALL_CASES, ids=[case.key for case in ALL_CASES])
def test_every_model_builds_or_is_refused_in_one_clear_line(
        case: Case, tmp_path: Path, runtime_dist: Path) -> None:
    (result,) = build_all([case], tmp_path, runtime_dist)
    assert result.status in ("built", "refused"), f"crashed instead of a clear error: {result.line}"
    if result.status == "built":
        assert (tmp_path / "bundles" / case.key / "bundle.json").is_file()
        return
    line = result.line
    assert line.strip() and "\n" not in line and "Traceback" not in line, line
    assert "onnxruntime_src" not in line and "/_work/" not in line, f"build paths: {line}"
    assert _names_what_it_lacks(line, case), f"names no operator or feature: {line}"
    assert not (tmp_path / "bundles" / case.key).exists(), "a refused build left files behind"


@pytest.mark.browser
def test_subset_in_chromium_matches_the_suite_wherever_a_hand_written_page_does(
        tmp_path: Path, runtime_dist: Path, browser_settings: BrowserSettings) -> None:
    selected = [case for case in ALL_CASES if case.key in SUBSET]
    assert len(selected) == len(SUBSET)
    built = build_all(selected, tmp_path, runtime_dist)
    stage_hand_page(tmp_path, selected, runtime_dist)
    runs = run_all(built, tmp_path, settings=browser_settings)
    assert len(runs) == len(selected) * len(BROWSERS) * 3
    wrong = [(run.page, run.case.key, run.browser, run.mode, run.detail) for run in runs
             if run.outcome == "mismatched"]
    assert not wrong, f"wrong numbers: {wrong}"
    losses = [(bundle.case.key, bundle.browser, bundle.mode, bundle.outcome, bundle.detail)
              for _, bundle in bundle_losses(runs)]
    assert not losses, f"the hand-written page matched, the bundle did not: {losses}"
    matched = {(run.case.key, run.browser, run.mode) for run in runs
               if run.page == "bundle" and run.outcome == "matched"}
    # every bundle that was built computed the suite's outputs through bundle.mjs on WASM
    made = [item.case.key for item in built if item.status == "built"]
    assert len(made) >= len(SUBSET) - 2, built  # opset 1 and 6 need converting (issue 12, 0)
    assert all((key, "wasm", "default") in matched for key in made), matched
    fallback = next(run for run in runs if run.case.key == SUBSET[-1] and run.page == "bundle"
                    and run.browser == "webgpu" and run.mode == "default")
    assert fallback.outcome == "matched" and fallback.ep == "wasm", fallback
