"""Errors a user can act on. Each one prints as a single line and exits non-zero (no traceback)."""

from __future__ import annotations

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
