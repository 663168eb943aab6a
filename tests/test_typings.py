"""The generated bundle.d.ts/.d.mts: `tsc --noEmit --strict` accepts correct use of a built bundle
and rejects a wrong input name, a wrong dtype, a wrong variant and a non-array EP list."""

import dataclasses
import shutil
import subprocess
from pathlib import Path

import pytest

from bundler.bundle import manifest as bundle_manifest
from bundler.bundle.layout import DECLARATION_FILES
from bundler.bundle.modelio import TensorSpec
from bundler.bundle.options import BuildOptions
from bundler.bundle.typings import declarations
from bundler.commands.build import build
from bundler.site.npmtools import node_executable, npm_tool
from tests import models

TYPESCRIPT = {"typescript": "7.0.2"}
RESOLUTIONS = {  # how a Node project and how a Vite/webpack project resolve './dist/bundle.mjs'
    "nodenext": ["--module", "nodenext", "--moduleResolution", "nodenext"],
    "bundler": ["--module", "esnext", "--moduleResolution", "bundler"],
}


@pytest.fixture(scope="module")
def tsc() -> list[str]:
    return [str(node_executable()),
            str(npm_tool(TYPESCRIPT) / "node_modules" / "typescript" / "bin" / "tsc")]


@pytest.fixture(scope="module")
def project(tmp_path_factory, runtime_dist) -> Path:
    """A TypeScript project folder with the multi_io bundle built into dist/."""
    root = tmp_path_factory.mktemp("typed")
    build(models.multi_io(root / "models"),
          BuildOptions(output=root / "dist", verify=False, runtime_dir=runtime_dist))
    return root


def compile_ts(tsc: list[str], project: Path, source: str,
               resolution: str = "nodenext") -> subprocess.CompletedProcess[str]:
    (project / "app.mts").write_text(source)
    return subprocess.run(
        [*tsc, "--noEmit", "--strict", "--target", "es2022", *RESOLUTIONS[resolution],
         "app.mts"],
        cwd=project, capture_output=True, text=True, timeout=300,
    )


GOOD = """
import { load, BundleError, type Inputs, type Model } from './dist/bundle.mjs';

const model: Model = await load({ executionProviders: ['webgpu', 'wasm'], variant: 'fp32' });
const codes: string[] = model.fallbackReasons.map((reason) => reason.code);
const feeds: Inputs = {
  x: { type: 'float32', dims: [2, 4], data: new Float32Array(8) },
  ids: { dims: [2, 3], data: [0, 1, 2, 3, 4, 5] },
  mask: { dims: [2, 3], data: new Int32Array(6) },
};
const out = await model.run(feeds);
const y: Float32Array = out.y.data;
const count: Int32Array = out.count.data;
const classes: 2 = out.y.dims[1];
console.log(codes, y, count, classes, model.fallbackReason?.length);
// the task API (a bundle built with --task; another rejects with 'wrong-task')
const found = await model.detect(new Blob([]), { threshold: 0.5 });
const top = await model.classify(new ImageData(2, 2), { topK: 3 });
const chunks = await model.stream().push(new Float32Array(4), 48000);
const x: number = found[0].box.x + top[0].score + chunks[0].score;
const label: string = found[0].label;
console.log(x, label, model.manifest.task?.labels?.length, model.manifest.task?.kind);
const made = await model.generate([{ role: 'user', content: 'Hi' }], {
  maxNewTokens: 8, temperature: 0.7, seed: 1, stop: ['\\n'], signal: new AbortController().signal,
  onToken: (piece: string) => console.log(piece),
});
const ids: number[] = made.tokenIds;
console.log(made.text.length + ids.length, made.timings.decodeTokensPerS ?? 0);
try {
  await load();
} catch (error) {
  if (error instanceof BundleError && error.code === 'no-execution-provider') {
    console.log(error.reasons?.map((reason) => `${reason.ep}: ${reason.detail}`));
  }
}
"""


@pytest.mark.parametrize("resolution", sorted(RESOLUTIONS))
def test_correct_use_compiles(tsc, project, resolution):
    result = compile_ts(tsc, project, GOOD, resolution)
    assert result.returncode == 0, result.stdout + result.stderr


def test_bundle_d_mts_is_what_typescript_finds_for_bundle_mjs(tsc, project, tmp_path):
    manifest = bundle_manifest.load(project / "dist")
    assert [(project / "dist" / name).read_text() for name in DECLARATION_FILES] == \
        [declarations(manifest)] * 2
    without = tmp_path / "project"
    shutil.copytree(project / "dist", without / "dist")
    (without / "dist" / "bundle.d.mts").unlink()
    result = compile_ts(tsc, without, GOOD)
    assert "Could not find a declaration file for module './dist/bundle.mjs'" in result.stdout, \
        result.stdout


RUN = """
import {{ load }} from './dist/bundle.mjs';
const model = await load();
await model.run({{
  {x}: {{ dims: [2, 4], data: {data} }},
  ids: {{ dims: [2, 3], data: [0, 1, 2, 3, 4, 5] }},
  mask: {{ dims: [2, 3], data: new Int32Array(6) }},
}});
"""


@pytest.mark.parametrize(("source", "error"), [
    (RUN.format(x="nope", data="new Float32Array(8)"),
     "'nope' does not exist in type 'Inputs'"),
    (RUN.format(x="x", data="new Int32Array(8)"),
     "Type 'Int32Array<ArrayBuffer>' is not assignable to type 'Float32Array"),
    (RUN.format(x="x", data="new Float32Array(8)").replace("dims: [2, 4]", "dims: [2, 5]"),
     "Type '5' is not assignable to type '4'"),
    ("import { load } from './dist/bundle.mjs';\nawait load({ executionProviders: 'wasm' });\n",
     "Type 'string' is not assignable to type 'readonly ExecutionProvider[]'"),
    ("import { load } from './dist/bundle.mjs';\nawait load({ variant: 'int4' });\n",
     "Type '\"int4\"' is not assignable to type '\"fp32\"'"),
], ids=["wrong-input-name", "wrong-dtype", "wrong-fixed-dim", "string-ep", "unknown-variant"])
def test_wrong_use_does_not_compile(tsc, project, source, error):
    result = compile_ts(tsc, project, source)
    assert result.returncode != 0 and error in result.stdout, result.stdout + result.stderr


def test_any_names_ranks_and_types_give_valid_declarations(tsc, project, tmp_path):
    built = bundle_manifest.load(project / "dist")
    session = dataclasses.replace(
        built.session(),
        name="odd */ session\n",
        inputs=[TensorSpec("<img src=x onerror=alert(1)>", "float32", None),
                TensorSpec("input.1", "int64", ()),
                TensorSpec('quote"\n*/', "bool", ("?", 2)),
                TensorSpec("text", "string", (1,))],
        outputs=[TensorSpec("half", "float16", (1, "n")), TensorSpec("labels", "string", None)],
    )
    session.variants = [dataclasses.replace(session.variants[0], name=name)
                        for name in ("fp32", "int8")]
    odd = dataclasses.replace(built, name="odd */ name\n", sessions=(session,))
    (tmp_path / "dist").mkdir()
    (tmp_path / "dist" / "bundle.d.mts").write_text(declarations(odd))
    source = """
import { load } from './dist/bundle.mjs';
const model = await load({ variant: 'int8' });
const out = await model.run({
  '<img src=x onerror=alert(1)>': { dims: [3, 1], data: [1, 2, 3] },
  'input.1': 7n,
  'quote"\\n*/': { dims: [5, 2], data: [true, false, true, false, true, false, true, false, true,
                                        false] },
  text: { data: ['a'] },
});
const half: number = out.half.data[0];
const labels: string[] = out.labels.data;
console.log(half, labels, out.half.dims.length);
"""
    result = compile_ts(tsc, tmp_path, source)
    assert result.returncode == 0, result.stdout + result.stderr


TWO_SESSIONS = """
import { load, type Model, type SessionName } from './dist/bundle.mjs';
const encoder: Model = await load({ variant: 'fp32' });  // the primary session
const decoder = await load({ session: 'decoder', variant: 'int8' });
const out = await decoder.run({ tokens: { dims: [1, 4], data: [1, 2, 3, 4] } });
const logits: Float32Array = out.logits.data;
const names: SessionName[] = ['multi_io', 'decoder'];
console.log(encoder.session, decoder.session, logits, names);
"""


@pytest.mark.parametrize(("source", "error"), [
    (TWO_SESSIONS, None),
    (TWO_SESSIONS.replace("session: 'decoder', variant: 'int8'", "session: 'joiner'"),
     "Type '\"joiner\"' is not assignable to type 'SessionName"),
    (TWO_SESSIONS.replace("variant: 'int8' })", "variant: 'fp32' })"),
     "Type '\"fp32\"' is not assignable to type '\"int8\"'"),
    (TWO_SESSIONS.replace("tokens:", "x:"), "'x' does not exist in type"),
], ids=["correct", "unknown-session", "other-session's-variant", "other-session's-input"])
def test_each_session_of_a_pipeline_is_typed(tsc, project, tmp_path, source, error):
    built = bundle_manifest.load(project / "dist")
    primary = built.session()
    decoder = bundle_manifest.Session(
        "decoder", [TensorSpec("tokens", "int64", (1, "n"))],
        [TensorSpec("logits", "float32", (1, "n", 8))],
        [dataclasses.replace(primary.variants[0], name="int8")], "int8")
    shutil.copytree(project / "dist", tmp_path / "dist")
    text = declarations(dataclasses.replace(built, sessions=(primary, decoder)))
    (tmp_path / "dist" / "bundle.d.mts").write_text(text)
    result = compile_ts(tsc, tmp_path, source)
    if error is None:
        assert result.returncode == 0, result.stdout + result.stderr
    else:
        assert result.returncode != 0 and error in result.stdout, result.stdout + result.stderr
