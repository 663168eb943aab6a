"""The bad-input matrix: every case through the real CLI, for every command it applies to.

Each run must exit != 0 with at most three lines on stderr, the last one `Error: ...` naming the
problem, no traceback, nothing left behind (no temporary folders beside the output or in $TMPDIR)
and an existing output folder byte-identical to before. A new command joins the matrix with one
entry in COMMANDS (how it takes a model, a built folder and extra flags) and its name in the
`commands` of the cases that apply to it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import pytest

from tests import models
from tests.conftest import ROOT

MAX_STDERR_LINES = 3
TIMEOUT_S = 240
ORT_SESSION_FILE = ".ses"  # onnxruntime 1.32 writes $TMPDIR/.ses on import: not the tool's


@dataclasses.dataclass(frozen=True)
class Workspace:
    root: Path
    model: Path  # a good model
    bundle: Path  # a good build of it (for commands that take a built folder)
    output: Path  # an existing build the command must leave untouched
    runtime_dir: Path


@dataclasses.dataclass(frozen=True)
class Bad:
    """What one case gives a command; None means the good one from the workspace."""

    model: Path | None = None
    bundle: Path | None = None
    output: Path | None = None
    args: tuple[str, ...] = ()
    env: dict[str, str] = dataclasses.field(default_factory=dict)
    verify: bool = False
    runtime_dir: bool = True  # pass the cached runtime (else the build fetches it)
    url: str | None = None  # for bundle doctor (else the built folder's path, which is no URL)


Argv = Callable[[Workspace, Bad], list[str]]


def _runtime(w: Workspace, bad: Bad) -> list[str]:
    return ["--runtime-dir", str(w.runtime_dir)] if bad.runtime_dir else []


COMMANDS: dict[str, Argv] = {
    "build": lambda w, bad: [
        "build", str(bad.model or w.model), "-o", str(bad.output or w.output),
        *_runtime(w, bad), *([] if bad.verify else ["--no-verify"]), *bad.args,
    ],
    "serve": lambda w, bad: [
        "serve", str(bad.model or w.model), "--port", "0", *_runtime(w, bad), *bad.args,
    ],
    "test": lambda w, bad: ["test", str(bad.bundle or w.bundle), *bad.args],
    "bench": lambda w, bad: ["bench", str(bad.bundle or w.bundle), "--ep", "wasm", "--runs", "1",
                             *bad.args],
    "inspect": lambda w, bad: ["inspect", str(bad.model or w.model), *bad.args],
    "run": lambda w, bad: ["run", str(bad.model or w.model), *bad.args],
    # the default -o (model.onnx in the working folder) must not be written
    "export": lambda w, bad: ["export", str(bad.model or w.model), "--input", "x=1,4", *bad.args],
    "doctor": lambda w, bad: ["doctor", bad.url or str(bad.bundle or w.bundle), *bad.args],
}


def _copy_bundle(w: Workspace, name: str) -> Path:
    copy = w.root / name
    shutil.copytree(w.bundle, copy)
    return copy


def _model_file(bundle: Path) -> Path:
    return next((bundle / "models").glob("*.onnx"))


def _replacing_model(content: Callable[[Path], bytes]) -> Callable[[Workspace], Bad]:
    """A bad model file, and a built folder whose model file holds the same bytes."""

    def make(w: Workspace) -> Bad:
        data = content(w.model)
        model = w.root / "bad.onnx"
        model.write_bytes(data)
        bundle = _copy_bundle(w, "bad-bundle")
        _model_file(bundle).write_bytes(data)
        return Bad(model=model, bundle=bundle)

    return make


PNG = bytes.fromhex("89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489"
                    "0000000d4944415478da63f8cfc0f01f0005000201e2216bc20000000049454e44ae426082")


def _missing(w: Workspace) -> Bad:
    return Bad(model=w.root / "nope.onnx", bundle=w.root / "nope")


def _directory(w: Workspace) -> Bad:
    (w.root / "folder").mkdir()
    return Bad(model=w.root / "folder", bundle=w.root / "folder")


def _missing_external_data(w: Workspace) -> Bad:
    model = models.external_data(w.root / "external")
    (model.parent / "external_data.weights").unlink()
    return Bad(model=model)


def _missing_model_file(w: Workspace) -> Bad:
    bundle = _copy_bundle(w, "no-model")
    _model_file(bundle).unlink()
    return Bad(bundle=bundle)


def _with_model(change: Callable[[onnx.ModelProto], None], name: str) -> Callable[[Workspace],
                                                                                   Bad]:
    def make(w: Workspace) -> Bad:
        model = onnx.load(str(w.model))
        change(model)
        path = w.root / f"{name}.onnx"
        onnx.save(model, str(path))
        return Bad(model=path)

    return make


def _newer_opset(model: onnx.ModelProto) -> None:
    model.opset_import[0].version = 30


def _unknown_op(model: onnx.ModelProto) -> None:
    model.graph.node[2].op_type = "Tanhh"


def _over_2gb_in_one_file(w: Workspace) -> Bad:
    """A valid ModelProto over 2 GB: a small model plus a doc_string of NUL bytes, written as a
    sparse file so it costs no disk (the check reads only the file's size)."""
    path = w.root / "huge.onnx"
    size = 2**31 + 2**20
    header = w.model.read_bytes() + bytes([0x32]) + _varint(size)  # field 6: doc_string
    with path.open("wb") as file:
        file.write(header)
        file.truncate(len(header) + size)
    return Bad(model=path)


def _over_2gb_external_data(w: Workspace) -> Bad:
    """A model whose external data file is over 2 GB (sparse, so no disk is used), asked for an
    int8-static variant: past 2 GB only the kinds that read a weight at a time are built
    (refused before any weight is read)."""
    model = models.external_data(w.root / "big")
    data = model.parent / "external_data.weights"
    with data.open("r+b") as file:
        file.truncate(2**31 + 2**20)
    return Bad(model=model, args=("--quantize", "int8-static"))


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _config(text: str) -> Callable[[Workspace], Bad]:
    def make(w: Workspace) -> Bad:
        path = w.root / "bundle.toml"
        path.write_text(text, encoding="utf-8")
        return Bad(args=("--config", str(path)))

    return make


def _flags(*args: str) -> Callable[[Workspace], Bad]:
    return lambda w: Bad(args=args)


def _calibration(**arrays: np.ndarray) -> Callable[[Workspace], Bad]:
    def make(w: Workspace) -> Bad:
        path = w.root / "samples.npz"
        np.savez(path, **arrays)
        return Bad(args=("--quantize", "int8-static", "--calibration", str(path)))

    return make


def _calibration_text(w: Workspace) -> Bad:
    path = w.root / "samples.npz"
    path.write_text("x,ids,mask\n1,2,3\n")
    return Bad(args=("--quantize", "int8-static", "--calibration", str(path)))


def _good_calibration(**changes: np.ndarray) -> dict[str, np.ndarray]:
    arrays = {
        "x": np.zeros((4, 1, 4), np.float32),
        "ids": np.zeros((4, 1, 3), np.int64),
        "mask": np.ones((4, 1, 3), np.int32),
    }
    return {**arrays, **changes}


def _output_under_a_file(w: Workspace) -> Bad:
    blocker = w.root / "a-file"
    blocker.write_text("not a folder\n")
    return Bad(output=blocker / "dist")


def _under_a_file(flag: str, name: str) -> Callable[[Workspace], Bad]:
    def make(w: Workspace) -> Bad:
        blocker = w.root / "a-file"
        blocker.write_text("not a folder\n")
        return Bad(args=(flag, str(blocker / name)))

    return make


def _no_chromium(w: Workspace) -> Bad:
    return Bad(env={"BUNDLER_CHROMIUM": str(w.root / "no-such-chromium")}, verify=True)


def _no_registry(w: Workspace) -> Bad:
    cache = w.root / "empty-cache"
    cache.mkdir()
    return Bad(runtime_dir=False, env={"XDG_CACHE_HOME": str(cache),
                                       "npm_config_registry": "http://127.0.0.1:9/",
                                       "npm_config_fetch_retries": "0"})  # fail in seconds


def _changed(fragment: str) -> dict[str, str]:
    """The fragment for a bad model file, or (bundle test) for a bundle's model file replaced;
    export reads a PyTorch file, which no bad model file is."""
    return {**dict.fromkeys(ONNX_COMMANDS, fragment),
            **dict.fromkeys(BUNDLE_COMMANDS, "does not match the sha256"),
            "export": "is not a TorchScript file"}


MODEL_COMMANDS = ("build", "serve")  # the commands that take build options
ONNX_COMMANDS = (*MODEL_COMMANDS, "inspect", "run")  # the commands that read an .onnx file
BUNDLE_COMMANDS = ("test", "bench")  # the commands that take a built folder into the browser
ALL = (*ONNX_COMMANDS, *BUNDLE_COMMANDS, "export")
DIM_COMMANDS = (*MODEL_COMMANDS, *BUNDLE_COMMANDS, "run")


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    make: Callable[[Workspace], Bad]
    expected: str | dict[str, str]  # a fragment of the Error line (per command where they differ)
    commands: tuple[str, ...] = ALL

    def fragment(self, command: str) -> str:
        return self.expected if isinstance(self.expected, str) else self.expected[command]


CASES = [
    Case("missing path", _missing, {**dict.fromkeys(ONNX_COMMANDS, "model not found"),
                                    "test": "nope", "bench": "nope", "export": "nope.onnx",
                                    "doctor": "is not an http(s) URL"}, (*ALL, "doctor")),
    Case("directory", _directory, {"build": "has no model.onnx", "serve": "is not a built bundle",
                                   "test": "has no bundle.json", "bench": "has no bundle.json",
                                   "inspect": "has no bundle.json",
                                   "run": "has no bundle.json", "export": "give module:factory"}),
    Case("empty file", _replacing_model(lambda good: b""), _changed("is empty")),
    Case("truncated file", _replacing_model(lambda good: good.read_bytes()[:200]),
         _changed("is not an ONNX model")),
    Case("text file", _replacing_model(lambda good: b"just some notes\n" * 30),
         _changed("is not an ONNX model")),
    Case("PNG image", _replacing_model(lambda good: PNG), _changed("is not an ONNX model")),
    Case("missing external data", _missing_external_data, "external data file",
         ONNX_COMMANDS),
    Case("bundle lacks its model file", _missing_model_file, "is missing", BUNDLE_COMMANDS),
    # (the build fits a newer opset to onnxruntime-web's newest, see compat)
    Case("opset newer than onnxruntime", _with_model(_newer_opset, "opset30"), "Opset 30",
         ("run",)),
    Case("operator onnxruntime lacks", _with_model(_unknown_op, "unknown-op"), "Tanhh",
         (*MODEL_COMMANDS, "run")),
    Case("over 2 GB in one file", _over_2gb_in_one_file, "2 GB", ONNX_COMMANDS),
    Case("over 2 GB with external data", _over_2gb_external_data, "2 GB", MODEL_COMMANDS),
    Case("unknown config key", _config('modle = "x.onnx"\n'), "unknown key 'modle'",
         MODEL_COMMANDS),
    Case("config value of the wrong type", _config("verify = 3\n"),
         "key 'verify': expected true or false", MODEL_COMMANDS),
    Case("config choice misspelt", _config('quantize = "int3"\n'), "key 'quantize'",
         MODEL_COMMANDS),
    Case("config dims not a table", _config('dims = "batch"\n'), "key 'dims'", MODEL_COMMANDS),
    Case("config EP unknown", _config('execution_providers = ["cuda"]\n'),
         "key 'execution_providers'", MODEL_COMMANDS),
    Case("config not TOML", _config("verify = \n"), "not valid TOML", MODEL_COMMANDS),
    Case("--dim without a value", _flags("--dim", "batch"), "--dim", DIM_COMMANDS),
    Case("--dim negative", _flags("--dim", "batch=-1"), "--dim", DIM_COMMANDS),
    Case("--dim of no input", _flags("--dim", "bacth=2"), "'bacth'", DIM_COMMANDS),
    Case("--dim axis of no input", _flags("--dim", "nosuch:0=2"), "'nosuch:0'", DIM_COMMANDS),
    Case("--calibration missing file", _flags("--quantize", "int8-static", "--calibration",
                                              "/nonexistent/samples.npz"), "samples.npz",
         MODEL_COMMANDS),
    Case("--calibration not an npz", _calibration_text, "cannot read it as .npz",
         MODEL_COMMANDS),
    Case("--calibration wrong input name",
         _calibration(**{k: v for k, v in _good_calibration().items() if k != "ids"},
                      idz=np.zeros((4, 1, 3), np.int64)), "no array for input 'ids'",
         MODEL_COMMANDS),
    Case("--calibration wrong dtype", _calibration(**_good_calibration(
        x=np.array([[["a", "b", "c", "d"]]] * 4))), "got <U1 values", MODEL_COMMANDS),
    Case("--calibration wrong shape", _calibration(**_good_calibration(
        x=np.zeros((4, 1, 5), np.float32))), "'x'", MODEL_COMMANDS),
    Case("--task misspelt", _flags("--task", "object-detektion"), "--task: task setting 'kind'",
         MODEL_COMMANDS),
    Case("config task setting unknown", _config('[task]\nkind = "object-detection"\n'
                                                 "thresold = 0.5\n"),
         "key 'task': unknown task setting 'thresold'", MODEL_COMMANDS),
    Case("config task threshold out of range", _config('[task]\nkind = "object-detection"\n'
                                                       "score_threshold = 5\n"),
         "task setting 'score_threshold': expected a number from 0 to 1", MODEL_COMMANDS),
    Case("config task scale divides by zero", _config('[task]\nkind = "object-detection"\n'
                                                      'scale = "1/0"\n'),
         "task setting 'scale': '1/0' divides by zero", MODEL_COMMANDS),
    Case("--task nms misspelt", _flags("--task", "object-detection", "--task", "nms=agnostic"),
         "task setting 'nms': expected one of per-class, class-agnostic", MODEL_COMMANDS),
    Case("--task labels file missing", _flags("--task", "image-classification", "--task",
                                              "labels=/nonexistent/labels.txt"), "labels.txt",
         MODEL_COMMANDS),
    Case("--task image on a model without images", _flags("--task", "object-detection"),
         "no 4-d float input", ("build",)),
    Case("test --image missing", _flags("--image", "/nonexistent/cat.png"),
         "/nonexistent/cat.png: no such file", ("test",)),
    Case("run --image without a task", lambda w: Bad(model=w.bundle, args=("--image", "x.png")),
         "need a bundle built with --task", ("run",)),
    Case("output under a file", _output_under_a_file, "a-file", ("build",)),
    Case("--report under a file", _under_a_file("--report", "report.json"), "a-file", ("test",)),
    Case("--json under a file", _under_a_file("--json", "bench.json"), "a-file", ("bench",)),
    Case("--plot under a file", _under_a_file("--plot", "bench.png"), "a-file", ("bench",)),
    Case("--variant not shipped", _flags("--variant", "int4"), "no variant 'int4'", ("bench",)),
    Case("--runs zero", _flags("--runs", "0"), "--runs", ("bench",)),
    Case("--threads zero", _flags("--threads", "0"), "--threads", ("bench",)),
    Case("--ep unknown", _flags("--ep", "cuda"), "--ep", ("test", "bench")),
    Case("URL nothing listens at", lambda w: Bad(url="http://127.0.0.1:9/dist/"), "cannot reach",
         ("doctor",)),
    Case("--max-file-size not a size", _flags("--max-file-size", "big"), "--max-file-size",
         ("doctor",)),
    Case("no Chromium", _no_chromium, "apt-get install", ("build", *BUNDLE_COMMANDS)),
    Case("registry unreachable, nothing cached", _no_registry, "--runtime-dir",
         MODEL_COMMANDS),
]


def _tree(folder: Path) -> dict[str, str]:
    """Relative path -> sha256 of every file under `folder` (its exact bytes)."""
    return {
        str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*")) if path.is_file()
    }


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, runtime_dist: Path) -> tuple[Path, Path]:
    """A good model and its build, made once for the module."""
    from bundler.bundle.options import BuildOptions
    from bundler.commands.build import build

    root = tmp_path_factory.mktemp("good")
    model = models.multi_io(root)
    bundle = root / "bundle"
    build(model, BuildOptions(output=bundle, runtime_dir=runtime_dist, verify=False))
    return model, bundle


@pytest.fixture
def workspace(tmp_path: Path, built: tuple[Path, Path], runtime_dist: Path) -> Workspace:
    model, bundle = built
    output = tmp_path / "site" / "dist"
    shutil.copytree(bundle, output)
    return Workspace(root=tmp_path, model=model, bundle=bundle, output=output,
                     runtime_dir=runtime_dist)


def run_bundle(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bundler", *args], capture_output=True,
                          text=True, cwd=cwd, env=env, timeout=TIMEOUT_S)


def _environment(tmp: Path, extra: dict[str, str]) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp), **extra}


def assert_clear_failure(result: subprocess.CompletedProcess[str], fragment: str) -> None:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode != 0, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    assert lines and lines[-1].startswith("Error: "), result.stderr
    assert len(lines) <= MAX_STDERR_LINES, result.stderr
    assert fragment in lines[-1], lines[-1]


@pytest.mark.parametrize(("case", "command"), [
    pytest.param(case, command, id=f"{command}: {case.name}")
    for case in CASES for command in case.commands
])
def test_bad_input_fails_clearly_and_leaves_nothing(workspace: Workspace, case: Case,
                                                    command: str) -> None:
    bad = case.make(workspace)
    tmp = workspace.root / "tmp"
    tmp.mkdir()
    cwd = workspace.root / "cwd"
    cwd.mkdir()
    site = workspace.output.parent
    before = _tree(workspace.output)
    result = run_bundle(*COMMANDS[command](workspace, bad),
                        env=_environment(tmp, bad.env), cwd=cwd)
    assert_clear_failure(result, case.fragment(command))
    assert _tree(workspace.output) == before
    assert sorted(p.name for p in site.iterdir()) == ["dist"]
    assert [p.name for p in tmp.iterdir() if p.name != ORT_SESSION_FILE] == []
    assert list(cwd.iterdir()) == []


def test_debug_shows_the_traceback(workspace: Workspace, tmp_path: Path) -> None:
    result = run_bundle("--debug", "build", str(tmp_path / "nope.onnx"), "-o",
                        str(workspace.output), env=_environment(tmp_path, {}), cwd=tmp_path)
    assert result.returncode != 0
    assert "Traceback (most recent call last)" in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith("Error: model not found")
