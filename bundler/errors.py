"""Errors a user can act on. Each one prints as a single line and exits non-zero (no traceback)."""

from __future__ import annotations

import re

import click


class BundlerError(click.ClickException):
    """Base class: `str(error)` is the one line the user sees."""

    exit_code = 2


class ConfigError(BundlerError):
    """bundle.toml or a flag has a wrong key or value."""


class ModelError(BundlerError):
    """The ONNX model cannot be read, checked or run."""


class RuntimeFetchError(BundlerError):
    """onnxruntime-web could not be fetched or found."""


class BrowserError(BundlerError):
    """Chromium could not be launched or the page failed."""


class QuantizeError(BundlerError):
    """A variant could not be produced or measured."""


class ExportError(BundlerError):
    """A PyTorch model could not be loaded, exported or validated."""


# onnxruntime's messages name files of the machine it was built on; they mean nothing here.
_BUILD_PATH = re.compile(r"(/[\w.+-]+)*/onnxruntime(_src)?/[\w./+-]*:\d+ ")


def first_line(error: BaseException | str, limit: int = 300, *, typed: bool = False) -> str:
    """The first non-empty line of an error, cut to `limit`, without onnxruntime's build paths;
    `typed` puts the exception's type first (for errors of libraries that say little else)."""
    lines = [line.strip() for line in str(error).strip().splitlines() if line.strip()]
    kind = type(error).__name__ if isinstance(error, BaseException) else ""
    if not lines:
        return kind or "unknown error"
    text = _BUILD_PATH.sub("", lines[0])[:limit]
    return f"{kind}: {text}" if typed and kind else text
