"""What a static host module provides: its `HOST = Host(...)`.

A host module (named after the host, `github-pages` -> `github_pages.py`) knows four things
about its host: the config file `bundle build --host` writes for it, how its HTTP responses give
it away (for `bundle doctor`), in which order that test runs against the other hosts', and what
to change on it for each kind of problem `bundle doctor` finds.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

Entries = list[dict[str, Any]]  # bundle.json's `files` table, as JSON


@dataclass(frozen=True)
class Host:
    """One static host. `detect` is given the response headers with lower-cased names;
    `detection_rank` orders the hosts' tests, lowest first, so that a platform's own marks win
    over those of a CDN that may sit in front of it; `fixes` maps each kind of problem `bundle
    doctor` finds to what to change on this host (a kind left out gets the fix for any host)."""

    name: str  # as `bundle build --host` takes it
    config_file: str  # written at the root of the published folder
    write_config: Callable[[Entries], str]  # the config file's text, from the `files` table
    detect: Callable[[Mapping[str, str]], bool]
    detection_rank: int
    fixes: Mapping[str, str]


def server_of(headers: Mapping[str, str]) -> str:
    """The Server header, lower-cased ("" when missing)."""
    return headers.get("server", "").lower()


def deploy_fixes(deploy: str) -> dict[str, str]:
    """The fixes of a host whose config file (`deploy` says how to deploy it) sets each file's
    headers: types, cache rules and COOP/COEP."""
    return {"content-type": deploy + " (it sets Content-Type per file)",
            "cache-hashed": deploy, "cache-stable": deploy,
            "no-isolation": deploy + " (COOP/COEP for every path)"}
