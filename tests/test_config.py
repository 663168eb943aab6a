from pathlib import Path

import pytest

from bundler.config import BuildOptions, load_config, load_options, merge, parse_dims
from bundler.errors import ConfigError


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "bundle.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_config_values_are_validated_and_paths_resolved_against_the_file(tmp_path):
    config = load_config(write(tmp_path, 'model = "m.onnx"\nverify = false\n[dims]\nbatch = 4\n'))
    assert config == {"model": tmp_path / "m.onnx", "verify": False, "dims": {"batch": 4}}


def test_every_bad_key_is_named_with_the_file(tmp_path):
    path = write(tmp_path, 'modle = "m.onnx"\nverify = "yes"\nexecution_providers = ["webgl"]\n')
    with pytest.raises(ConfigError) as raised:
        load_config(path)
    message = str(raised.value)
    assert message.startswith(f"{path}: ")
    assert "unknown key 'modle'" in message
    assert "key 'verify': expected true or false" in message
    assert "key 'execution_providers': unknown 'webgl'; expected some of webgpu, wasm" in message


def test_invalid_toml_is_one_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(write(tmp_path, "model = \n"))


def test_flags_win_over_the_config_and_dims_merge():
    config = {"name": "from-config", "dims": {"batch": 2, "height": 32}, "verify": False}
    options = merge(config, {"name": "from-flag", "dims": {"height": 64}, "verify": None})
    assert options == BuildOptions(name="from-flag", dims={"batch": 2, "height": 64}, verify=False)


@pytest.mark.parametrize("text", ["batch", "batch=", "=3", "batch=-1", "batch=x", "image:h=3"])
def test_bad_dim_flag_is_rejected_naming_the_flag(text):
    with pytest.raises(ConfigError, match=r"^--dim: .*(NAME=VALUE|AXIS)"):
        merge({}, {"dims": [text]})
    with pytest.raises(ConfigError, match=r"^--fix-dim: "):
        merge({}, {"fix_dims": [text]})


def test_flags_are_validated_against_the_same_schema(tmp_path):
    with pytest.raises(ConfigError) as raised:
        merge({}, {"quantize": "int3", "format": "tflite", "max_error": "cosine>1.5"})
    message = str(raised.value)
    assert "--quantize: expected one of fp32, fp16, int8-weights, int8, int8-static, int4, auto" \
        in message
    assert "--format: expected one of onnx, ort" in message
    assert "cosine" in message


def test_variants_and_per_ep_default_from_flags_and_config(tmp_path):
    options = merge({}, {"variants": "fp16,int8", "default_variant": "webgpu=fp16,wasm=int8"})
    assert options.variants == ("fp16", "int8")
    assert options.default_variant == {"webgpu": "fp16", "wasm": "int8"}
    assert options.plan.kinds == ("fp16", "int8")
    config = load_config(write(tmp_path, 'quantize = "auto"\n'))
    assert merge(config, {}).plan == (("fp32", "fp16", "int8-weights", "int8", "int8-static",
                                       "int4"), None)
    assert merge({}, {"quantize": "int8", "variants": "fp16"}).plan == (("int8", "fp16"), "int8")
    auto_with_default = write(tmp_path, 'quantize = "auto"\n[default_variant]\nwasm = "int8"\n')
    with pytest.raises(ConfigError, match=r"bundle.toml: quantize = auto chooses the default"):
        load_options(auto_with_default, {})


def test_dims_by_name_and_by_input_axis():
    assert parse_dims(["batch=2", "image:3=224"]) == {"batch": 2, "image:3": 224}
