"""`bundle test` on a task bundle: the browser's classify()/detect()/stream()/embed()/tokens()
against the Python reference (bundler.tasks.pipeline, bundler.text.reference on native
onnxruntime) from the same files, to the final answers: the same labels, scores within
tolerance, boxes with IoU >= 0.99, embeddings within cosine 0.9999, entities with the same
offsets, the same count. Image files go to the page as they are (the
browser decodes them); audio goes as samples (so both sides resample the same samples); texts go
as a list (a JSON file of strings, or one text a line), tokenized on each side by its own
tokenizer."""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import functools
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort

from bundler.bundle.manifest import Manifest, Task
from bundler.bundle.modelio import cpu_session
from bundler.console import Reporter
from bundler.errors import ConfigError
from bundler.hosting.publish import assembled
from bundler.server.bundle_server import HARNESS_PATH, serve_directory
from bundler.tasks.audio import read_wav
from bundler.tasks.image import read_image
from bundler.tasks.kinds.automatic_speech_recognition import NAME as SPEECH_RECOGNITION
from bundler.tasks.kinds.registry import kind_of
from bundler.tasks.kinds.text_generation import CHECK_STEPS
from bundler.tasks.kinds.text_generation import NAME as TEXT_GENERATION
from bundler.tasks.kinds.token_classification import NAME as TOKEN_CLASSIFICATION
from bundler.tasks.pipeline import run_audio, run_image
from bundler.tasks.samples import picture, png_bytes, speech_like, wav_bytes
from bundler.text.agreement import native_generations
from bundler.text.entities import utf16_offsets
from bundler.text.reference import bundle_tokenizer, run_text
from bundler.text.samples import CHECK_PROMPTS, CHECK_TEXTS
from bundler.text.whisper_bundle import CASES, transcripts
from bundler.text.whisper_run import WhisperSessions
from bundler.variants.registry import is_quantized
from bundler.verify.browser import BrowserSettings, launch, playwright_session
from bundler.verify.harness import harness_call
from bundler.verify.reference import run_native
from bundler.verify.tolerance import Comparison, tolerance_for


def columns(kind: str) -> list[str]:
    """The task-check table's columns for a bundle of `kind` (TaskComparison.row's)."""
    counted, *measured = kind_of(kind).compared or ("answers", "worst difference")
    return ["task check", "variant", "ran on", "file", f"{counted} (native, browser)",
            *measured, "result"]


@dataclasses.dataclass
class TaskComparison:
    ep: str
    variant: str
    file: str
    native_count: int = 0
    browser_count: int = 0
    worst_score_difference: float = 0.0
    lowest_iou: float | None = None
    error: str | None = None
    # where the browser's greedy tokens part from native's at a near-tie of native's scores
    # (a speech window: kinds.automatic_speech_recognition): not a failure, said in the row
    ties: list[str] = dataclasses.field(default_factory=list)
    # the other sessions' variants that ran with it (a speech model's decoder), shown after it
    others: tuple[str, ...] = ()

    @property
    def passed(self) -> bool:
        return self.error is None

    def row(self, kind: str) -> list[str]:
        """A row of the table with columns(kind)."""
        iou = "-" if self.lowest_iou is None else f"{self.lowest_iou:.4f}"
        boxes = "lowest IoU" in (kind_of(kind).compared or ())
        return ["task", " / ".join((self.variant, *self.others)), self.ep, self.file,
                f"{self.native_count}, {self.browser_count}",
                f"{self.worst_score_difference:.3g}", *([iou] if boxes else []),
                ("pass" if self.passed else f"FAIL: {self.error}")
                + "".join(f"; {tie}" for tie in self.ties)]


@dataclasses.dataclass(frozen=True)
class TaskInput:
    name: str
    data: bytes  # the file's bytes

    @classmethod
    def made(cls, task: Task) -> TaskInput:
        if kind_of(task.kind).media == "text":
            texts = CHECK_PROMPTS if task.kind == TEXT_GENERATION else CHECK_TEXTS
            return cls("check-texts.json", json.dumps(texts, ensure_ascii=False).encode())
        if kind_of(task.kind).media == "audio":
            return cls("generated.wav", wav_bytes(speech_like(2.0, 22050), 22050))
        return cls("generated.png", png_bytes(picture(240, 320)))


def texts_of(item: TaskInput) -> list[str]:
    """A text input's texts: a JSON list of strings, else one text a line."""
    text = item.data.decode("utf-8", errors="replace")
    try:
        texts = json.loads(text)
    except ValueError:
        return [line for line in text.splitlines() if line.strip()]
    if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts) or not texts:
        raise ConfigError(f"{item.name}: expected a JSON list of strings")
    return texts


def _native_answers(model: Path, manifest: Manifest, inputs: Sequence[TaskInput],
                    folder: Path, directory: Path, steps: int,
                    config: Mapping[str, str] | None = None,
                    others: Mapping[str, tuple[Path, Mapping[str, str] | None]] | None = None,
                    spread: bool = False) -> tuple[list[Any], list[dict[str, Any]]]:
    """(the native answers, what the page is given) for each input; `config`: the variant's
    session config entries, so native opens it as bundle.mjs does; `others`: the other
    sessions' files and config entries (their defaults on the EP the browser runs); `spread`:
    a generation's (a transcript's) answers measure native's own spread on the teacher-forced
    steps (bundler.text.agreement)."""
    task = manifest.task
    assert task is not None
    kind = kind_of(task.kind)
    specs = manifest.session().inputs
    session = cpu_session(model, config=config)
    run = lambda feeds: run_native(session, feeds)  # noqa: E731
    # a session at the basic level: without the fused integer kernels
    basic = lambda path, entries: cpu_session(  # noqa: E731
        path, config=entries, level=ort.GraphOptimizationLevel.ORT_ENABLE_BASIC)
    found, items = [], []
    for item in inputs:
        path = folder / item.name
        path.write_bytes(item.data)
        if kind.name == TEXT_GENERATION:  # greedy tokens, teacher-forced logits
            tokenizer = bundle_tokenizer(directory, task, folder)
            answers, item_sent = native_generations(session, folder / "tokenizer", tokenizer,
                                                    texts_of(item), steps,
                                                    basic(model, config) if spread else None)
            found.append(answers)
            items.append(item_sent)
        elif kind.media == "text":
            tokenizer = bundle_tokenizer(directory, task, folder)
            texts = texts_of(item)
            answers = run_text(run, task, tokenizer, [spec.name for spec in specs], texts,
                               top_k=5)[kind.answers]
            if kind.name == TOKEN_CLASSIFICATION:  # the browser's offsets are UTF-16's
                answers = [utf16_offsets(text, found) for text, found in zip(texts, answers,
                                                                            strict=True)]
            found.append(answers)
            items.append({"texts": texts})
        elif kind.media == "audio":
            samples, rate = read_wav(path)
            sent = {"samples": base64.b64encode(samples.astype(np.float32).tobytes()).decode(),
                    "rate": rate}
            if kind.name == SPEECH_RECOGNITION:  # each case's transcript, window by window
                decoder, decoder_config = (others or {})["decoder"]  # the decoder's own config
                sessions = WhisperSessions(session, cpu_session(decoder, config=decoder_config))
                found.append(transcripts(directory, manifest, sessions, samples, rate,
                                         steps=True, basic=WhisperSessions(
                                             basic(model, config), basic(decoder, decoder_config))
                                         if spread else None))
                # per case, per window: the calls the browser runs teacher-forced
                sent["cases"] = list(CASES)
                sent["teacher"] = [[window["teacher"] for window in case["steps"]]
                                   for case in found[-1]]
            else:
                found.append(run_audio(run, task, specs, samples, rate)[kind.answers])
            items.append(sent)
        else:
            found.append(run_image(run, task, read_image(path), top_k=5)[kind.answers])
            items.append({"file": base64.b64encode(item.data).decode()})
    return found, items


def _tolerance(task: str, variant_kind: str, ep: str) -> float:
    """The compare's bound: scores' atol, or a generation's (a transcript's) teacher-forced
    logits' and a speech window's near-tie's fraction of the logit range (WebGPU on its
    accelerator row)."""
    if task in (TEXT_GENERATION, SPEECH_RECOGNITION):
        comparison: Comparison = ("generation-logits" if task == TEXT_GENERATION
                                  else "transcript-logits")
        bound = tolerance_for(comparison, variant_kind,
                              "webgpu" if ep == "webgpu" else "cpu").range_fraction
        assert bound is not None
        return bound
    return tolerance_for("task-scores", variant_kind).atol


PROGRESS = "progress: "  # web/dev/conformance.mjs's console lines of a long check's progress


def _progress(reporter: Reporter, message: Any) -> None:
    """A console message of the check's page: its progress lines said as they come (a speech
    check's windows, minutes each on WebGPU over SwiftShader)."""
    if message.text.startswith(PROGRESS):
        reporter.info(f"  {message.text[len(PROGRESS):]}")


def check_task(directory: Path, manifest: Manifest, inputs: Sequence[TaskInput],
               execution_providers: Sequence[str], settings: BrowserSettings,
               reporter: Reporter, scratch: Path, every_variant: bool = False,
               steps: int = CHECK_STEPS) -> list[TaskComparison]:
    """Each EP's default variant (or every variant) of the primary session, in Chromium and
    natively (the same variant's file; the other sessions' defaults on that EP, as load() opens
    them), on every input; a text-generation bundle for `steps` tokens."""
    task = manifest.task
    if task is None:
        raise ConfigError(f"{directory} was built without --task: --image/--audio need a task")
    kind = kind_of(task.kind)
    assert kind.compare is not None
    comparisons: list[TaskComparison] = []
    shipped = [ep for ep in execution_providers if ep in manifest.runtime.builds]
    with contextlib.ExitStack() as stack:
        base_url = stack.enter_context(serve_directory(directory))
        playwright = stack.enter_context(playwright_session())
        browser = stack.enter_context(launch(playwright, settings, webgpu="webgpu" in shipped))
        session = manifest.session()
        runs = [(ep, variant) for ep in shipped for variant in (
            session.variants if every_variant else [session.default_for(ep)])]
        for ep, variant in runs:
            # the graph `ep` opens (int4 format=per-ep: its own form there)
            model = stack.enter_context(assembled(directory, manifest, variant.graph_for(ep)))
            others = {other.name: (stack.enter_context(assembled(
                directory, manifest, other.default_for(ep).graph_for(ep))),
                other.default_for(ep).config_for("wasm")) for other in manifest.sessions[1:]}
            # a speech model's decoder decides the tokens: quantized when either session is
            kinds = [variant.kind, *(other.default_for(ep).kind for other in manifest.sessions[1:])]
            quantized = next((k for k in kinds if is_quantized(k)), None)
            names = tuple(other.default_for(ep).name for other in manifest.sessions[1:])
            with reporter.step(f"Task check on {ep} ({' / '.join((variant.name, *names))})"):
                # Native always runs as WASM does (its config: int4 qdq folded into float
                # weights); WebGPU runs qdq's DequantizeLinear + MatMul as they are, the same
                # arithmetic, where native's fused MatMulNBits differed by 1.8% of the range.
                # An EP's own graph (int4 format=per-ep's qdq form on WebGPU) is run so too.
                native, items = _native_answers(model, manifest, inputs, scratch, directory,
                                                steps, variant.config_for("wasm"), others,
                                                spread=quantized is not None)
                page = browser.new_page()
                page.set_default_timeout(settings.timeouts_ms["load"] + settings.timeouts_ms["run"])
                page.on("console", functools.partial(_progress, reporter))
                try:
                    page.goto(base_url + HARNESS_PATH.lstrip("/"))
                    got = page.evaluate(harness_call("conformance.mjs", "runTask"), {
                        "base": base_url, "method": kind.method, "items": items,
                        "options": {"executionProviders": [ep], "variant": variant.name,
                                    "ignoreVerification": True}})
                finally:
                    page.close()
            tolerance = _tolerance(kind.name, quantized or variant.kind, ep)
            for item, want, index in zip(inputs, native, range(len(inputs)), strict=True):
                result = TaskComparison(ep, variant.name, item.name, others=names)
                if "error" in got:
                    result.error = got["error"]
                else:
                    kind.compare(want, got["results"][index], result, tolerance)
                comparisons.append(result)
    return comparisons
