"""The sampling spec (bundler/text/sampling.py's docstring): the Python and the Node side draw the
same tokens for the same logits and seed, and each logits processor agrees with transformers'."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import (
    RepetitionPenaltyLogitsProcessor,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

from bundler.errors import ConfigError
from bundler.site.npmtools import node_executable
from bundler.text.sampling import (
    Mulberry32,
    Sampler,
    SamplingOptions,
    draw,
    exp64,
    penalize,
    top_k_filter,
    top_p_filter,
)

TWIN = Path(__file__).resolve().parent / "js" / "sampling_twin.mjs"
STEPS = 200


def _vectors(seed: int, vocab: int, count: int, scale: float = 3.0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal(vocab) * scale).astype(np.float32) for _ in range(count)]


def _ties() -> list[np.ndarray]:
    """Equal scores everywhere a tie-break rule matters, and a masked token."""
    return [np.array([1, 1, 1, 0, 0, -np.inf, 2, 2], np.float32),
            np.array([0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5], np.float32)]


CASES = [
    (_vectors(0, 50, 3), [1, 2, 3], SamplingOptions(repetition_penalty=1.3)),
    (_vectors(1, 1000, 4), [5, 9, 5], SamplingOptions(True, 0.7, 40, 0.9, 1.2, seed=7)),
    (_ties(), [6], SamplingOptions(True, seed=1)),
    (_ties(), [], SamplingOptions(True, top_k=2, top_p=0.6, seed=2)),
    (_ties(), [0, 6], SamplingOptions(repetition_penalty=2.0)),
    (_vectors(2, 200, 2, scale=30.0), [], SamplingOptions(True, top_p=0.5, seed=123456789)),
    (_vectors(3, 100, 5), [4], SamplingOptions(True, 2.5, seed=2**32 - 1)),
    (_vectors(4, 64, 3), [], SamplingOptions(True, 1.0, top_k=1, seed=3)),
    (_vectors(5, 300, 3, scale=0.01), list(range(40)), SamplingOptions(True, 0.3, 0, 0.95, 1.1, 9)),
    ([np.array([0.25], np.float32)], [0], SamplingOptions(True, seed=4)),
    # top-k over 1024 (a sort, not a heap) and a top-p prefix far below the top score
    (_vectors(6, 2000, 2, scale=2.0), [3], SamplingOptions(True, 1.3, 1500, 0.99, seed=5)),
]


def _python_tokens(vectors: list[np.ndarray], prompt: list[int], options: SamplingOptions,
                   steps: int = STEPS) -> list[int]:
    sampler, seen, drawn = Sampler(options), list(prompt), []
    for step in range(steps):
        token = sampler.next(vectors[step % len(vectors)], seen)
        drawn.append(token)
        seen.append(token)
    return drawn


def _camel(options: SamplingOptions) -> dict:
    return {"doSample": options.do_sample, "temperature": options.temperature,
            "topK": options.top_k, "topP": options.top_p,
            "repetitionPenalty": options.repetition_penalty, "seed": options.seed}


def _node(table: dict, tmp_path: Path) -> dict:
    path = tmp_path / "table.json"
    path.write_text(json.dumps(table))
    result = subprocess.run([str(node_executable()), str(TWIN), str(path)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_python_and_node_draw_the_same_tokens(tmp_path: Path) -> None:
    rng = np.random.default_rng(8)
    grid = [0.0, -1e-300, -0.5, -0.34657359027997264, -1.0, -20.0, -699.9, -700.0, -700.5,
            *(-rng.exponential(5.0, 300)).tolist(), *(-rng.uniform(0, 745, 100)).tolist()]
    table = {
        "cases": [{"steps": STEPS, "prompt": prompt, "options": _camel(options),
                   "logits": [[None if np.isneginf(v) else float(v) for v in vector]
                              for vector in vectors]}
                  for vectors, prompt, options in CASES],
        "exp": grid, "prng": {"seed": 42, "count": 1000},
    }
    node = _node(table, tmp_path)
    assert node["exp"] == exp64(np.array(grid)).tolist()
    random = Mulberry32(42)
    assert node["uint32"] == [random.next_uint32() for _ in range(1000)]
    assert node["uniforms"] == [random.uniform() for _ in range(1000)]
    for (vectors, prompt, options), tokens in zip(CASES, node["tokens"], strict=True):
        assert tokens == _python_tokens(vectors, prompt, options), options
    assert len(set(node["tokens"][1])) > 10 and len(set(node["tokens"][6])) > 10  # they vary


def test_exp64_is_exp_to_the_last_bits() -> None:
    x = -np.random.default_rng(0).uniform(0, 700, 10000)
    assert np.max(np.abs(exp64(x) / np.exp(x) - 1)) < 4e-16
    assert exp64(np.array([0.0, -800.0, -np.inf])).tolist() == [1.0, 0.0, 0.0]


def test_the_draw_follows_the_softmax() -> None:
    scores = np.array([0.0, 1.0, 2.0, -1.0, 0.5])
    expected = np.exp(scores) / np.exp(scores).sum()
    random = Mulberry32(5)
    counts = np.bincount([draw(scores, random.uniform()) for _ in range(20000)], minlength=5)
    assert np.max(np.abs(counts / 20000 - expected)) < 0.015


def test_greedy_picks_the_lowest_id_on_ties_and_draws_nothing() -> None:
    sampler = Sampler(SamplingOptions(True, temperature=0.0, seed=3))
    assert sampler.next(np.array([1, 3, 3, 2], np.float32)) == 1
    assert sampler.random.state == 3  # no uniform drawn


@pytest.mark.parametrize("seed", range(5))
def test_processors_match_transformers(seed: int) -> None:
    rng = np.random.default_rng(seed)
    logits = (rng.standard_normal((1, 257)) * 4).astype(np.float32)
    seen = rng.integers(0, 257, 30)
    ids, scores = torch.tensor(seen[None]), torch.tensor(logits)
    scores64 = logits[0].astype(np.float64)

    theirs = RepetitionPenaltyLogitsProcessor(1.4)(ids, scores.clone())[0].numpy()
    np.testing.assert_allclose(penalize(scores64, seen, 1.4), theirs, rtol=1e-6)
    theirs = TemperatureLogitsWarper(0.6)(ids, scores.clone())[0].numpy()
    np.testing.assert_allclose(scores64 / 0.6, theirs, rtol=1e-6)
    for top_k in (1, 5, 50, 256):
        theirs = TopKLogitsWarper(top_k)(ids, scores.clone())[0].numpy()
        assert np.array_equal(np.isinf(top_k_filter(scores64, top_k)), np.isinf(theirs))
    for top_p in (0.05, 0.3, 0.9, 0.99):
        theirs = TopPLogitsWarper(top_p)(ids, scores.clone())[0].numpy()
        ours = top_p_filter(scores64, top_p)
        assert np.array_equal(np.isinf(ours), np.isinf(theirs)), top_p
        assert np.isfinite(ours).sum() >= 1


def test_top_p_keeps_one_token_at_least() -> None:
    scores = np.array([5.0, 1.0, 0.0])
    assert np.isfinite(top_p_filter(scores, 1e-9)).tolist() == [True, False, False]


@pytest.mark.parametrize("settings", [{"temperature": -1.0}, {"top_k": 1.5}, {"top_p": 0.0},
                                      {"repetition_penalty": 0.0}, {"seed": 2**32}])
def test_bad_options_are_one_line_errors(settings: dict) -> None:
    with pytest.raises(ConfigError, match="must be"):
        SamplingOptions(**settings)
