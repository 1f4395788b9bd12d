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
# Resolved, so that a .venv linked to a cache outside the checkout (.ci/run's) is built at the
# cache's own path, which its scripts' first lines name, and serves every later clone.
venv=$(realpath -m "$here/.venv")
stamp="$venv/lockbench-requirements.txt"
python=${PYTHON:-python3}

if [ -x "$venv/bin/python" ] && cmp -s "$here/requirements.txt" "$stamp"; then
    echo "python adapters: already installed in $venv"
    exit 0
fi

"$python" -m venv --clear "$venv"
PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore \
    "$venv/bin/python" -m pip install --quiet --no-deps --only-binary=:all: \
    -r "$here/requirements.txt"
# --no-deps trusts requirements.txt to be complete; check that it is.
"$venv/bin/python" -m pip check
cp "$here/requirements.txt" "$stamp"
echo "python adapters: installed $(grep -c '==' "$here/requirements.txt") pinned packages in $venv"
