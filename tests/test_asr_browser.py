"""A Whisper export folder (tests/speech_models.py) built as users build it (`bundle build DIR`,
no --task): the task is inferred, the bundle holds an `encoder` and a `decoder` session with the
tokenizer, config and speech modules; in headless Chromium on WASM, model.transcribe() of speech
read by eSpeak NG gives the tokens of the native run (bundler/text/whisper_run.py) over the
bundle's own model files, window by window and merged, and the same text (in the worker mode
too), with the decoder's int4 variant (each session has two) against its own native run, and
`bundle test --audio` compares each window's teacher-forced logits too (a tampered copy fails);
the demo page transcribes a dropped recording."""

from __future__ import annotations

import base64
import json
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from bundler.bundle import manifest as manifest_file
from bundler.bundle.files import HASH_LENGTH
from bundler.bundle.layout import SPEECH_FILES
from bundler.bundle.modelio import sha256_of
from bundler.commands.build import summary
from bundler.site.pages import human_bytes
from bundler.tasks.audio import read_wav, resample
from bundler.tasks.samples import wav_bytes
from tests import speech_models
from tests.conftest import run_cli
from tests.speech import speech

pytestmark = pytest.mark.browser

SECONDS = 4.0  # one window, a few sentences' worth of tokens
CASES = [{"language": "en", "task": "transcribe", "timestamps": False},
         {"timestamps": True}]  # the language detected, the timestamp rules acting


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, runtime_dist: Path) -> dict[str, Any]:
    return speech_models.built(tmp_path_factory.getbasetemp(), runtime_dist,
                               *speech_models.WASM_BUILD)


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
    # every session ships the variants asked for, each with its own default
    encoder, decoder = bundle.sessions
    assert [v.name for v in encoder.variants] == ["fp32", "int4"] and encoder.default_variant \
        == "fp32"
    assert [v.name for v in decoder.variants] == ["int4", "fp32"] and decoder.default_variant \
        == "int4"
    for variant in encoder.variants + decoder.variants:  # made, hashed and measured alike
        assert sha256_of(built["bundle"] / variant.file) == variant.sha256
        assert f".{variant.sha256[:HASH_LENGTH]}." in variant.file
        assert variant.accuracy is not None and variant.accuracy.data == "check-audio"
        assert variant.accuracy.tokens_agreement is not None
        assert variant.accuracy.word_error_rate is not None
        assert variant.reference is not None
    # the build's summary line names each session's variants and what load() fetches of each
    int4 = bundle.wire_bytes(decoder.variant("int4"), "wasm")
    runtime = bundle.fetched_bytes(bundle.runtime.builds["wasm"].wasm)
    assert int4 is not None and 0 < runtime < int4
    line = summary(bundle)
    assert f"encoder: fp32 {human_bytes(encoder.variant('fp32').bytes)}, int4 " in line
    assert f"; decoder: int4 {human_bytes(decoder.variant('int4').bytes)}, fp32 " in line
    assert (f"wasm encoder fp32 {human_bytes(bundle.wire_bytes(encoder.variant('fp32')))} +"
            f" decoder int4 {human_bytes(int4 - runtime)} + runtime {human_bytes(runtime)};"
            ) in line
    assert decoder.variant("fp32").accuracy.tokens_agreement == 1.0
    # the build's check: transcribe() in Chromium gave the native tokens of each session's
    # default on WASM (the encoder's fp32, the decoder's int4)
    table = built["log"][built["log"].index("automatic-speech-recognition: browser vs"):]
    assert re.search(r"task\W+fp32 / int4\W+wasm\W+generated\.wav.*pass", table), table
    assert not bundle.verification.problems


def test_transcribe_gives_the_native_tokens_and_text(built, plain_browser, open_bundle):
    samples, rate = speech(SECONDS)
    audio = np.asarray(samples, np.float32)
    native = [speech_models.native(built, audio, rate, case) for case in CASES]
    assert all(len(case["windows"][0]) > 4 for case in native)  # something was decoded
    with open_bundle(plain_browser, built["bundle"]) as page:
        got = page.evaluate(TRANSCRIBE, {
            "url": page.base_url + "bundle.mjs", "rate": rate, "cases": CASES,
            "samples": base64.b64encode(audio.tobytes()).decode()})
    assert got["sessions"] == ["encoder", "decoder"] and got["ep"] == "wasm"
    timings = [result.pop("timings") for result in (*got["results"], got["worker"])]
    assert got["worker"] == got["results"][0]
    for timing, want in zip(timings, [*native, native[0]], strict=True):
        assert timing["audioSeconds"] == pytest.approx(SECONDS, abs=1e-3)
        assert timing["encoderMs"] > 0 and timing["decoderMs"] > 0
        assert timing["encoderMs"] + timing["decoderMs"] <= timing["totalMs"]
        assert timing["decoderSteps"] >= len(want["windows"][0])  # a step per token chosen
        assert timing["decoderStepsPerS"] == pytest.approx(
            timing["decoderSteps"] * 1000 / timing["decoderMs"])
        assert timing["realTimeFactor"] == pytest.approx(SECONDS * 1000 / timing["totalMs"],
                                                         rel=1e-3)
        if want["text"]:  # else no text token came
            assert 0 < timing["firstTextMs"] < timing["totalMs"]
    for result, want, case in zip(got["results"], native, CASES, strict=True):
        assert result["windows"] == want["windows"]
        assert result["tokens"] == want["tokens"]
        assert result["text"] == want["text"]
        if case["timestamps"]:
            assert [(s["start"], s["end"], s["tokens"]) for s in result["segments"]] == [
                (c.start, c.end, c.tokens) for c in want["chunks"]]
        else:
            assert "segments" not in result


ENGLISH_ONLY = """async ({ url, samples, rate }) => {
  const { load } = await import(url);
  const bytes = Uint8Array.from(atob(samples), (c) => c.charCodeAt(0));
  const audio = new Float32Array(bytes.buffer);
  const model = await load({ executionProviders: ['wasm'] });
  const results = [];
  for (const timestamps of [false, true]) {
    results.push(await model.transcribe(audio, { sampleRate: rate, timestamps }));
  }
  const refused = await model.transcribe(audio, { sampleRate: rate, language: 'en' })
    .then(() => null, (error) => error.message);
  await model.release();
  return { results, refused };
}"""


def test_an_english_only_export_transcribes_as_native(tmp_path_factory, runtime_dist,
                                                      plain_browser, open_bundle):
    """whisper-tiny.en's generation config (no language or task ids, <|notimestamps|> forced):
    the browser's prompt and tokens are native's with and without timestamps, and a language
    asked for is refused with the reason."""
    root = tmp_path_factory.getbasetemp()
    folder = tmp_path_factory.mktemp("english") / "model"
    shutil.copytree(speech_models.exported(root), folder)
    config = folder / "generation_config.json"
    config.write_text(json.dumps(speech_models.english_only(json.loads(config.read_text()))))
    output = folder.parent / "bundle"
    result = run_cli("build", folder, "-o", output, "--runtime-dir", runtime_dist,
                     "--variants", "fp32", "--ep", "wasm")
    assert result.returncode == 0, result.stderr
    english = {"bundle": output, "folder": folder}
    samples, rate = speech(SECONDS)
    audio = np.asarray(samples, np.float32)
    with open_bundle(plain_browser, output) as page:
        got = page.evaluate(ENGLISH_ONLY, {
            "url": page.base_url + "bundle.mjs", "rate": rate,
            "samples": base64.b64encode(audio.tobytes()).decode()})
    for result, timestamps in zip(got["results"], [False, True], strict=True):
        want = speech_models.native(english, audio, rate, {"timestamps": timestamps})
        assert len(want["tokens"]) > 4 and result["windows"] == want["windows"]
        assert result["text"] == want["text"]
    assert got["refused"].startswith("language 'en' cannot be given: this model is English-only")


def test_an_unmerged_export_is_merged_at_build(tmp_path_factory, runtime_dist, tmp_path):
    """optimum's export with --no-post-process (encoder_model.onnx, decoder_model.onnx,
    decoder_with_past_model.onnx): the build merges the decoder's two files and its transcript
    is that of optimum's merged export of the same weights; without the with-past file the
    build refuses in one line and writes nothing."""
    import onnxruntime as ort

    from bundler.tasks.logmel import spec_of
    from bundler.text import whisper
    from bundler.text.whisper_run import WhisperSessions, transcribe

    folder = speech_models.whisper(tmp_path_factory.mktemp("unmerged"), merged=False).folder
    assert not (folder / "decoder_model_merged.onnx").exists()
    no_past = tmp_path / "no-past"
    shutil.copytree(folder, no_past, ignore=shutil.ignore_patterns("decoder_with_past*"))
    refused = run_cli("build", no_past, "-o", tmp_path / "refused", "--runtime-dir",
                      runtime_dist)
    assert refused.returncode != 0 and not (tmp_path / "refused").exists()
    assert "a speech model needs its decoder with the KV cache" in refused.stderr
    assert "Traceback" not in refused.stderr and len(refused.stderr.strip().splitlines()) == 1

    output = tmp_path / "bundle"
    result = run_cli("build", folder, "-o", output, "--runtime-dir", runtime_dist,
                     "--variants", "fp32", "--ep", "wasm")
    assert result.returncode == 0, result.stderr
    assert [s.name for s in manifest_file.load(output).sessions] == ["encoder", "decoder"]
    samples, rate = speech(SECONDS)
    recording = tmp_path / "speech.wav"
    recording.write_bytes(wav_bytes(np.asarray(samples, np.float32), rate))
    ran = run_cli("run", output, "--audio", recording, "--json")
    assert ran.returncode == 0, ran.stderr
    merged = speech_models.exported(tmp_path_factory.getbasetemp())  # the same seed's weights
    sessions = WhisperSessions(*(ort.InferenceSession(str(merged / name)) for name in (
        "encoder_model.onnx", "decoder_model_merged.onnx")))
    settings = whisper.settings_of(json.loads((merged / "generation_config.json").read_text()))
    features = spec_of(json.loads((merged / "preprocessor_config.json").read_text()))
    audio, rate = read_wav(recording)
    for got, timestamps in zip(json.loads(ran.stdout)["transcripts"], [False, True],
                               strict=True):
        runs, _ = transcribe(sessions, audio, rate, features, settings, None, None, timestamps)
        assert got["windows"] == [run.tokens for run in runs] and len(got["windows"][0]) > 4


def test_a_folder_without_whisper_configs_builds_with_them_filled(tmp_path_factory, runtime_dist,
                                                                 tmp_path):
    """A model saved from its config alone: generation_config.json with config.json's ids only,
    no preprocessor_config.json. The build says what it fills, ships the completed configs
    (the checkpoint's decoding keys, Whisper's front end at config.json's mel bins), and its
    browser check passes on them; `bundle run --audio` reads them."""
    folder = tmp_path / "model"
    shutil.copytree(speech_models.exported(tmp_path_factory.getbasetemp()), folder)
    given = json.loads((folder / "generation_config.json").read_text())
    (folder / "generation_config.json").write_text(
        json.dumps(speech_models.from_model_config(given)))
    (folder / "preprocessor_config.json").unlink()
    output = tmp_path / "bundle"
    result = run_cli("build", folder, "-o", output, "--runtime-dir", runtime_dist,
                     "--variants", "fp32", "--ep", "wasm")
    assert result.returncode == 0, result.stderr
    said = result.stdout + result.stderr
    assert ("generation_config.json lacks no_timestamps_token_id, lang_to_id, task_to_id,"
            " is_multilingual: filled from config.json and the tokenizer's special tokens") in said
    assert "no preprocessor_config.json: Whisper's log-mel front end, 80 mel bins" in said
    files = manifest_file.load(output).task.files
    shipped = json.loads((output / files["generation_config.json"]).read_text())
    for key in ("no_timestamps_token_id", "lang_to_id", "task_to_id"):
        assert shipped[key] == given[key], key
    front_end = json.loads((output / files["preprocessor_config.json"]).read_text())
    assert (front_end["feature_size"], front_end["n_fft"], front_end["hop_length"]) == (80, 400,
                                                                                        160)
    samples, rate = speech(SECONDS)
    recording = tmp_path / "speech.wav"
    recording.write_bytes(wav_bytes(np.asarray(samples, np.float32), rate))
    ran = run_cli("run", output, "--audio", recording, "--json")
    assert ran.returncode == 0, ran.stderr
    assert all(len(got["tokens"]) > 4 for got in json.loads(ran.stdout)["transcripts"])


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


SOURCES = """async ({ url, samples, rate, wav, options }) => {
  const { load } = await import(url);
  const decode = (text) => Uint8Array.from(atob(text), (c) => c.charCodeAt(0));
  const audio = new Float32Array(decode(samples).buffer);
  const model = await load({ executionProviders: ['wasm'] }); // warmUp: on by default
  const pieces = [];
  const streamed = await model.transcribe(audio, { sampleRate: rate, ...options,
    onText: (piece, window) => pieces.push([piece, window]) });
  const stampedPieces = []; // the text streamed with the timestamp rules acting
  const stamped = await model.transcribe(audio, { sampleRate: rate, timestamps: true,
    onText: (piece) => stampedPieces.push(piece) });
  // a stereo AudioBuffer at the recording's rate (the recording, and backwards): mixed down
  const buffer = new AudioBuffer({ length: audio.length, numberOfChannels: 2, sampleRate: rate });
  buffer.copyToChannel(audio, 0);
  buffer.copyToChannel(audio.slice().reverse(), 1);
  const mixed = await model.transcribe(buffer, options);
  const blob = await model.transcribe(new Blob([decode(wav)], { type: 'audio/wav' }), options);
  const failure = async (call) => {
    try {
      await call();
      return null;
    } catch (error) {
      return { name: error.name, code: error.code ?? null, message: error.message };
    }
  };
  const controller = new AbortController();
  let chosen = 0;
  const abortedMidway = await failure(() => model.transcribe(audio, { sampleRate: rate,
    ...options, signal: controller.signal,
    onToken: () => { chosen += 1; if (chosen === 3) controller.abort(); } }));
  const abortedBefore = await failure(() => model.transcribe(audio, { sampleRate: rate,
    ...options, signal: AbortSignal.abort() }));
  const again = await model.transcribe(audio, { sampleRate: rate, ...options });
  const notAudio = await failure(() => model.transcribe(new Blob(['not audio']), options));
  const notASource = await failure(() => model.transcribe('speech.wav', options));
  await model.release();
  return { streamed, pieces, stamped, stampedPieces, mixed, blob, abortedMidway, chosen,
           abortedBefore, again, notAudio, notASource, warmedUp: model.loadMs > 0 };
}"""


def test_transcribe_takes_audio_buffers_and_blobs_streams_text_and_aborts(built, plain_browser,
                                                                          open_bundle):
    samples, rate = speech(SECONDS)
    audio = np.asarray(samples, np.float32)
    options = CASES[0]
    stereo = ((audio.astype(np.float64) + audio[::-1]) / 2).astype(np.float32)
    wav = wav_bytes(resample(audio, rate, 16000), 16000)
    recording = built["bundle"].parent / "speech-16k.wav"
    recording.write_bytes(wav)
    want = speech_models.native(built, audio, rate, options)
    want_mixed = speech_models.native(built, stereo, rate, options)
    want_blob = speech_models.native(built, *read_wav(recording), options)
    want_stamped = speech_models.native(built, audio, rate, {"timestamps": True})
    # a call's tail after its last timestamp pair was dropped and decoded again: text that was
    # decoded but is not the window's, which the streaming must hold back
    assert want["dropped"] > 0 and want_stamped["dropped"] > 0
    assert want_mixed["windows"] != want["windows"]  # the mixdown is what was transcribed
    with open_bundle(plain_browser, built["bundle"]) as page:
        got = page.evaluate(SOURCES, {
            "url": page.base_url + "bundle.mjs", "rate": rate, "options": options,
            "samples": base64.b64encode(audio.tobytes()).decode(),
            "wav": base64.b64encode(wav).decode()})
    assert got["streamed"]["windows"] == want["windows"]
    # the text as it was decoded, byte-level pieces held back until whole: the pieces joined
    assert len(got["pieces"]) > 2 and {window for _, window in got["pieces"]} == {0}
    assert "".join(piece for piece, _ in got["pieces"]) == got["streamed"]["text"] == want["text"]
    assert got["stamped"]["windows"] == want_stamped["windows"]
    assert "".join(got["stampedPieces"]) == got["stamped"]["text"] == want_stamped["text"]
    assert got["mixed"]["windows"] == want_mixed["windows"]
    assert got["blob"]["windows"] == want_blob["windows"]
    assert got["abortedMidway"] is not None and got["abortedMidway"]["name"] == "AbortError"
    assert got["chosen"] == 3  # no step after the abort
    assert got["abortedBefore"]["name"] == "AbortError"
    for call in ("again", "streamed"):
        del got[call]["timings"]
    assert got["again"] == got["streamed"]  # an aborted call left nothing behind
    assert got["notAudio"]["code"] == got["notASource"]["code"] == "bad-source"


def test_bundle_run_and_test_transcribe_a_recording(built, tmp_path):
    samples, rate = speech(SECONDS)
    recording = tmp_path / "speech.wav"
    recording.write_bytes(wav_bytes(np.asarray(samples, np.float32), rate))
    audio, rate = read_wav(recording)
    result = run_cli("run", built["bundle"], "--audio", recording, "--json")
    assert result.returncode == 0, result.stderr
    transcripts = json.loads(result.stdout)["transcripts"]
    for got, timestamps in zip(transcripts, [False, True], strict=True):
        want = speech_models.native(built, audio, rate, {"timestamps": timestamps})
        assert got["windows"] == want["windows"] and got["text"] == want["text"]
        assert ("segments" in got) == timestamps
    shown = run_cli("run", built["bundle"], "--audio", recording)
    assert shown.returncode == 0 and ": transcript" in shown.stdout, shown.stderr
    report = tmp_path / "report.json"
    checked = run_cli("test", built["bundle"], "--audio", recording, "--ep", "wasm",
                      "--no-fallback", "--report", report)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    task = json.loads(report.read_text())["task"]
    assert [(entry["ep"], entry["file"], entry["passed"]) for entry in task] == [
        ("wasm", "speech.wav", True)]
    assert task[0]["native_count"] == task[0]["browser_count"] == 2  # without, with timestamps
    # the row names the decoder's variant that ran with the encoder's: WASM's default, int4
    assert (task[0]["variant"], task[0]["others"]) == ("fp32", ["int4"])
    assert "fp32 / int4" in checked.stdout
    # the check's progress as it goes: each transcript's windows
    assert "transcript 2 of 2, window 1 of 1" in checked.stderr
    # each window's logits, the browser's decoder fed native's tokens, were compared: the worst
    # share of a step's logit range is the row's (the browser's float32 is not native's)
    assert 0 < task[0]["worst_score_difference"] <= 0.01, task[0]
    # logits doubled where the check reads them alone (the tokens agree, so teacher forcing is
    # read from the transcript's own steps): the tokens still agree, the check fails
    drifted = tmp_path / "drifted"
    shutil.copytree(built["bundle"], drifted)
    module = drifted / "text" / "transcribe.mjs"
    source = module.read_text(encoding="utf-8")
    wrong = source.replace("run.onStep?.(seek, ids, generated, logits);",
                           "run.onStep?.(seek, ids, generated, logits.map((v) => v * 2));")
    assert wrong != source
    module.write_text(wrong, encoding="utf-8")
    for compressed in (drifted / "text").glob("transcribe.mjs.*"):
        compressed.unlink()
    failed = run_cli("test", drifted, "--audio", recording, "--ep", "wasm", "--no-fallback",
                     "--report", report)
    assert failed.returncode != 0
    [entry] = json.loads(report.read_text())["task"]
    assert re.match(r"transcript \d window 0: the teacher-forced logits differ at step \d+ by"
                    r" [\d.e-]+ of the logit range \(tolerance 0\.01", entry["error"]), entry
    assert entry["worst_score_difference"] > 0.01 and "Traceback" not in failed.stderr


def test_bundle_bench_reports_transcribe_calls_per_ep_and_variant(built, tmp_path):
    samples, rate = speech(SECONDS)
    recording = tmp_path / "speech.wav"
    recording.write_bytes(wav_bytes(np.asarray(samples, np.float32), rate))
    out = tmp_path / "bench.json"
    result = run_cli("bench", built["bundle"], "--audio", recording, "--calls", "2",
                     "--variant", "fp32", "--threads", "1", "--json", out)
    assert result.returncode == 0, result.stderr
    assert "real-time factor" in result.stdout and "fp32 / int4" in result.stdout
    report = json.loads(out.read_text(encoding="utf-8"))
    assert (report["audio"], report["calls"]) == ("speech.wav", 2)
    assert report["audio_seconds"] == pytest.approx(SECONDS, abs=1e-3)
    manifest = manifest_file.load(built["bundle"])
    [row] = report["results"]  # the bundle ships WASM only
    encoder, decoder = manifest.session("encoder"), manifest.session("decoder")
    assert (row["ep"], row["ran_on"], row["variant"], row["decoder_variant"], row["error"]) == (
        "wasm", "wasm", "fp32", "int4", None)
    assert row["bytes"] == encoder.variant("fp32").bytes + decoder.variant("int4").bytes
    assert 0 < row["wire_bytes"] <= row["bytes"] and row["runtime_wire_bytes"] > 0
    assert row["load_ms"] > 0 and len(row["calls"]) == 2 and row["first_call"] == row["calls"][0]
    for call in row["calls"]:
        assert call["audio_seconds"] == pytest.approx(SECONDS, abs=1e-3)
        assert call["real_time_factor"] == pytest.approx(SECONDS * 1000 / call["total_ms"],
                                                         rel=1e-3)
        assert call["encoder_ms"] > 0 and call["decoder_steps"] > 4
    assert row["later_calls"]["total_ms"] == row["calls"][1]["total_ms"]
    refused = run_cli("bench", built["bundle"], "--profile")
    assert refused.returncode != 0 and "Traceback" not in refused.stderr
    assert "not for automatic-speech-recognition bundles" in refused.stderr
