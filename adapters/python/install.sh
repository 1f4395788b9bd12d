#!/bin/sh
# Installs the pinned lock libraries of the Python adapters (redis-py, kazoo, aetcd; see
# requirements.txt) into adapters/python/.venv, which is git-ignored. Idempotent: a venv whose
# recorded requirements match requirements.txt is left alone; otherwise it is rebuilt from scratch.
#
# Debian packages needed: python3 python3-venv
# (Debian ships the venv module's ensurepip separately, in python3-venv; without it
# `python3 -m venv` fails with "ensurepip is not available".)
# Needs network access to PyPI (or a pip index / find-links configured for pip).
set -eu

here=$(cd "$(dirname "$0")" && pwd)
. "$here/../../scripts/lib/venv.sh"
venv_current "python adapters" "$here" python && exit 0
venv_build "$here"
echo "python adapters: installed $(grep -c '==' "$here/requirements.txt") pinned packages in $venv"
