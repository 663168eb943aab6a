"""The task kinds by name: adding a kind is adding its module here (see spec.py) and its entry
in web/tasks/index.mjs's KINDS table."""

from __future__ import annotations

from bundler.tasks.kinds import (
    audio_stream,
    automatic_speech_recognition,
    feature_extraction,
    generic,
    image_classification,
    object_detection,
    text_classification,
    text_generation,
    token_classification,
)
from bundler.tasks.kinds.spec import TaskKind

# In the order of `--task`'s choices.
KINDS: dict[str, TaskKind] = {kind.name: kind for kind in (
    generic.KIND, image_classification.KIND, object_detection.KIND, audio_stream.KIND,
    feature_extraction.KIND, text_classification.KIND, token_classification.KIND,
    text_generation.KIND,
    automatic_speech_recognition.KIND)}
TASK_KINDS = tuple(KINDS)
GENERIC = generic.KIND.name


def kind_of(name: str) -> TaskKind:
    """The kind bundle.json's task.kind (or a checked --task) names."""
    return KINDS[name]


def kinds_fed(media: str) -> tuple[TaskKind, ...]:
    """The kinds fed `media` ("image", "audio" or "text")."""
    return tuple(kind for kind in KINDS.values() if kind.media == media)
