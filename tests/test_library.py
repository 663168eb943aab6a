"""The library API as a user calls it: from a fresh interpreter, any number of times."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from bundler.bundle.options import DEFAULT_RUNTIME_VERSION
from tests.conftest import ROOT

SCRIPT = """
import sys
from pathlib import Path

import bundler

out, runtime = Path(sys.argv[1]), Path(sys.argv[2])
first = bundler.build(options=bundler.BuildOptions(output=out / "a", runtime_dir=runtime,
                                                   verify=False))
second = bundler.build(options=bundler.BuildOptions(output=out / "b", runtime_dir=runtime,
                                                    verify=False, quantize="int8"))
assert callable(bundler.build) and callable(bundler.serve) and callable(bundler.check_bundle)
assert bundler.BuildOptions is bundler.bundle.options.BuildOptions
print(first.name, first.session().variants[0].kind, second.session().variants[0].kind,
      first.schema_version)
"""


def test_build_twice_in_one_interpreter(tmp_path: Path, runtime_dist: Path) -> None:
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(SCRIPT), str(tmp_path),
                             str(runtime_dist)], capture_output=True, text=True, cwd=tmp_path,
                            timeout=600, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["digits", "fp32", "int8", "2"]
    assert DEFAULT_RUNTIME_VERSION == "1.31.1"
