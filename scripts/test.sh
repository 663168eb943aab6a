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
# torch for the export tests: the CPU wheel (about 2 minutes into a fresh venv), never the CUDA one
.venv/bin/python -m pip install -q 'torch==2.13.0' --extra-index-url https://download.pytorch.org/whl/cpu
.venv/bin/python -m pip install -q -e '.[test,train,torch]'
.venv/bin/ruff check .
exec .venv/bin/python -m pytest "$@"
