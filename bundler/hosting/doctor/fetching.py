"""What `bundle doctor` fetches, as a browser would (sending `Accept-Encoding: br, gzip`), and
what bundle.json says each file is."""

from __future__ import annotations

import dataclasses
import urllib.error
import urllib.request
from typing import Any

from bundler.bundle.files import fetched_path, sessions_of
from bundler.errors import ConfigError
from bundler.site.runtime import BUILDS

_TIMEOUT_S = 60


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
    runs: tuple[tuple[int, ...], ...] = ()  # a packed sibling's float runs (bundler.bundle.planes)


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


def folder_url(url: str) -> str:
    """The URL of the bundle's folder (ending in /), from that of the folder, a page in it or
    its bundle.json."""
    if not url.startswith(("http://", "https://")):
        raise ConfigError(f"{url!r} is not an http(s) URL; give the URL the bundle is deployed"
                          " at (for a local folder: bundle serve FOLDER, then that URL)")
    base = url.split("#")[0].split("?")[0]
    if base.endswith((".html", "bundle.json")):
        base = base.rsplit("/", 1)[0] + "/"
    return base if base.endswith("/") else base + "/"


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
                    runs = (piece.get("packed") or {}).get("runs", [])
                    found.append(dataclasses.replace(found[-1], path=fetched_path(piece),
                                                     whole=False, encodings=(),
                                                     gzip_sibling=True,
                                                     runs=tuple(map(tuple, runs))))
        return found
    runtime = manifest["runtime"]
    paths = ["index.html", "bundle.mjs", *(variant["file"] for session in sessions_of(manifest)
                                           for variant in session["variants"])]
    for build in runtime["builds"].values():
        if "wasm" in build:  # {module, mjs, wasm}, hashed names
            paths += build.values()
            continue
        shipped = next((b for b in BUILDS.values() if runtime["dir"] + b.module == build["module"]),
                       None)
        paths += [build["module"], *(runtime["dir"] + name for name in
                                     (shipped.files if shipped else ()))]
    return [Expected(path, kind="." + path.rsplit(".", 1)[-1]) for path in dict.fromkeys(paths)]
