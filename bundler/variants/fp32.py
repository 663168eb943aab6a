"""fp32: the optimised model itself, as one self-contained file."""

from __future__ import annotations

from bundler.bundle.modelio import copy_model
from bundler.bundle.records import Fp32Settings
from bundler.variants.spec import Job, KindSpec


def make(job: Job) -> None:
    copy_model(job.src, job.dst)
    job.result.settings = Fp32Settings(weights="float32")


KIND = KindSpec(
    name="fp32",
    keeps_float="everything",
    needs_calibration=False,
    quantized=False,
    advice="check that the file is readable",
    make=make,
)
