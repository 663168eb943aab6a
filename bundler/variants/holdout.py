"""`bundle test --validation data.npz`: the shipped variant's agreement with fp32 on the user's
own inputs, after the build, judged by the same bounds `auto` judged its candidates by
(bundler.variants.budget: top-1 by its 95 % Wilson lower bound, cosine and normalised error by a
quantile over samples; a task bundle's answers decoded, bundler.variants.decoded).

fp32 is the bundle's own fp32 variant where it ships one; where `auto` dropped it, the original
model given with --original (with the task's preprocessing graph added, as the build adds it).
"""

from __future__ import annotations

import contextlib
import dataclasses
import tempfile
from pathlib import Path

from bundler.bundle import manifest as manifest_file
from bundler.bundle.folder import bundled_model, native_model
from bundler.errors import ConfigError
from bundler.tasks.build import with_task_graph
from bundler.text.reference import bundle_tokenizer
from bundler.text.validation import TEXT_KINDS, check_text_task, is_text_file, text_feeds
from bundler.variants.budget import Budget, default_budget, parse_budget
from bundler.variants.decoded import decoder
from bundler.variants.default import named_defaults
from bundler.variants.make import answers
from bundler.variants.metrics import Feeds, Metrics, measure
from bundler.verify.samples import load_samples

COLUMNS = ("variant", "against", "measured on (n)", "top1", "top1 95% lower bound",
           "cosine (p5)", "mean_rel (p95)", "task answers (95% lower)", "budget")


@dataclasses.dataclass(frozen=True)
class HeldOut:
    """One shipped default variant measured against fp32 on the user's validation inputs."""

    variant: str
    against: str  # "fp32 (shipped)" or the original model's file name
    metrics: Metrics
    budget: Budget

    @property
    def failures(self) -> list[str]:
        return self.budget.failures(self.metrics, exact=self.variant == "fp32")

    def row(self) -> list[str]:
        def judged(key: str, estimate: bool = False) -> str:
            n, point, bound = self.metrics.judged(key)
            value = point if estimate else bound
            return "-" if value is None else f"{value:.4g}"

        return [self.variant, self.against, f"validation ({len(self.metrics.per_sample)})",
                judged("top1", estimate=True), judged("top1"), judged("cosine"),
                judged("mean_rel"), answers(self.metrics.bounds()),
                "; ".join(self.failures) or f"within ({self.budget})"]


def check_held_out(directory: Path, validation: Path, original: Path | None) -> list[HeldOut]:
    """Measure each default variant of the bundle in `directory` against fp32 on `validation`,
    natively, and judge it by the bundle's budget (auto's, else the default one)."""
    manifest = manifest_file.load(directory)
    feeds = (_texts(directory, validation, manifest) if is_text_file(validation)
             else load_samples(validation, manifest.session().inputs, "--validation"))
    budget = (parse_budget(manifest.selection.budget) if manifest.selection
              else default_budget(manifest.task.kind if manifest.task else None))
    with tempfile.TemporaryDirectory(prefix="bundle-validation-") as scratch, \
            contextlib.ExitStack() as stack:
        # a model split into parts for static hosts, put back together while it is measured
        shipped = lambda name: stack.enter_context(  # noqa: E731
            native_model(directory, manifest, bundled_model(directory, name)[2]))
        if any(variant.name == "fp32" for variant in manifest.session().variants):
            reference, against = shipped("fp32"), "fp32 (shipped)"
        elif original is not None:
            if not original.is_file():
                raise ConfigError(f"--original {original}: no such file")
            reference = with_task_graph(original, manifest.task, Path(scratch))
            against = original.name
        else:
            raise ConfigError(f"--validation: {directory} ships no fp32 variant to compare with;"
                              " pass --original MODEL.onnx, the model it was built from")
        return [HeldOut(name, against, dataclasses.replace(
            measure(reference, shipped(name), feeds, decoder(manifest.task)),
            measured_on="validation"), budget)
            for name in named_defaults(manifest.session().default_variant)]


def _texts(directory: Path, validation: Path, manifest: manifest_file.Manifest) -> Feeds:
    """A text bundle's validation texts, tokenized by its own shipped tokenizer."""
    check_text_task(validation, manifest.task, kinds=TEXT_KINDS)
    assert manifest.task is not None
    with tempfile.TemporaryDirectory(prefix="bundle-validation-") as scratch:
        tokenizer = bundle_tokenizer(directory, manifest.task, Path(scratch))
    return text_feeds(validation, manifest.task, tokenizer,
                      [spec.name for spec in manifest.session().inputs])
