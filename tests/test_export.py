"""`bundle export`: PyTorch -> ONNX with a dynamic batch, validated against PyTorch at two batch
sizes; validation failures are errors; without PyTorch, one line says how to install it."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch

from bundler.errors import ExportError
from bundler.model.export import export, parse_input_shape
from tests import torch_modules
from tests.conftest import ROOT, run_cli


def _dims(path, index=0):
    value = onnx.load(path).graph.input[index].type.tensor_type.shape.dim
    return [d.dim_param or d.dim_value for d in value]


def test_small_module_with_dynamic_batch_validated_at_1_and_3(tmp_path):
    result = run_cli("export", "tests.torch_modules:small_cnn", "--input", "image=2,1,8,8",
                     "--output-names", "scores,features", "-o", tmp_path / "cnn.onnx", cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert "at batch sizes 1, 3: worst abs error" in result.stderr
    model = tmp_path / "cnn.onnx"
    assert _dims(model) == ["batch", 1, 8, 8]
    assert {o.version for o in onnx.load(model).opset_import if o.domain == ""} == {17}
    # The file really generalises: batch 5, never seen, agrees with PyTorch in eval mode.
    module = torch_modules.small_cnn().eval()
    image = torch.randn(5, 1, 8, 8, generator=torch.Generator().manual_seed(7))
    with torch.no_grad():
        scores, features = (t.numpy() for t in module(image))
    got = ort.InferenceSession(str(model)).run(None, {"image": image.numpy()})
    np.testing.assert_allclose(got[0], scores, atol=1e-5, rtol=1e-4)
    np.testing.assert_allclose(got[1], features, atol=1e-5, rtol=1e-4)


def test_declared_dims_torchscript_and_torch_export_files(tmp_path):
    shapes = [parse_input_shape("ids=2,seq:5@int64")]
    assert shapes[0].dynamic == {0: "batch", 1: "seq"}
    module = torch_modules.TokenMixer().eval()
    example = (torch.randint(0, 16, (2, 5)),)
    torch.jit.trace(module, example).save(str(tmp_path / "mixer.pt"))
    torch.export.save(torch.export.export(module, example), str(tmp_path / "mixer.pt2"))
    for source in ("tests.torch_modules:TokenMixer", tmp_path / "mixer.pt", tmp_path / "mixer.pt2"):
        output = tmp_path / f"{getattr(source, 'suffix', '.mod')[1:]}.onnx"
        report = export(str(source), shapes, output, batch_sizes=(1, 3), samples=2)
        assert sorted({c["batch"] for c in report.checks}) == [1, 3] and len(report.checks) == 4
        assert report.worst_abs_error < 1e-5
        assert _dims(output) == ["batch", "seq"]


def test_a_model_that_does_not_match_pytorch_is_an_error(tmp_path):
    output = tmp_path / "switch.onnx"
    with pytest.raises(ExportError, match="ONNX and PyTorch differ on output 'output'"):
        export("tests.torch_modules:SignSwitch", [parse_input_shape("x=2,3")], output,
               samples=5)
    assert not output.exists()  # never kept
    with pytest.raises(ExportError, match=r"differ on output 'output' at batch 1: shape \[2,"
                                          r" 3\], PyTorch's \[1, 6\]"):
        export("tests.torch_modules:FlatBatch", [parse_input_shape("x=2,3,2")], output)
    result = run_cli("export", "tests.torch_modules:FixedBatch", "--input", "x=2,6",
                     "-o", output, cwd=ROOT)
    last = result.stderr.strip().splitlines()[-1]
    assert result.returncode == 2 and last.startswith("Error: the exported model fails at batch 1")
    assert "Traceback" not in result.stderr


def test_bad_sources_and_shapes_are_one_line(tmp_path):
    for args, message in [
        (("nope.module:make", "--input", "x=1,2"), "Error: cannot load nope.module:make"),
        (("tests.torch_modules:small_cnn", "--input", "image"), "expected NAME=D0,D1"),
        (("tests.torch_modules:small_cnn", "--input", "image=1,x"), "'x' is not SIZE or"),
        (("tests.torch_modules:small_cnn",), "give the example input shapes"),
        ((tmp_path / "missing.pt2", "--input", "x=1"), "torch.export file not found"),
    ]:
        result = run_cli("export", *args, "-o", tmp_path / "m.onnx", cwd=ROOT)
        last = result.stderr.strip().splitlines()[-1]  # after the progress line, if any
        assert result.returncode == 2 and last.startswith("Error: ") and message in last, last
        assert "Traceback" not in result.stderr


def test_without_torch_one_line_and_no_torch_at_import(tmp_path):
    # sys.modules[name] = None makes `import torch` raise ImportError, as when it is absent.
    code = ("import sys; sys.modules['torch'] = None; from bundler.cli import main;"
            " main(['export', 'x:y', '--input', 'x=1'])")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            cwd=tmp_path, timeout=120)
    assert result.returncode == 2
    assert result.stderr.strip() == ("Error: bundle export needs PyTorch: pip install"
                                     " 'onnx-bundler[torch]'")
    code = ("import sys, bundler, bundler.cli, bundler.model.export, bundler.commands.export,"
            " bundler.model.analysis, bundler.edge.session;"
            " print(json.dumps('torch' in sys.modules))")
    result = subprocess.run([sys.executable, "-c", "import json;" + code], capture_output=True,
                            text=True, timeout=120)
    assert json.loads(result.stdout) is False, result.stderr


@pytest.mark.browser
def test_export_then_build(tmp_path, runtime_dist):
    # The build takes onnxruntime-web from the cache runtime_dist filled.
    result = run_cli("export", "tests.torch_modules:small_cnn", "--input", "image=1,1,8,8",
                     "--output-names", "scores,features", "-o", tmp_path / "cnn.onnx", "--build",
                     "--build-output", tmp_path / "dist", cwd=ROOT)
    assert result.returncode == 0, result.stderr
    manifest = json.loads((tmp_path / "dist" / "bundle.json").read_text())
    assert manifest["sessions"][0]["inputs"][0]["shape"] == ["batch", 1, 8, 8]
    assert manifest["verification"]["status"] == "passed"
