from pathlib import Path

import pytest

from bundler.bundle.options import BuildOptions, load_config, load_options, merge, parse_dims
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
    assert options.kinds == ("fp16", "int8")
    config = load_config(write(tmp_path, 'quantize = "auto"\n'))
    assert merge(config, {}).kinds == ("fp32", "fp16", "int8-weights", "int8", "int8-static",
                                       "int4")


def test_quantize_and_variants_both_ship_with_quantize_as_the_default():
    assert merge({}, {"quantize": "fp32", "variants": "int8"}).kinds == ("fp32", "int8")
    assert merge({}, {"quantize": "int8", "variants": "fp16,int8"}).kinds == ("int8", "fp16")
    assert merge({}, {}).kinds == ("fp32",)


def test_auto_with_a_default_variant_is_an_error_not_ignored(tmp_path):
    config = write(tmp_path, 'quantize = "auto"\n[default_variant]\nwasm = "int8"\n')
    with pytest.raises(ConfigError, match=r"bundle\.toml: default_variant: auto chooses"):
        load_options(config, {})
    with pytest.raises(ConfigError, match="auto chooses the default"):
        merge({}, {"quantize": "auto", "default_variant": "int8"})


def test_a_default_variant_that_does_not_ship_is_an_error():
    with pytest.raises(ConfigError, match="'int4' is not shipped"):
        merge({}, {"variants": "fp16,int8", "default_variant": "int4"})


def test_options_made_in_python_are_checked_like_flags(tmp_path):
    with pytest.raises(ConfigError, match="^quantize: expected one of"):
        BuildOptions(quantize="int3")
    with pytest.raises(ConfigError, match="^execution_providers: unknown 'cuda'"):
        BuildOptions(execution_providers=("cuda",))
    options = BuildOptions(output=tmp_path / "out", dims={"batch": 2})
    assert options.output == (tmp_path / "out").resolve()
    assert options.verify is True and options.format == "onnx" and options.dims == {"batch": 2}
    assert BuildOptions().dims is not BuildOptions().dims  # defaults are not shared


def test_dims_by_name_and_by_input_axis():
    assert parse_dims(["batch=2", "image:3=224"]) == {"batch": 2, "image:3": 224}


def test_int4_settings_merge_key_by_key_and_are_checked(tmp_path):
    config = tmp_path / "bundle.toml"
    config.write_text("[int4]\nblock_size = 64\naccuracy_level = 4\n", encoding="utf-8")
    options = load_options(config, {"int4": ("symmetric=false", "lm_head=false")})
    assert (options.int4.block_size, options.int4.accuracy_level) == (64, 4)
    assert (options.int4.symmetric, options.int4.lm_head, options.int4.embeddings) == (
        False, False, False)
    assert merge({}, {}).int4 == BuildOptions().int4  # the defaults: block 32, symmetric
    for flag, message in (("block_size=20", "--int4: int4 block_size: expected one of 16"),
                          ("accuracy_level=5", "int4 accuracy_level: expected one of 0"),
                          ("symmetric=maybe", "int4 symmetric: expected true or false"),
                          ("format=gguf", "int4 format: expected one of nbits, qdq"),
                          ("bits=8", "unknown int4 setting 'bits'"), ("64", "KEY=VALUE")):
        with pytest.raises(ConfigError, match=message):
            merge({}, {"int4": (flag,)})
