"""web/tasks/logmel.mjs in a Chromium page: Whisper's log-mel features of speech read aloud by
eSpeak NG at 22,050 Hz (resampled in the page) within 1e-4 of the Python spec's."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from bundler.tasks.logmel import log_mel, spec_of
from tests.speech import speech

pytestmark = pytest.mark.browser

WEB = Path(__file__).resolve().parent.parent / "web"

IN_PAGE = """async ({ base, rate, config }) => {
  const { logMel, logMelSpec } = await import(base + 'tasks/logmel.mjs');
  const bytes = await (await fetch(base + 'speech.f32')).arrayBuffer();
  const features = logMel(new Float32Array(bytes), rate, logMelSpec(config));
  return Array.from(features);
}"""


def test_logmel_runs_in_chromium_as_in_python(tmp_path, plain_browser, open_bundle):
    samples, rate = speech(12.0)
    (tmp_path / "tasks").mkdir()
    for name in ("logmel.mjs", "audio.mjs"):  # the module and the resampler it imports
        shutil.copy(WEB / "tasks" / name, tmp_path / "tasks" / name)
    shutil.copy(WEB / "bundle.core.mjs", tmp_path)  # audio.mjs's errors (BundleError)
    (tmp_path / "index.html").write_text("<!doctype html><title>log-mel</title>\n",
                                         encoding="utf-8")
    (tmp_path / "speech.f32").write_bytes(np.asarray(samples, np.float32).tobytes())
    config = {"feature_size": 128}
    with open_bundle(plain_browser, tmp_path, "index.html") as page:
        got = page.evaluate(IN_PAGE, {"base": page.base_url, "rate": rate, "config": config})
    want = log_mel(samples, rate, spec_of(config))
    got = np.array(got, np.float32).reshape(want.shape)
    assert np.abs(got - want).max() < 1e-4 and np.ptp(want) > 1.0
