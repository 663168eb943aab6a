"""The `_headers` file, which Netlify and Cloudflare Pages both read: its writer and the fixes
that come down to deploying it."""

from __future__ import annotations

from bundler.hosting.headers import SITE_HEADERS, served, type_of
from bundler.hosting.spec import Entries, deploy_fixes

HEADERS_FILE = "_headers"
HEADERS_FILE_FIXES = deploy_fixes("deploy the _headers file that bundle build wrote at the root"
                                  " of the published folder")


def write_headers_file(entries: Entries) -> str:
    lines = ["# Netlify and Cloudflare Pages: publish this folder with this file at its root.",
             "/*"]
    lines += [f"  {name}: {value}" for name, value in SITE_HEADERS.items()]
    for path, control, encoding in served(entries):
        lines += [f"/{path}", f"  Cache-Control: {control}", f"  Content-Type: {type_of(path)}"]
        if encoding:
            lines.append(f"  Content-Encoding: {encoding}")
    return "\n".join(lines) + "\n"
