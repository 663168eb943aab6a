"""bundle serve: the real command in a subprocess on a free port, driven over HTTP and, for live
reload, from a real headless Chromium page."""

from __future__ import annotations

import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from bundler.bundle.options import CONFIG_FILE_NAME
from bundler.commands.serve import changed_paths, snapshot
from tests import encoder_models, models
from tests.conftest import default_sigint

SECRET = "top-secret-marker"


class Served:
    """`bundle serve ARGS --port 0` in a subprocess; its output collected line by line."""

    def __init__(self, *args: str | Path, cwd: Path, env: dict[str, str] | None = None) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "bundler", "serve", *map(str, args)],
            cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            preexec_fn=default_sigint,
        )
        self.lines: list[str] = []
        self._new_line = threading.Condition()
        threading.Thread(target=self._collect, daemon=True).start()

    def _collect(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            with self._new_line:
                self.lines.append(line.rstrip("\n"))
                self._new_line.notify_all()
        with self._new_line:
            self._new_line.notify_all()

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    def wait_for(self, pattern: str, timeout: float = 120.0, start: int = 0) -> re.Match[str]:
        """The first line from `start` on matching `pattern`; fails if the server exits first."""
        deadline = time.monotonic() + timeout
        with self._new_line:
            while True:
                for line in self.lines[start:]:
                    if match := re.search(pattern, line):
                        return match
                if self.process.poll() is not None and not self._new_line.wait(0.5):
                    raise AssertionError(f"bundle serve exited ({self.process.returncode}):\n"
                                         f"{self.output}")
                if time.monotonic() > deadline:
                    raise AssertionError(f"no line matching {pattern!r} in:\n{self.output}")
                self._new_line.wait(0.5)

    @property
    def url(self) -> str:
        return self.wait_for(r"Serving on (http://\S+/)")[1]

    def stop(self, signum: int = signal.SIGINT) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signum)
        try:
            return self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            raise AssertionError(f"bundle serve did not stop on signal {signum}:\n{self.output}"
                                 ) from None


@pytest.fixture
def serve_cli(tmp_path: Path, runtime_dist: Path):
    started: list[Served] = []

    def _serve(*args: str | Path, cwd: Path = tmp_path, port: str = "0",
               env: dict[str, str] | None = None) -> Served:
        served = Served(*args, "--port", port, cwd=cwd, env=env)
        started.append(served)
        return served

    yield _serve
    for served in started:
        served.stop(signal.SIGTERM)


def fetch(url: str, headers: dict[str, str] | None = None):
    request = urllib.request.Request(url, headers=headers or {})
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.status, response.headers, response.read()


def raw_get(url: str, target: str, method: str = "GET") -> tuple[int, dict[str, str], bytes]:
    """A request with the target sent exactly as given (no client-side normalisation)."""
    host, port = re.match(r"http://([^:/]+):(\d+)/", url).groups()
    with socket.create_connection((host, int(port)), timeout=10) as connection:
        connection.sendall(f"{method} {target} HTTP/1.1\r\nHost: {host}\r\n"
                           "Connection: close\r\n\r\n".encode())
        data = b""
        while chunk := connection.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in header_lines)
    return int(status_line.split()[1]), headers, body


def listening_addresses(port: int) -> set[str]:
    """Local addresses with a listening TCP socket on `port`, from /proc/net/tcp{,6}."""
    addresses = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, port_hex = local.split(":")
            if state == "0A" and int(port_hex, 16) == port:
                addresses.add(socket.inet_ntop(socket.AF_INET, bytes.fromhex(address)[::-1])
                              if len(address) == 8 else address)
    return addresses


def test_serves_a_built_folder_with_isolation_headers_exact_types_and_real_404s(
        build_bundle, serve_cli, tmp_path):
    folder, manifest = build_bundle(models.multi_io(tmp_path), name="site")
    (folder / "extra.ort").write_bytes(b"ort")
    (folder / "empty").mkdir()
    served = serve_cli(folder)
    url = served.url
    model_file = manifest["sessions"][0]["variants"][0]["file"]
    wasm_build = manifest["runtime"]["builds"]["wasm"]
    expected = {
        "": "text/html; charset=utf-8",
        "bundle.json": "application/json",
        "bundle.mjs": "text/javascript",
        "app.mjs": "text/javascript",
        wasm_build["wasm"]: "application/wasm",
        wasm_build["mjs"]: "text/javascript",
        model_file: "application/octet-stream",
        "extra.ort": "application/octet-stream",
    }
    for path, content_type in expected.items():
        status, headers, body = fetch(url + path)
        assert status == 200, path
        assert headers["Content-Type"] == content_type, path
        assert headers["Cross-Origin-Opener-Policy"] == "same-origin"
        assert headers["Cross-Origin-Embedder-Policy"] == "require-corp"
        assert headers["Cache-Control"] == "no-cache"
        assert int(headers["Content-Length"]) == len(body)
    assert fetch(url + model_file)[2] == (folder / model_file).read_bytes()

    _, headers, _ = fetch(url + "bundle.json")
    assert fetch_status(url + "bundle.json", {"If-None-Match": headers["ETag"]}) == 304
    for missing in ("runtime/ort-wasm-missing.wasm", "nope.html", "empty/", "bundle.json/"):
        status, headers, body = raw_get(url, "/" + missing)
        assert status == 404, missing
        assert headers["Content-Type"].startswith("text/plain"), missing  # never an HTML page
        assert b"<" not in body
    status, headers, _ = raw_get(url, "/runtime")
    assert (status, headers["Location"]) == (301, "/runtime/")
    served.stop()


def fetch_status(url: str, headers: dict[str, str]) -> int:
    try:
        return fetch(url, headers)[0]
    except urllib.error.HTTPError as error:
        return error.code


def test_nothing_outside_the_folder_is_served(build_bundle, serve_cli, tmp_path):
    folder, _ = build_bundle(models.multi_io(tmp_path), name="site")
    secret = tmp_path / "secret.txt"
    secret.write_text(SECRET)
    (tmp_path / "private").mkdir()
    (tmp_path / "private" / "key.txt").write_text(SECRET)
    (folder / "out.txt").symlink_to(secret)
    (folder / "out-dir").symlink_to(tmp_path / "private")
    (folder / "in.json").symlink_to(folder / "bundle.json")
    (folder / "loop").symlink_to(folder / "loop")
    url = serve_cli(folder).url
    attempts = [
        "/../secret.txt", "/runtime/../../secret.txt", "/%2e%2e/secret.txt",
        "/%2E%2E%2Fsecret.txt", "/runtime/%2e%2e/%2e%2e/secret.txt", "/..%5csecret.txt",
        "/%2e%2e%2f%2e%2e%2f%2e%2e%2f%2e%2e%2fetc%2fpasswd", f"/{secret}", f"//{secret}",
        f"/%2F{str(secret).lstrip('/')}", f"http://127.0.0.1/../{secret.name}", "/out.txt",
        "/out-dir/key.txt", "/out-dir/", "/%00../secret.txt", "/loop",
    ]
    for target in attempts:
        status, _, body = raw_get(url, target)
        assert status in (400, 403, 404), target
        assert SECRET.encode() not in body and b"root:" not in body, target
    assert raw_get(url, "/../secret.txt")[0] == 403
    assert raw_get(url, "/out.txt")[0] == 403
    status, _, body = raw_get(url, "/in.json")  # a link that stays inside is served
    assert status == 200 and json.loads(body)["name"] == "multi_io"


def test_binds_loopback_only_picks_a_free_port_and_refuses_one_in_use(build_bundle, serve_cli,
                                                                      tmp_path):
    folder, _ = build_bundle(models.multi_io(tmp_path), name="site")
    served = serve_cli(folder)
    port = int(re.search(r":(\d+)/$", served.url)[1])
    assert port != 0
    assert listening_addresses(port) == {"127.0.0.1"}

    second = serve_cli(folder, port=str(port))
    assert second.process.wait(timeout=60) != 0
    lines = [line for line in second.lines if line.strip()]
    assert len(lines) == 1, second.output
    assert f"port {port} on 127.0.0.1 is already in use" in lines[0]
    assert "--port 0" in lines[0] and "Traceback" not in second.output


def test_ctrl_c_sigterm_and_sighup_stop_cleanly_and_remove_the_temporary_folder(
        tmp_path, serve_cli):
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    model = tmp_path / "model.onnx"
    shutil.copyfile(models.multi_io(tmp_path / "a"), model)
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        served = serve_cli(model, env={**os.environ, "TMPDIR": str(scratch)})
        fetch(served.url + "bundle.json")
        assert list(scratch.glob("bundle-serve-*")), "the build should live in the temporary folder"
        assert served.stop(signum) == 0, served.output
        assert "Stopped." in served.output and "Traceback" not in served.output
        assert list(scratch.glob("bundle-serve-*")) == []


def test_rebuilds_on_model_change_and_keeps_the_last_good_build_on_failure(tmp_path, serve_cli):
    model = tmp_path / "model.onnx"
    shutil.copyfile(models.multi_io(tmp_path / "a"), model)
    served = serve_cli(model)
    url = served.url
    assert json.loads(fetch(url + "bundle.json")[2])["sessions"][0]["inputs"][0]["name"] == "x"
    html = fetch(url)[2].decode()
    assert re.search(r'<script type="module" src="/__bundler__/livereload.mjs\?build=[\w-]+">'
                     r"</script>\n</body>", html)

    mark = len(served.lines)
    shutil.copyfile(models.scalar_input(tmp_path / "b"), model)
    served.wait_for(r"model\.onnx changed: model: fp32 .*inputs x, scale, step", start=mark)
    assert json.loads(fetch(url + "bundle.json")[2])["sessions"][0]["inputs"][1]["name"] == "scale"

    mark = len(served.lines)
    model.write_text("broken")
    served.wait_for("rebuild failed, still serving the last good build: .*model.onnx", start=mark)
    assert json.loads(fetch(url + "bundle.json")[2])["sessions"][0]["inputs"][1]["name"] == "scale"
    assert served.process.poll() is None


def test_an_export_folder_is_built_and_rebuilt_when_a_file_in_it_changes(tmp_path, serve_cli):
    folder = encoder_models.bert_folders(tmp_path / "exports")["text-classification"]
    served = serve_cli(folder)
    task = json.loads(fetch(served.url + "bundle.json")[2])["task"]
    assert (task["kind"], task["max_length"]) == ("text-classification", 128)

    mark = len(served.lines)
    tokenizer_config = folder / "tokenizer_config.json"
    settings = json.loads(tokenizer_config.read_text())
    tokenizer_config.write_text(json.dumps({**settings, "model_max_length": 64}))
    served.wait_for(r"tokenizer_config\.json changed: .*reloading", start=mark)
    rebuilt = json.loads(fetch(served.url + "bundle.json")[2])["task"]
    assert rebuilt["max_length"] == 64, served.output


def test_bundle_toml_changes_rebuild_with_the_new_options(tmp_path, serve_cli):
    models.multi_io(tmp_path)
    config = tmp_path / CONFIG_FILE_NAME
    config.write_text('model = "multi_io.onnx"\nname = "first"\n')
    served = serve_cli()  # the model comes from bundle.toml
    assert json.loads(fetch(served.url + "bundle.json")[2])["name"] == "first"

    mark = len(served.lines)
    config.write_text('model = "multi_io.onnx"\nname = "second"\n')
    served.wait_for("bundle.toml changed: second", start=mark)
    assert json.loads(fetch(served.url + "bundle.json")[2])["name"] == "second"

    mark = len(served.lines)
    config.write_text('model = "multi_io.onnx"\nquantise = "fp16"\n')
    served.wait_for(r"rebuild failed, still serving the last good build: .*bundle\.toml: unknown"
                    r" key 'quantise'", start=mark)
    assert json.loads(fetch(served.url + "bundle.json")[2])["name"] == "second"


def test_a_change_of_the_external_data_file_rebuilds(tmp_path, serve_cli):
    model = models.external_data(tmp_path)
    served = serve_cli(model)
    first = json.loads(fetch(served.url + "bundle.json")[2])["sessions"][0]["variants"][0]["sha256"]
    weights = tmp_path / "external_data.weights"
    data = bytearray(weights.read_bytes())
    data[:4] = bytes(4)  # one float32 weight becomes 0
    mark = len(served.lines)
    weights.write_bytes(bytes(data))
    served.wait_for("external_data.weights changed: external_data", start=mark)
    again = json.loads(fetch(served.url + "bundle.json")[2])
    assert again["sessions"][0]["variants"][0]["sha256"] != first


def _events(url: str) -> tuple[http.client.HTTPResponse, http.client.HTTPConnection]:
    host, port = re.match(r"http://([^:/]+):(\d+)/", url).groups()
    connection = http.client.HTTPConnection(host, int(port), timeout=30)
    connection.request("GET", "/__bundler__/events")
    response = connection.getresponse()
    assert response.headers["Content-Type"] == "text/event-stream"
    return response, connection


def _next_state(response: http.client.HTTPResponse, seconds: float = 60) -> dict:
    # the connection's 30 s timeout bounds each read, the deadline the pings between states
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        line = response.fp.readline().decode()
        if not line:
            raise AssertionError("the server closed the event stream")
        if line.startswith("data: "):
            return json.loads(line[len("data: "):])
    raise AssertionError(f"no new state on the event stream in {seconds:g} s")


def test_a_served_folder_reloads_pages_when_it_changes(build_bundle, serve_cli, tmp_path):
    folder, _ = build_bundle(models.multi_io(tmp_path), name="site")
    served = serve_cli(folder)
    response, connection = _events(served.url)
    first = _next_state(response)
    assert first["error"] is None
    (folder / "index.html").write_text("<p>changed</p>")
    second = _next_state(response)
    assert second["build"] != first["build"] and second["error"] is None
    served.wait_for(r"index\.html changed: multi_io: .*reloading 1 page\)")
    connection.close()

    mark = len(served.lines)
    (folder / "bundle.json").write_text("{broken")
    served.wait_for("the folder is not a valid bundle now: .*bundle.json", start=mark)
    status, headers, body = raw_get(served.url, "/__bundler__/events", method="HEAD")
    assert (status, headers["Content-Type"], body) == (200, "text/event-stream", b"")


def test_templates_are_rendered_and_a_template_change_rerenders_without_a_model_rebuild(
        tmp_path, serve_cli):
    templates = tmp_path / "theme"
    templates.mkdir()
    (templates / "style.css").write_text("h1 { color: red; }")
    page = templates / "index.html.j2"
    page.write_text('{% extends "bundler/index.html.j2" %}{% block title %}Custom'
                    " {{ manifest.name }}{% endblock %}")
    served = serve_cli(models.multi_io(tmp_path), "--templates", templates)
    url = served.url
    assert "<title>Custom multi_io</title>" in fetch(url)[2].decode()
    assert fetch(url + "style.css")[1]["Content-Type"] == "text/css"

    mark = len(served.lines)
    page.write_text('{% extends "bundler/index.html.j2" %}{% block title %}Second{% endblock %}')
    served.wait_for("index.html.j2 changed: multi_io", start=mark)
    assert "<title>Second</title>" in fetch(url)[2].decode()
    assert not any("Optimis" in line for line in served.lines[mark:])  # the model was not rebuilt

    mark = len(served.lines)
    page.write_text("{% block title %}")
    served.wait_for(r"rebuild failed, still serving the last good build: template .*"
                    r"index\.html\.j2:1", start=mark)
    assert "<title>Second</title>" in fetch(url)[2].decode()


def test_bad_serve_arguments_give_one_line(build_bundle, serve_cli, tmp_path):
    folder, _ = build_bundle(models.multi_io(tmp_path), name="site")
    cases = [
        ((folder, "--quantize", "fp16"), "do not apply to a built folder"),
        ((tmp_path,), "is not a built bundle"),
        ((tmp_path / "missing.onnx",), "missing.onnx"),
        ((folder, "--host", "no-such-host.invalid"), "--host 'no-such-host.invalid'"),
    ]
    for args, message in cases:
        served = serve_cli(*args)
        assert served.process.wait(timeout=60) != 0
        lines = [line for line in served.lines if line.strip()]
        assert len(lines) == 1 and message in lines[0], served.output


def test_snapshot_sees_a_same_size_rewrite_and_a_replacement_by_rename(tmp_path):
    watched = tmp_path / "model.onnx"
    watched.write_bytes(b"aaaa")
    before = snapshot([watched, tmp_path / "absent.toml"])
    os.utime(watched, ns=(before[str(watched)][0] + 1, before[str(watched)][0] + 1))
    assert changed_paths(before, snapshot([watched])) == [str(watched)]
    replacement = tmp_path / "new.onnx"
    replacement.write_bytes(b"bbbb")
    os.utime(replacement, ns=(before[str(watched)][0],) * 2)  # same size and mtime, new inode
    replacement.replace(watched)
    assert changed_paths(before, snapshot([watched])) == [str(watched)]
    (tmp_path / "absent.toml").write_text("")
    assert str(tmp_path / "absent.toml") in changed_paths(
        before, snapshot([watched, tmp_path / "absent.toml"]))


@pytest.mark.browser
def test_the_page_reloads_with_the_new_model_and_shows_a_failed_rebuild(
        tmp_path, serve_cli, plain_browser, browser_settings):
    model = tmp_path / "model.onnx"
    shutil.copyfile(models.multi_io(tmp_path / "a"), model)
    served = serve_cli(model)
    url = served.url
    context = plain_browser.new_context()
    page = context.new_page()
    page.set_default_timeout(browser_settings.timeouts_ms["load"])
    try:
        page.goto(url)
        page.wait_for_selector("body[data-ready=true]")
        assert "running on wasm" in page.locator("#status").inner_text().lower()
        assert "scale" not in page.locator("td > code").all_inner_texts()
        page.evaluate("window.beforeReload = true")

        started = time.monotonic()
        shutil.copyfile(models.scalar_input(tmp_path / "b"), model)
        page.wait_for_function("window.beforeReload === undefined", timeout=15_000)
        page.wait_for_selector("body[data-ready=true]", timeout=15_000)
        assert time.monotonic() - started < 15
        served.wait_for(r"model\.onnx changed: .*reloading 1 page\)")
        assert "scale" in page.locator("td > code").all_inner_texts()

        page.evaluate("window.beforeReload = true")
        model.write_text("broken")
        overlay = page.wait_for_selector("#bundler-error-overlay", timeout=15_000)
        assert "model.onnx" in overlay.inner_text()
        assert page.evaluate("window.beforeReload") is True  # the last good build stays loaded

        shutil.copyfile(models.multi_io(tmp_path / "c"), model)
        page.wait_for_function("window.beforeReload === undefined", timeout=15_000)
        page.wait_for_selector("body[data-ready=true]")
        assert page.locator("#bundler-error-overlay").count() == 0
        assert "mask" in page.locator("td > code").all_inner_texts()
    finally:
        context.close()
