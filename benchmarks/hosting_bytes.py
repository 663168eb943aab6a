"""Bytes a WASM-only first visit transfers: a hand-written onnxruntime-web page vs the bundle on a
plain static host and on a CDN-like host serving the precompressed siblings; then a second visit.

    PYTHONPATH=. python benchmarks/hosting_bytes.py [MODEL] [--quantize int8]

The hand-written page does what onnxruntime-web's docs show: it imports the WebGPU build
(`onnxruntime-web/webgpu`), points wasmPaths at the package's dist/ and creates a session from
the fp32 model's URL. Everything is served from 127.0.0.1 by a server that counts body bytes,
in one headless Chromium without WebGPU.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

from bundler.bundle.options import merge
from bundler.commands.build import build
from bundler.console import TerminalReporter
from bundler.resources import example_model
from bundler.site.runtime import BUILDS, fetch_runtime
from bundler.verify.browser import launch, load_settings, playwright_session
from tests.hostsim import TEST_PAGE, Host, hosting

HAND_WRITTEN = """async () => {
  const ort = await import(new URL('ort.webgpu.min.mjs', location.href).href);
  ort.env.wasm.wasmPaths = new URL('./', location.href).href;
  const session = await ort.InferenceSession.create(new URL('model.onnx', location.href).href,
                                                    { executionProviders: ['wasm'] });
  return session.inputNames.length;
}"""
BUNDLE = """async () => {
  const { load } = await import(new URL('bundle.mjs', location.href).href);
  const model = await load();
  return model.ep;
}"""


def _visit(browser, host: Host, script: str, visits: int = 1) -> list[int]:
    """Body bytes the server sent, per visit of one browser context."""
    sent = []
    with hosting(host) as url:
        context = browser.new_context()
        page = context.new_page()
        page.set_default_timeout(300_000)
        for visit in range(visits):
            host.sent.clear()
            page.goto(url + TEST_PAGE) if visit == 0 else page.reload()
            page.evaluate(script)
            sent.append(sum(host.sent.values()))
        context.close()
    return sent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", nargs="?", type=Path, default=example_model())
    parser.add_argument("--quantize", default="int8")
    args = parser.parse_args()
    reporter = TerminalReporter()
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        dist = fetch_runtime(merge({}, {}).runtime_version)
        hand = work / "hand"
        hand.mkdir()
        shutil.copyfile(args.model, hand / "model.onnx")
        for name in (BUILDS["webgpu"].module, *BUILDS["webgpu"].files):
            shutil.copyfile(dist / name, hand / name)
        (hand / "bundle.json").write_text('{"files": []}')  # the host's cache rules: none
        build(args.model, merge({}, {"output": work / "dist", "quantize": args.quantize,
                                     "verify": False}), reporter=reporter)
        with playwright_session() as playwright, launch(playwright, load_settings(),
                                                         webgpu=False) as browser:
            (handwritten,) = _visit(browser, Host(hand, isolation=False), HAND_WRITTEN)
            plain, _ = _visit(browser, Host(work / "dist", isolation=False), BUNDLE, visits=2)
            cdn, second = _visit(browser, Host(work / "dist", negotiate=True), BUNDLE, visits=2)
    rows = [("hand-written page (fp32, onnxruntime-web/webgpu)", handwritten, 1.0),
            (f"bundle ({args.quantize}), plain static host", plain, plain / handwritten),
            (f"bundle ({args.quantize}), CDN with .br/.gz siblings", cdn, cdn / handwritten),
            ("bundle, second visit (same browser)", second, second / handwritten)]
    reporter.table(f"First-visit bytes, WASM only: {args.model.name}", ("Page", "Bytes", "Ratio"),
                   [(name, f"{count:,}", f"{ratio:.3f}") for name, count, ratio in rows])


if __name__ == "__main__":
    main()
