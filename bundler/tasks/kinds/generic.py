"""generic: no task; the app runs the model on the tensors it is given."""

from __future__ import annotations

from bundler.tasks.kinds.spec import TaskKind

KIND = TaskKind(name="generic", settings=())
