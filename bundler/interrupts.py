"""Signals that end a command: SIGTERM and SIGHUP raise KeyboardInterrupt as Ctrl-C does, so every
`finally` and cleanup runs (temporary folders removed, the previous output kept); a short critical
section (moving a finished build into place) can hold them until it is done."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType

_ENDING = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP")
                if hasattr(signal, name))


def _in_main_thread() -> bool:
    # Python runs signal handlers in the main thread only, and only it may install them.
    return threading.current_thread() is threading.main_thread()


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


@contextlib.contextmanager
def signals_interrupt() -> Iterator[None]:
    """SIGTERM and SIGHUP (a closed terminal) raise KeyboardInterrupt inside the block."""
    if not _in_main_thread():
        yield
        return
    previous = {signum: signal.signal(signum, _interrupt) for signum in _ENDING
                if signum != signal.SIGINT}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """A signal that arrives inside the block takes effect when the block has finished."""
    if not _in_main_thread():
        yield
        return
    received: list[int] = []
    previous = {signum: signal.signal(signum, lambda signum, frame: received.append(signum))
                for signum in _ENDING}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if received:
            signal.raise_signal(received[0])
