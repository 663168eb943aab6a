"""Interrupts: SIGINT (Ctrl-C, to the whole process group as a terminal sends it) or SIGTERM (to the
process, as `kill` sends it) at any point of `bundle build` leaves the previous output exactly as
it was and no temporary folder anywhere; the same for `bundle serve` during a rebuild."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from bundler.bundle.staging import move_into_place, staging_folder
from bundler.interrupts import interrupted, signals_interrupt
from tests import models
from tests.conftest import ROOT, default_sigint
from tests.test_bad_inputs import ORT_SESSION_FILE, _tree

EXIT_TIMEOUT_S = 60


class Command:
    """`bundle ARGS` in its own session, with its stderr lines collected as they come."""

    def __init__(self, args: list[str], cwd: Path, tmp: Path) -> None:
        env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp)}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "bundler", *args], cwd=cwd, env=env, text=True,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
            preexec_fn=default_sigint,
        )
        self.lines: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.append(line)

    def wait_for_line(self, fragment: str, timeout: float = 300) -> None:
        deadline = time.monotonic() + timeout
        while not any(fragment in line for line in self.lines):
            assert self.process.poll() is None, f"ended before {fragment!r}: {self.text}"
            assert time.monotonic() < deadline, f"no {fragment!r} in: {self.text}"
            time.sleep(0.05)

    def send(self, signum: int) -> None:
        if signum == signal.SIGINT:
            os.killpg(self.process.pid, signum)
        else:
            self.process.send_signal(signum)

    def wait(self) -> int:
        code = self.process.wait(timeout=EXIT_TIMEOUT_S)
        self.reader.join(timeout=10)
        return code

    @property
    def text(self) -> str:
        return "".join(self.lines)


def _after(seconds: float) -> Callable[[Command], None]:
    return lambda command: time.sleep(seconds)


def _at_line(fragment: str) -> Callable[[Command], None]:
    return lambda command: command.wait_for_line(fragment)


MOMENTS = {
    "after 0.5 s": _after(0.5),
    "after 2 s": _after(2),
    "while making variants": _at_line("Making the fp16 variant"),
    "during verification": _at_line("Comparing in Chromium"),
}


@pytest.fixture(scope="module")
def previous_build(tmp_path_factory: pytest.TempPathFactory, runtime_dist: Path
                   ) -> tuple[Path, Path]:
    from bundler.bundle.options import BuildOptions
    from bundler.commands.build import build

    root = tmp_path_factory.mktemp("previous")
    model = models.conv_stack(root)
    output = root / "dist"
    build(model, BuildOptions(output=output, runtime_dir=runtime_dist, verify=False))
    return model, output


def _no_leftovers(*folders: Path) -> None:
    for folder in folders:
        assert [p.name for p in folder.iterdir() if p.name != ORT_SESSION_FILE] == [], folder


@pytest.mark.browser
@pytest.mark.parametrize("moment", list(MOMENTS))
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_interrupted_build_keeps_the_previous_output(tmp_path, previous_build, runtime_dist,
                                                     moment, signum):
    model, previous = previous_build
    site = tmp_path / "site"
    site.mkdir()
    output = site / "dist"
    subprocess.run(["cp", "-a", str(previous), str(output)], check=True)
    before = _tree(output)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    command = Command(["build", str(model), "-o", str(output), "--runtime-dir", str(runtime_dist),
                       "--variants", "fp32,fp16"], cwd=tmp_path, tmp=tmp)
    MOMENTS[moment](command)
    assert command.process.poll() is None, f"the build ended before the signal: {command.text}"
    command.send(signum)
    code = command.wait()
    assert code != 0, command.text
    assert "Traceback" not in command.text
    assert _tree(output) == before, f"exit {code}, the output replaced; it printed:\n{command.text}"
    assert sorted(p.name for p in site.iterdir()) == ["dist"]
    _no_leftovers(tmp)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_serve_interrupted_during_a_rebuild_removes_its_folder(tmp_path, runtime_dist, signum):
    model = models.conv_stack(tmp_path / "model")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    command = Command(["serve", str(model), "--port", "0", "--runtime-dir", str(runtime_dist),
                       "--variants", "fp32,fp16"], cwd=tmp_path, tmp=tmp)
    try:
        command.wait_for_line("Serving on")
        scratch = [p for p in tmp.iterdir() if p.name.startswith("bundle-serve-")]
        assert len(scratch) == 1
        os.utime(model)  # a change: the rebuild starts within a poll or two
        deadline = time.monotonic() + 60
        while len(list(scratch[0].glob(".build-*.tmp"))) == 0:
            assert time.monotonic() < deadline, command.text
            time.sleep(0.02)
        command.send(signum)
        assert command.wait() == 0, command.text  # serve stops on a signal as on Ctrl-C
    finally:
        if command.process.poll() is None:
            command.process.kill()
    assert "Traceback" not in command.text
    _no_leftovers(tmp)


def test_a_build_interrupted_where_a_library_caught_it_replaces_nothing(tmp_path):
    # A library that catches the KeyboardInterrupt (a browser driver's event loop can) must not
    # let the build go on to replace its output: the signal is remembered.
    output = tmp_path / "dist"
    output.mkdir()
    (output / "bundle.json").write_text("old")
    with (signals_interrupt(), pytest.raises(KeyboardInterrupt),
          staging_folder(output) as staging):
        (staging / "bundle.json").write_text("new")
        with contextlib.suppress(KeyboardInterrupt):  # what such a library does
            signal.raise_signal(signal.SIGTERM)
        move_into_place(staging, output)
    assert (output / "bundle.json").read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["dist"]
    with signals_interrupt():  # the next command starts afresh
        assert not interrupted()


@pytest.mark.parametrize("library", ["replaces our handler", "blocks the signal"])
def test_a_signal_our_handler_never_saw_still_counts(library):
    # The record does not rest on our Python handler: a library's own handler in its place, or a
    # mask that keeps the signal pending, must not let a build replace its output.
    with signals_interrupt():
        if library == "replaces our handler":
            signal.signal(signal.SIGTERM, lambda signum, frame: None)
            signal.raise_signal(signal.SIGTERM)
            assert interrupted()
        else:
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
            try:
                # to this thread: a signal to the process would go to another thread of the
                # suite's (a reader, a driver's), which does not block it
                signal.pthread_kill(threading.get_ident(), signal.SIGTERM)
                assert interrupted()
            finally:
                signal.signal(signal.SIGTERM, signal.SIG_IGN)  # discards the pending one
                signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
    with signals_interrupt():
        assert not interrupted()


def test_the_command_line_imports_no_heavy_library_before_its_signal_handlers():
    # Until bundler.cli is imported and a command runs, Ctrl-C ends `bundle` with Python's own
    # traceback: that window stays short. onnx (most of a second, through ml_dtypes),
    # onnxruntime, numpy-heavy stacks and torch are imported by the commands, never by the CLI.
    code = ("import sys, json; import bundler.cli;"
            " print(json.dumps(sorted(m for m in ('onnx', 'onnxruntime', 'torch', 'transformers',"
            " 'playwright') if m in sys.modules)))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)}, check=True)
    assert result.stdout.strip() == "[]"
