#!/usr/bin/env bash
# Installs everything the test suite needs (Python packages in .venv, Debian's Chromium) and runs
# the whole suite, browser tests included. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -z "${BUNDLER_CHROMIUM:-}" ] && ! command -v chromium >/dev/null 2>&1; then
  sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq chromium >/dev/null
fi

[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
# Pinned versions (constraints/test.txt), so a new machine runs the suite as it passed here. torch
# for the export tests: 2.13.0 is the CPU build this kind of machine keeps on disk (about 2 minutes
# into a fresh venv); a newer one would be a CUDA build of several GB.
.venv/bin/python -m pip install -q -c constraints/test.txt -e '.[test,train,torch,plot,docs]'
# The real-size lane's Silero VAD ships in this package; its dependencies (torchaudio, another
# torch build) are not needed to read the ONNX file, so they are left out.
.venv/bin/python -m pip install -q --no-deps -c constraints/test.txt silero-vad==6.2.3
.venv/bin/ruff check .
exec .venv/bin/python -m pytest "$@"
