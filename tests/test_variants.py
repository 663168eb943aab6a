"""Variants in bundle build (native side): files, accuracy records, defaults, formats, errors."""

import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from bundler.bundle.options import BuildOptions
from bundler.commands.build import build
from bundler.console import Reporter
from bundler.errors import ConfigError, QuantizeError
from bundler.variants.make import ORT_QDQ_WARNING
from tests import models, quant_models
from tests.conftest import run_cli


def test_several_variants_ship_with_accuracy_measured_on_the_examples_samples(build_bundle):
    directory, manifest = build_bundle(None, variants=("fp32", "int8-weights", "int8"),
                                       default_variant={"webgpu": "fp32", "wasm": "int8"})
    names = [v["name"] for v in manifest["sessions"][0]["variants"]]
    assert names == ["fp32", "int8-weights", "int8"]
    assert manifest["sessions"][0]["default_variant"] == {"webgpu": "fp32", "wasm": "int8"}
    for variant in manifest["sessions"][0]["variants"]:
        assert (directory / variant["file"]).stat().st_size == variant["bytes"]
        # rounded to 4 decimals
        assert variant["ratio"] == pytest.approx(variant["bytes"] / manifest["source"]["bytes"],
                                                 abs=5e-5)
        accuracy = variant["accuracy"]
        assert accuracy["data"] == "calibration" and accuracy["samples"] == 64
        assert accuracy["cosine"] > 0.999 and accuracy["top1_agreement"] >= 0.98
    int8 = onnx.load(str(directory / manifest["sessions"][0]["variants"][2]["file"]))
    assert {"DynamicQuantizeLinear", "ConvInteger"} & {n.op_type for n in int8.graph.node}
    assert manifest["optimization"]["enabled"] is True


def test_quantize_with_variants_ships_both_and_quantize_is_the_default(build_bundle, tmp_path):
    _, manifest = build_bundle(None, quantize="int8", variants=("fp32",))
    assert [v["name"] for v in manifest["sessions"][0]["variants"]] == ["int8", "fp32"]
    assert manifest["sessions"][0]["default_variant"] == "int8"
    result = run_cli("build", "-o", tmp_path / "auto", "--quantize", "auto", "--default-variant",
                     "fp32", "--no-verify")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1] == (
        "Error: default_variant: auto chooses the default variant; drop default_variant, or"
        " ship fixed variants with variants = [...] and default_variant")
    assert not (tmp_path / "auto").exists()


def test_weight_only_int8_is_about_a_quarter_of_fp32_on_a_weight_heavy_model(build_bundle,
                                                                            tmp_path):
    model = quant_models.mlp_classifier(tmp_path / "mlp.onnx")
    _, manifest = build_bundle(model, variants=("fp32", "int8-weights", "fp16"))
    sizes = {v["name"]: v["bytes"] for v in manifest["sessions"][0]["variants"]}
    assert 0.2 < sizes["int8-weights"] / sizes["fp32"] < 0.35
    assert 0.45 < sizes["fp16"] / sizes["fp32"] < 0.55
    # generated inputs: says accuracy is unknown
    for variant in manifest["sessions"][0]["variants"][1:]:
        assert variant["accuracy"]["data"] == "generated"
        assert any("accuracy unknown" in note for note in variant["notes"])


def test_int8_static_with_calibration_data_from_an_npz(build_bundle, tmp_path):
    model = quant_models.conv_classifier(tmp_path / "cnn.onnx")
    images = np.concatenate([feed["image"] for feed in quant_models.image_feeds(n=4)])
    np.savez(tmp_path / "calibration.npz", image=images)
    _, manifest = build_bundle(model, quantize="int8-static",
                               calibration=tmp_path / "calibration.npz",
                               calibration_method="percentile")
    (variant,) = manifest["sessions"][0]["variants"]
    assert variant["name"] == manifest["sessions"][0]["default_variant"] == "int8-static"
    assert variant["settings"]["calibration_method"] == "percentile"
    assert variant["settings"]["calibration_samples"] == len(images)
    assert variant["accuracy"]["samples"] == len(images)
    assert not any("accuracy unknown" in note for note in variant["notes"])


def test_int4_makes_matmulnbits_and_says_clearly_when_nothing_is_eligible(build_bundle, tmp_path):
    directory, manifest = build_bundle(quant_models.transformer_block(tmp_path / "tf.onnx"),
                                       quantize="int4", dims={"seq": 16})
    shipped = onnx.load(str(directory / manifest["sessions"][0]["variants"][0]["file"]))
    assert "MatMulNBits" in {node.op_type for node in shipped.graph.node}
    result = run_cli("build", models.conv_stack(tmp_path), "-o", tmp_path / "none",
                     "--quantize", "int4", "--no-verify")
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert "MatMul" in result.stderr.strip().splitlines()[-1]
    assert not (tmp_path / "none").exists()


def test_ort_format_ships_ort_files_that_onnxruntime_loads(tmp_path, runtime_dist):
    class Warnings(Reporter):
        def __init__(self) -> None:
            self.seen: list[str] = []

        def warn(self, message: str) -> None:
            self.seen.append(message)

    directory, reporter = tmp_path / "dist", Warnings()
    manifest = build(None, BuildOptions(output=directory, runtime_dir=runtime_dist, verify=False,
                                        variants=("fp32", "int8", "int8-static"), format="ort"),
                     reporter=reporter).to_json()
    assert reporter.seen.count(ORT_QDQ_WARNING) == 1  # for int8-static only
    for variant in manifest["sessions"][0]["variants"]:
        assert variant["file"].endswith(".ort")
        session = ort.InferenceSession(str(directory / variant["file"]),
                                       providers=["CPUExecutionProvider"])
        assert [i.name for i in session.get_inputs()] == ["image"]


def test_fix_dim_fixes_the_shipped_shape(build_bundle):
    _, manifest = build_bundle(None, fix_dims={"batch": 1})
    assert manifest["sessions"][0]["inputs"][0]["shape"] == [1, 1, 8, 8]


def test_bad_calibration_and_default_variant_are_one_clear_error(build_bundle, tmp_path):
    np.savez(tmp_path / "wrong.npz", pixels=np.zeros((4, 1, 8, 8), np.float32))
    with pytest.raises(ConfigError, match="no array for input 'image'.*pixels"):
        build_bundle(None, quantize="int8-static", calibration=tmp_path / "wrong.npz")
    np.savez(tmp_path / "shape.npz", image=np.zeros((4, 1, 9, 9), np.float32))
    with pytest.raises(ConfigError, match=r"have shape \[1, 1, 9, 9\]"):
        build_bundle(None, quantize="int8-static", calibration=tmp_path / "shape.npz")
    with pytest.raises(ConfigError, match="default_variant: 'int8' is not shipped"):
        build_bundle(None, variants=("fp32", "fp16"), default_variant="int8")
    assert not (tmp_path / "dist").exists()


def test_unrunnable_model_refuses_unmeasured_quantized_variants(build_bundle, tmp_path):
    with pytest.raises(QuantizeError, match="never shipped unmeasured"):
        build_bundle(models.symbolic_hw(tmp_path), quantize="int8", dims={"height": 1,
                                                                           "width": 1})


def test_config_file_drives_variants(tmp_path, runtime_dist):
    (tmp_path / "bundle.toml").write_text(
        'quantize = "int8-weights"\nverify = false\n'
        f'runtime_dir = "{runtime_dist}"\n')
    result = run_cli("build", "-o", "dist", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    manifest = json.loads((tmp_path / "dist" / "bundle.json").read_text())
    assert [v["name"] for v in manifest["sessions"][0]["variants"]] == ["int8-weights"]
    assert "Variants (accuracy against fp32" in result.stdout


def test_accuracy_is_measured_at_the_dims_the_model_is_used_at(tmp_path, runtime_dist):
    class Recorder(Reporter):
        def __init__(self) -> None:
            self.warnings: list[str] = []
            self.tables: dict[str, list] = {}

        def warn(self, message: str) -> None:
            self.warnings.append(message)

        def table(self, title, columns, rows) -> None:
            self.tables[title] = [dict(zip(columns, row, strict=True)) for row in rows]

    model = models.symbolic_hw(tmp_path / "model")
    np.savez(tmp_path / "validation.npz", image=np.random.default_rng(0).random(
        (3, 3, 20, 24), dtype=np.float32))
    workloads, rows, guesses = {}, {}, {}
    for name, options in {"guess": {}, "dim": {"dims": {"height": 24, "width": 20}},
                          "data": {"validation": tmp_path / "validation.npz"}}.items():
        reporter = Recorder()
        manifest = build(model, BuildOptions(output=tmp_path / name, runtime_dir=runtime_dist,
                                             verify=False, quantize="int8", **options),
                         reporter=reporter).to_json()
        workloads[name] = manifest["workload"]
        (rows[name],) = reporter.tables["Variants (accuracy against fp32, native onnxruntime)"]
        guesses[name] = [w for w in reporter.warnings if "guessed size" in w]
    assert workloads["guess"]["dims_source"] == "guess"
    (size,) = {g["value"] for g in workloads["guess"]["guessed"]}  # the check's smallest size
    assert [g["dim"] for g in workloads["guess"]["guessed"]] == ["height", "width"]
    assert workloads["guess"]["inputs"] == {"image": [1, 3, size, size]}
    (warning,) = guesses["guess"]
    assert f"input image 1x3x{size}x{size}: height={size} (axis 2), width={size} (axis 3)" \
        in warning and "--dim height=VALUE --dim width=VALUE" in warning
    assert rows["guess"]["inputs (dims from)"] == f"image 1x3x{size}x{size} (guess)"
    assert workloads["dim"] == {"inputs": {"image": [1, 3, 24, 20]},
                                "dims": {"height": 24, "width": 20}, "dims_source": "--dim",
                                "dim_sources": {"height": "--dim", "width": "--dim"},
                                "guessed": []}
    assert rows["dim"]["inputs (dims from)"] == "image 1x3x24x20 (--dim)"
    assert workloads["data"]["inputs"] == {"image": [1, 3, 20, 24]}
    assert workloads["data"]["dims_source"] == "sample"
    assert rows["data"]["inputs (dims from)"] == "image 1x3x20x24 (sample)"
    assert guesses["dim"] == guesses["data"] == []


def test_int8_quantizes_inside_a_merged_decoders_branches(build_bundle, tmp_path):
    from tests import decoder_models

    export = decoder_models.gpt2_merged(tmp_path / "merged")
    directory, manifest = build_bundle(export.onnx, variants=("int8",))
    (variant,) = manifest["sessions"][0]["variants"]
    model = onnx.load(str(directory / variant["file"]))
    (branch_node,) = [n for n in model.graph.node if n.op_type == "If"]
    for branch in branch_node.attribute:
        assert {"DynamicQuantizeLinear", "MatMulInteger"} <= {n.op_type for n in branch.g.node}


def test_int8_weights_stores_a_merged_decoders_branch_weights(build_bundle, tmp_path):
    """The layers' weights, initializers of the outer graph read inside the If's branches, are
    stored as int8; both branches (no past, and with the cache) still give fp32's logits."""
    import numpy as np

    from bundler.bundle.modelio import cpu_session
    from bundler.text.generate import Decoder
    from bundler.variants.footprint import HEAP_MARGIN
    from tests import decoder_models

    export = decoder_models.gpt2_merged(tmp_path / "merged")
    directory, manifest = build_bundle(export.onnx, variants=("int8-weights",))
    (variant,) = manifest["sessions"][0]["variants"]
    # 2 layers x (qkv, proj, fc, fc proj), and the tied LM head (its own constant while quantized)
    assert variant["settings"]["weights_int8"] == 9
    # folded into float weights at load on WASM (the build's native runs open it so too)
    assert variant["session_config"] == {"wasm": {"session.disable_quant_qdq": "1"},
                                         "webgpu": {"session.qdq_matmulnbits_accuracy_level": "1"}}
    model = onnx.load(str(directory / variant["file"]))
    assert [n.op_type for n in model.graph.node].count("DequantizeLinear") == 9
    floats = {t.name for t in model.graph.initializer if t.data_type == onnx.TensorProto.FLOAT
              and np.prod(t.dims) >= 1024 and len(t.dims) == 2}
    # the heap it needs on WASM holds the weights as float32 too, 4 bytes per int8 value
    int8_values = sum(int(np.prod(t.dims)) for t in model.graph.initializer
                      if t.data_type == onnx.TensorProto.INT8 and len(t.dims) == 2)
    assert variant["memory"]["heap"] == variant["bytes"] + HEAP_MARGIN + 4 * int8_values
    (branch_node,) = [n for n in model.graph.node if n.op_type == "If"]
    for branch in branch_node.attribute:
        assert not {n.input[1] for n in branch.g.node
                    if n.op_type in ("MatMul", "Gemm") and len(n.input) > 1} & floats

    def cosine(a: np.ndarray, b: np.ndarray) -> float:
        return float(np.sum(a * b) / (np.linalg.norm(a) * np.linalg.norm(b)))

    # what the config buys: the loaded graph has float weights, no DequantizeLinear left to run
    config = variant["session_config"]["wasm"]
    for opened, left in ((None, 9), (config, 0)):
        optimized = tmp_path / f"optimized-{left}.onnx"
        cpu_session(directory / variant["file"], config=opened, optimized_path=optimized)
        loaded = onnx.load(str(optimized))
        assert [n.op_type for n in loaded.graph.node].count("DequantizeLinear") == left

    want, got = (Decoder(cpu_session(path, config=config))
                 for path in (export.onnx, directory / variant["file"]))
    ids, mask = [5, 17, 99, 3, 42], np.ones((1, 6), np.int64)
    (first, past), (ours, our_past) = want.run(ids, None, mask[:, :5]), got.run(ids, None,
                                                                                 mask[:, :5])
    assert cosine(first, ours) > 0.99  # the branch without past
    assert cosine(want.run([7], past, mask)[0], got.run([7], our_past, mask)[0]) > 0.99


def test_int8_weights_computes_natively_in_float32_as_the_browser_does(build_bundle, tmp_path):
    """Native onnxruntime fuses the int8 DequantizeLinear + MatMul pairs into 8-bit MatMulNBits
    that quantize the activations too (accuracy_level 4, its default); onnxruntime-web computes
    in float32. Opened with the variant's session config, as every native run opens it, the
    native outputs are those of the float32 computation (no graph optimisation at all), on the
    first step and on one with the cache (its WebGPU entry: WASM folds the weights instead)."""
    from bundler.bundle.modelio import cpu_session
    from bundler.text.generate import Decoder
    from tests import decoder_models

    export = decoder_models.llama(tmp_path / "llama")
    directory, manifest = build_bundle(export.onnx, variants=("int8-weights",))
    (variant,) = manifest["sessions"][0]["variants"]
    config = variant["session_config"]
    assert config["webgpu"] == {"session.qdq_matmulnbits_accuracy_level": "1"}
    path = directory / variant["file"]
    opened = Decoder(cpu_session(path, config=config["webgpu"]))
    plain = Decoder(cpu_session(path, level=ort.GraphOptimizationLevel.ORT_DISABLE_ALL))
    ids, mask = [5, 17, 99, 3, 42], np.ones((1, 6), np.int64)
    (logits, past), (want, want_past) = (d.run(ids, None, mask[:, :5]) for d in (opened, plain))
    np.testing.assert_allclose(logits, want, atol=1e-5)
    for name in want_past:
        np.testing.assert_allclose(past[name], want_past[name], atol=1e-5)
    np.testing.assert_allclose(opened.run([7], past, mask)[0], plain.run([7], want_past, mask)[0],
                               atol=1e-5)
