"""GitHub Pages: it cannot set headers, so the bundle relies on the COI worker for threads and
on file extensions for types; `.nojekyll` keeps Jekyll from dropping files. Recognised by its
X-GitHub-Request-Id header."""

from __future__ import annotations

from collections.abc import Mapping

from bundler.hosting.spec import Entries, Host, server_of


def _nojekyll(entries: Entries) -> str:
    return ""


def _detect(headers: Mapping[str, str]) -> bool:
    return "x-github-request-id" in headers or server_of(headers) == "github.com"


HOST = Host(
    name="github-pages",
    config_file=".nojekyll",
    write_config=_nojekyll,
    detect=_detect,
    detection_rank=0,
    fixes={
        "missing": "upload every file in bundle.json's files (parts included); keep the"
                   " .nojekyll file so that Jekyll does not drop files",
        "content-type": "GitHub Pages picks the type by extension: keep the file names of the"
                        " build",
        "html-instead": "a 404.html that loads the app makes GitHub Pages look like an SPA host:"
                        " remove it from the bundle's folder",
        "too-big": "GitHub refuses files over 100 MiB: build with --max-file-size 25MiB",
        "cache-hashed": "GitHub Pages caches every file for 10 minutes and cannot be told"
                        " otherwise; bundle.mjs keeps models and .wasm in Cache Storage anyway",
        "cache-stable": "GitHub Pages caches for 10 minutes: a new deploy reaches returning"
                        " visitors that much later",
        "no-isolation": "GitHub Pages cannot send headers: build without --no-coi-worker, so"
                        " that coi-serviceworker.js ships and index.html loads it",
        "worker-only": "nothing more is possible on GitHub Pages",
    },
)
