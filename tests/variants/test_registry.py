"""The registry: every kind by name, make_variant's checks and errors, determinism."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import bundler.variants.int8 as int8_module
from bundler.errors import ConfigError, QuantizeError
from bundler.variants.kinds import VARIANT_KINDS, module_name
from bundler.variants.registry import kind_spec, make_variant
from tests.variants.helpers import feeds


@pytest.mark.parametrize("kind", VARIANT_KINDS)
def test_every_kind_is_the_module_of_its_name(kind: str) -> None:
    spec = kind_spec(kind)
    assert spec.name == kind
    assert spec.make.__module__ == f"bundler.variants.{module_name(kind)}"
    assert spec.keeps_float and spec.advice
    assert spec.needs_calibration is (kind == "int8-static")


@pytest.mark.parametrize("kind", VARIANT_KINDS)
def test_variants_are_deterministic(optimized: dict[str, Path], tmp_path: Path, kind) -> None:
    name = "cnn" if kind != "int4" else "transformer"
    first, second = tmp_path / "a" / "model.onnx", tmp_path / "b" / "model.onnx"
    one = make_variant(kind, optimized[name], first, calibration=feeds(name))
    two = make_variant(kind, optimized[name], second, calibration=feeds(name))
    data = first.read_bytes()
    assert data == second.read_bytes()
    assert one.settings == two.settings and one.notes == two.notes
    json.dumps(one.to_json())
    assert b"ort.quant" not in data and b"bundler-" not in data and b"/tmp" not in data


def test_library_errors_become_one_line_quantize_errors(
    optimized: dict[str, Path], tmp_path: Path, monkeypatch
) -> None:
    def crash(*args, **kwargs):
        raise RuntimeError("MatMulInteger kernel missing\n  File ... traceback")

    monkeypatch.setattr(int8_module, "quantize_dynamic", crash)
    with pytest.raises(QuantizeError) as caught:
        make_variant("int8", optimized["mlp"], tmp_path / "int8.onnx")
    message = str(caught.value)
    assert message == (
        "could not make the int8 variant of mlp.onnx (RuntimeError: MatMulInteger kernel"
        " missing); try int8-weights"
    )


def test_unknown_kind_and_method(optimized: dict[str, Path], tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown variant 'int2'; choose from fp32, fp16"):
        make_variant("int2", optimized["mlp"], tmp_path / "x.onnx")
    with pytest.raises(ConfigError, match="unknown calibration method 'kl'"):
        make_variant("int8-static", optimized["mlp"], tmp_path / "x.onnx", calibration_method="kl")
