"""The manifest (bundle.json's content) assembled from the stages' results: once at the end of a
build, and for a stage that needs the bundle as it stands (the browser check, auto's timing)."""

from __future__ import annotations

from collections.abc import Sequence

from bundler import __version__
from bundler.bundle.manifest import (
    TOOL_NAME,
    FileEntry,
    Manifest,
    Source,
    Tool,
    Verification,
)
from bundler.bundle.modelio import model_bytes
from bundler.hosting.publish import HostingOptions
from bundler.stages.choose import Chosen
from bundler.stages.prepare import Checked, Prepared
from bundler.stages.variants import Made
from bundler.stages.verify import pending


def assemble(checked: Checked, prepared: Prepared, made: Made, hosting: HostingOptions,
             chosen: Chosen, *, verification: Verification | None = None,
             files: Sequence[FileEntry] | None = None) -> Manifest:
    """The manifest of these results; `verification` None: the check has not run yet, `files`
    None: nothing is published yet."""
    return Manifest(
        name=checked.name,
        tool=Tool(TOOL_NAME, __version__),
        runtime=prepared.runtime,
        sessions=chosen.sessions,
        source=Source(checked.source.name, model_bytes(checked.source)),
        optimization=made.optimization,
        # and each kind a session could not be made in, with why
        notes=[*prepared.notes, *(note for session in made.sessions for note in session.skipped),
               *chosen.notes],
        verification=verification or pending(),
        selection=chosen.selection,
        hosting=hosting.record(),
        files=None if files is None else list(files),
        task=checked.task,
        workload=made.workload,
    )
