"""`bundle doctor URL`: does a deployed bundle load as it should? HTTP only, no browser.

It fetches what a browser would (the page, bundle.json and every file bundle.json lists) and
checks each response (bundler.hosting.doctor.checks), then the page's cross-origin isolation and
that a missing file gets a real 404, not the page. Each problem comes with its fix for the host,
told from the response headers.
"""

from __future__ import annotations

import json

from bundler.bundle.files import sessions_of
from bundler.bundle.layout import COI_WORKER
from bundler.console import Reporter
from bundler.errors import BundlerError
from bundler.hosting.doctor.checks import (
    PROBE,
    check_file,
    check_isolation,
    check_missing_file,
    decoded,
)
from bundler.hosting.doctor.fetching import Expected, Fetched, expected_files, fetch, folder_url
from bundler.hosting.doctor.fixes import fix_for
from bundler.hosting.doctor.report import DoctorReport, file_row
from bundler.hosting.registry import detect_host
from bundler.hosting.sizes import DEFAULT_MAX_FILE_SIZE


def doctor(url: str, max_file_size: int = DEFAULT_MAX_FILE_SIZE,
           reporter: Reporter | None = None) -> DoctorReport:
    reporter = reporter or Reporter()
    base = folder_url(url)
    page = fetch(base)
    if page.status is None:
        raise BundlerError(f"cannot reach {base}: {page.error}")
    host = detect_host(page.headers)
    manifest_response = fetch(base + "bundle.json")
    try:
        manifest = json.loads(decoded(manifest_response, "bundle.json", []) or b"")
        manifest["runtime"]  # noqa: B018 (a bundle.json, not any JSON)
    except (ValueError, KeyError, TypeError):
        raise BundlerError(f"{base}bundle.json is not a bundle's manifest (HTTP"
                           f" {manifest_response.status}); give the URL of the folder that"
                           " bundle build made") from None
    rows, problems = [], []
    fetched_by_path: dict[str, Fetched] = {}
    for expected in expected_files(manifest):
        with reporter.step(f"Fetching {expected.path}"):
            fetched = page if expected.path == "index.html" else fetch(base + expected.path)
        fetched_by_path[expected.path] = fetched
        found = check_file(fetched, expected, max_file_size)
        rows.append(file_row(expected, fetched, found))
        problems += found
    manifest_problems = check_file(manifest_response, Expected("bundle.json", kind=".json"),
                                   max_file_size)
    rows.insert(0, file_row(Expected("bundle.json"), manifest_response, manifest_problems))
    problems += manifest_problems
    worker = fetched_by_path.get(COI_WORKER) or fetch(base + COI_WORKER)
    isolation = check_isolation(page, worker)
    problems += [isolation] if isolation else []
    missing_file = check_missing_file(fetch(base + PROBE))
    problems += [missing_file] if missing_file else []
    for problem in problems:
        problem.fix = fix_for(problem.kind, host)
    return DoctorReport(base, host, rows, problems,
                        [str(session.get("name")) for session in sessions_of(manifest)])
