#!/usr/bin/env bash
# Set up everything the test suite needs on a fresh Debian machine, then run it.
#   bash tests/run.sh [pytest args...]
# Idempotent: a second run reuses .venv and skips what is already installed.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
VENV=${LIUYI_VENV:-.venv}

# System packages the tests drive for real (see README "Tests").
need_apt=()
for pkg in $(cat tests/apt-packages.txt 2>/dev/null); do
  dpkg -s "$pkg" >/dev/null 2>&1 || need_apt+=("$pkg")
done
command -v node >/dev/null 2>&1 || need_apt+=(nodejs)  # the JavaScript parser tests run on node --test
if [ ${#need_apt[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need_apt[@]}"
fi

if [ ! -x "$VENV/bin/python" ]; then
  "$PYTHON" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install -q --upgrade pip
# torch only for export/parity tooling; 2.13.0 is the CPU build this machine carries (any other
# version would pull a multi-GB CUDA build).
"$VENV/bin/python" -m pip install -q "torch==2.13.0"
"$VENV/bin/python" -m pip install -q -e ".[test]"

"$VENV/bin/python" -m ruff check .
"$VENV/bin/python" -m mypy decoding server
exec "$VENV/bin/python" -m pytest "$@"
