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
from bundler.tasks.kinds.spec import (
    FLOATS,
    ModelIO,
    TaskKind,
    close_logits,
    same_count,
    same_tokens,
)

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
    """Per transcript, every 30 s window's teacher-forced logits (the browser's decoder fed
    native's tokens over its own encoding: native's "steps", see
    bundler.text.whisper_bundle.window_steps) within `tolerance` times each step's logit range
    of native's, plus native's own spread where measured (a quantized combination's: the worst
    of its transcripts'); `worst_score_difference` is the worst such ratio. Then the same token
    ids in every window, and merged. Where a window's tokens part from native's at a near-tie
    (the browser's token scored within `tolerance` times the step's logit range of native's own
    by native), the window is a tie, noted in `result.ties`, not a failure: the browser's
    logits differ from native's by float noise (quantized: by rounding), and two tokens that
    close can go either way. The rest of that window, and the merged tokens, cannot be compared
    then."""
    if not same_count(native, browser, result, "transcripts"):
        return
    spread = max((float(want.get("spread", 0.0)) for want in native), default=0.0)
    for index, (want, got) in enumerate(zip(native, browser, strict=True)):
        steps, logits = want["steps"], got["logits"]
        if len(steps) != len(logits):
            result.error = (f"transcript {index}: teacher-forced logits of {len(logits)} windows"
                            f" for native's {len(steps)}")
            return
        for number, (probed, rows) in enumerate(zip(steps, logits, strict=True)):
            if not close_logits(probed["raw"], probed["range"], rows, result, tolerance, spread,
                                f"transcript {index} window {number}"):
                return
    for index, (want, got) in enumerate(zip(native, browser, strict=True)):
        wanted, windows = want["windows"], got["windows"]
        if len(wanted) != len(windows):
            result.error = (f"transcript {index}: {len(windows)} windows for native's"
                            f" {len(wanted)}")
            return
        tied = False
        for number, (ours, theirs) in enumerate(zip(wanted, windows, strict=True)):
            what = f"transcript {index} window {number}"
            tie = _tie(list(ours), list(theirs), want["steps"][number], tolerance)
            if tie is not None:
                result.ties.append(f"{what}: {tie}")
                tied = True
            elif not same_tokens(list(ours), list(theirs), result, what):
                return
        if not tied and not same_tokens(list(want["tokens"]), list(got["tokens"]), result,
                                        f"transcript {index}"):
            return


def _tie(wanted: list[int], tokens: list[int], steps: dict[str, list],
         tolerance: float) -> str | None:
    """Where `tokens` part from `wanted` at a near-tie of native's scores (`steps`): the line
    saying so; None when they agree, or part elsewhere (a failure)."""
    if wanted == tokens:
        return None
    at = next((i for i, (a, b) in enumerate(zip(wanted, tokens, strict=False)) if a != b),
              min(len(wanted), len(tokens)))
    if at >= len(steps["at"]) or at >= len(tokens):  # the browser's window ended first
        return None
    scores = dict(zip(steps["at"][at], steps["logits"][at], strict=True))
    chosen, theirs = steps["at"][at][0], tokens[at]
    if theirs not in scores:  # below native's top PROBES: not close
        return None
    gap = (scores[chosen] - scores[theirs]) / max(steps["range"][at], 1e-12)
    if not gap <= tolerance:  # NaN too
        return None
    return (f"a near-tie at step {at}: native's scores of its {chosen} and the browser's"
            f" {theirs} differ by {gap:.2g} of the logit range (tolerance {tolerance:g}); the"
            " rest of the window is not compared")


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
    compared=("transcripts", "worst logit difference / range"),
)
