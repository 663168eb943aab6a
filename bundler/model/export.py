"""`bundle export`: PyTorch -> ONNX, validated against PyTorch before anything is built.

The model comes from `module:factory` (an nn.Module, a class, or a function returning one), a
TorchScript file (torch.jit.save) or a torch.export file (.pt2). It is put in eval mode and
exported with onnxruntime-friendly settings: the TorchScript-based exporter (no onnxscript
needed), opset 17 by default, axis 0 of every input a dynamic `batch` dim (unless static_batch)
plus the dims declared as NAME:SIZE. Then ONNX (onnxruntime CPU) and PyTorch run on several
seeded random inputs at two batch sizes, and every output must be np.allclose; the worst error
is reported, and a failure is an ExportError (the file is not kept). PyTorch is imported only
here, never when bundler is imported.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import sys
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bundler.errors import ConfigError, ExportError
from bundler.verify.tolerance import tolerance_for

DEFAULT_OPSET = 17
BATCH = "batch"
DEFAULT_BATCH_SIZES = (1, 3)
DEFAULT_SAMPLES = 3
CONVERSION = tolerance_for("conversion")  # the exported model against the PyTorch one
DTYPES = ("float32", "float16", "float64", "int64", "int32", "bool")
INSTALL_HINT = "bundle export needs PyTorch: pip install 'onnx-bundler[torch]'"


@dataclasses.dataclass(frozen=True)
class InputShape:
    """One example input: sizes, with names for dynamic axes (axis 0 is `batch` unless fixed)."""

    name: str
    sizes: tuple[int, ...]
    dynamic: dict[int, str]
    dtype: str = "float32"

    def at_batch(self, batch: int) -> tuple[int, ...]:
        return tuple(batch if self.dynamic.get(axis) == BATCH else size
                     for axis, size in enumerate(self.sizes))


def parse_input_shape(text: str, static_batch: bool = False) -> InputShape:
    """`NAME=D0,D1,...[@DTYPE]`; a D is SIZE or DIMNAME:SIZE (a dynamic dim with that name)."""
    name, sep, rest = text.partition("=")
    rest, _, dtype = rest.partition("@")
    if not sep or not name or not rest:
        raise ConfigError(f"--input {text!r}: expected NAME=D0,D1,... (e.g. image=1,3,224,224 or"
                          " ids=1,seq:16@int64)")
    if (dtype or "float32") not in DTYPES:
        raise ConfigError(f"--input {text!r}: dtype {dtype!r} is not one of {', '.join(DTYPES)}")
    sizes: list[int] = []
    dynamic: dict[int, str] = {}
    for axis, part in enumerate(rest.split(",")):
        dim, _, size = part.strip().rpartition(":")
        if not size.isdigit() or int(size) < 1:
            raise ConfigError(f"--input {text!r}: {part!r} is not SIZE or DIMNAME:SIZE")
        sizes.append(int(size))
        if dim:
            dynamic[axis] = dim
        elif axis == 0 and not static_batch:
            dynamic[axis] = BATCH
    return InputShape(name, tuple(sizes), dynamic, dtype or "float32")


def require_torch() -> Any:
    try:
        import torch
    except ImportError:
        raise ExportError(INSTALL_HINT) from None
    return torch


@contextlib.contextmanager
def _importable_from_cwd() -> Iterator[None]:
    sys.path.insert(0, str(Path.cwd()))
    try:
        yield
    finally:
        sys.path.remove(str(Path.cwd()))


def load_module(source: str, shapes: Sequence[InputShape]) -> Any:
    """The nn.Module (or ScriptModule) `source` names, in eval mode."""
    torch = require_torch()
    path = Path(source)
    if path.suffix == ".pt2":
        if not path.is_file():
            raise ExportError(f"torch.export file not found: {path}")
        # An ExportedProgram's module cannot be put in eval mode or traced by the exporter as it
        # is; tracing it gives a ScriptModule with the same graph.
        program = torch.export.load(str(path)).module()
        with torch.no_grad():
            return torch.jit.trace(program, _example(shapes, shapes[0].sizes[0]), strict=False)
    if path.suffix in (".pt", ".pth", ".ts", ".torchscript") or path.is_file():
        try:
            module = torch.jit.load(str(path), map_location="cpu")
        except (RuntimeError, ValueError, OSError) as error:
            raise ExportError(f"{path} is not a TorchScript file ({str(error).splitlines()[0]});"
                              " a state_dict needs module:factory") from None
        return module.eval()
    module_name, sep, attribute = source.partition(":")
    if not sep or not module_name or not attribute:
        raise ConfigError(f"{source!r}: give module:factory, a TorchScript file or a .pt2 file")
    try:
        with _importable_from_cwd():
            target = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as error:
        raise ExportError(f"cannot load {source}: {error}") from None
    if not isinstance(target, torch.nn.Module):
        target = target()
    if not isinstance(target, torch.nn.Module):
        raise ExportError(f"{source} gave a {type(target).__name__}, not a torch.nn.Module")
    return target.eval()


def _example(shapes: Sequence[InputShape], batch: int, seed: int = 0) -> tuple[Any, ...]:
    torch = require_torch()
    generator = torch.Generator().manual_seed(seed)
    tensors = []
    for shape in shapes:
        size = shape.at_batch(batch)
        dtype = getattr(torch, shape.dtype)
        if shape.dtype == "bool":
            tensors.append(torch.randint(0, 2, size, generator=generator).bool())
        elif dtype.is_floating_point:
            tensors.append(torch.randn(size, generator=generator).to(dtype))
        else:
            tensors.append(torch.randint(0, 8, size, generator=generator).to(dtype))
    return tuple(tensors)


def _flatten(result: Any) -> list[Any]:
    if isinstance(result, dict):
        return [v for value in result.values() for v in _flatten(value)]
    if isinstance(result, list | tuple):
        return [v for value in result for v in _flatten(value)]
    return [result]


@dataclasses.dataclass(frozen=True)
class ExportReport:
    path: Path
    opset: int
    inputs: list[str]
    outputs: list[str]
    dynamic: dict[str, dict[int, str]]
    checks: list[dict[str, Any]]  # per run: batch, seed, worst abs and relative error

    @property
    def worst_abs_error(self) -> float:
        return max(check["max_abs_error"] for check in self.checks)


def export(source: str, shapes: Sequence[InputShape], output: Path, *,
           opset: int = DEFAULT_OPSET, output_names: Sequence[str] = (),
           batch_sizes: Sequence[int] = DEFAULT_BATCH_SIZES, samples: int = DEFAULT_SAMPLES,
           rtol: float = CONVERSION.rtol, atol: float = CONVERSION.atol) -> ExportReport:
    """Export, validate, and keep `output` only when every check passed."""
    torch = require_torch()
    if not shapes:
        raise ConfigError("give the example input shapes: --input NAME=D0,D1,... per input")
    module = load_module(source, shapes)
    example = _example(shapes, shapes[0].sizes[0])
    with torch.no_grad():
        count = len(_flatten(module(*example)))
    names = list(output_names) or (["output"] if count == 1 else
                                   [f"output_{i}" for i in range(count)])
    if len(names) != count:
        raise ConfigError(f"the model has {count} outputs; --output-names gave {len(names)}")
    dynamic = {shape.name: dict(shape.dynamic) for shape in shapes}
    batched = any(BATCH in axes.values() for axes in dynamic.values())
    output_axes = {name: {0: BATCH} for name in names} if batched else {}
    output.parent.mkdir(parents=True, exist_ok=True)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the legacy exporter's deprecation notice
            torch.onnx.export(module, example, str(output), input_names=[s.name for s in shapes],
                              output_names=names, opset_version=opset, dynamo=False,
                              dynamic_axes={**dynamic, **output_axes}, do_constant_folding=True)
    except Exception as error:  # noqa: BLE001 - the exporter raises many unrelated types
        output.unlink(missing_ok=True)
        raise ExportError(f"torch.onnx.export failed: {str(error).strip().splitlines()[0]}"
                          ) from None
    try:
        checks = _validate(module, output, shapes, names, batch_sizes if batched
                           else batch_sizes[:1], samples, rtol, atol)
    except ExportError:
        output.unlink(missing_ok=True)
        raise
    return ExportReport(output, opset, [s.name for s in shapes], names, dynamic, checks)


def _validate(module: Any, model: Path, shapes: Sequence[InputShape], names: Sequence[str],
              batch_sizes: Sequence[int], samples: int, rtol: float, atol: float,
              ) -> list[dict[str, Any]]:
    torch = require_torch()
    from bundler.bundle.modelio import cpu_session

    session = cpu_session(model)
    checks = []
    for batch in batch_sizes:
        for seed in range(samples):
            example = _example(shapes, batch, seed)
            with torch.no_grad():
                expected = [t.detach().cpu().numpy() for t in _flatten(module(*example))]
            try:
                got = session.run(list(names), {s.name: t.numpy()
                                                for s, t in zip(shapes, example, strict=True)})
            except Exception as error:  # noqa: BLE001 - onnxruntime raises unrelated types
                raise ExportError(f"the exported model fails at batch {batch} in onnxruntime"
                                  f" ({str(error).strip().splitlines()[0]}); a dim the model"
                                  " fixes may be marked dynamic") from None
            worst_abs = worst_rel = 0.0
            for name, want, have in zip(names, expected, got, strict=True):
                want64, have64 = np.asarray(want, np.float64), np.asarray(have, np.float64)
                if want64.shape != have64.shape:
                    raise ExportError(
                        f"ONNX and PyTorch differ on output {name!r} at batch {batch}: shape"
                        f" {list(have64.shape)}, PyTorch's {list(want64.shape)} (a size the"
                        " trace fixed)")
                if not np.allclose(have64, want64, rtol=rtol, atol=atol):
                    raise ExportError(
                        f"ONNX and PyTorch differ on output {name!r} at batch {batch} (worst"
                        f" abs error {np.abs(have64 - want64).max():.3g}; rtol {rtol}, atol"
                        f" {atol}): Python control flow on values is fixed by the export")
                difference = np.abs(have64 - want64)
                worst_abs = max(worst_abs, float(difference.max(initial=0.0)))
                worst_rel = max(worst_rel, float((difference / np.maximum(np.abs(want64), atol)
                                                  ).max(initial=0.0)))
            checks.append({"batch": batch, "seed": seed, "max_abs_error": worst_abs,
                           "max_rel_error": worst_rel})
    return checks

