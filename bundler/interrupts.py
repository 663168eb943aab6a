"""Signals that end a command: SIGTERM and SIGHUP raise KeyboardInterrupt as Ctrl-C does, so every
`finally` and cleanup runs (temporary folders removed, the previous output kept); a short critical
section (moving a finished build into place) can hold them until it is done.

A library may catch the KeyboardInterrupt and carry on (a browser driver's event loop can), so a
signal is also remembered: `interrupted()` lets the last step of a build refuse to replace its
output after one. The record does not depend on our Python handler having run: the interpreter's
C handler writes each signal's number to a wakeup socket the moment it arrives (so a handler a
library put in place of ours, or one still waiting for the main thread, is seen too), and a signal
held pending by a blocked mask counts as well."""

from __future__ import annotations

import contextlib
import signal
import socket
import threading
from collections.abc import Iterator
from types import FrameType

_ENDING = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP")
                if hasattr(signal, name))
_received: list[int] = []


def _in_main_thread() -> bool:
    # Python runs signal handlers in the main thread only, and only it may install them.
    return threading.current_thread() is threading.main_thread()


def _interrupt(signum: int, frame: FrameType | None) -> None:
    _received.append(signum)
    raise KeyboardInterrupt


_wakeup: list[socket.socket] = []  # the reading end, inside a `signals_interrupt` block


def interrupted() -> bool:
    """Whether an ending signal arrived inside the current `signals_interrupt` block."""
    if _wakeup:
        with contextlib.suppress(BlockingIOError):
            _received.extend(number for number in _wakeup[0].recv(4096) if number in _ENDING)
    pending = signal.sigpending() if hasattr(signal, "sigpending") else set()
    return bool(_received) or any(signum in pending for signum in _ENDING)


@contextlib.contextmanager
def _signals_written() -> Iterator[None]:
    """The C handler writes each signal's number to a socket of ours (see the module's doc)."""
    reader, writer = socket.socketpair()
    for end in (reader, writer):
        end.setblocking(False)
    try:
        previous = signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
    except ValueError:  # not the main interpreter
        reader.close()
        writer.close()
        yield
        return
    _wakeup.append(reader)
    try:
        yield
    finally:
        signal.set_wakeup_fd(previous)
        _wakeup.clear()
        reader.close()
        writer.close()


@contextlib.contextmanager
def signals_interrupt() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP (a closed terminal) raise KeyboardInterrupt inside the block and
    are remembered for `interrupted()`. SIGINT is left alone where it was not Python's default
    (ignored, as in a background job of a non-interactive shell)."""
    if not _in_main_thread():
        yield
        return
    _received.clear()
    previous = {signum: signal.signal(signum, _interrupt) for signum in _ENDING
                if signum != signal.SIGINT
                or signal.getsignal(signum) is signal.default_int_handler}
    try:
        with _signals_written():
            yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        _received.clear()


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
