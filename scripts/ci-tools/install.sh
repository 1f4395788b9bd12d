#!/bin/sh
# Installs Apache Otava and junitparser (pinned and hashed in requirements.txt) into
# scripts/ci-tools/.venv, which is git-ignored: docs/ci-formats.md's "Trends across commits"
# runs Otava on `lockbench history`'s CSV, and bench/tests/ci_tools.rs checks both (a planted
# shift found at its run, the JUnit file read back). Idempotent: a venv whose recorded
# requirements match requirements.txt is left alone; otherwise it is rebuilt from scratch.
#
# Debian packages needed: python3 (3.11, whose wheels the hashes are of) python3-venv
# Needs network access to PyPI (or a pip index / find-links configured for pip).
set -eu

here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/venv.sh"
venv_current ci-tools "$here" otava && exit 0

python=${PYTHON:-python3}
version=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
if [ "$version" != 3.11 ]; then
    echo "ci-tools: $python is Python $version; requirements.txt hashes CPython 3.11's wheels" \
        "(set PYTHON to a python3.11, or re-make the list as its header says)" >&2
    exit 1
fi

venv_build "$here" --require-hashes
versions=$("$venv/bin/python" -c 'from importlib.metadata import version as v
print("apache-otava", v("apache-otava"), "and junitparser", v("junitparser"))')
echo "ci-tools: installed $versions in $venv"
