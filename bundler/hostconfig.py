"""The config files that make each static host serve a bundle right, from bundle.json's `files`.

Every served file gets its own rule (no wildcard for Cache-Control: Netlify and Cloudflare join
the values of every matching rule with commas): `immutable` for content-hashed names, `no-cache`
(revalidate, which costs a 304 and no body) for stable ones. The whole site gets COOP/COEP (so
onnxruntime-web gets threads), and CORP/CORS so a page on another origin may import the bundle.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterable, Iterator
from pathlib import Path, PurePosixPath
from typing import Any

from bundler.server import content_type

MIB = 1024 * 1024
DEFAULT_MAX_FILE_SIZE = 25 * MIB  # Cloudflare Pages refuses bigger files
_SIZE = re.compile(r"^\s*(?P<number>\d+(?:\.\d+)?)\s*(?P<unit>[KMG]i?B|B)?\s*$", re.IGNORECASE)
_UNITS = {"b": 1, "kb": 1000, "mb": 1000**2, "gb": 1000**3, "kib": 1024, "mib": MIB,
          "gib": 1024**3}
HOSTS = ("netlify", "cloudflare", "vercel", "github-pages", "s3", "nginx")
CONFIG_FILES = {"netlify": "_headers", "cloudflare": "_headers", "vercel": "vercel.json",
                "github-pages": ".nojekyll", "s3": "s3-upload.sh", "nginx": "nginx.conf"}
SITE_HEADERS = {
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Embedder-Policy": "require-corp",
    "Cross-Origin-Resource-Policy": "cross-origin",
    "Access-Control-Allow-Origin": "*",
}
IMMUTABLE = "public, max-age=31536000, immutable"
REVALIDATE = "no-cache"
_ENCODING_SUFFIXES = {"br": ".br", "gzip": ".gz"}
MANIFEST_FILE = "bundle.json"


def parse_size(value: object) -> int:
    """Bytes from 26214400, "25MiB", "25 MB" (MB = 1000², MiB = 1024²)."""
    if isinstance(value, int) and not isinstance(value, bool):
        size = value
    else:
        match = _SIZE.match(str(value)) if isinstance(value, str) else None
        if match is None:
            raise ValueError(f"expected a size such as 25MiB, 10MB or 1000000, got {value!r}")
        size = int(float(match["number"]) * _UNITS[(match["unit"] or "b").lower()])
    if size < 1024:
        raise ValueError(f"a file size limit under 1 KiB makes no sense, got {value!r}")
    return size


def is_hashed(path: str, sha256: str) -> bool:
    """Does the file name carry its content hash (so it may be cached forever)?"""
    return sha256[:8] in PurePosixPath(path).name


def cache_control(path: str, sha256: str) -> str:
    return IMMUTABLE if is_hashed(path, sha256) else REVALIDATE


def _type_of(path: str) -> str:
    """The Content-Type of a file, a part or a sibling: that of the original name."""
    name = PurePosixPath(path).name
    for suffix in _ENCODING_SUFFIXES.values():
        name = name.removesuffix(suffix)
    stem, _, last = name.rpartition(".")
    if last.startswith("part") and last[4:].isdigit():
        name = stem
    return content_type(Path(name))


def served(entries: Iterable[dict[str, Any]]) -> Iterator[tuple[str, str, str | None]]:
    """(path, Cache-Control, Content-Encoding or None) of every file a browser may request."""
    yield MANIFEST_FILE, REVALIDATE, None
    for entry in entries:
        pieces = entry.get("parts") or [entry]
        for piece in pieces:
            control = cache_control(piece["path"], entry["sha256"])
            yield piece["path"], control, None
            for encoding, sibling in piece.get("encodings", {}).items():
                yield sibling["path"], control, encoding


def _headers_file(entries: list[dict[str, Any]]) -> str:
    lines = ["# Netlify and Cloudflare Pages: publish this folder with this file at its root.",
             "/*"]
    lines += [f"  {name}: {value}" for name, value in SITE_HEADERS.items()]
    for path, control, encoding in served(entries):
        lines += [f"/{path}", f"  Cache-Control: {control}", f"  Content-Type: {_type_of(path)}"]
        if encoding:
            lines.append(f"  Content-Encoding: {encoding}")
    return "\n".join(lines) + "\n"


def _vercel_json(entries: list[dict[str, Any]]) -> str:
    headers = [{"source": "/(.*)", "headers": [{"key": name, "value": value}
                                               for name, value in SITE_HEADERS.items()]}]
    for path, control, encoding in served(entries):
        rule = [{"key": "Cache-Control", "value": control},
                {"key": "Content-Type", "value": _type_of(path)}]
        if encoding:
            rule.append({"key": "Content-Encoding", "value": encoding})
        headers.append({"source": f"/{path}", "headers": rule})
    return json.dumps({"headers": headers}, indent=2) + "\n"


def _nginx_conf(entries: list[dict[str, Any]]) -> str:
    site = "".join(f'    add_header {name} "{value}" always;\n'
                   for name, value in SITE_HEADERS.items())
    hashed = sorted(path for path, control, encoding in served(entries)
                    if control == IMMUTABLE and encoding is None)
    lines = [
        "# nginx: put this inside the server { } block whose root is this folder (for a",
        "# sub-path, prefix each location with it). gzip_static serves the .gz siblings to",
        "# browsers that accept gzip; with the ngx_brotli module, uncomment brotli_static.",
        "include /etc/nginx/mime.types;",
        "types { application/wasm wasm; text/javascript mjs; application/octet-stream onnx ort; }",
        "gzip_static on;",
        "# brotli_static on;",
        "location / {",
        "    try_files $uri =404;",
        site + f'    add_header Cache-Control "{REVALIDATE}" always;',
        "}",
    ]
    for path in hashed:
        lines += [f"location = /{path} {{", site + f'    add_header Cache-Control "{IMMUTABLE}"'
                  " always;", "}"]
    return "\n".join(lines) + "\n"


def _s3_script(entries: list[dict[str, Any]]) -> str:
    """An upload with the right types and cache headers; where a .gz sibling exists it is
    uploaded under the file's own name with Content-Encoding: gzip (S3 cannot negotiate, and
    every client accepts gzip), and under its own name as it is (bundle.mjs fetches a model's
    or a .wasm's sibling and decompresses it)."""
    lines = ["#!/bin/sh",
             "# Upload this folder to S3 (and so CloudFront): sh s3-upload.sh s3://BUCKET/PREFIX",
             "# COOP/COEP need a CloudFront response headers policy; without one, the page's",
             "# coi-serviceworker.js adds them from the second visit on.",
             "set -eu", 'target="${1:?usage: sh s3-upload.sh s3://BUCKET/PREFIX}"',
             'cd "$(dirname "$0")"']
    for entry in entries:
        for piece in entry.get("parts") or [entry]:
            path = piece["path"]
            gzip = piece.get("encodings", {}).get("gzip")
            source, extra = (gzip["path"], " --content-encoding gzip") if gzip else (path, "")
            lines.append(
                f"aws s3 cp {shlex.quote(source)} \"$target\"/{shlex.quote(path)}"
                f" --content-type {shlex.quote(_type_of(path))}"
                f" --cache-control {shlex.quote(cache_control(path, entry['sha256']))}{extra}")
            if gzip:
                lines.append(
                    f"aws s3 cp {shlex.quote(gzip['path'])} \"$target\"/{shlex.quote(gzip['path'])}"
                    " --content-type application/gzip"
                    f" --cache-control {shlex.quote(cache_control(path, entry['sha256']))}")
    lines.append(f'aws s3 cp {MANIFEST_FILE} "$target"/{MANIFEST_FILE} --content-type'
                 f" application/json --cache-control {REVALIDATE}")
    return "\n".join(lines) + "\n"


_WRITERS = {"netlify": _headers_file, "cloudflare": _headers_file, "vercel": _vercel_json,
            "github-pages": lambda entries: "", "s3": _s3_script, "nginx": _nginx_conf}


def write_host_configs(directory: Path, entries: list[dict[str, Any]], hosts: Iterable[str]
                       ) -> None:
    """Write the config file of each host in `hosts` (GitHub Pages: `.nojekyll`, as it cannot
    set headers and relies on the COI worker)."""
    for host in dict.fromkeys(hosts):
        (directory / CONFIG_FILES[host]).write_text(_WRITERS[host](entries), encoding="utf-8")
