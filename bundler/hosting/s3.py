"""Amazon S3 (and CloudFront in front of it): `s3-upload.sh`, which uploads each file with its
headers, as S3 keeps headers per object. Recognised by its X-Amz-* headers."""

from __future__ import annotations

import shlex
from collections.abc import Mapping

from bundler.bundle.layout import MANIFEST_FILE
from bundler.hosting.headers import REVALIDATE, cache_control, type_of
from bundler.hosting.spec import Entries, Host, deploy_fixes, server_of

_UPLOAD = "upload with the s3-upload.sh that bundle build wrote (it sets each file's headers)"


def _s3_script(entries: Entries) -> str:
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
                f" --content-type {shlex.quote(type_of(path))}"
                f" --cache-control {shlex.quote(cache_control(path, entry['sha256']))}{extra}")
            # the siblings bundle.mjs fetches by their own names, as the bytes they are
            for sibling in (gzip, piece.get("packed")):
                if sibling:
                    lines.append(
                        f"aws s3 cp {shlex.quote(sibling['path'])}"
                        f" \"$target\"/{shlex.quote(sibling['path'])} --content-type"
                        " application/gzip"
                        f" --cache-control {shlex.quote(cache_control(path, entry['sha256']))}")
    lines.append(f'aws s3 cp {MANIFEST_FILE} "$target"/{MANIFEST_FILE} --content-type'
                 f" application/json --cache-control {REVALIDATE}")
    return "\n".join(lines) + "\n"


def _detect(headers: Mapping[str, str]) -> bool:
    return ("x-amz-cf-id" in headers or "x-amz-request-id" in headers
            or "amazons3" in server_of(headers))


HOST = Host(
    name="s3",
    config_file="s3-upload.sh",
    write_config=_s3_script,
    detect=_detect,
    detection_rank=2,
    fixes={
        **deploy_fixes(_UPLOAD),
        "missing": "upload the whole folder: " + _UPLOAD,
        "content-type": _UPLOAD + ", or aws s3 cp FILE --content-type application/wasm",
        "html-instead": "CloudFront's custom error response answers with /index.html and 200:"
                        " answer 403/404 with 404 instead",
        "stale": "upload the whole folder again and invalidate CloudFront:"
                 " aws cloudfront create-invalidation --distribution-id ID --paths '/*'",
        "wrong-encoding": "set --content-encoding only on the object uploaded from the matching"
                          " .gz/.br sibling (s3-upload.sh does)",
        "unencoded": "upload .gz siblings with --content-encoding gzip (s3-upload.sh does)",
        "uncompressed": _UPLOAD + ": it uploads the .gz siblings with Content-Encoding: gzip",
        "no-isolation": "attach a CloudFront response headers policy with"
                        " Cross-Origin-Opener-Policy: same-origin and"
                        " Cross-Origin-Embedder-Policy: require-corp",
    },
)
