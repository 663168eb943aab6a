"""`bundle build`: model -> static web app folder, written atomically.

A thin orchestrator of the stages in bundler.stages: the inputs are checked and the runtime
fetched first, before any folder is made; then the stages run in order into a temporary folder
beside the output (prepare -> variants -> choose -> publish the heavy files -> verify -> render
-> publish the rest), the manifest is assembled once from their results and written, and only a
complete build is moved into place.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import shutil
from pathlib import Path

from bundler.bundle import manifest as manifest_file
from bundler.bundle.edge import EdgeManifest
from bundler.bundle.layout import HEAVY_DIRS, MODELS_DIR, RUNTIME_DIR, WORK_DIR
from bundler.bundle.manifest import Manifest
from bundler.bundle.options import BuildOptions
from bundler.bundle.staging import check_output, move_into_place, staging_folder
from bundler.console import Reporter
from bundler.errors import VerificationFailed
from bundler.hosting.publish import HostingOptions, add_coi_worker
from bundler.site.pages import human_bytes, write_modules
from bundler.stages import choose, prepare, publish, render, variants, verify
from bundler.stages.assemble import assemble
from bundler.stages.combine import choose_combination
from bundler.text.build import ship_text


def build(
    model: Path | None = None,
    options: BuildOptions | None = None,
    *,
    force: bool = False,
    reporter: Reporter | None = None,
) -> Manifest | EdgeManifest:
    """Build the bundle and return its manifest (the content of bundle.json); with target edge,
    the edge folder's (edge.json, see bundler.edge.build)."""
    options = options or BuildOptions()
    reporter = reporter or Reporter()
    checked = prepare.check(model, options, reporter)
    options = checked.options  # with the task an export folder implies
    if options.target == "edge":
        from bundler.edge.build import build_edge

        return build_edge(checked.source, options, force=force, is_example=checked.is_example,
                          reporter=reporter)
    output = Path(options.output)
    check_output(output, checked.source, force)
    fetched = prepare.fetch(options, reporter)
    hosting = HostingOptions(options.max_file_size, options.hosts, options.coi_worker)
    with staging_folder(output) as staging:
        prepared = prepare.prepare(checked, fetched, staging, options, reporter)
        made = variants.make(checked, prepared, staging, options, reporter)
        checked = dataclasses.replace(checked, task=ship_text(checked.task, checked.text,
                                                              staging))
        manifest_of = functools.partial(assemble, checked, prepared, made, hosting)
        chosen = choose.every_variant(made)
        if made.transcripts is not None and any(s.plan.auto for s in made.sessions):
            chosen = choose_combination(staging, made, chosen, options,
                                        checked.task and checked.task.kind, reporter)
        elif made.primary.plan.auto:
            chosen = choose.choose_auto(staging, made, manifest_of(chosen), options,
                                        checked.user, reporter)
        heavy = publish.heavy(staging, hosting, reporter)
        verified = verify.verify(staging, manifest_of(chosen, files=heavy.files), options,
                                 reporter)
        # auto's default failing an EP's final check: the next of its ranking there, checked
        while (instead := choose.fall_back(staging, chosen,
                                           verified.failed_defaults(chosen.primary),
                                           reporter)) is not None:
            heavy = publish.again(staging, hosting, heavy, choose.gone(chosen, instead), reporter)
            chosen = instead
            verified = verify.verify(staging, manifest_of(chosen, files=heavy.files), options,
                                     reporter)
        shutil.rmtree(staging / WORK_DIR)
        render.render(staging, manifest_of(chosen, verification=verified.record,
                                           files=heavy.files), options.templates)
        published = publish.finish(staging, hosting, heavy)
        manifest = manifest_of(chosen, verification=verified.record, files=published.files)
        manifest_file.dump(staging, manifest)
        move_into_place(staging, output)
    _summarise(manifest, output, reporter, verification_wanted=options.verify)
    if options.strict and (failures := verify.strict_failures(verified.report,
                                                              manifest.verification)):
        raise VerificationFailed(f"--strict: {failures[0]}" + (
            f" (and {len(failures) - 1} more)" if len(failures) > 1 else "")
            + f"; the bundle is in {output}/")
    return manifest


def rerender(previous: Path, output: Path, templates: Path | None) -> Manifest:
    """A new build in `output` that is `previous` with its pages rendered again (for a change of
    the templates only): the models and runtime are linked, not rebuilt, nor compressed again."""
    old = manifest_file.load(previous)
    heavy = publish.Published(tuple(entry for entry in old.files or []
                                    if entry.path.startswith(HEAVY_DIRS)))
    hosting = HostingOptions.of(old.hosting)
    with staging_folder(output) as staging:
        for folder in (RUNTIME_DIR, MODELS_DIR):
            shutil.copytree(previous / folder, staging / folder, copy_function=_link_or_copy)
        add_coi_worker(staging, hosting)
        write_modules(staging, old.name, old.runtime.version)
        render.render(staging, dataclasses.replace(old, files=list(heavy.files)), templates)
        published = publish.finish(staging, hosting, heavy)
        manifest = dataclasses.replace(old, files=list(published.files), hosting=hosting.record())
        manifest_file.dump(staging, manifest)
        move_into_place(staging, output)
    return manifest


def _link_or_copy(source: str, target: str) -> None:
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def summary(manifest: Manifest) -> str:
    """One line about a build: what ships (per session, for a pipeline), what load() fetches by
    default per EP (each session's variant's bytes on the wire, gzip siblings where written,
    and the runtime's wasm), and what the model takes and gives."""
    named = len(manifest.sessions) > 1
    variants = "; ".join(
        (f"{session.name}: " if named else "") + ", ".join(
            f"{variant.name} {human_bytes(variant.bytes)}" for variant in session.variants)
        for session in manifest.sessions)
    inputs = ", ".join(spec.name for spec in manifest.session().inputs)
    outputs = ", ".join(spec.name for spec in manifest.session().outputs)
    line = (f"{manifest.name}: {variants}{_on_the_wire(manifest)}; inputs {inputs}"
            f" -> outputs {outputs}")
    if named:  # a pipeline: the inputs and outputs above are its primary session's
        line += "; sessions " + ", ".join(session.name for session in manifest.sessions)
    return line


def _on_the_wire(manifest: Manifest) -> str:
    """'; on the wire by default: wasm int4 1.1 MB + runtime 3.7 MB, …' (a pipeline's: each
    session's, 'wasm encoder fp32 28.9 MB + decoder int8 27.1 MB + runtime …'; '' without a
    files table)."""
    if manifest.files is None:
        return ""
    named = len(manifest.sessions) > 1
    parts = []
    for ep, build in manifest.runtime.builds.items():
        runtime = manifest.fetched_bytes(build.wasm)
        models = []
        for session in manifest.sessions:
            variant = session.default_for(ep)
            bytes_ = (manifest.wire_bytes(variant, ep) or 0) - runtime
            models.append(f"{session.name + ' ' if named else ''}{variant.name}"
                          f" {human_bytes(bytes_)}")
        parts.append(f"{ep} {' + '.join(models)} + runtime {human_bytes(runtime)}")
    return f"; on the wire by default: {', '.join(parts)}" if parts else ""


def _summarise(manifest: Manifest, output: Path, reporter: Reporter,
               verification_wanted: bool) -> None:
    verification = manifest.verification
    if verification.status == "not_done" and verification_wanted:
        reporter.warn(f"not verified in the browser: {verification.reason}"
                      f" ({verification.hint})")
    elif verification.status == "failed":
        for variant, results in (verification.results or {}).items():
            for ep, entry in results.items():
                if not entry.passed:
                    why = entry.error or (f"worst abs error {entry.max_abs_error}"
                                          if entry.max_abs_error is not None else
                                          "NaN or infinity where native onnxruntime differs")
                    reporter.warn(f"{variant} on {ep} failed browser verification ({why});"
                                  " load() skips it unless told ignoreVerification: true")
        for problem in verification.problems or []:
            reporter.warn(problem)
    reporter.info(f"Built {output}/ ({summary(manifest)})")
