"""`bundle doctor URL`: does a deployed bundle load as it should? HTTP only, no browser.

It fetches what a browser would (the page, bundle.json and every file bundle.json lists, sending
`Accept-Encoding: br, gzip`) and checks each response: status, Content-Type, the bytes (magic
numbers, sha256 and size against bundle.json, after undoing the Content-Encoding the response
claims), cache headers, the size limit of static hosts; then the page's cross-origin isolation
(COOP/COEP, or the COI service worker) and that a missing file gets a real 404, not the page.
Each problem comes with its fix for the host, guessed from the response headers.
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import json
import re
import urllib.error
import urllib.request
import zlib
from typing import Any

import brotli

from bundler.commands.fixes import fix_for
from bundler.console import Reporter
from bundler.errors import BundlerError, ConfigError
from bundler.files import fetched_path
from bundler.hostconfig import DEFAULT_MAX_FILE_SIZE, is_hashed
from bundler.hosting import COI_WORKER
from bundler.runtime import BUILDS

JS_TYPES = {"text/javascript", "application/javascript", "application/x-javascript",
            "text/ecmascript", "application/ecmascript"}
EXPECTED_TYPES = {".wasm": {"application/wasm"}, ".mjs": JS_TYPES, ".js": JS_TYPES,
                  ".html": {"text/html"}}
MODEL_SUFFIXES = {".onnx", ".ort", ".data"}
DAY = 86400
PROBE = "__bundle_doctor_missing__.wasm"
_TIMEOUT_S = 60
_MAX_AGE = re.compile(r"max-age\s*=\s*(\d+)")
_PART = re.compile(r"\.part(\d+)$")


@dataclasses.dataclass
class Problem:
    severity: str  # "error": loading breaks or downloads more than it must; "warning"
    path: str
    kind: str
    message: str
    fix: str


@dataclasses.dataclass
class Fetched:
    url: str
    status: int | None
    headers: dict[str, str]
    body: bytes
    error: str | None = None

    def header(self, name: str) -> str:
        return self.headers.get(name.lower(), "")

    @property
    def mime(self) -> str:
        return self.header("content-type").split(";")[0].strip().lower()


@dataclasses.dataclass
class Expected:
    """One file (or part) as bundle.json describes it."""

    path: str
    bytes: int | None = None
    sha256: str | None = None
    name_hash: str | None = None  # the whole file's sha256, which a hashed name carries
    first: bool = True  # the first part (or a whole file): the one that starts with magic bytes
    whole: bool = True  # not a part (parts are fetched as bytes, so their type matters less)
    encodings: tuple[str, ...] = ()
    kind: str = ""  # the original file's suffix
    gzip_sibling: bool = False  # the .gz that bundle.mjs fetches in place of the file (or part)


@dataclasses.dataclass
class DoctorReport:
    url: str
    host: str
    rows: list[list[str]]
    problems: list[Problem]

    @property
    def ok(self) -> bool:
        return not any(problem.severity == "error" for problem in self.problems)

    def grouped_problems(self) -> list[tuple[str, str, str, str]]:
        """One row per severity and kind of problem: the files it concerns, the first one's
        message, the fix (errors first)."""
        groups: dict[tuple[str, str], list[Problem]] = {}
        for problem in self.problems:
            groups.setdefault((problem.severity, problem.kind), []).append(problem)
        rows = []
        for (severity, _), problems in sorted(groups.items(), key=lambda g: g[0][0] != "error"):
            paths = [problem.path for problem in problems]
            more = f" and {len(paths) - 3} more" if len(paths) > 3 else ""
            rows.append((severity, ", ".join(paths[:3]) + more, problems[0].message,
                         problems[0].fix))
        return rows

    def to_json(self) -> dict[str, Any]:
        columns = [column.lower().replace(" ", "_") for column in COLUMNS]
        return {"url": self.url, "host": self.host, "ok": self.ok,
                "files": [dict(zip(columns, row, strict=True)) for row in self.rows],
                "problems": [dataclasses.asdict(problem) for problem in self.problems]}


COLUMNS = ("File", "Status", "Content type", "Encoding", "Sent", "Cache control", "Result")


def fetch(url: str) -> Fetched:
    request = urllib.request.Request(url, headers={
        "Accept-Encoding": "br, gzip", "User-Agent": "onnx-bundler doctor"})
    try:
        with urllib.request.urlopen(request, timeout=_TIMEOUT_S) as response:
            return Fetched(url, response.status, _lower(response.headers), response.read())
    except urllib.error.HTTPError as error:
        return Fetched(url, error.code, _lower(error.headers), error.read())
    except (urllib.error.URLError, OSError, ValueError) as error:
        return Fetched(url, None, {}, b"", str(getattr(error, "reason", error)))


def _lower(headers: Any) -> dict[str, str]:
    return {name.lower(): value for name, value in headers.items()}


def detect_host(headers: dict[str, str]) -> str:
    server = headers.get("server", "").lower()
    if "x-nf-request-id" in headers or "netlify" in server:
        return "netlify"
    if "x-vercel-id" in headers or "vercel" in server:
        return "vercel"
    if "x-github-request-id" in headers or server == "github.com":
        return "github-pages"
    if "cf-ray" in headers or "cloudflare" in server:
        return "cloudflare"
    if "x-amz-cf-id" in headers or "x-amz-request-id" in headers or "amazons3" in server:
        return "s3"
    if server.startswith("nginx"):
        return "nginx"
    return "unknown"


def expected_files(manifest: dict[str, Any]) -> list[Expected]:
    """The files to check: bundle.json's `files` table, or for bundles built before it, the
    pages, the variants' models and the runtime files."""
    if "files" in manifest:
        found = []
        for entry in manifest["files"]:
            suffix = "." + entry["path"].rsplit(".", 1)[-1]
            for index, piece in enumerate(entry.get("parts") or [entry]):
                found.append(Expected(piece["path"], piece["bytes"], piece["sha256"],
                                      entry["sha256"], index == 0, "parts" not in entry,
                                      tuple(piece.get("encodings", {})), suffix))
                if fetched_path(piece) != piece["path"]:
                    found.append(dataclasses.replace(found[-1], path=fetched_path(piece),
                                                     whole=False, encodings=(),
                                                     gzip_sibling=True))
        return found
    runtime = manifest["runtime"]
    paths = ["index.html", "bundle.mjs", *(variant["file"] for variant in manifest["variants"])]
    for build in runtime["builds"].values():
        if "wasm" in build:  # {module, mjs, wasm}, hashed names
            paths += build.values()
            continue
        shipped = next((b for b in BUILDS.values() if runtime["dir"] + b.module == build["module"]),
                       None)
        paths += [build["module"], *(runtime["dir"] + name for name in
                                     (shipped.files if shipped else ()))]
    return [Expected(path, kind="." + path.rsplit(".", 1)[-1]) for path in dict.fromkeys(paths)]


def _decoded(fetched: Fetched, path: str, problems: list[Problem]) -> bytes | None:
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
    body = _decoded(fetched, expected.path, problems)
    if body is not None and expected.gzip_sibling and body[:2] == b"\x1f\x8b":
        body = _gunzipped(body, expected.path, problems)
    if body is None:
        return
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


def _isolation(page: Fetched, worker: Fetched | None) -> Problem | None:
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


def _folder_url(url: str) -> str:
    if not url.startswith(("http://", "https://")):
        raise ConfigError(f"{url!r} is not an http(s) URL; give the URL the bundle is deployed"
                          " at (for a local folder: bundle serve FOLDER, then that URL)")
    base = url.split("#")[0].split("?")[0]
    if base.endswith((".html", "bundle.json")):
        base = base.rsplit("/", 1)[0] + "/"
    return base if base.endswith("/") else base + "/"


def _row(expected: Expected, fetched: Fetched, problems: list[Problem]) -> list[str]:
    result = "; ".join(f"{p.severity}: {p.kind}" for p in problems) or "ok"
    return [expected.path, str(fetched.status or fetched.error), fetched.mime or "-",
            fetched.header("content-encoding") or "-", str(len(fetched.body)),
            fetched.header("cache-control") or "-", result]


def doctor(url: str, max_file_size: int = DEFAULT_MAX_FILE_SIZE,
           reporter: Reporter | None = None) -> DoctorReport:
    reporter = reporter or Reporter()
    base = _folder_url(url)
    page = fetch(base)
    if page.status is None:
        raise BundlerError(f"cannot reach {base}: {page.error}")
    host = detect_host(page.headers)
    manifest_response = fetch(base + "bundle.json")
    try:
        manifest = json.loads(_decoded(manifest_response, "bundle.json", []) or b"")
        manifest["runtime"]  # noqa: B018 (a bundle.json, not any JSON)
    except (ValueError, KeyError, TypeError):
        raise BundlerError(f"{base}bundle.json is not a bundle's manifest (HTTP"
                           f" {manifest_response.status}); give the URL of the folder that"
                           " bundle build made") from None
    rows, problems = [], []
    fetched_by_path: dict[str, Fetched] = {}
    for expected in expected_files(manifest):
        with reporter.step(f"Fetching {expected.path}"):
            fetched = page if expected.path == "index.html" else fetch(base + expected.path)
        fetched_by_path[expected.path] = fetched
        found = check_file(fetched, expected, max_file_size)
        rows.append(_row(expected, fetched, found))
        problems += found
    manifest_problems = check_file(manifest_response, Expected("bundle.json", kind=".json"),
                                   max_file_size)
    rows.insert(0, _row(Expected("bundle.json"), manifest_response, manifest_problems))
    problems += manifest_problems
    worker = fetched_by_path.get(COI_WORKER) or fetch(base + COI_WORKER)
    isolation = _isolation(page, worker)
    problems += [isolation] if isolation else []
    probe = fetch(base + PROBE)
    if probe.status == 200:
        what = "an HTML page" if _looks_like_html(probe.body) else f"{len(probe.body)} bytes"
        problems.append(Problem("error", PROBE, "spa-fallback", f"a file that does not exist got"
                                f" HTTP 200 and {what}: a missing or renamed file would load as"
                                " that page, and browsers cache it", ""))
    for problem in problems:
        problem.fix = fix_for(problem.kind, host)
    return DoctorReport(base, host, rows, problems)
