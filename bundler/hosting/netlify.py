"""Netlify: the `_headers` file, recognised by its X-Nf-Request-Id header."""

from __future__ import annotations

from collections.abc import Mapping

from bundler.hosting.headers_file import HEADERS_FILE, HEADERS_FILE_FIXES, write_headers_file
from bundler.hosting.spec import Host, server_of


def _detect(headers: Mapping[str, str]) -> bool:
    return "x-nf-request-id" in headers or "netlify" in server_of(headers)


HOST = Host(
    name="netlify",
    config_file=HEADERS_FILE,
    write_config=write_headers_file,
    detect=_detect,
    detection_rank=0,
    fixes={
        **HEADERS_FILE_FIXES,
        "html-instead": "a catch-all rewrite (/* /index.html 200 in _redirects or netlify.toml)"
                        " answers files with the page: remove it or limit it to paths without a"
                        " dot",
    },
)
