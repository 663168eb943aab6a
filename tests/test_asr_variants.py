"""Variants per session of a speech-recognition bundle (the suite's random Whisper): the plan of
each session (--session-quantize, the encoder kept fp32 unless named), and `--quantize auto`
judging every combination of the sessions' candidates on its transcripts of a recording given
as --validation (token agreement and word error rate against fp32's), the figures recorded being
those a native run of the shipped files gives."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from bundler.bundle import manifest as manifest_file
from bundler.bundle.options import BuildOptions, merge
from bundler.commands.build import build
from bundler.errors import ConfigError
from bundler.tasks.audio import read_wav
from bundler.tasks.logmel import spec_of
from bundler.tasks.samples import wav_bytes
from bundler.text import whisper
from bundler.text.quality import agreement
from bundler.text.transcripts import word_error_rate
from bundler.text.whisper_run import WhisperSessions, transcribe
from bundler.variants.budget import parse_budget
from bundler.variants.per_session import check_sessions
from bundler.variants.tools import graphs_of
from tests import speech_models
from tests.speech import speech

SPEECH = "automatic-speech-recognition"


def test_each_session_gets_its_plan() -> None:
    options = merge({}, {"quantize": "int8", "variants": ("fp32",)})
    # the encoder is sensitive to quantization: fp32 unless named; the decoder follows --quantize
    assert options.plan_of("encoder", SPEECH) == (("fp32",), "fp32")
    assert options.plan_of("decoder", SPEECH) == (("int8", "fp32"), "int8")
    assert options.plan_of("encoder", None) == (("int8", "fp32"), "int8")  # not a speech model
    named = merge({"session_quantize": {"encoder": "int8"}},
                  {"session_quantize": ["decoder=auto"]})
    assert named.session_quantize == {"encoder": "int8", "decoder": "auto"}  # merged by entry
    assert named.plan_of("encoder", SPEECH) == (("int8",), "int8")
    assert named.plan_of("decoder", SPEECH).auto
    with pytest.raises(ConfigError, match="--session-quantize: expected SESSION=KIND"):
        merge({}, {"session_quantize": ["decoder"]})
    with pytest.raises(ConfigError, match="session 'decoder': expected one of fp32"):
        merge({}, {"session_quantize": ["decoder=int3"]})
    with pytest.raises(ConfigError, match=r"no session 'dekoder' \(it has: encoder, decoder\)"):
        check_sessions({"dekoder": "int8"}, ["encoder", "decoder"])


def test_word_error_rate_counts_edits_over_the_reference_words() -> None:
    assert word_error_rate(["a b c d"], ["a b c d"]) == 0
    assert word_error_rate(["a b c d"], ["a x c"]) == 0.5  # one substitution, one deletion
    assert word_error_rate(["a b", "c d"], ["a b e", "c d"]) == 0.25  # an insertion, 4 words
    assert word_error_rate([""], ["a"]) == 1.0 and word_error_rate([""], [""]) == 0.0
    budget = parse_budget("tokens>=0.9,wer<=0.05")
    assert str(budget) == "tokens>=0.9,wer<=0.05"
    with pytest.raises(ConfigError, match="wer takes <="):
        parse_budget("wer>=0.1")


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Speech read by eSpeak NG, at its own rate: the check audio given as --validation."""
    samples, rate = speech(3.0)
    path = tmp_path_factory.mktemp("speech") / "speech.wav"
    path.write_bytes(wav_bytes(np.asarray(samples, np.float32), rate))
    return path


@pytest.fixture(scope="module")
def auto_built(tmp_path_factory: pytest.TempPathFactory, runtime_dist: Path,
               whisper_export: speech_models.SpeechExport, recording: Path) -> Path:
    output = tmp_path_factory.mktemp("asr-auto") / "bundle"
    build(whisper_export.folder, BuildOptions(
        output=output, runtime_dir=runtime_dist, execution_providers=("wasm",),
        quantize="auto", variants=("fp32", "int8"), session_quantize={"encoder": "auto"},
        validation=recording, verify=False))
    return output


def _transcript(bundle: Path, folder: Path, files: dict[str, str], audio: Path) -> list[int]:
    sessions = WhisperSessions(*(ort.InferenceSession(str(bundle / files[name]))
                                 for name in ("encoder", "decoder")))
    settings = whisper.settings_of(json.loads((folder / "generation_config.json").read_text()))
    spec = spec_of(json.loads((folder / "preprocessor_config.json").read_text()))
    samples, rate = read_wav(audio)
    _, chunks = transcribe(sessions, samples, rate, spec, settings)
    return [token for chunk in chunks for token in chunk.tokens]


def test_auto_judges_every_combination_on_its_transcripts(auto_built, whisper_export):
    bundle = manifest_file.load(auto_built)
    selection = bundle.selection
    assert selection is not None and selection.budget == "tokens>=0.9,wer<=0.05"
    assert [c.name for c in selection.candidates] == [
        f"encoder={e},decoder={d}" for e in ("fp32", "int8") for d in ("fp32", "int8")]
    for candidate in selection.candidates:
        assert candidate.accuracy is not None and candidate.accuracy.data == "validation"
        assert candidate.native_ms is not None and candidate.native_ms > 0
    fp32 = selection.candidates[0]
    assert fp32.within_budget and fp32.accuracy.tokens_agreement == 1.0
    assert fp32.accuracy.word_error_rate == 0.0
    chosen = [c for c in selection.candidates if c.chosen]
    assert [c.name for c in chosen] == [selection.chosen]
    assert chosen[0].within_budget
    # each session ships its variant of the chosen combination, as its default; no other file
    picked = dict(part.split("=") for part in selection.chosen.split(","))
    for session in bundle.sessions:
        assert [v.name for v in session.variants] == [picked[session.name]]
        assert session.default_variant == picked[session.name]
    shipped = {v.file.split("/")[1] for s in bundle.sessions for v in s.variants}
    assert {p.name for p in (auto_built / "models").glob("*.onnx")} == shipped


def test_the_recorded_agreement_is_the_native_runs(auto_built, whisper_export, recording):
    """The chosen combination's tokens_agreement, recomputed from the shipped files against
    the export's own fp32 files on the recording given as --validation."""
    bundle = manifest_file.load(auto_built)
    chosen = next(c for c in bundle.selection.candidates if c.chosen)
    folder = whisper_export.folder
    want = _transcript(folder, folder, {"encoder": "encoder_model.onnx",
                                        "decoder": "decoder_model_merged.onnx"}, recording)
    got = _transcript(auto_built, folder, {s.name: s.variants[0].file for s in bundle.sessions},
                      recording)
    assert len(want) > 4
    assert chosen.accuracy.tokens_agreement == pytest.approx(agreement([want], [got]), abs=1e-6)
    assert np.isfinite(chosen.accuracy.word_error_rate)


def test_bundle_run_takes_a_session(auto_built):
    """`bundle run --session decoder` runs that session's default on its tensors and compares
    them with its variant's recorded reference (every session has one now)."""
    from bundler.commands.run import run
    from bundler.errors import ModelError

    result = run(auto_built, session_name="decoder", as_json=True)
    assert "logits" in result["outputs"] and result["reference"]["matches"] is True
    with pytest.raises(ModelError, match=r"no session 'joiner' \(it has: encoder, decoder\)"):
        run(auto_built, session_name="joiner")
    with pytest.raises(ConfigError, match="--session runs one session on its tensors"):
        run(auto_built, session_name="decoder", audio=auto_built / "bundle.json")


def test_int4_quantizes_the_weights_a_merged_decoders_branch_holds(whisper_export, runtime_dist,
                                                                  tmp_path):
    """The cross-attention key and value projections, which only the branch without past
    computes and holds itself once optimised: 4-bit like the weights both branches share (they
    stayed float32, 4.7 MB of a Whisper-tiny-sized int4 decoder's 13.5 MB; transformers.js's q4
    quantizes them too). Only MatMuls of two activations stay float."""
    output = tmp_path / "bundle"
    build(whisper_export.folder, BuildOptions(
        output=output, runtime_dir=runtime_dist, execution_providers=("wasm",), quantize="int4",
        verify=False))
    (variant,) = manifest_file.load(output).session("decoder").variants
    model = onnx.load(str(output / variant.file))
    graphs = list(graphs_of(model.graph))
    floats = {tensor.name for graph in graphs for tensor in graph.initializer
              if tensor.data_type == onnx.TensorProto.FLOAT and len(tensor.dims) == 2}
    matmuls = [node for graph in graphs for node in graph.node if node.op_type == "MatMul"]
    assert matmuls and not [node.name for node in matmuls if node.input[1] in floats]
    # a decoder's int4 is the qdq form: a 4-bit MatMul reads its DequantizeLinear's output
    assert variant.settings.format == "qdq" and variant.settings.embeddings
    dequantized = {node.output[0] for graph in graphs for node in graph.node
                   if node.op_type == "DequantizeLinear"}
    assert variant.settings.matmuls_float32 == len(
        [node for node in matmuls if node.input[1] not in dequantized])


def test_recordings_as_validation_need_a_speech_bundle(recording, tmp_path):
    with pytest.raises(ConfigError, match=r"recordings \(\.wav\) measure a"
                                          " automatic-speech-recognition bundle"):
        build(None, BuildOptions(output=tmp_path / "out", validation=recording, verify=False))
    assert not (tmp_path / "out").exists()


def test_bundle_run_puts_models_split_for_static_hosts_back_together(whisper_export, runtime_dist,
                                                                     recording, tmp_path):
    """A model file over --max-file-size (25 MiB by default: a Whisper-tiny's encoder and
    decoder) ships as parts; `bundle run` joins them, for a session on its tensors and for the
    transcription (it said the model was missing), and so does `bundle inspect`."""
    from bundler.commands.run import run

    output = tmp_path / "bundle"
    build(whisper_export.folder, BuildOptions(
        output=output, runtime_dir=runtime_dist, execution_providers=("wasm",),
        max_file_size=300_000, verify=False))
    bundle = manifest_file.load(output)
    files = {session.name: session.default_for("wasm").file for session in bundle.sessions}
    parts = {entry.path: entry.parts for entry in bundle.files or []}
    assert all(not (output / file).exists() and parts[file] for file in files.values())
    assert run(output, session_name="decoder", as_json=True)["reference"]["matches"] is True
    from bundler.commands.inspect import inspect

    analysis = inspect(output, session="decoder", as_json=True).to_json()
    assert analysis["model"]["file"] == Path(files["decoder"]).name
    folder = whisper_export.folder
    want = _transcript(folder, folder, {"encoder": "encoder_model.onnx",
                                        "decoder": "decoder_model_merged.onnx"}, recording)
    transcripts = run(output, audio=recording, as_json=True)["transcripts"]
    assert transcripts[0]["tokens"] == want and len(want) > 4
