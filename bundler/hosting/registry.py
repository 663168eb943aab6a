"""The static hosts by name, and what is done over all of them: writing the chosen hosts'
config files and telling the host from a response's headers.

Each host is the module of its name in this package (see spec.py). They are light (no brotli,
onnx or onnxruntime), so options and `bundle --help` read the names from here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from bundler.hosting import cloudflare, github_pages, netlify, nginx, s3, vercel
from bundler.hosting.spec import Entries, Host

# In the order of `--host`'s choices and of bundle.json's `hosting.hosts` (with --host all).
HOSTS: dict[str, Host] = {host.name: host for host in (
    netlify.HOST, cloudflare.HOST, vercel.HOST, github_pages.HOST, s3.HOST, nginx.HOST)}
HOST_NAMES = tuple(HOSTS)
CONFIG_FILES = {name: host.config_file for name, host in HOSTS.items()}
UNKNOWN_HOST = "unknown"
_BY_DETECTION_RANK = sorted(HOSTS.values(), key=lambda host: host.detection_rank)


def write_host_configs(directory: Path, entries: Entries, hosts: Iterable[str]) -> None:
    """Write the config file of each host in `hosts` (GitHub Pages: `.nojekyll`, as it cannot
    set headers and relies on the COI worker)."""
    for name in dict.fromkeys(hosts):
        host = HOSTS[name]
        (directory / host.config_file).write_text(host.write_config(entries), encoding="utf-8")


def detect_host(headers: Mapping[str, str]) -> str:
    """The name of the host whose marks the (lower-cased) response headers carry, else
    "unknown"."""
    return next((host.name for host in _BY_DETECTION_RANK if host.detect(headers)), UNKNOWN_HOST)
