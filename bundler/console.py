"""Progress and result output. The core reports through a Reporter so it stays usable as a library
(the default reporter is silent); the CLI passes one that draws on the terminal with rich."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator, Sequence

from rich.console import Console
from rich.markup import escape
from rich.table import Table


class Reporter:
    """Silent reporter: what the library uses unless told otherwise."""

    def info(self, message: str) -> None:
        pass

    def warn(self, message: str) -> None:
        pass

    @contextlib.contextmanager
    def step(self, message: str) -> Iterator[None]:
        yield

    def table(self, title: str, columns: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
        pass


class TerminalReporter(Reporter):
    """Draws on stderr: a spinner per long step, warnings in yellow, results as tables."""

    def __init__(self) -> None:
        self.console = Console(stderr=True, highlight=False, soft_wrap=True)
        self.results = Console(file=sys.stdout, highlight=False)
        if not self.results.is_terminal:  # logs and pipes: no wrapping at 80 columns
            self.results.width = 200

    def info(self, message: str) -> None:
        self.console.print(escape(message))

    def warn(self, message: str) -> None:
        self.console.print(f"[yellow]warning:[/yellow] {escape(message)}")

    @contextlib.contextmanager
    def step(self, message: str) -> Iterator[None]:
        if self.console.is_terminal:
            with self.console.status(escape(message)):
                yield
        else:
            self.console.print(f"{escape(message)} …")
            yield

    def table(self, title: str, columns: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
        table = Table(title=title, title_justify="left")
        for column in columns:
            table.add_column(column)
        for row in rows:
            table.add_row(*(escape(str(cell)) for cell in row))
        self.results.print(table)
