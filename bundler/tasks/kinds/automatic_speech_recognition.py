"""automatic-speech-recognition: an encoder-decoder speech model (a Whisper-style optimum export,
`--task automatic-speech-recognition-with-past`: encoder_model.onnx + decoder_model_merged.onnx)
built from its export folder into two sessions, `encoder` (the primary one, which the task record
describes) and `decoder`. Audio in, tokens and text out: model.transcribe() (web/text/
transcribe.mjs over the decoding spec web/text/whisper.mjs); its native twin is
bundler/text/whisper_run.py, whose transcript's tokens the browser's must equal."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from bundler.errors import ConfigError
from bundler.tasks.kinds.spec import FLOATS, ModelIO, TaskKind, same_count, same_tokens

if TYPE_CHECKING:
    from bundler.bundle.modelio import TensorSpec
    from bundler.bundle.records import Task
    from bundler.console import Reporter
    from bundler.tasks.check import TaskComparison
    from bundler.tasks.spec import TaskSpec

NAME = "automatic-speech-recognition"
FEATURES, HIDDEN = "input_features", "last_hidden_state"
RATE = 16000  # what the log-mel front end takes; any other rate is resampled to it


def _looks_like(inputs: list[TensorSpec], outputs: list[TensorSpec]) -> str | None:
    features = next((s for s in inputs if s.name == FEATURES and s.type in FLOATS
                     and len(s.shape or ()) == 3), None)
    if features is not None and any(s.name == HIDDEN for s in outputs):
        return f"log-mel {FEATURES} in, {HIDDEN} out (a speech encoder)"
    return None


def _resolve(spec: TaskSpec, model: ModelIO) -> Task:
    from bundler.bundle.records import Task

    names = [s.name for s in model.inputs]
    outputs = [s.name for s in model.outputs]
    if FEATURES not in names or HIDDEN not in outputs:
        raise ConfigError(f"task {NAME}: the model is not a speech encoder (it takes"
                          f" {', '.join(names)}; gives {', '.join(outputs)}): build the export"
                          " folder of optimum-cli export onnx --task"
                          " automatic-speech-recognition-with-past")
    return Task(kind=NAME, input=FEATURES, output=HIDDEN, sample_rate=RATE,
                max_length=spec.max_length)


def compare_transcripts(native: list[dict], browser: list[dict], result: TaskComparison,
                        tolerance: float) -> None:
    """Per transcript, the same token ids in every 30 s window, then merged (`tolerance` does
    not apply: greedy tokens agree or not)."""
    if not same_count(native, browser, result, "transcripts"):
        return
    for index, (want, got) in enumerate(zip(native, browser, strict=True)):
        wanted, windows = want.get("windows", []), got.get("windows", [])
        if len(wanted) != len(windows):
            result.error = (f"transcript {index}: {len(windows)} windows for native's"
                            f" {len(wanted)}")
            return
        for number, (ours, theirs) in enumerate(zip(wanted, windows, strict=True)):
            if not same_tokens(list(ours), list(theirs), result,
                               f"transcript {index} window {number}"):
                return
        if not same_tokens(list(want["tokens"]), list(got["tokens"]), result,
                           f"transcript {index}"):
            return


def report_transcripts(reporter: Reporter, source: Path, task: Task,
                       result: dict[str, Any]) -> None:
    """A row per transcript (without and with timestamps): its token ids and text, and a row
    per timed segment."""
    rows = []
    for item in result["transcripts"]:
        timed = bool(item.get("options", {}).get("timestamps"))
        rows.append(["yes" if timed else "no", "", " ".join(map(str, item["tokens"])),
                     item.get("text", "")])
        rows += [["", f"{s['start']} s - {s['end']} s", "", s["text"]]
                 for s in item.get("segments", [])]
    reporter.table(f"{source}: transcript", ["timestamps", "segment", "token ids", "text"],
                   rows)


KIND = TaskKind(
    name=NAME,
    settings=("max_length",),
    media="audio",
    method="transcribe",
    answers="transcripts",
    heading="Transcribe speech",
    web_module="text.mjs",
    looks_like=_looks_like,
    resolve=_resolve,
    compare=compare_transcripts,
    report=report_transcripts,
)
