"""The headers every static host is told to send, from bundle.json's `files`.

Every served file gets its own rule (no wildcard for Cache-Control: Netlify and Cloudflare join
the values of every matching rule with commas): `immutable` for content-hashed names, `no-cache`
(revalidate, which costs a 304 and no body) for stable ones. The whole site gets COOP/COEP (so
onnxruntime-web gets threads), and CORP/CORS so a page on another origin may import the bundle.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path, PurePosixPath
from typing import Any

from bundler.bundle.layout import ENCODINGS, MANIFEST_FILE
from bundler.server.bundle_server import content_type

SITE_HEADERS = {
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Embedder-Policy": "require-corp",
    "Cross-Origin-Resource-Policy": "cross-origin",
    "Access-Control-Allow-Origin": "*",
}
IMMUTABLE = "public, max-age=31536000, immutable"
REVALIDATE = "no-cache"


def is_hashed(path: str, sha256: str) -> bool:
    """Does the file name carry its content hash (so it may be cached forever)?"""
    return sha256[:8] in PurePosixPath(path).name


def cache_control(path: str, sha256: str) -> str:
    return IMMUTABLE if is_hashed(path, sha256) else REVALIDATE


def type_of(path: str) -> str:
    """The Content-Type of a file, a part or a sibling: that of the original name."""
    name = PurePosixPath(path).name
    for suffix in ENCODINGS.values():
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
            if "packed" in piece:  # gzip of the piece's float planes
                yield piece["packed"]["path"], control, "gzip"
