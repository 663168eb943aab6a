"""The browser harness lives in web/dev/*.mjs, not in Python strings: the server serves those
modules, every harness_call in bundler/ names a function they export, and no JavaScript program
is left in a Python string in bundler/."""

from __future__ import annotations

import ast
import re
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from bundler.perf.page import BENCH_MODULE
from bundler.resources import resource
from bundler.server.bundle_server import HARNESS_MODULES, serve_directory

PACKAGE = Path(__file__).resolve().parent.parent / "bundler"
DEV = resource("web") / "dev"
# What a program has (statements: a block, an await, a declaration, and semicolons) and a
# one-line call expression does not.
_PROGRAM = re.compile(r"=>\s*\{|\bawait\s|\b(const|let)\s+[\w{\[]")


def _python_files() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_the_server_serves_the_harness_modules_and_nothing_else_there(tmp_path: Path) -> None:
    with serve_directory(tmp_path) as base_url:
        url = base_url.rstrip("/") + HARNESS_MODULES
        with urllib.request.urlopen(url + "harness.mjs", timeout=10) as response:
            assert response.headers["Content-Type"].startswith("text/javascript")
            assert response.read() == (DEV / "harness.mjs").read_bytes()
        for name in ("missing.mjs", "..%2Fbundle.mjs", "../bundle.mjs", "harness.mjs.map"):
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(url + name, timeout=10)
            assert refused.value.code == 404, name


def test_every_harness_call_names_a_function_its_module_exports() -> None:
    exported = {path.name: set(re.findall(r"^export (?:async )?function (\w+)",
                                          path.read_text(encoding="utf-8"), re.MULTILINE))
                for path in DEV.glob("*.mjs")}
    calls = [(path, call) for path in _python_files() if path.name != "harness.py"
             for call in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
             if isinstance(call, ast.Call) and getattr(call.func, "id", None) == "harness_call"]
    assert len(calls) >= 6, "the harness is called from conformance, tasks, bench, profile, auto"
    constants = {"BENCH_MODULE": BENCH_MODULE}
    for path, call in calls:
        module, function = call.args
        name = module.value if isinstance(module, ast.Constant) else constants[module.id]
        assert function.value in exported[name], f"{path}: {name} has no export {function.value}"


def test_no_javascript_program_is_left_in_a_python_string() -> None:
    found = [f"{path.relative_to(PACKAGE.parent)}:{node.lineno}"
             for path in _python_files()
             for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
             if isinstance(node, ast.Constant) and isinstance(node.value, str)
             and _PROGRAM.search(node.value) and ";" in node.value]
    assert found == [], "JavaScript belongs in web/dev/*.mjs"
