"""Load: `bundle serve` answers 200 concurrent requests for the model and wasm files with no error
and intact bytes. The requests go to 127.0.0.1 only, all at once from 200 threads, each with a
timeout, and the server is stopped at the end."""

from __future__ import annotations

import hashlib
import json
import threading
import urllib.request
from concurrent.futures import ThreadPoolExecutor

from tests import quant_models
from tests.test_serve import serve_cli  # noqa: F401 - the fixture

CONCURRENT = 200
REQUEST_TIMEOUT_S = 60


def _digests(manifest: dict) -> dict[str, str]:
    """sha256 of each file the bundle ships (its parts, for a file split into parts), from
    bundle.json's files table; HTML pages left out (serve injects its live-reload client)."""
    return {shipped["path"]: shipped["sha256"] for entry in manifest["files"]
            for shipped in entry.get("parts") or [entry] if not shipped["path"].endswith(".html")}


def test_200_concurrent_requests_get_intact_bytes(tmp_path, build_bundle, serve_cli):  # noqa: F811
    folder, manifest = build_bundle(quant_models.mlp_classifier(tmp_path / "mlp.onnx"),
                                    variants=("fp32", "fp16"))
    expected = _digests(manifest)
    assert len(expected) >= 4
    served = serve_cli(folder)
    base = served.url
    assert base.startswith("http://127.0.0.1:")
    paths = [list(expected)[i % len(expected)] for i in range(CONCURRENT)]
    start = threading.Barrier(CONCURRENT, timeout=REQUEST_TIMEOUT_S)

    def get(path: str) -> tuple[str, int, str]:
        start.wait()  # all 200 connect at once
        with urllib.request.urlopen(base + path, timeout=REQUEST_TIMEOUT_S) as response:
            return path, response.status, hashlib.sha256(response.read()).hexdigest()

    with ThreadPoolExecutor(max_workers=CONCURRENT) as pool:
        results = list(pool.map(get, paths))
    assert len(results) == CONCURRENT
    wrong = [(path, status) for path, status, digest in results
             if status != 200 or digest != expected[path]]
    assert wrong == []
    assert json.loads((folder / "bundle.json").read_text()) == manifest
