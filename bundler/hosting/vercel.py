"""Vercel: `vercel.json` with a header rule per file, recognised by its X-Vercel-Id header."""

from __future__ import annotations

import json
from collections.abc import Mapping

from bundler.hosting.headers import SITE_HEADERS, served, type_of
from bundler.hosting.spec import Entries, Host, deploy_fixes, server_of


def _vercel_json(entries: Entries) -> str:
    headers = [{"source": "/(.*)", "headers": [{"key": name, "value": value}
                                               for name, value in SITE_HEADERS.items()]}]
    for path, control, encoding in served(entries):
        rule = [{"key": "Cache-Control", "value": control},
                {"key": "Content-Type", "value": type_of(path)}]
        if encoding:
            rule.append({"key": "Content-Encoding", "value": encoding})
        headers.append({"source": f"/{path}", "headers": rule})
    return json.dumps({"headers": headers}, indent=2) + "\n"


def _detect(headers: Mapping[str, str]) -> bool:
    return "x-vercel-id" in headers or "vercel" in server_of(headers)


HOST = Host(
    name="vercel",
    config_file="vercel.json",
    write_config=_vercel_json,
    detect=_detect,
    detection_rank=0,
    fixes={
        **deploy_fixes("deploy the vercel.json that bundle build wrote (at the project root)"),
        "html-instead": "a catch-all rewrite to /index.html in vercel.json answers files with the"
                        ' page: limit it to paths without a dot ("source": "/((?!.*\\\\.).*)")',
    },
)
