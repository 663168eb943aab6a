"""bundle serve: the real command on a free port, rebuilding when the model changes."""

import json
import shutil
import socket
import subprocess
import sys
import time
import urllib.request

from tests import models


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def fetch(url: str):
    with urllib.request.urlopen(url, timeout=5) as response:
        return response.headers, response.read()


def wait_for(condition, server, timeout=90.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise AssertionError(f"bundle serve exited: {server.stderr.read()}")
        try:
            if condition():
                return
        except OSError:
            pass
        time.sleep(0.3)
    server.kill()
    raise AssertionError(f"timed out; server said: {server.communicate()[1]}")


def test_serve_builds_serves_isolated_and_rebuilds_on_change(tmp_path, runtime_dist):
    model = tmp_path / "model.onnx"
    shutil.copyfile(models.multi_io(tmp_path / "a"), model)
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "bundler", "serve", str(model), "--port", str(port),
         "--runtime-dir", str(runtime_dist)],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    base = f"http://127.0.0.1:{port}/"
    try:
        wait_for(lambda: fetch(base + "bundle.json"), server)
        headers, html = fetch(base)
        assert headers["Cross-Origin-Opener-Policy"] == "same-origin"
        assert headers["Cross-Origin-Embedder-Policy"] == "require-corp"
        assert b"livereload" in html  # the live-reload client is injected into the page
        assert json.loads(fetch(base + "bundle.json")[1])["inputs"][0]["name"] == "x"
        headers, _ = fetch(base + "runtime/ort-wasm-simd-threaded.wasm")
        assert headers["Content-Type"] == "application/wasm"

        shutil.copyfile(models.scalar_input(tmp_path / "b"), model)
        wait_for(lambda: json.loads(fetch(base + "bundle.json")[1])["inputs"][1]["name"]
                 == "scale", server)

        model.write_text("broken")
        time.sleep(3)  # the failed rebuild keeps the last good build served
        assert json.loads(fetch(base + "bundle.json")[1])["inputs"][1]["name"] == "scale"
    finally:
        server.terminate()
        server.wait(timeout=10)
    assert "rebuild failed, still serving the last good build" in server.stderr.read()
