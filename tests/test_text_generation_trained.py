"""A decoder trained in the suite until it counts (tests/trained_decoder.py), built with
`--task text-generation` and run in headless Chromium on WASM: its output is checked for content
(the continuation is the counting), greedily, with seeded sampling, and through chat messages; each
run also equals the Python reference loop's tokens."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bundler.text.sampling import SamplingOptions
from tests import trained_decoder
from tests.conftest import run_cli
from tests.test_text_generation_browser import _generate, _native

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def counter(tmp_path_factory: pytest.TempPathFactory, runtime_dist: Path) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("counter")
    folder = trained_decoder.counter_folder(root / "model").folder
    output = root / "bundle"
    result = run_cli("build", folder, "-o", output, "--runtime-dir", runtime_dist,
                     "--task", "text-generation", "--ep", "wasm", "--variants", "fp32")
    assert result.returncode == 0, result.stderr
    return {"bundle": output, "folder": folder}


def test_the_trained_decoder_counts_natively(counter):
    # the model learned the pattern before any bundle code ran: the Python reference loop counts
    assert json.loads((counter["bundle"] / "bundle.json").read_text())["task"][
        "kind"] == "text-generation"
    result = run_cli("run", counter["bundle"], "--text", "7 8 9", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["generated"][0].startswith(" 10 11 12 13 14 15")


PROMPTS = ["1 2 3 4", "31 32 33"]
COUNTED = [trained_decoder.counting(5, 12), trained_decoder.counting(34, 12)]


def test_the_browser_continues_the_counting(counter, plain_browser, open_bundle):
    sampling = SamplingOptions(do_sample=True, temperature=0.7, top_k=20, seed=3)
    with open_bundle(plain_browser, counter["bundle"]) as page:
        greedy = _generate(page, PROMPTS, maxNewTokens=12)
        sampled = _generate(page, PROMPTS, maxNewTokens=12, temperature=0.7, topK=20, seed=3)
        chat = _generate(page, [[{"role": "user", "content": "60 61 62"}]], maxNewTokens=6)
    assert [run["text"] for run in greedy["runs"]] == [" " + text for text in COUNTED]
    assert [run["tokenIds"] for run in greedy["runs"]] == _native(counter, PROMPTS, 12)
    # a trained model's distribution is peaked: a seeded draw still counts, token for token as
    # the Python reference draws it
    assert [run["text"] for run in sampled["runs"]] == [" " + text for text in COUNTED]
    assert [run["tokenIds"] for run in sampled["runs"]] == _native(counter, PROMPTS, 12, sampling)
    assert chat["runs"][0]["text"] == " " + trained_decoder.counting(63, 6)
