"""What `bundle doctor` reports: the problems found, each with its fix, and a row per file."""

from __future__ import annotations

import dataclasses
from typing import Any

from bundler.hosting.doctor.fetching import Expected, Fetched

COLUMNS = ("File", "Status", "Content type", "Encoding", "Sent", "Cache control", "Result")


@dataclasses.dataclass
class Problem:
    severity: str  # "error": loading breaks or downloads more than it must; "warning"
    path: str
    kind: str
    message: str
    fix: str


@dataclasses.dataclass
class DoctorReport:
    url: str
    host: str
    rows: list[list[str]]
    problems: list[Problem]
    sessions: list[str] = dataclasses.field(default_factory=list)  # bundle.json's, by name

    @property
    def ok(self) -> bool:
        return not any(problem.severity == "error" for problem in self.problems)

    def grouped_problems(self) -> list[tuple[str, str, str, str]]:
        """One row per severity and kind of problem: the files it concerns, the first one's
        message, the fix (errors first)."""
        groups: dict[tuple[str, str], list[Problem]] = {}
        for problem in self.problems:
            groups.setdefault((problem.severity, problem.kind), []).append(problem)
        rows = []
        for (severity, _), problems in sorted(groups.items(), key=lambda g: g[0][0] != "error"):
            paths = [problem.path for problem in problems]
            more = f" and {len(paths) - 3} more" if len(paths) > 3 else ""
            rows.append((severity, ", ".join(paths[:3]) + more, problems[0].message,
                         problems[0].fix))
        return rows

    def to_json(self) -> dict[str, Any]:
        columns = [column.lower().replace(" ", "_") for column in COLUMNS]
        return {"url": self.url, "host": self.host, "ok": self.ok, "sessions": self.sessions,
                "files": [dict(zip(columns, row, strict=True)) for row in self.rows],
                "problems": [dataclasses.asdict(problem) for problem in self.problems]}


def file_row(expected: Expected, fetched: Fetched, problems: list[Problem]) -> list[str]:
    """The table row of one file: what came back and the kinds of problem found."""
    result = "; ".join(f"{p.severity}: {p.kind}" for p in problems) or "ok"
    return [expected.path, str(fetched.status or fetched.error), fetched.mime or "-",
            fetched.header("content-encoding") or "-", str(len(fetched.body)),
            fetched.header("cache-control") or "-", result]
