from pathlib import Path

import pytest

from bundler.model.optimize import optimize
from tests.variants.helpers import BUILDERS


@pytest.fixture(scope="session")
def optimized(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each test model, optimised as `bundle build` does before making variants."""
    directory = tmp_path_factory.mktemp("optimized")
    paths = {}
    for name, (build, _) in BUILDERS.items():
        paths[name] = directory / f"{name}.onnx"
        optimize(build(directory / f"{name}.raw.onnx"), paths[name])
    return paths


@pytest.fixture(scope="session")
def decoder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny GPT-2 with past as optimum exports it (Conv1D layers as Gemm, the LM head tied to
    the token embedding), optimised."""
    from tests import decoder_models

    directory = tmp_path_factory.mktemp("decoder")
    optimize(decoder_models.gpt2(directory).onnx, directory / "optimized.onnx")
    return directory / "optimized.onnx"
