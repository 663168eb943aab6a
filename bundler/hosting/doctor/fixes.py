"""What to change for each kind of problem `bundle doctor` finds: the host module's fix
(its `HOST.fixes`) where it has one, else the fix for any host below."""

from __future__ import annotations

from bundler.hosting.registry import HOSTS

ANY_HOST_FIXES: dict[str, str] = {
    "unreachable": "check the URL and that the host answers from this machine",
    "missing": "upload the whole folder, every file of bundle.json's files (parts included)",
    "status": "the host refused the file; check its permissions or access rules",
    "content-type": "serve .wasm as application/wasm and .mjs/.js as text/javascript",
    "html-instead": "answer a missing file with a 404, never with the index page",
    "magic": "upload the file again byte for byte (no text-mode transfer, no rewriting)",
    "stale": "deploy the whole folder again as one and purge the CDN cache; serve stable names"
             " with Cache-Control: no-cache",
    "wrong-encoding": "send Content-Encoding only with the bytes of that encoding",
    "unencoded": "the bytes are compressed but sent without Content-Encoding: never upload a"
                 " .br/.gz sibling under the file's own name without that header",
    "too-big": "build with --max-file-size (default 25MiB) so that big files ship in parts",
    "uncompressed": "serve the .br/.gz siblings with Content-Encoding to browsers that accept"
                    " them",
    "cache-hashed": "send Cache-Control: public, max-age=31536000, immutable for content-hashed"
                    " names",
    "cache-stable": "send Cache-Control: no-cache for files whose names stay the same across"
                    " builds",
    "no-validator": "send an ETag or Last-Modified, so that revalidation costs a 304",
    "no-isolation": "send Cross-Origin-Opener-Policy: same-origin and"
                    " Cross-Origin-Embedder-Policy: require-corp, or ship the COI worker (build"
                    " without --no-coi-worker)",
    "worker-only": "send COOP/COEP headers too, so that the first visit also gets threads",
}
# A missing file answered with the page is fixed as a file answered with the page.
_FIXED_AS = {"spa-fallback": "html-instead"}


def fix_for(kind: str, host: str) -> str:
    """The fix for a problem of `kind` on the host named `host` ("unknown": any host)."""
    kind = _FIXED_AS.get(kind, kind)
    own = HOSTS[host].fixes.get(kind) if host in HOSTS else None
    return own or ANY_HOST_FIXES[kind]
