"""What `bundle build` does for a task: say which task the model looks like, and prepend the
image preprocessing to the model before it is prepared (so every variant has it)."""

from __future__ import annotations

from pathlib import Path

import onnx

from bundler.bundle.manifest import Task
from bundler.bundle.modelio import TensorSpec, is_large, read_model, save_model
from bundler.tasks.kinds.registry import GENERIC, kind_of
from bundler.tasks.resolve import likely_task
from bundler.tasks.spec import TaskSpec

TASK_MODEL = "task.onnx"


def task_hint(spec: TaskSpec, model: onnx.ModelProto) -> str | None:
    """A line for the user when the model looks like a task other than the one asked for."""
    guess = likely_task(model)
    if guess is None or guess[0] == spec.kind:
        return None
    kind, why = guess
    if spec.kind == GENERIC and kind_of(kind).media == "text":  # its tokenizer is in the folder
        return (f"hint: this looks like {kind} ({why}); build its export folder (model.onnx,"
                " config.json, tokenizer.json) to get the text API and demo (see"
                " docs/how-to/text-models.md)")
    if spec.kind == GENERIC:
        return (f"hint: this looks like {kind} ({why}); build with --task {kind} to get the task"
                " API and demo (see docs/how-to/task-apps.md)")
    return f"hint: the model looks like {kind} ({why}), not {spec.kind} as asked"


def shipped_inputs(inputs: tuple[TensorSpec, ...], task: Task | None) -> tuple[TensorSpec, ...]:
    """The model's inputs as shipped: an image task's image input becomes uint8 [1, H, W, 3]
    (what --sample, --calibration and --validation arrays must then hold)."""
    if task is None or kind_of(task.kind).media != "image":
        return inputs
    height, width = task.size or (0, 0)
    return tuple(TensorSpec(spec.name, "uint8", (1, height, width, 3)) if spec.name == task.input
                 else spec for spec in inputs)


def with_task_graph(source: Path, task: Task | None, work: Path) -> Path:
    """The model to prepare: `source`, or for a task with a graph of its own (an image task's
    preprocessing, text-generation's new key/value slices) a copy with it."""
    kind = kind_of(task.kind) if task is not None else None
    if task is None or kind is None or kind.preprocess is None \
            or (kind.preprocess_optional and is_large(source)):
        return source
    preprocess = kind.preprocess
    work.mkdir(parents=True, exist_ok=True)
    model = preprocess(read_model(source), task)
    target = work / TASK_MODEL
    save_model(model, target)
    return target
