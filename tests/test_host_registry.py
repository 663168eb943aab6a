"""The static host registry: every host is the module of its name and has every part (config
writer, detection, doctor fixes), and `--host` offers exactly the registered hosts."""

from __future__ import annotations

import hashlib
import importlib

import pytest

from bundler.bundle.options import OPTIONS, load_options
from bundler.cli import build
from bundler.hosting.doctor.fixes import ANY_HOST_FIXES, fix_for
from bundler.hosting.registry import CONFIG_FILES, HOST_NAMES, HOSTS, detect_host
from tests.conftest import run_cli

# Response headers each host sends (as doctor sees them: names lower-cased). A new host needs
# its own here.
HOST_HEADERS = {
    "netlify": {"server": "Netlify", "x-nf-request-id": "01HX"},
    "cloudflare": {"server": "cloudflare", "cf-ray": "8a1b2c3d4e5f-AMS"},
    "vercel": {"server": "Vercel", "x-vercel-id": "fra1::abc"},
    "github-pages": {"server": "GitHub.com", "x-github-request-id": "A1B2:3C4D"},
    "s3": {"server": "AmazonS3", "x-amz-request-id": "4442587FB7D0A2F9"},
    "nginx": {"server": "nginx/1.25.3"},
}
_SHA = hashlib.sha256(b"model").hexdigest()
ENTRIES = [
    {"path": "index.html", "bytes": 2000, "sha256": hashlib.sha256(b"page").hexdigest(),
     "encodings": {"br": {"path": "index.html.br", "bytes": 300},
                   "gzip": {"path": "index.html.gz", "bytes": 400}}},
    {"path": f"models/fp32.{_SHA[:8]}.onnx", "bytes": 9000, "sha256": _SHA,
     "parts": [{"path": f"models/fp32.{_SHA[:8]}.onnx.part{index}", "bytes": 4500,
                "sha256": hashlib.sha256(bytes([index])).hexdigest()} for index in range(2)]},
]


def test_every_host_has_its_detection_headers_here():
    assert set(HOST_HEADERS) == set(HOST_NAMES)


@pytest.mark.parametrize("name", HOST_NAMES)
def test_every_host_is_the_module_of_its_name_with_every_part(name: str):
    host = importlib.import_module(f"bundler.hosting.{name.replace('-', '_')}").HOST
    assert host is HOSTS[name] and host.name == name
    # config writer: deterministic text for the file `bundle build --host NAME` writes
    assert CONFIG_FILES[name] == host.config_file and "/" not in host.config_file
    config = host.write_config(ENTRIES)
    assert isinstance(config, str) and config == host.write_config(ENTRIES)
    assert config == "" or config.endswith("\n")
    # detection: its own headers and nobody else's
    assert host.detect(HOST_HEADERS[name]) and detect_host(HOST_HEADERS[name]) == name
    assert not host.detect({"server": "SimpleHTTP/0.6 Python/3.12"})
    # doctor rules: fixes for kinds of problem doctor knows, each its own advice
    assert host.fixes and set(host.fixes) <= set(ANY_HOST_FIXES)
    for kind, fix in host.fixes.items():
        assert fix_for(kind, name) == fix != ANY_HOST_FIXES[kind]


def test_a_platforms_marks_win_over_a_cdn_in_front_of_it():
    behind_cloudflare = {**HOST_HEADERS["github-pages"], "cf-ray": "8a1b2c3d4e5f-AMS"}
    assert detect_host(behind_cloudflare) == "github-pages"
    assert detect_host({"server": "nginx", "x-amz-cf-id": "abc"}) == "s3"
    assert detect_host({"server": "SimpleHTTP/0.6"}) == "unknown"


def test_fixes_fall_back_to_the_one_for_any_host():
    assert fix_for("no-validator", "netlify") == ANY_HOST_FIXES["no-validator"]
    assert fix_for("content-type", "unknown") == ANY_HOST_FIXES["content-type"]
    assert fix_for("spa-fallback", "nginx") == fix_for("html-instead", "nginx") != fix_for(
        "html-instead", "unknown")


def test_host_choices_come_from_the_registry(tmp_path):
    flag = next(param for param in build.params if param.name == "hosts")
    assert tuple(flag.type.choices) == (*HOST_NAMES, "all")
    assert OPTIONS["hosts"].default == HOST_NAMES
    assert all(name in OPTIONS["hosts"].help for name in HOST_NAMES)
    assert load_options(None, {"hosts": "all"}, cwd=tmp_path).hosts == HOST_NAMES
    result = run_cli("build", "--host", "heroku", "-o", tmp_path / "dist")
    assert result.returncode == 2
    assert all(f"'{name}'" in result.stderr for name in HOST_NAMES), result.stderr
