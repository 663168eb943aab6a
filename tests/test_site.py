"""The rendered app and a user template folder (--templates / `templates` in bundle.toml)."""

from __future__ import annotations

import re

import pytest

from bundler.bundle.options import load_config
from bundler.errors import ConfigError
from tests import models


def test_user_templates_extend_the_page_and_their_files_are_copied(tmp_path, build_bundle):
    theme = tmp_path / "theme"
    (theme / "img").mkdir(parents=True)
    (theme / "index.html.j2").write_text(
        '{% extends "bundler/index.html.j2" %}{% block title %}Mine: {{ manifest.name }}'
        '{% endblock %}{% block head %}<link rel="stylesheet" href="style.css">{% endblock %}')
    (theme / "about.html.j2").write_text("<p>{{ session.inputs | length }} inputs</p>")
    (theme / "style.css").write_text("body { color: teal; }")
    (theme / "img" / "logo.svg").write_text("<svg/>")
    (theme / ".index.html.j2.swp").write_text("editor junk")
    folder, manifest = build_bundle(models.multi_io(tmp_path), templates=theme)

    page = (folder / "index.html").read_text()
    assert "<title>Mine: multi_io</title>" in page
    assert '<link rel="stylesheet" href="style.css">' in page
    assert "<code>mask</code>" in page  # the shipped page's content block is kept
    assert (folder / "about.html").read_text() == "<p>3 inputs</p>"
    assert (folder / "style.css").read_text() == "body { color: teal; }"
    assert (folder / "img" / "logo.svg").is_file()
    assert not list(folder.glob(".*.swp")) and not (folder / "about.html.j2").exists()


@pytest.mark.parametrize(("name", "text", "message"), [
    ("bundle.json.j2", "{}", "would replace the bundle's own bundle.json"),
    ("bundle.mjs", "", "would replace the bundle's own bundle.mjs"),
    ("models/x.onnx", "", "would replace the bundle's own models"),
    ("index.html.j2", "{% if %}", "index.html.j2:1"),
    ("index.html.j2", "{{ manifest.no_such_key }}", "no_such_key"),
])
def test_template_folder_problems_are_one_clear_error(tmp_path, build_bundle, name, text,
                                                      message):
    theme = tmp_path / "theme"
    (theme / name).parent.mkdir(parents=True, exist_ok=True)
    (theme / name).write_text(text)
    with pytest.raises(ConfigError, match=message.replace(".", r"\.")):
        build_bundle(models.multi_io(tmp_path), templates=theme)
    assert not (tmp_path / "dist").exists()


def test_templates_key_must_name_a_folder(tmp_path):
    config = tmp_path / "bundle.toml"
    config.write_text('templates = "theme"\n')
    with pytest.raises(ConfigError, match=r"bundle\.toml: key 'templates': .*theme is not a"
                                          r" folder"):
        load_config(config)


def test_the_page_preloads_exactly_the_modules_its_script_imports(tmp_path, build_bundle):
    folder, _ = build_bundle(models.multi_io(tmp_path))
    page = (folder / "index.html").read_text()
    preloaded = set(re.findall(r'<link rel="modulepreload" href="\./([^"]+)">', page))
    imported, pending = set(), ["app.mjs"]
    while pending:  # the static imports from the page's script on (dynamic ones load later)
        module = pending.pop()
        imported.add(module)
        source = (folder / module).read_text()
        pending += [name for name in re.findall(r"^import .*? from '\./([^']+)';", source,
                                                 flags=re.M | re.S) if name not in imported]
    assert preloaded == imported
