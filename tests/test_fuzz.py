"""Property-based tests (hypothesis) of what users type and give: bundle.toml values, --dim
texts and sample .npz files. Whatever comes in, the answer is a checked value or a ConfigError
(one clear line), never another exception."""

from __future__ import annotations

import string
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from bundler.bundle.modelio import NUMPY_TYPES, TensorSpec
from bundler.bundle.options import OPTIONS, flag_of, load_config, parse_dims, validate
from bundler.errors import ConfigError
from bundler.verify.samples import load_samples

EXAMPLES = settings(max_examples=200, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])

# What a TOML file can hold: scalars, dates, arrays and tables of them.
long_paths = st.text("ab/.", min_size=250, max_size=600)  # past the OS's name limit
toml_scalars = (st.text(max_size=40) | long_paths | st.integers() | st.floats(allow_nan=True)
                | st.booleans() | st.datetimes() | st.dates() | st.times())
toml_values = st.recursive(
    toml_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner,
                                                                max_size=4),
    max_leaves=10,
)
keys = st.sampled_from(sorted(OPTIONS)) | st.text(max_size=12)


@EXAMPLES
@given(values=st.dictionaries(keys, toml_values, max_size=5), from_file=st.booleans())
def test_validate_gives_values_or_config_error(tmp_path, values, from_file):
    try:
        checked = validate(values, tmp_path, "bundle.toml" if from_file else None)
    except ConfigError as error:
        assert error.message and "\n" not in error.message
    else:
        assert set(checked) == set(values) <= set(OPTIONS)


@EXAMPLES
@given(text=st.text(max_size=200))
def test_any_config_text_loads_or_is_a_config_error(tmp_path, text):
    path = tmp_path / "bundle.toml"
    path.write_text(text, encoding="utf-8")
    try:
        load_config(path)
    except ConfigError as error:
        assert str(path) in error.message


dim_texts = st.text(alphabet=string.ascii_letters + string.digits + ":=_- -\u00e9\n", max_size=16)


@EXAMPLES
@given(texts=st.lists(dim_texts | st.text(max_size=16), max_size=4))
def test_parse_dims_gives_sizes_or_a_value_error(texts):
    try:
        dims = parse_dims(texts)
    except ValueError as error:
        assert "expected NAME=VALUE" in str(error) or "AXIS" in str(error)
    else:
        assert all(isinstance(size, int) and size >= 0 for size in dims.values())
        assert len(dims) <= len(texts)


@EXAMPLES
@given(texts=st.lists(dim_texts, max_size=4))
def test_dims_flag_gives_sizes_or_a_config_error(texts):
    try:
        validate({"dims": texts}, Path.cwd(), spelling=flag_of)
    except ConfigError as error:
        assert error.message.startswith("--dim: ")


INPUTS = [TensorSpec("x", "float32", ("batch", 4)), TensorSpec("ids", "int64", ("batch", 3)),
          TensorSpec("flag", "bool", ()), TensorSpec("free", "float32", None)]
dtypes = st.sampled_from([np.float32, np.float64, np.float16, np.int64, np.int32, np.uint8,
                          np.bool_, np.complex64, np.dtype("U3"), np.dtype("S2")])
arrays = dtypes.flatmap(lambda dtype: hnp.arrays(dtype, hnp.array_shapes(min_dims=0, max_dims=4,
                                                                          max_side=5)))


@EXAMPLES
@given(data=st.dictionaries(st.sampled_from(["x", "ids", "flag", "free", "other"]), arrays,
                            max_size=5))
def test_sample_files_give_fitting_feeds_or_a_config_error(tmp_path, data):
    path = tmp_path / "samples.npz"
    np.savez(path, **data)
    try:
        samples = load_samples(path, INPUTS, "--calibration")
    except ConfigError as error:
        assert error.message.startswith(f"--calibration {path}")
        return
    assert samples
    for sample in samples:
        assert set(sample) == {spec.name for spec in INPUTS}
        for spec in INPUTS:
            value = sample[spec.name]
            assert value.dtype == NUMPY_TYPES[spec.type]
            if spec.shape is not None:
                assert len(value.shape) == len(spec.shape)
                assert all(isinstance(d, str) or d == n for d, n in zip(spec.shape, value.shape,
                                                                   strict=True))


def test_a_file_that_is_not_npz_is_a_config_error(tmp_path):
    path = tmp_path / "samples.npz"
    path.write_bytes(b"PK\x03\x04 not really a zip")
    with pytest.raises(ConfigError, match="cannot read it as .npz"):
        load_samples(path, INPUTS, "--calibration")


