"""Consumer apps: the examples (Vite 8, webpack 5 with entry and output only, a Next.js client
component) import the npm-installed bundle, build for production, and compute in headless
Chromium what native onnxruntime computes, on both EPs, with and without the worker."""

import json

import numpy as np
import pytest

from bundler.bundle import manifest as manifest_file
from bundler.bundle.modelio import cpu_session
from bundler.bundle.options import BuildOptions
from bundler.commands.build import build
from bundler.server.bundle_server import serve_directory
from bundler.text.reference import run_text
from bundler.text.samples import CHECK_TEXTS
from bundler.text.tokenizer import TextTokenizer
from bundler.verify.reference import run_native
from tests import encoder_models
from tests.frontend import (
    APPS,
    build_example,
    copies_in_output,
    install_bundle,
    native_probabilities,
)

pytestmark = pytest.mark.browser

RUNS = [("wasm", False), ("wasm", True), ("webgpu", False), ("webgpu", True)]
SETTLED = "document.getElementById('output')?.dataset.state !== 'loading'"


@pytest.fixture(scope="module")
def apps(tmp_path_factory, runtime_dist):
    """A folder whose node_modules holds the example's bundle, installed with npm once."""
    root = tmp_path_factory.mktemp("apps")
    bundle = root / "bundle"
    manifest = build(None, BuildOptions(output=bundle, name="digits", verify=False,
                                        runtime_dir=runtime_dist))
    install_bundle(root, bundle)
    return root, bundle, manifest.to_json()


@pytest.mark.parametrize("name", list(APPS))
def test_example_app_built_for_production_holds_each_file_once_and_matches_native(
        name, apps, webgpu_browser, browser_settings):
    root, bundle, manifest = apps
    folder = build_example(name, root)
    copies = copies_in_output(bundle, manifest, folder / APPS[name].output)
    assert copies == dict.fromkeys(copies, 1), f"copies of each bundle file in the output: {copies}"
    expected = native_probabilities(bundle, manifest)
    with serve_directory(folder / APPS[name].served) as url:
        context = webgpu_browser.new_context()
        try:
            for ep, worker in RUNS:
                page = context.new_page()
                page.goto(f"{url}?ep={ep}{'&worker' if worker else ''}")
                page.wait_for_function(SETTLED, timeout=browser_settings.timeouts_ms["load"])
                output = page.locator("#output")
                text = output.inner_text()
                assert output.get_attribute("data-state") == "done", f"{ep} worker={worker}: {text}"
                result = json.loads(text)
                assert (result["ep"], result["worker"]) == (ep, worker)
                tolerance = browser_settings.tolerances[ep]
                np.testing.assert_allclose(result["probabilities"], expected,
                                           atol=tolerance["atol"], rtol=tolerance["rtol"])
                page.close()
        finally:
            context.close()
    if name == "nextjs":  # the server render imported the package's node entry, not bundle.mjs
        server = "\n".join(path.read_text(errors="replace")
                           for path in (folder / ".next" / "server").rglob("*.js"))
        assert "runs in the browser only" in server


# A text bundle's app: its modules under text/ (the tokenizer and its library) must be followed by
# the app's bundler, which a URL made at run time would hide from it.
TEXT_APP = """import { load } from 'text-embed';
const output = document.getElementById('output');
try {
  const model = await load({ executionProviders: ['wasm'] });
  const rows = await model.embed(TEXTS);
  output.textContent = JSON.stringify(rows.map((row) => Array.from(row)));
  output.dataset.state = 'done';
} catch (error) {
  output.textContent = `${error.name}: ${error.message}`;
  output.dataset.state = 'error';
}
"""


@pytest.fixture(scope="module")
def text_app(tmp_path_factory, runtime_dist):
    """A folder whose node_modules holds a feature-extraction bundle, and the folder it was
    built from."""
    root = tmp_path_factory.mktemp("text-apps")
    folder = encoder_models.bert_folders(root / "models")["feature-extraction"]
    bundle = root / "bundle"
    build(folder, BuildOptions(output=bundle, name="text-embed", verify=False,
                               runtime_dir=runtime_dist))
    install_bundle(root, bundle)
    return root, bundle, folder


@pytest.mark.parametrize("name", ["vite", "webpack"])
def test_a_text_bundle_in_an_app_embeds_as_python(name, text_app, webgpu_browser,
                                                  browser_settings):
    root, bundle, folder = text_app
    texts = list(CHECK_TEXTS[:3])
    app = build_example(name, root, TEXT_APP.replace("TEXTS", json.dumps(texts)))
    manifest = manifest_file.load(bundle)
    model = manifest.session()
    session = cpu_session(bundle / model.variant("fp32").file)
    expected = run_text(lambda feeds: run_native(session, feeds), manifest.task,
                        TextTokenizer.from_folder(folder), [spec.name for spec in model.inputs],
                        texts)["embeddings"]
    with serve_directory(app / APPS[name].served) as url:
        page = webgpu_browser.new_page()
        try:
            page.goto(url)
            page.wait_for_function(SETTLED, timeout=browser_settings.timeouts_ms["load"])
            output = page.locator("#output")
            assert output.get_attribute("data-state") == "done", output.inner_text()
            np.testing.assert_allclose(json.loads(output.inner_text()), expected, atol=1e-4)
        finally:
            page.close()
