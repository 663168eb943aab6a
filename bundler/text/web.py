"""The browser side of a text bundle: web/text/tokenizer.mjs and the @huggingface/tokenizers
module it imports, shipped inside the bundle (no CDN) under the names bundler.bundle.layout
declares (TEXT_FILES).

The library comes from the npm registry once, into the tool's cache (bundler.npmtools); a build
copies `web_files()` into the bundle folder.
"""

from __future__ import annotations

from pathlib import Path

from bundler.bundle.layout import TEXT_TOKENIZER_MODULE, TOKENIZERS_LIBRARY
from bundler.npmtools import npm_tool
from bundler.resources import resource

# The exact version every bundle ships (web/text/tokenizer.mjs is tested against it).
TOKENIZERS_JS = {"@huggingface/tokenizers": "0.2.0"}


def tokenizers_library() -> Path:
    """The library's browser/Node ES module (minified), from the npm cache; installs it the first
    time."""
    (name,) = TOKENIZERS_JS
    return npm_tool(TOKENIZERS_JS) / "node_modules" / name / "dist" / "tokenizers.min.mjs"


def web_files() -> dict[str, Path]:
    """Bundle name -> the file to copy there: the wrapper module and the library it imports."""
    return {TEXT_TOKENIZER_MODULE: resource("web") / TEXT_TOKENIZER_MODULE,
            TOKENIZERS_LIBRARY: tokenizers_library()}
