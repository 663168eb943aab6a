"""Real-size models of each class the project claims, made offline from real architectures with
seeded random weights: a MobileNetV2 image classifier and a BERT encoder (transformers), a GPT-2
decoder with past key/values (exported by optimum as users do), a YOLOv8n detector (the
architecture written out in torch, exported as Ultralytics exports it) and Silero VAD (the ONNX
file shipped in the silero-vad package). A missing package raises, it never skips.

`python -m tests.realsize_models DIR` writes them all into DIR (scripts/real_models.sh)."""

from __future__ import annotations

import importlib.util
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import onnx

OPSET = 17
SEED = 0
DETECTOR_SIZE = 320  # Ultralytics' export at imgsz=320: the same weights, 4x less compute


def _torch():
    import torch

    torch.manual_seed(SEED)
    return torch


def _export(module, example: tuple, path: Path, input_names: list[str], output_names: list[str],
            dynamic_axes: dict[str, dict[int, str]]) -> Path:
    torch = _torch()
    module.eval()
    with torch.no_grad():
        torch.onnx.export(module, example, str(path), input_names=input_names,
                          output_names=output_names, dynamic_axes=dynamic_axes,
                          opset_version=OPSET, dynamo=False)
    return path


def calibrate_batch_norms(model, images) -> None:
    """Sets every BatchNorm's running mean and variance to those of its inputs on `images`."""
    torch = _torch()
    for layer in model.modules():
        if isinstance(layer, torch.nn.BatchNorm2d):
            layer.reset_running_stats()
            layer.momentum = None  # a plain average over the batches seen
    model.train()
    with torch.no_grad():
        model(images)
    model.eval()


def classifier(directory: Path) -> Path:
    """MobileNetV2 (transformers, 1000 classes, 224x224): 3.5 M parameters, 14 MB. Its batch
    norms' statistics are those of random images, as training would set them: at their initial
    values the logits are 1e-25, which any tolerance would pass."""
    from transformers import MobileNetV2Config, MobileNetV2ForImageClassification

    torch = _torch()
    model = MobileNetV2ForImageClassification(MobileNetV2Config(num_labels=1000))
    calibrate_batch_norms(model, torch.rand(8, 3, 224, 224))

    class Logits(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, pixel_values):
            return self.model(pixel_values=pixel_values).logits

    return _export(Logits(), (torch.rand(1, 3, 224, 224),), directory / "mobilenet_v2.onnx",
                   ["pixel_values"], ["logits"], {"pixel_values": {0: "batch"},
                                                  "logits": {0: "batch"}})


def detector(directory: Path) -> Path:
    """YOLOv8n (80 classes), output0 [1, 84, N] as Ultralytics exports it: 3.2 M parameters,
    12.8 MB."""
    from tests.realsize_yolo import yolov8n

    torch = _torch()
    return _export(yolov8n(), (torch.rand(1, 3, DETECTOR_SIZE, DETECTOR_SIZE),),
                   directory / "yolov8n.onnx", ["images"], ["output0"], {})


def _optimum_export(model, task: str, directory: Path, name: str) -> Path:
    """`optimum-cli export onnx --task TASK` of a model saved locally, as users export one from
    the Hub; the ONNX file is moved to DIR/NAME."""
    from optimum.exporters.onnx import main_export

    with tempfile.TemporaryDirectory(dir=directory) as scratch:
        saved, exported = Path(scratch) / "saved", Path(scratch) / "onnx"
        model.save_pretrained(saved)
        main_export(str(saved), exported, task=task, opset=OPSET, local_files_only=True,
                    do_validation=False)
        target = directory / name
        shutil.move(exported / "model.onnx", target)
        if (exported / "model.onnx_data").exists():
            shutil.move(exported / "model.onnx_data", directory / "model.onnx_data")
    return target


def encoder(directory: Path) -> Path:
    """A MiniLM-sized BERT (6 layers x 384, 12 heads, vocab 8192) for feature-extraction:
    input_ids, attention_mask, token_type_ids -> last_hidden_state. 13.8 M parameters, 55 MB."""
    from transformers import BertConfig, BertModel

    _torch()
    config = BertConfig(vocab_size=8192, hidden_size=384, num_hidden_layers=6,
                        num_attention_heads=12, intermediate_size=1536)
    return _optimum_export(BertModel(config), "feature-extraction", directory, "bert.onnx")


def decoder(directory: Path) -> Path:
    """GPT-2 (4 layers x 512, 8 heads, vocab 8192, 512 positions) for text-generation-with-past:
    input_ids, attention_mask, position_ids and past_key_values.* -> logits and present.*."""
    from transformers import GPT2Config, GPT2LMHeadModel

    _torch()
    config = GPT2Config(vocab_size=8192, n_positions=512, n_embd=512, n_layer=4, n_head=8)
    return _optimum_export(GPT2LMHeadModel(config), "text-generation-with-past", directory,
                           "gpt2.onnx")


def streaming(directory: Path) -> Path:
    """Silero VAD v5 as the silero-vad package ships it: input [1, 576] with 64 samples of
    context, state [2, 1, 128], sr int64 (an If on 16000/8000): 2.3 MB. Found without importing
    the package, whose dependencies (torchaudio) are not installed."""
    spec = importlib.util.find_spec("silero_vad")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("silero-vad is not installed: pip install --no-deps -c "
                           "constraints/test.txt silero-vad (scripts/test.sh does)")
    source = Path(next(iter(spec.submodule_search_locations))) / "data" / "silero_vad.onnx"
    return Path(shutil.copy(source, directory / "silero_vad.onnx"))


def external_data(directory: Path) -> Path:
    """The BERT encoder saved with its weights in bert_external.onnx.data."""
    source = encoder(directory)
    model = onnx.load(source)
    target = directory / "bert_external.onnx"
    onnx.save(model, target, save_as_external_data=True, location=target.name + ".data",
              size_threshold=1024)
    source.unlink()
    return target


LANE: dict[str, Callable[[Path], Path]] = {
    "classifier": classifier, "detector": detector, "encoder": encoder, "decoder": decoder,
    "streaming": streaming, "external": external_data,
}


def megabytes(model: Path) -> float:
    """The model's size with its external data."""
    return sum(p.stat().st_size for p in model.parent.glob(model.name + "*")) / 1e6


if __name__ == "__main__":
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    for name in sys.argv[2:] or LANE:
        (out / name).mkdir(exist_ok=True)
        path = LANE[name](out / name)
        print(f"{name}\t{path}\t{megabytes(path):.1f} MB")
