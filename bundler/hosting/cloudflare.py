"""Cloudflare Pages: the `_headers` file, recognised by its CF-Ray header. Cloudflare's CDN may
sit in front of any other host, so its marks are tried after theirs."""

from __future__ import annotations

from collections.abc import Mapping

from bundler.hosting.headers_file import HEADERS_FILE, HEADERS_FILE_FIXES, write_headers_file
from bundler.hosting.spec import Host, server_of


def _detect(headers: Mapping[str, str]) -> bool:
    return "cf-ray" in headers or "cloudflare" in server_of(headers)


HOST = Host(
    name="cloudflare",
    config_file=HEADERS_FILE,
    write_config=write_headers_file,
    detect=_detect,
    detection_rank=1,
    fixes={
        **HEADERS_FILE_FIXES,
        "html-instead": "Cloudflare Pages treats a project without a top-level 404.html as a"
                        " single-page app: add a 404.html",
        "stale": "deploy the whole folder again and purge the cache (Caching > Purge)",
        "too-big": "Cloudflare Pages refuses files over 25 MiB: build with --max-file-size"
                   " 25MiB (the default) so that big files ship in parts",
    },
)
