"""nginx: `nginx.conf`, the lines for the server block, recognised by its Server header (tried
last: many hosts run nginx)."""

from __future__ import annotations

from collections.abc import Mapping

from bundler.hosting.headers import IMMUTABLE, REVALIDATE, SITE_HEADERS, served
from bundler.hosting.spec import Entries, Host, deploy_fixes, server_of

_DEPLOY = "include the nginx.conf that bundle build wrote in the server block and reload nginx"


def _nginx_conf(entries: Entries) -> str:
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


def _detect(headers: Mapping[str, str]) -> bool:
    return server_of(headers).startswith("nginx")


HOST = Host(
    name="nginx",
    config_file="nginx.conf",
    write_config=_nginx_conf,
    detect=_detect,
    detection_rank=3,
    fixes={
        **deploy_fixes(_DEPLOY),
        "content-type": _DEPLOY + " (types { application/wasm wasm; text/javascript mjs; })",
        "html-instead": "use try_files $uri =404; for the bundle, not try_files $uri /index.html;",
        "wrong-encoding": "do not add Content-Encoding by hand; gzip_static/brotli_static set it",
        "uncompressed": "gzip_static on; (and brotli_static on; with ngx_brotli) in the bundle's"
                        " location serve the .gz/.br siblings",
    },
)
