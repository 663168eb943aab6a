"""model.listen() in headless Chromium on a fake microphone fed from a WAV file of speech read
by eSpeak NG: through the AudioWorklet and the ScriptProcessor capture, with the energy detector
and with a voice-activity bundle loaded on the same page, each final transcript is the native
run's (bundler/text/whisper_run.py) of the samples the page captured for that utterance, partial
text comes while an utterance grows (in the worker mode too), and the utterances hold the
recording's speech. The demo
page's microphone mode shows partial then final text and stops."""

from __future__ import annotations

import base64
import dataclasses
from pathlib import Path

import numpy as np
import pytest

from bundler.tasks.samples import wav_bytes
from bundler.verify.browser import launch
from tests import speech_models, task_models
from tests.speech import speech
from tests.test_asr_browser import built  # noqa: F401 (the built bundle, as a fixture)

pytestmark = pytest.mark.browser

SPEECH_SECONDS = 4.0
LEAD, TAIL = 1.0, 2.0  # seconds of silence before and after the speech
VAD = "vad"  # the voice-activity bundle's folder inside the speech bundle's, one origin


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, np.ndarray, int]:
    samples, rate = speech(SPEECH_SECONDS)
    padded = np.concatenate([np.zeros(int(LEAD * rate), np.float32), samples,
                             np.zeros(int(TAIL * rate), np.float32)])
    path = tmp_path_factory.mktemp("mic") / "speech.wav"
    path.write_bytes(wav_bytes(padded, rate))
    return path, padded, rate


@pytest.fixture(scope="module")
def mic_browser(playwright, browser_settings, recording):
    """A Chromium whose fake microphone plays the recording once, then silence."""
    settings = dataclasses.replace(browser_settings, base_args=(
        *browser_settings.base_args, "--use-fake-device-for-media-stream",
        "--use-fake-ui-for-media-stream", "--autoplay-policy=no-user-gesture-required",
        f"--use-file-for-fake-audio-capture={recording[0]}%noloop"))
    with launch(playwright, settings, webgpu=False) as browser:
        yield browser


@pytest.fixture(scope="module")
def with_vad(built, runtime_dist):  # noqa: F811 (the imported fixture)
    """The speech bundle with a voice-activity bundle (audio-stream) built beside it."""
    from bundler.bundle.options import BuildOptions
    from bundler.commands.build import build

    output = built["bundle"] / VAD
    build(task_models.audio_model(output.parent / "vad-model"),
          BuildOptions(output=output, verify=False, runtime_dir=runtime_dist,
                       task={"kind": "audio-stream", "score_threshold": 0.1}))
    return built


LISTEN = """async ({ url, vadUrl, capture, worker, seconds }) => {
  const { load } = await import(url);
  const model = await load({ executionProviders: ['wasm'], worker });
  const vad = vadUrl ? await (await import(vadUrl)).load({ executionProviders: ['wasm'] }) : null;
  const media = await navigator.mediaDevices.getUserMedia({ audio: true });
  const controller = new AbortController();
  const partials = [];
  let finalsSeen = 0;
  const listening = model.listen(media, { signal: controller.signal, vad, capture,
    onPartial: ({ text, start, end }) => partials.push({ text, start, end }),
    onFinal: () => { finalsSeen++; } });
  await new Promise((resolve) => { setTimeout(resolve, seconds * 1000); });
  controller.abort();
  const finals = await listening;
  media.getTracks().forEach((track) => track.stop());
  const base64 = (audio) => {
    const bytes = new Uint8Array(audio.buffer, audio.byteOffset, audio.byteLength);
    let text = '';
    for (let i = 0; i < bytes.length; i += 8192) {
      text += String.fromCharCode(...bytes.subarray(i, i + 8192));
    }
    return btoa(text);
  };
  return { partials, finalsSeen, finals: finals.map((final) => ({
    text: final.text, tokens: final.tokens, windows: final.windows, start: final.start,
    end: final.end, rate: final.sampleRate, audio: base64(final.audio) })) };
}"""


def _listen(page, capture: str, vad: bool, worker: bool) -> dict:
    return page.evaluate(LISTEN, {
        "url": page.base_url + "bundle.mjs", "capture": capture, "worker": worker,
        "vadUrl": page.base_url + f"{VAD}/bundle.mjs" if vad else None,
        "seconds": LEAD + SPEECH_SECONDS + TAIL + 1})


# The ScriptProcessor runs on the page's thread, which a transcription holds for a while on a busy
# machine: its blocks are lost then, so that case runs the model in a worker, as apps should.
@pytest.mark.parametrize(("capture", "vad", "worker"), [
    ("worklet", False, False), ("script-processor", False, True), ("auto", True, False)])
def test_listen_finals_are_the_native_transcripts_of_the_captured_utterances(
        with_vad, mic_browser, open_bundle, recording, capture, vad, worker):
    with open_bundle(mic_browser, with_vad["bundle"]) as page:
        got = _listen(page, capture, vad, worker)
    finals = got["finals"]
    assert finals and got["finalsSeen"] == len(finals)
    spoken = 0.0
    for final in finals:
        audio = np.frombuffer(base64.b64decode(final["audio"]), np.float32)
        assert audio.size == round((final["end"] - final["start"]) * final["rate"])
        native = speech_models.native(with_vad, audio, final["rate"], {"timestamps": False})
        assert final["windows"] == native["windows"]
        assert (final["tokens"], final["text"]) == (native["tokens"], native["text"])
        spoken += audio.size / final["rate"]
    assert any(final["tokens"] for final in finals)
    # the utterances hold the speech, each from the silence before it (its preroll)
    assert SPEECH_SECONDS * 0.8 <= spoken <= SPEECH_SECONDS + TAIL + 1
    first = np.frombuffer(base64.b64decode(finals[0]["audio"]), np.float32)
    assert np.sqrt(np.mean(first[:round(0.02 * finals[0]["rate"])] ** 2)) < 0.01  # silence
    # partial text while an utterance grew, each inside a final's utterance
    assert got["partials"]
    for partial in got["partials"]:
        assert any(final["start"] == partial["start"] and partial["end"] < final["end"]
                   for final in finals)


def test_listen_refuses_what_is_not_a_microphone_stream(built, mic_browser,  # noqa: F811
                                                         open_bundle):
    with open_bundle(mic_browser, built["bundle"]) as page:
        errors = page.evaluate("""async ({ url }) => {
          const { load } = await import(url);
          const model = await load({ executionProviders: ['wasm'] });
          const media = await navigator.mediaDevices.getUserMedia({ audio: true });
          const message = async (call) => {
            try { await call(); return null; } catch (error) { return error.message; } };
          const got = {
            stream: await message(() => model.listen({})),
            vad: await message(() => model.listen(media, { vad: model })),
            silence: await message(() => model.listen(media, { silenceMs: -1 })),
          };
          media.getTracks().forEach((track) => track.stop());
          return got;
        }""", {"url": page.base_url + "bundle.mjs"})
    assert errors == {
        "stream": "listen(stream): give a MediaStream with an audio track",
        "vad": "listen({ vad }): give a model loaded from an audio-stream bundle",
        "silence": "listen(): silenceMs must be a number >= 0, got -1"}


FINAL_LINE = r"/^\d+\.\d\d s – \d+\.\d\d s: /"


def test_the_demo_page_shows_partial_then_final_text_from_the_microphone(
        built, mic_browser, open_bundle):  # noqa: F811
    with open_bundle(mic_browser, built["bundle"], "index.html") as page:
        page.page.wait_for_selector("body[data-ready=true]")
        live = page.page.locator("#task-live")
        assert live.is_enabled() and live.text_content() == "Start microphone"
        live.click()
        partial = page.page.wait_for_selector("#task-results li[data-partial]", timeout=60_000)
        assert partial.text_content().startswith("… ")
        page.page.wait_for_function(
            f"() => [...document.querySelectorAll('#task-results li')].some((item) =>"
            f" {FINAL_LINE}.test(item.textContent))", timeout=60_000)
        assert (live.text_content(), live.get_attribute("aria-pressed")) == (
            "Stop microphone", "true")
        live.click()
        assert (live.text_content(), live.get_attribute("aria-pressed")) == (
            "Start microphone", "false")
        assert page.page.get_attribute("#status", "data-state") != "error"
