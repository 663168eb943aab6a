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
    if opening < 0 or "::" not in text[:opening] or " " in text[:opening].strip().split(" ", 1)[-1]:
        return text
    depth = 0
    for index in range(opening, len(text)):
        depth += {"(": 1, ")": -1}.get(text[index], 0)
        if depth == 0:
            rest = text[index + 1:].lstrip()
            return rest[len("const"):].lstrip() if rest.startswith("const ") else rest
    return text


def clean_message(text: str, limit: int = 300) -> str:
    """The first meaningful line of an onnxruntime (native or web) error, without the source
    paths and function signatures of the machine that built onnxruntime."""
    lines = [line for line in str(text).strip().splitlines() if line.strip()]
    if not lines:
        return "unknown error"
    line = lines[0]
    for match in reversed(list(_SOURCE_LOCATION.finditer(line))):
        line = line[:match.start()] + _drop_signature(line[match.end():])
    return _ORT_STATUS.sub("", line).strip()[:limit]
