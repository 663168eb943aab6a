"""A decoder trained in the suite until it counts (tests/trained_decoder.py), built with
`--task text-generation` and run in headless Chromium on WASM: its output is checked for content
(the continuation is the counting), greedily, with seeded sampling, and through chat messages; each
run also equals the Python reference loop's tokens."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

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


STOP_AT_FIRST_PIECE = """() => {
  const results = document.getElementById('task-results');
  new MutationObserver((_, observer) => {
    const reply = results.querySelector('li[data-role=assistant] span');
    if (reply?.textContent) {
      observer.disconnect();
      document.getElementById('chat-stop').click();
    }
  }).observe(results, { subtree: true, childList: true, characterData: true });
}"""


def _send(page: Any, text: str, **settings: str) -> None:
    for name, value in settings.items():
        page.fill(f"#chat-{name}", value)
    page.fill("#task-text", text)
    page.click("#task-run")


def _first_turn(page: Any, mode: str) -> None:
    """Once the demo page is ready and says it is in `mode`: "1 2 3 4", 4 new tokens, answered."""
    page.wait_for_selector("body[data-ready=true]")
    assert mode in page.text_content("#chat-mode")
    page.click("#chat-settings summary")
    _send(page, "1 2 3 4", **{"max-new-tokens": "4"})
    page.wait_for_selector("#chat-stats:has-text('tokens/s')")


def _replies(page: Any) -> list[str]:
    return page.locator("#task-results li[data-role=assistant] span").all_text_contents()


def test_the_demo_page_chats_streams_and_stops(counter, plain_browser, open_bundle):
    with open_bundle(plain_browser, counter["bundle"], "index.html") as opened:
        page = opened.page
        _first_turn(page, "chat template")
        assert _replies(page) == [" " + trained_decoder.counting(5, 4)]
        stats = page.text_content("#chat-stats")
        assert stats.startswith("4 prompt tokens · first token") and stats.endswith(
            "4 new tokens")
        # the second turn sees the first: the template joins the conversation (16 numbers in
        # all, the trained window)
        _send(page, " 9 10")
        page.wait_for_selector("#task-results li:nth-child(4)")
        page.wait_for_selector("#task-run:not([disabled])")
        assert _replies(page)[1] == " " + trained_decoder.counting(11, 4)
        assert page.text_content("#chat-stats").startswith("10 prompt tokens")
        # the settings reach generate(): a near-uniform draw no longer counts
        page.click("#chat-clear")
        _send(page, "1 2 3 4", temperature="50", seed="1")
        page.wait_for_selector("#task-run:not([disabled])")
        assert _replies(page)[0] not in ("", " " + trained_decoder.counting(5, 8))
        # Stop, clicked as the first piece streams in, ends the reply there
        page.click("#chat-clear")
        page.evaluate(STOP_AT_FIRST_PIECE)
        _send(page, "1 2 3", temperature="0", **{"max-new-tokens": "100"})
        page.wait_for_selector("#chat-stats:has-text('stopped')")
        reply = _replies(page)[0]
        assert reply.startswith(" 4") and len(reply.split()) <= 2
        assert page.is_enabled("#task-run") and not page.is_enabled("#chat-stop")


@pytest.fixture(scope="module")
def plain_counter(counter: dict[str, Path], tmp_path_factory: pytest.TempPathFactory,
                  runtime_dist: Path) -> Path:
    """The same counter, its tokenizer without a chat template (no check: the model is the
    checked one)."""
    import shutil

    root = tmp_path_factory.mktemp("plain-counter")
    folder = shutil.copytree(counter["folder"], root / "model")
    config_path = folder / "tokenizer_config.json"
    config = json.loads(config_path.read_text(encoding="utf-8"))
    del config["chat_template"]
    config_path.write_text(json.dumps(config), encoding="utf-8")
    result = run_cli("build", folder, "-o", root / "bundle", "--runtime-dir", runtime_dist,
                     "--task", "text-generation", "--ep", "wasm", "--variants", "fp32",
                     "--no-verify")
    assert result.returncode == 0, result.stderr
    return root / "bundle"


def test_without_a_chat_template_each_message_is_a_prompt(plain_counter, plain_browser,
                                                         open_bundle):
    with open_bundle(plain_browser, plain_counter, "index.html") as opened:
        page = opened.page
        _first_turn(page, "no chat template")
        _send(page, "40 41")  # continued on its own, not after the first turn
        page.wait_for_selector("#task-results li:nth-child(4)")
        page.wait_for_selector("#task-run:not([disabled])")
        assert _replies(page) == [" " + trained_decoder.counting(5, 4),
                                  " " + trained_decoder.counting(42, 4)]
        assert page.text_content("#chat-stats").startswith("2 prompt tokens")
