"""audio-stream: samples in, a score per chunk and the segments scoring over the threshold out,
the model's state carried from chunk to chunk (bundler.tasks.audio, web/tasks/audio.mjs)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from bundler.errors import ConfigError
from bundler.tasks.kinds.spec import FLOATS, ModelIO, TaskKind, same_count

if TYPE_CHECKING:
    from bundler.bundle.modelio import TensorSpec
    from bundler.bundle.records import Task
    from bundler.console import Reporter
    from bundler.tasks.check import TaskComparison
    from bundler.tasks.spec import TaskSpec


def state_pairs(inputs: list[TensorSpec], outputs: list[TensorSpec]
                ) -> tuple[tuple[str, str], ...]:
    """Inputs fed back from an output of the same shape whose name extends the input's
    (state -> stateN, h0 -> h0_out) or the other way round."""
    pairs = []
    for spec in inputs:
        for out in outputs:
            names = (spec.name.lower().rstrip("0"), out.name.lower())
            related = names[1].startswith(names[0]) or names[0].startswith(names[1])
            if related and spec.shape == out.shape and spec.type == out.type:
                pairs.append((spec.name, out.name))
                break
    return tuple(pairs)


def _looks_like(inputs: list[TensorSpec], outputs: list[TensorSpec]) -> str | None:
    first = inputs[0]
    if state_pairs(inputs, outputs) and first.type in FLOATS and len(first.shape or ()) <= 2:
        return f"samples {first.name} and state carried between calls"
    return None


def _resolve(spec: TaskSpec, model: ModelIO) -> Task:
    from bundler.bundle.records import Task

    inputs, outputs, output = model.inputs, model.outputs, model.output
    names = {s.name for s in inputs}
    out_names = {s.name for s in outputs}
    state = spec.state or state_pairs(inputs, outputs)
    for name, out in state:
        if name not in names or out not in out_names:
            raise ConfigError(f"task setting 'state': {name}={out} names no input/output pair of"
                              " the model")
    carried = {name for name, _ in state}
    samples = next((s for s in inputs if s.name == spec.input), None) or next(
        (s for s in inputs if s.type in FLOATS and s.name not in carried), None)
    if samples is None:
        raise ConfigError(f"task {spec.kind}: no float input for the samples; give input=NAME")
    rate_input = next((s.name for s in inputs if s.name not in carried | {samples.name}
                       and s.type in ("int64", "int32") and len(s.shape or ()) <= 1), None)
    last = (samples.shape or (None,))[-1]
    context = spec.context_size
    chunk = (spec.chunk_size if "chunk_size" in spec.given or not isinstance(last, int)
             else last - context)
    if chunk < 1:
        raise ConfigError(f"task setting 'context_size': {context} leaves no room in input"
                          f" {samples.name!r} of {last} samples")
    if output in carried or output in {out for _, out in state}:
        output = next((s.name for s in outputs if s.name not in {o for _, o in state}), output)
    return Task(kind=spec.kind, input=samples.name, output=output,
                sample_rate=spec.sample_rate, chunk_size=chunk, context_size=context,
                state=dict(state),
                sample_rate_input=rate_input, score_threshold=spec.score_threshold
                if "score_threshold" in spec.given else 0.5)


def _compare(native: list[dict], browser: list[dict], result: TaskComparison,
             tolerance: float) -> None:
    if not same_count(native, browser, result, "chunks"):
        return
    result.worst_score_difference = max((abs(a["score"] - b["score"])
                                         for a, b in zip(native, browser, strict=True)),
                                        default=0.0)
    if result.worst_score_difference > tolerance:
        result.error = f"chunk scores differ by more than {tolerance}"


def _report(reporter: Reporter, source: Path, task: Task, result: dict[str, Any]) -> None:
    reporter.table(f"{source}: {len(result['chunks'])} chunks, segments scoring >="
                   f" {task.score_threshold}", ["start s", "end s"],
                   [[f"{s['start']:.3f}", f"{s['end']:.3f}"] for s in result["segments"]])


KIND = TaskKind(
    name="audio-stream",
    settings=("input", "output", "sample_rate", "chunk_size", "context_size", "state",
              "score_threshold"),
    media="audio",
    method="stream",
    answers="chunks",
    heading="Stream audio",
    web_module="audio.mjs",
    looks_like=_looks_like,
    resolve=_resolve,
    compare=_compare,
    report=_report,
    compared=("chunks", "worst score difference"),
)
