"""The shape of the package (docs/development/architecture.md): grouped by contract and stage, no
module too long to read in one sitting, and no import cycle between modules at import time."""

from __future__ import annotations

import ast
from pathlib import Path

import bundler

PACKAGE = Path(bundler.__file__).parent
MAX_LINES = 450
# What may sit at the top of bundler/: the public API, the click layer and the cross-cutting
# helpers every package uses; everything else belongs to a package of its contract or stage.
TOP_LEVEL = {"__init__", "__main__", "cli", "console", "errors", "interrupts", "resources"}


def _modules() -> dict[str, Path]:
    modules = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        modules[name] = path
    return modules


def _import_time_imports(path: Path, name: str, known: set[str]) -> set[str]:
    """The bundler modules `name` imports when it is imported: module-level statements only (not
    those inside functions or under `if TYPE_CHECKING:`)."""
    found: set[str] = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1]
                                + ([base] if base else []))
            targets = [base] + [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        found.update(target for target in targets if target in known and target != name)
    return found


def test_no_module_is_over_the_line_limit() -> None:
    long = {name: n for name, path in _modules().items()
            if (n := len(path.read_text().splitlines())) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines: {long}"


def test_the_top_level_holds_only_the_api_and_cross_cutting_helpers() -> None:
    flat = {path.stem for path in PACKAGE.glob("*.py")}
    assert flat <= TOP_LEVEL, f"group these into a package: {sorted(flat - TOP_LEVEL)}"


def test_no_import_cycle_at_import_time() -> None:
    modules = _modules()
    graph = {name: _import_time_imports(path, name, set(modules))
             for name, path in modules.items()}
    # A package's __init__ is imported before its modules: an edge to a package is an edge to
    # its __init__, which is a node of its own here, so `a.b -> a` is no cycle unless a imports
    # a.b back.
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for target in sorted(graph[node]):
            if state.get(target) == 1:
                return stack[stack.index(target):] + [target]
            if target not in state and (cycle := visit(target)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for name in sorted(graph):
        if name not in state and (cycle := visit(name)):
            raise AssertionError("import cycle: " + " -> ".join(cycle))


def test_the_cycle_check_finds_a_cycle(tmp_path: Path) -> None:
    """The check above reads real import statements: two modules importing each other is one."""
    (tmp_path / "a.py").write_text("from bundler.b import x\n")
    (tmp_path / "b.py").write_text("import bundler.a\n")
    known = {"bundler.a", "bundler.b"}
    assert _import_time_imports(tmp_path / "a.py", "bundler.a", known) == {"bundler.b"}
    assert _import_time_imports(tmp_path / "b.py", "bundler.b", known) == {"bundler.a"}
