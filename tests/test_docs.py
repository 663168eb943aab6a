"""The documentation site builds with `mkdocs build --strict`, and everything the code declares is
in it: every option of every command, every bundle.toml key, every task setting and every
BundleError code. Adding one without documentation fails here."""

from __future__ import annotations

import html
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import typing
from pathlib import Path

import click
import pytest

from bundler.bundle.options import OPTIONS
from bundler.cli import main

ROOT = Path(__file__).resolve().parent.parent
WEB = ROOT / "web"


def _hooks():
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "docs" / "hooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


hooks = _hooks()


def mkdocs_build(config: Path, site: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(site)],
        cwd=config.parent, capture_output=True, text=True, timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    site = tmp_path_factory.mktemp("docs") / "site"
    result = mkdocs_build(ROOT / "mkdocs.yml", site)
    assert result.returncode == 0, f"mkdocs build --strict failed:\n{result.stderr}"
    return site


def page_text(site: Path, page: str) -> str:
    """The visible text of a built page's article (tags removed, entities decoded)."""
    path = site / page / "index.html"
    assert path.is_file(), f"no page {page}/ in the built site"
    text = path.read_text(encoding="utf-8")
    article = text[text.index("<article"):text.index("</article>")]
    return html.unescape(re.sub(r"<[^>]+>", "", article))


def test_mkdocs_build_strict_passes(site):
    assert (site / "index.html").is_file()
    assert (site / "changelog" / "index.html").is_file()
    assert "Unreleased" in page_text(site, "changelog")


def test_every_command_option_is_on_its_command_page(site):
    for name, command in main.commands.items():
        text = page_text(site, f"reference/cli/{name}")
        assert f"bundle {name}" in text
        for param in command.params:
            if isinstance(param, click.Option):
                for flag in (*param.opts, *param.secondary_opts):
                    assert flag in text, f"bundle {name} {flag} is not in reference/cli/{name}"
    overview = page_text(site, "reference/cli")
    for param in main.params:
        for flag in (*getattr(param, "opts", ()), *getattr(param, "secondary_opts", ())):
            assert flag in overview, f"bundle {flag} is not on the command-line overview"


def test_every_command_option_has_help():
    # the command pages are the --help text: an option without help is undocumented there
    missing = [f"bundle {name} {param.opts[0]}" for name, command in main.commands.items()
               for param in command.params
               if isinstance(param, click.Option) and not (param.help or "").strip()]
    assert not missing, f"options without help: {', '.join(missing)}"


def test_every_bundle_toml_key_is_documented(site):
    text = page_text(site, "reference/bundle-toml")
    for key, declared in OPTIONS.items():
        assert key in text, f"bundle.toml key {key!r} is not in reference/bundle-toml"
        assert declared.help in text.replace("\n", " ")


def test_every_task_setting_and_choice_is_documented(site):
    text = page_text(site, "reference/task-settings")
    hints = typing.get_type_hints(hooks.TaskSpec)
    for field in hooks.task_settings():
        assert field.name in text, f"task setting {field.name!r} is not in reference/task-settings"
        for choice in typing.get_args(hints[field.name]):
            for value in typing.get_args(choice) or (choice,):
                if isinstance(value, str):
                    assert value in text, f"task setting {field.name} = {value!r} is undocumented"


def _thrown_codes() -> set[str]:
    thrown = set()
    for path in WEB.rglob("*.mjs"):
        thrown |= set(re.findall(r"new BundleError\(\s*'([a-z0-9-]+)'",
                                 path.read_text(encoding="utf-8")))
    return thrown


def _typed_codes() -> set[str]:
    typings = (WEB / "bundle.d.ts").read_text(encoding="utf-8")
    union = re.search(r"export type ErrorCode =(?P<body>[^;]*);", typings)
    assert union, "bundle.d.ts has no ErrorCode type"
    return set(re.findall(r"'([a-z0-9-]+)'", union["body"]))


def test_every_error_code_is_declared_typed_and_documented(site):
    declared = hooks.error_codes()
    assert set(declared) >= {"bad-option", "integrity", "wrong-task"}  # the parser found them
    assert not _thrown_codes() - set(declared), "BundleError codes thrown but not in ERROR_CODES"
    assert _typed_codes() == set(declared), "bundle.d.ts's ErrorCode differs from ERROR_CODES"
    text = page_text(site, "reference/errors")
    for code, meaning in declared.items():
        assert code in text, f"error code {code!r} is not in reference/errors"
        assert meaning and meaning in text, f"error code {code!r} has no meaning in the docs"


def test_error_code_without_a_comment_is_reported():
    source = "export const ERROR_CODES = [\n  'known', // what it means\n  'bare',\n];"
    assert hooks.error_codes(source) == {"known": "what it means", "bare": ""}


def test_a_task_setting_the_page_does_not_describe_fails_the_build(tmp_path):
    """The docs of a tree whose task-settings page lost a setting's description do not build."""
    for name in ("mkdocs.yml", "CHANGELOG.md"):
        shutil.copy(ROOT / name, tmp_path / name)
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    (tmp_path / "web").symlink_to(WEB)
    page = tmp_path / "docs" / "reference" / "task-settings.md"
    text = page.read_text(encoding="utf-8")
    row = next(line for line in text.splitlines() if line.startswith("| `context_size` |"))
    page.write_text(text.replace(row + "\n", ""), encoding="utf-8")

    result = mkdocs_build(tmp_path / "mkdocs.yml", tmp_path / "site")

    assert result.returncode != 0
    assert "task setting 'context_size'" in result.stderr
    assert "is not described in reference/task-settings.md" in result.stderr


def test_readme_is_short_and_starts_with_the_two_commands():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.encode()) <= 12 * 1024
    first_block = readme[readme.index("```sh"):readme.index("```", readme.index("```sh") + 5)]
    assert "pip install . && bundle serve" in first_block
    assert "bash scripts/test.sh" in first_block
    for link in re.findall(r"\]\((?!https?:)([^)#]+)", readme):
        assert (ROOT / link).exists(), f"README links to {link}, which does not exist"
