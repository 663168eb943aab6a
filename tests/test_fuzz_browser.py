"""Fuzzing `model.run()` in headless Chromium (hypothesis): feeds with wrong names, missing or
extra inputs, wrong shapes and types, NaN and infinities, empty tensors, huge dims and indices out
of range. Every call ends within a few seconds in a rejection with a message, or in outputs that
match native onnxruntime; the page never crashes. The example count keeps it to about 30 s."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bundler.bundle.modelio import NUMPY_TYPES
from bundler.verify.reference import run_native
from tests import models

pytestmark = pytest.mark.browser

EXAMPLES = 300
CALL_TIMEOUT_MS = 10_000
# WASM and native onnxruntime differ by float rounding of tanh and sums only.
ATOL, RTOL = 1e-4, 1e-4

LOAD = """async (url) => {
  const { load } = await import(url);
  window.fuzzModel = await load({ executionProviders: ['wasm'] });
  return window.fuzzModel.inputs;
}"""

RUN = """async ({ feeds, ms }) => {
  const hang = new Promise((resolve) => setTimeout(() => resolve({ hang: true }), ms));
  const call = Promise.resolve().then(() => window.fuzzModel.run(feeds)).then(
    (out) => ({ ok: Object.fromEntries(Object.entries(out).map(
      ([name, t]) => [name, { dims: t.dims, data: Array.from(t.data, Number) }])) }),
    (error) => ({ error: String(error && error.message || error) }));
  return Promise.race([call, hang]);
}"""

floats = st.floats(width=32, allow_nan=True, allow_infinity=True)
junk = st.none() | st.booleans() | st.text(max_size=5) | st.integers(-3, 3) | st.lists(
    st.integers(-2, 2) | st.text(max_size=2), max_size=3)
huge = st.sampled_from([2**31, 10**9, 2**53, 2**64])


@st.composite
def feeds(draw: st.DrawFn) -> tuple[dict[str, Any], bool]:
    """Feeds for multi_io, and whether they were changed from valid ones."""
    batch = draw(st.integers(0, 3))
    value: dict[str, Any] = {
        "x": {"dims": [batch, 4], "data": draw(st.lists(floats, min_size=batch * 4,
                                                         max_size=batch * 4))},
        "ids": {"type": "int64", "dims": [batch, 3],
                "data": draw(st.lists(st.integers(0, 7), min_size=batch * 3,
                                      max_size=batch * 3))},
        "mask": {"dims": [batch, 3], "data": draw(st.lists(st.integers(-9, 9),
                                                           min_size=batch * 3,
                                                           max_size=batch * 3))},
    }
    changes = draw(st.lists(st.sampled_from(MUTATIONS), max_size=2))
    for change in changes:
        name = draw(st.sampled_from(sorted(value) or ["x"]))
        change(draw, value, name)
    return value, bool(changes)


def _rename(draw, value, name):
    if name in value:
        value[name + draw(st.sampled_from(["_", "s", "X"]))] = value.pop(name)


def _drop(draw, value, name):
    value.pop(name, None)


def _dims(draw, value, name):
    if isinstance(value.get(name), dict):
        value[name]["dims"] = draw(st.lists(st.integers(-2, 5) | huge | st.floats(0, 3),
                                            max_size=4))


def _type(draw, value, name):
    if isinstance(value.get(name), dict):
        value[name]["type"] = draw(st.sampled_from(["float32", "float64", "int32", "int64",
                                                    "int8", "bool", "string", "nope"]))


def _data(draw, value, name):
    if isinstance(value.get(name), dict):
        value[name]["data"] = draw(junk)


def _whole(draw, value, name):
    value[name] = draw(junk)


def _ids_out_of_range(draw, value, name):
    ids = value.get("ids")
    if isinstance(ids, dict) and isinstance(ids.get("data"), list) and ids["data"]:
        ids["data"][0] = draw(st.integers(-(2**40), -1) | st.integers(8, 2**40))


MUTATIONS = [_rename, _drop, _dims, _type, _data, _whole, _ids_out_of_range]


def _native(model, manifest: dict, feed: dict[str, Any]) -> dict[str, np.ndarray] | Exception:
    try:
        arrays = {spec["name"]: np.asarray(feed[spec["name"]]["data"],
                                           NUMPY_TYPES[spec["type"]]).reshape(
                                               feed[spec["name"]]["dims"])
                  for spec in manifest["sessions"][0]["inputs"]}
        return run_native(model, arrays)
    except Exception as error:  # noqa: BLE001 - any refusal, compared with the browser's
        return error


def test_run_rejects_clearly_or_answers_correctly(build_bundle, tmp_path, plain_browser,
                                                   open_bundle):
    directory, manifest = build_bundle(models.multi_io(tmp_path / "model"))
    model = directory / manifest["sessions"][0]["variants"][0]["file"]
    crashes: list[str] = []
    with open_bundle(plain_browser, directory) as page:
        page.page.on("crash", lambda page: crashes.append("crashed"))
        page.evaluate(LOAD, page.base_url + "bundle.mjs")

        @settings(max_examples=EXAMPLES, deadline=None, database=None,
                  suppress_health_check=list(HealthCheck))
        @given(case=feeds())
        def check(case: tuple[dict[str, Any], bool]) -> None:
            feed, changed = case
            result = page.evaluate(RUN, {"feeds": feed, "ms": CALL_TIMEOUT_MS})
            assert not result.get("hang"), f"run() did not settle in {CALL_TIMEOUT_MS} ms"
            native = _native(model, manifest, feed)
            if "error" in result:
                assert result["error"].strip(), feed
                # Valid feeds the native runtime accepts must be answered, not refused.
                assert changed or isinstance(native, Exception), (feed, result)
                return
            assert not isinstance(native, Exception), (feed, native, result)
            for name, expected in native.items():
                got = result["ok"][name]
                assert got["dims"] == list(expected.shape)
                np.testing.assert_allclose(np.asarray(got["data"], np.float64),
                                           expected.ravel().astype(np.float64),
                                           atol=ATOL, rtol=RTOL, equal_nan=True)

        check()
        after = page.evaluate(RUN, {"feeds": {
            "x": {"dims": [1, 4], "data": [0.1, 0.2, 0.3, 0.4]},
            "ids": {"type": "int64", "dims": [1, 3], "data": [1, 2, 3]},
            "mask": {"dims": [1, 3], "data": [1, 1, 0]}}, "ms": CALL_TIMEOUT_MS})
    assert crashes == []
    assert after["ok"]["count"]["data"] == [2]
