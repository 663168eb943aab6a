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


class VerificationFailed(BundlerError):
    """--strict: the bundle was built but an execution provider failed the browser check."""

    exit_code = 1


# onnxruntime prefixes its messages with its build machine's source location and the C++
# function, e.g. "/onnxruntime_src/onnxruntime/core/graph/model.cc:257 onnxruntime::Model::Model(
# ModelProto &&, ...) Unsupported model IR version: 14"; neither means anything on this machine.
_SOURCE_LOCATION = re.compile(r"(?:[A-Za-z]:)?(?:[\\/][\w.+-]+)+\.(?:cc|cpp|cxx|c|h|hpp):\d+:? ")
_ORT_STATUS = re.compile(r"\[ONNXRuntimeError\] : \d+ : \w+ : ")


def _drop_signature(text: str) -> str:
    """Remove a leading C++ signature `ret ns::Func(args...) [const] ` (parentheses nest)."""
    opening = text.find("(")
    name = text[:opening].strip().rsplit(" ", 1)[-1]
    if opening < 0 or "::" not in name:
        return text
    depth = 0
    for index in range(opening, len(text)):
        depth += {"(": 1, ")": -1}.get(text[index], 0)
        if depth == 0:
            rest = text[index + 1:].lstrip()
            return rest[len("const"):].lstrip() if rest.startswith("const ") else rest
    return text


def first_line(error: BaseException | str, limit: int = 300, *, typed: bool = False) -> str:
    """The first non-empty line of an error, cut to `limit`, without the source paths and
    function signatures of the machine onnxruntime was built on; `typed` puts the exception's
    type first (for errors of libraries that say little else)."""
    lines = [line.strip() for line in str(error).strip().splitlines() if line.strip()]
    kind = type(error).__name__ if isinstance(error, BaseException) else ""
    if not lines:
        return kind or "unknown error"
    line = lines[0]
    for match in reversed(list(_SOURCE_LOCATION.finditer(line))):
        line = line[:match.start()] + _drop_signature(line[match.end():])
    text = _ORT_STATUS.sub("", line).strip()[:limit]
    return f"{kind}: {text}" if typed and kind else text
