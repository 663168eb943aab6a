"""The browser side of a text bundle: web/text/tokenizer.mjs and the @huggingface/tokenizers
module it imports, shipped inside the bundle (no CDN) under the names bundler.bundle.layout
declares (TEXT_FILES).

The library comes from the npm registry once, into the tool's cache (bundler.site.npmtools); a build
copies `web_files()` into the bundle folder.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from bundler.bundle.layout import (
    GENERATION_FILES,
    SPEECH_FILES,
    TEXT_TOKENIZER_MODULE,
    TOKENIZERS_LIBRARY,
)
from bundler.resources import resource
from bundler.site.npmtools import npm_tool

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


def generation_modules() -> dict[str, Path]:
    """Bundle name -> the file to copy there, for a text-generation bundle: web/text/'s
    generate.mjs, decoding.mjs, sampling.mjs and chat.mjs, and @huggingface/jinja as jinja.mjs."""
    from bundler.text.chat import JINJA_FILE, jinja_dist

    return {name: jinja_dist() if name.endswith("/" + JINJA_FILE) else resource("web") / name
            for name in GENERATION_FILES}


def ship_generation_modules(staging: Path) -> None:
    for name, path in generation_modules().items():
        shutil.copyfile(path, staging / name)


def ship_speech_modules(staging: Path) -> None:
    """A speech-recognition bundle's web/text/ modules (SPEECH_FILES), under the same names."""
    for name in SPEECH_FILES:
        shutil.copyfile(resource("web") / name, staging / name)
