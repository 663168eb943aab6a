"""npm packages the tool and its tests run (bundlers, TypeScript), installed once into the cache.

`npm_tool({"vite": "8.4.0"})` installs the packages at exact versions into
`cache_root()/npm-tools/<hash of the set>/node_modules` the first time, with the same node/npm as
the runtime fetch, and returns that folder; later calls find it there and touch no network.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path

from bundler.errors import RuntimeFetchError
from bundler.site.runtime import cache_root, node_and_npm, run_npm

MARKER = "installed.json"


def npm_tool(packages: Mapping[str, str], scripts: bool = True) -> Path:
    """The folder whose node_modules holds `packages` (name -> exact version). `scripts=False`:
    without running the packages' install scripts (`--ignore-scripts`), for a package whose
    dependencies download native binaries from outside the registry (onnxruntime-node's does,
    through @huggingface/transformers) that the caller does not use."""
    if not packages:
        raise ValueError("npm_tool needs at least one package")
    specs = sorted(f"{name}@{version}" for name, version in packages.items())
    flags = [] if scripts else ["--ignore-scripts"]
    key = hashlib.sha256("\n".join([*specs, *flags]).encode()).hexdigest()[:16]
    target = cache_root() / "npm-tools" / f"{specs[0].replace('/', '+')}-{key}"
    if (target / MARKER).is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        node, npm = node_and_npm()
        env = {**os.environ, "PATH": f"{node.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
        run_npm([*npm, "install", "--no-audit", "--no-fund", "--loglevel=error",
                 *flags, "--prefix", str(staging), *specs], env, f"npm install {' '.join(specs)}")
        (staging / MARKER).write_text(json.dumps(specs) + "\n")  # last: a complete install
        try:
            staging.rename(target)
        except OSError:  # another process installed it meanwhile
            if not (target / MARKER).is_file():
                raise RuntimeFetchError(f"cannot move the npm install into {target}") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def node_executable() -> Path:
    """The node that runs the installed tools."""
    return node_and_npm()[0]
