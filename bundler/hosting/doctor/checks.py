"""The checks of each response `bundle doctor` gets: status, Content-Type, the bytes (magic
numbers, sha256 and size against bundle.json, after undoing the Content-Encoding the response
claims), cache headers, the size limit of static hosts; the page's cross-origin isolation
(COOP/COEP, or the COI service worker); and that a missing file gets a real 404, not the page.
"""

from __future__ import annotations

import gzip
import hashlib
import re
import zlib

import brotli

from bundler.bundle.layout import COI_WORKER
from bundler.bundle.planes import unpack
from bundler.hosting.doctor.fetching import Expected, Fetched
from bundler.hosting.doctor.report import Problem
from bundler.hosting.headers import is_hashed

JS_TYPES = {"text/javascript", "application/javascript", "application/x-javascript",
            "text/ecmascript", "application/ecmascript"}
EXPECTED_TYPES = {".wasm": {"application/wasm"}, ".mjs": JS_TYPES, ".js": JS_TYPES,
                  ".html": {"text/html"}}
DAY = 86400
PROBE = "__bundle_doctor_missing__.wasm"  # a file no bundle has
_MAX_AGE = re.compile(r"max-age\s*=\s*(\d+)")


def decoded(fetched: Fetched, path: str, problems: list[Problem]) -> bytes | None:
    """The body with its Content-Encoding undone; None (and a problem) when it does not undo."""
    encoding = fetched.header("content-encoding").strip().lower()
    try:
        if encoding in ("", "identity"):
            return fetched.body
        if encoding == "gzip":
            return gzip.decompress(fetched.body)
        if encoding == "br":
            return brotli.decompress(fetched.body)
        if encoding == "deflate":
            return zlib.decompress(fetched.body)
    except (OSError, EOFError, zlib.error, brotli.error):
        problems.append(Problem("error", path, "wrong-encoding", f"sent with Content-Encoding:"
                                f" {encoding}, but the body is not {encoding}", ""))
        return None
    problems.append(Problem("error", path, "wrong-encoding",
                            f"unknown Content-Encoding: {encoding}", ""))
    return None


def _gunzipped(body: bytes, path: str, problems: list[Problem]) -> bytes | None:
    """A gzip sibling's bytes as bundle.mjs decompresses them."""
    try:
        return gzip.decompress(body)
    except (OSError, EOFError, zlib.error):
        problems.append(Problem("error", path, "wrong-encoding", "starts like gzip but does not"
                                " decompress", ""))
        return None


def _hidden_encoding(body: bytes, expected: Expected) -> str | None:
    """The encoding of a body sent without Content-Encoding that is really compressed."""
    candidates = [("gzip", gzip.decompress)] if body[:2] == b"\x1f\x8b" else []
    candidates.append(("br", brotli.decompress))
    for name, decompress in candidates:
        try:
            data = decompress(body)
        except (OSError, EOFError, zlib.error, brotli.error):
            continue
        if expected.sha256 is None or hashlib.sha256(data).hexdigest() == expected.sha256:
            return name
    return None


def _looks_like_html(body: bytes) -> bool:
    start = body[:512].lstrip().lower()
    return start.startswith((b"<!doctype html", b"<html", b"<head", b"<body", b"<!--", b"<?xml"))


def _magic_problem(body: bytes, expected: Expected) -> str | None:
    if expected.kind == ".html":
        return None
    if _looks_like_html(body):  # any part: binary bytes do not start like a page
        return "html-instead"
    if not expected.first:
        return None
    if expected.kind == ".wasm" and body[:4] != b"\0asm":
        return "magic"
    if expected.kind == ".onnx" and body[:1] != b"\x08":  # ModelProto field 1, ir_version
        return "magic"
    if expected.kind == ".ort" and body[4:8] != b"ORTM":  # the flatbuffer's file identifier
        return "magic"
    return None


_MAGIC_TEXT = {
    "html-instead": "an HTML page was sent in place of this file (an SPA fallback or an error"
                    " page)",
    "magic": "the bytes do not start like a {kind} file (found {found})",
}


def _check_content(fetched: Fetched, expected: Expected, limit: int,
                   problems: list[Problem]) -> None:
    body = decoded(fetched, expected.path, problems)
    if body is not None and expected.gzip_sibling and body[:2] == b"\x1f\x8b":
        body = _gunzipped(body, expected.path, problems)
    if body is None:
        return
    if expected.runs and len(body) == expected.bytes:  # else a partial copy: "stale" below
        body = unpack(body, [list(run) for run in expected.runs])
    allowed = EXPECTED_TYPES.get(expected.kind)
    if expected.whole and allowed and fetched.mime not in allowed:
        problems.append(Problem("error", expected.path, "content-type",
                                f"Content-Type is {fetched.mime or 'missing'}, expected"
                                f" {sorted(allowed)[-1]}", ""))
    elif expected.kind != ".html" and fetched.mime == "text/html":
        problems.append(Problem("error", expected.path, "content-type", "sent as text/html", ""))
    hidden = (_hidden_encoding(body, expected) if not fetched.header("content-encoding")
              and expected.sha256 and hashlib.sha256(body).hexdigest() != expected.sha256
              else None)
    if hidden:
        problems.append(Problem("error", expected.path, "unencoded", f"{hidden}-compressed bytes"
                                f" sent without Content-Encoding: {hidden}", ""))
        return
    magic = _magic_problem(body, expected)
    if magic:
        problems.append(Problem("error", expected.path, magic, _MAGIC_TEXT[magic].format(
            kind=expected.kind, found=body[:4].hex(" ") or "nothing"), ""))
        return
    if expected.sha256 and hashlib.sha256(body).hexdigest() != expected.sha256:
        problems.append(Problem("error", expected.path, "stale",
                                f"sha256 differs from bundle.json ({len(body)} bytes, bundle.json"
                                f" says {expected.bytes}): a stale or partial copy", ""))
    stored = len(fetched.body) if expected.gzip_sibling else len(body)  # as the host keeps it
    if stored > limit:
        problems.append(Problem("error", expected.path, "too-big",
                                f"{stored} bytes, over the {limit}-byte limit of static"
                                " hosts", ""))
    fetched_as_gzip = "gzip" in expected.encodings and expected.kind in FETCHED_AS_BYTES
    if (expected.encodings and not fetched_as_gzip and not fetched.header("content-encoding")
            and len(body) > 1024):
        problems.append(Problem("warning", expected.path, "uncompressed",
                                f"sent uncompressed though bundle.json lists"
                                f" {'/'.join(expected.encodings)} siblings", ""))


# Files bundle.mjs fetches as bytes, from their gzip sibling where there is one: sent plain under
# their own name, they cost nothing extra.
FETCHED_AS_BYTES = {".wasm", ".onnx", ".ort"}
_LOOKS_HASHED = re.compile(r"\.[0-9a-f]{8}\.[a-z]+(\.part\d+)?$")


def _check_cache(fetched: Fetched, expected: Expected, problems: list[Problem]) -> None:
    control = fetched.header("cache-control").lower()
    match = _MAX_AGE.search(control)
    max_age = int(match[1]) if match else None
    revalidated = "no-cache" in control or "no-store" in control or max_age == 0
    # without a sha256 (a bundle.json with no files table), a name that looks hashed counts
    hashed = (is_hashed(expected.path, expected.name_hash) if expected.name_hash
              else _LOOKS_HASHED.search(expected.path) is not None)
    if hashed:
        if "immutable" not in control and (max_age or 0) < DAY:
            problems.append(Problem("warning", expected.path, "cache-hashed",
                                    "a content-hashed name that is not cached as immutable"
                                    f" ({control or 'no Cache-Control'})", ""))
        return
    if not revalidated and ("immutable" in control or (max_age or 0) > DAY):
        problems.append(Problem("error", expected.path, "cache-stable",
                                f"a stable name cached without revalidation ({control}): browsers"
                                " keep the old file after a new deploy", ""))
    elif not revalidated:
        problems.append(Problem("warning", expected.path, "cache-stable",
                                f"a stable name not revalidated ({control or 'no Cache-Control'}):"
                                " a new deploy reaches returning visitors late", ""))
    elif "no-store" not in control and not (fetched.header("etag")
                                            or fetched.header("last-modified")):
        problems.append(Problem("warning", expected.path, "no-validator",
                                "revalidated, but without ETag or Last-Modified every visit"
                                " downloads it again", ""))


def check_file(fetched: Fetched, expected: Expected, limit: int) -> list[Problem]:
    problems: list[Problem] = []
    if fetched.status is None:
        return [Problem("error", expected.path, "unreachable", f"no answer: {fetched.error}", "")]
    if fetched.status == 404:
        return [Problem("error", expected.path, "missing", "HTTP 404: not deployed", "")]
    if fetched.status != 200:
        return [Problem("error", expected.path, "status", f"HTTP {fetched.status}", "")]
    _check_content(fetched, expected, limit, problems)
    _check_cache(fetched, expected, problems)
    return problems


def check_isolation(page: Fetched, worker: Fetched | None) -> Problem | None:
    coop = page.header("cross-origin-opener-policy").lower()
    coep = page.header("cross-origin-embedder-policy").lower()
    if coop == "same-origin" and coep in ("require-corp", "credentialless"):
        return None
    missing = "no COOP/COEP headers on the page"
    if (worker is not None and worker.status == 200 and worker.mime in JS_TYPES
            and COI_WORKER.encode() in page.body):
        return Problem("warning", "index.html", "worker-only", f"{missing}; the COI worker"
                       " isolates it from the second visit on (single-threaded until then)", "")
    return Problem("error", "index.html", "no-isolation", f"{missing} and no COI service worker:"
                   " onnxruntime-web runs single-threaded (no SharedArrayBuffer)", "")


def check_missing_file(probe: Fetched) -> Problem | None:
    """A problem when `probe`, the answer for PROBE, is HTTP 200 (the page, or any file) where a
    404 should be."""
    if probe.status != 200:
        return None
    what = "an HTML page" if _looks_like_html(probe.body) else f"{len(probe.body)} bytes"
    return Problem("error", PROBE, "spa-fallback", f"a file that does not exist got"
                   f" HTTP 200 and {what}: a missing or renamed file would load as"
                   " that page, and browsers cache it", "")
