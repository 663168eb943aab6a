"""bundle.mjs's pure part (web/bundle.core.mjs) unit-tested under Node: tests/js/*.test.mjs."""

import os
import re
import subprocess
from pathlib import Path

from bundler.site.npmtools import node_executable

JS_TESTS = Path(__file__).resolve().parent / "js"


def test_bundle_core_passes_its_node_tests(runtime_dist):
    files = sorted(JS_TESTS.glob("*.test.mjs"))
    assert files, f"no *.test.mjs in {JS_TESTS}"
    result = subprocess.run(
        [str(node_executable()), "--test", *map(str, files)],
        env={**os.environ, "ORT_WEB_DIST": str(runtime_dist)},
        capture_output=True, text=True, timeout=300,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    passed = re.search(r"^# pass (\d+)$", result.stdout, re.MULTILINE)
    assert passed and int(passed.group(1)) >= 20, output
