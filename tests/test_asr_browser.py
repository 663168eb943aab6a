"""A Whisper export folder (tests/speech_models.py) built as users build it (`bundle build DIR`,
no --task): the task is inferred, the bundle holds an `encoder` and a `decoder` session with the
tokenizer, config and speech modules; in headless Chromium on WASM, model.transcribe() of speech
read by eSpeak NG gives the tokens of the native run (bundler/text/whisper_run.py) over the
bundle's own model files, window by window and merged, and the same text (in the worker mode
too); the demo page transcribes a dropped recording."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
import pytest

from bundler.bundle import manifest as manifest_file
from bundler.bundle.layout import SPEECH_FILES
from bundler.tasks.logmel import spec_of
from bundler.tasks.samples import wav_bytes
from bundler.text import whisper
from bundler.text.tokenizer import TextTokenizer
from bundler.text.whisper_run import WhisperSessions, transcribe
from tests import speech_models
from tests.conftest import run_cli
from tests.speech import speech

pytestmark = pytest.mark.browser

SECONDS = 4.0  # one window, a few sentences' worth of tokens
CASES = [{"language": "en", "task": "transcribe", "timestamps": False},
         {"timestamps": True}]  # the language detected, the timestamp rules acting


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, runtime_dist: Path) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("asr")
    folder = speech_models.whisper(root / "model").folder
    output = root / "bundle"
    result = run_cli("build", folder, "-o", output, "--runtime-dir", runtime_dist,
                     "--ep", "wasm", "--variants", "fp32")
    assert result.returncode == 0, result.stderr
    return {"bundle": output, "folder": folder}


def _native(built: dict[str, Path], samples: np.ndarray, rate: int,
            options: dict[str, Any]) -> dict[str, Any]:
    bundle = manifest_file.load(built["bundle"])
    open_session = lambda name: ort.InferenceSession(  # noqa: E731
        str(built["bundle"] / bundle.session(name).variant("fp32").file))
    sessions = WhisperSessions(open_session("encoder"), open_session("decoder"))
    folder = built["folder"]
    settings = whisper.settings_of(json.loads((folder / "generation_config.json").read_text()))
    spec = spec_of(json.loads((folder / "preprocessor_config.json").read_text()))
    language = options.get("language")
    runs, chunks = transcribe(sessions, samples, rate, spec, settings,
                              whisper.language_id(settings, language) if language else None,
                              options.get("task"), options["timestamps"])
    tokens = [token for chunk in chunks for token in chunk.tokens]
    return {"windows": [run.tokens for run in runs], "tokens": tokens,
            "text": TextTokenizer.from_folder(folder).decode(tokens), "chunks": chunks}


TRANSCRIBE = """async ({ url, samples, rate, cases }) => {
  const { load } = await import(url);
  const bytes = Uint8Array.from(atob(samples), (c) => c.charCodeAt(0));
  const audio = new Float32Array(bytes.buffer);
  const model = await load({ executionProviders: ['wasm'] });
  const results = [];
  for (const options of cases) {
    results.push(await model.transcribe(audio, { sampleRate: rate, ...options }));
  }
  const sessions = [model.session, model._decoder.session];
  await model.release();
  // in the worker mode, each session in its own worker: the same transcript
  const inWorker = await load({ executionProviders: ['wasm'], worker: true });
  const worker = await inWorker.transcribe(audio, { sampleRate: rate, ...cases[0] });
  await inWorker.release();
  return { results, sessions, ep: model.ep, worker };
}"""


def test_the_build_infers_the_task_and_ships_two_sessions(built):
    bundle = manifest_file.load(built["bundle"])
    assert bundle.task is not None and bundle.task.kind == "automatic-speech-recognition"
    assert [session.name for session in bundle.sessions] == ["encoder", "decoder"]
    assert bundle.session("decoder").inputs[0].name == "input_ids"
    assert {"generation_config.json", "preprocessor_config.json",
            "tokenizer.json"} <= set(bundle.task.files or {})
    assert all((built["bundle"] / name).is_file() for name in SPEECH_FILES)
    assert bundle.verification.status == "passed"  # the encoder's per-session conformance


def test_transcribe_gives_the_native_tokens_and_text(built, plain_browser, open_bundle):
    samples, rate = speech(SECONDS)
    audio = np.asarray(samples, np.float32)
    native = [_native(built, audio, rate, case) for case in CASES]
    assert all(len(case["windows"][0]) > 4 for case in native)  # something was decoded
    with open_bundle(plain_browser, built["bundle"]) as page:
        got = page.evaluate(TRANSCRIBE, {
            "url": page.base_url + "bundle.mjs", "rate": rate, "cases": CASES,
            "samples": base64.b64encode(audio.tobytes()).decode()})
    assert got["sessions"] == ["encoder", "decoder"] and got["ep"] == "wasm"
    assert got["worker"] == got["results"][0]
    for result, want, case in zip(got["results"], native, CASES, strict=True):
        assert result["windows"] == want["windows"]
        assert result["tokens"] == want["tokens"]
        assert result["text"] == want["text"]
        if case["timestamps"]:
            assert [(s["start"], s["end"], s["tokens"]) for s in result["segments"]] == [
                (c.start, c.end, c.tokens) for c in want["chunks"]]
        else:
            assert "segments" not in result


def test_the_demo_page_transcribes_a_dropped_recording(built, plain_browser, open_bundle,
                                                       tmp_path):
    samples, rate = speech(SECONDS)
    recording = tmp_path / "speech.wav"
    recording.write_bytes(wav_bytes(np.asarray(samples, np.float32), rate))
    with open_bundle(plain_browser, built["bundle"], "index.html") as page:
        page.page.wait_for_selector("body[data-ready=true]")
        page.page.set_input_files("#task-file", str(recording))
        page.page.wait_for_selector("#task-results li", timeout=120_000)
        items = page.page.locator("#task-results li").all_text_contents()
        assert items and all(re.match(r"\d+\.\d\d s – \d+\.\d\d s: ", item) for item in items), \
            items
        assert page.page.is_enabled("#task-live")  # the microphone mode (test_asr_listen_browser)
