"""What to change on each static host for each problem `bundle doctor` finds.

FIXES[kind][host] is the fix on that host; FIXES[kind]["*"] where no host-specific one applies.
The host names are those of `bundle build --host`, plus "unknown".
"""

from __future__ import annotations

_HEADERS = "deploy the _headers file that bundle build wrote at the root of the published folder"
_VERCEL = "deploy the vercel.json that bundle build wrote (at the project root)"
_NGINX = "include the nginx.conf that bundle build wrote in the server block and reload nginx"
_S3 = "upload with the s3-upload.sh that bundle build wrote (it sets each file's headers)"

FIXES: dict[str, dict[str, str]] = {
    "unreachable": {"*": "check the URL and that the host answers from this machine"},
    "missing": {
        "github-pages": "upload every file in bundle.json's files (parts included); keep the"
                        " .nojekyll file so that Jekyll does not drop files",
        "s3": "upload the whole folder: " + _S3,
        "*": "upload the whole folder, every file of bundle.json's files (parts included)",
    },
    "status": {"*": "the host refused the file; check its permissions or access rules"},
    "content-type": {
        "netlify": _HEADERS + " (it sets Content-Type per file)",
        "cloudflare": _HEADERS + " (it sets Content-Type per file)",
        "vercel": _VERCEL + " (it sets Content-Type per file)",
        "nginx": _NGINX + " (types { application/wasm wasm; text/javascript mjs; })",
        "s3": _S3 + ", or aws s3 cp FILE --content-type application/wasm",
        "github-pages": "GitHub Pages picks the type by extension: keep the file names of the"
                        " build",
        "*": "serve .wasm as application/wasm and .mjs/.js as text/javascript",
    },
    "html-instead": {
        "netlify": "a catch-all rewrite (/* /index.html 200 in _redirects or netlify.toml)"
                   " answers files with the page: remove it or limit it to paths without a dot",
        "cloudflare": "Cloudflare Pages treats a project without a top-level 404.html as a"
                      " single-page app: add a 404.html",
        "vercel": "a catch-all rewrite to /index.html in vercel.json answers files with the page:"
                  ' limit it to paths without a dot ("source": "/((?!.*\\\\.).*)")',
        "nginx": "use try_files $uri =404; for the bundle, not try_files $uri /index.html;",
        "s3": "CloudFront's custom error response answers with /index.html and 200: answer"
              " 403/404 with 404 instead",
        "github-pages": "a 404.html that loads the app makes GitHub Pages look like an SPA host:"
                        " remove it from the bundle's folder",
        "*": "answer a missing file with a 404, never with the index page",
    },
    "magic": {"*": "upload the file again byte for byte (no text-mode transfer, no rewriting)"},
    "stale": {
        "s3": "upload the whole folder again and invalidate CloudFront:"
              " aws cloudfront create-invalidation --distribution-id ID --paths '/*'",
        "cloudflare": "deploy the whole folder again and purge the cache (Caching > Purge)",
        "*": "deploy the whole folder again as one and purge the CDN cache; serve stable names"
             " with Cache-Control: no-cache",
    },
    "wrong-encoding": {
        "nginx": "do not add Content-Encoding by hand; gzip_static/brotli_static set it",
        "s3": "set --content-encoding only on the object uploaded from the matching .gz/.br"
              " sibling (s3-upload.sh does)",
        "*": "send Content-Encoding only with the bytes of that encoding",
    },
    "unencoded": {
        "s3": "upload .gz siblings with --content-encoding gzip (s3-upload.sh does)",
        "*": "the bytes are compressed but sent without Content-Encoding: never upload a .br/.gz"
             " sibling under the file's own name without that header",
    },
    "too-big": {
        "cloudflare": "Cloudflare Pages refuses files over 25 MiB: build with --max-file-size"
                      " 25MiB (the default) so that big files ship in parts",
        "github-pages": "GitHub refuses files over 100 MiB: build with --max-file-size 25MiB",
        "*": "build with --max-file-size (default 25MiB) so that big files ship in parts",
    },
    "uncompressed": {
        "nginx": "gzip_static on; (and brotli_static on; with ngx_brotli) in the bundle's"
                 " location serve the .gz/.br siblings",
        "s3": _S3 + ": it uploads the .gz siblings with Content-Encoding: gzip",
        "*": "serve the .br/.gz siblings with Content-Encoding to browsers that accept them",
    },
    "cache-hashed": {
        "netlify": _HEADERS, "cloudflare": _HEADERS, "vercel": _VERCEL, "nginx": _NGINX,
        "s3": _S3,
        "github-pages": "GitHub Pages caches every file for 10 minutes and cannot be told"
                        " otherwise; bundle.mjs keeps models and .wasm in Cache Storage anyway",
        "*": "send Cache-Control: public, max-age=31536000, immutable for content-hashed names",
    },
    "cache-stable": {
        "netlify": _HEADERS, "cloudflare": _HEADERS, "vercel": _VERCEL, "nginx": _NGINX,
        "s3": _S3,
        "github-pages": "GitHub Pages caches for 10 minutes: a new deploy reaches returning"
                        " visitors that much later",
        "*": "send Cache-Control: no-cache for files whose names stay the same across builds",
    },
    "no-validator": {"*": "send an ETag or Last-Modified, so that revalidation costs a 304"},
    "no-isolation": {
        "netlify": _HEADERS + " (COOP/COEP for every path)",
        "cloudflare": _HEADERS + " (COOP/COEP for every path)",
        "vercel": _VERCEL + " (COOP/COEP for every path)",
        "nginx": _NGINX + " (COOP/COEP for every path)",
        "s3": "attach a CloudFront response headers policy with Cross-Origin-Opener-Policy:"
              " same-origin and Cross-Origin-Embedder-Policy: require-corp",
        "github-pages": "GitHub Pages cannot send headers: build without --no-coi-worker, so"
                        " that coi-serviceworker.js ships and index.html loads it",
        "*": "send Cross-Origin-Opener-Policy: same-origin and Cross-Origin-Embedder-Policy:"
             " require-corp, or ship the COI worker (build without --no-coi-worker)",
    },
    "worker-only": {
        "github-pages": "nothing more is possible on GitHub Pages",
        "*": "send COOP/COEP headers too, so that the first visit also gets threads",
    },
    "spa-fallback": {},  # filled below: the fixes of html-instead
}
FIXES["spa-fallback"] = FIXES["html-instead"]


def fix_for(kind: str, host: str) -> str:
    fixes = FIXES[kind]
    return fixes.get(host) or fixes["*"]
