#!/bin/sh
# Installs kubernetes-validate (pinned in requirements.txt) into scripts/kubernetes-validate/.venv,
# which is git-ignored; bench/tests/k8s.rs validates the manifests of `lockbench k8s render`
# with it, offline, against the schemas it bundles. Idempotent: a venv whose recorded
# requirements match requirements.txt is left alone; otherwise it is rebuilt from scratch.
#
# Debian packages needed: python3 python3-venv
# Needs network access to PyPI (or a pip index / find-links configured for pip).
set -eu

here=$(cd "$(dirname "$0")" && pwd)
# Resolved, so that a .venv linked to a cache outside the checkout (.ci/run's) is built at the
# cache's own path, which its scripts' first lines name, and serves every later clone.
venv=$(realpath -m "$here/.venv")
stamp="$venv/lockbench-requirements.txt"
python=${PYTHON:-python3}

if [ -x "$venv/bin/kubernetes-validate" ] && cmp -s "$here/requirements.txt" "$stamp"; then
    echo "kubernetes-validate: already installed in $venv"
    exit 0
fi

"$python" -m venv --clear "$venv"
PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore \
    "$venv/bin/python" -m pip install --quiet --no-deps --only-binary=:all: \
    -r "$here/requirements.txt"
# --no-deps trusts requirements.txt to be complete; check that it is.
"$venv/bin/python" -m pip check
cp "$here/requirements.txt" "$stamp"
echo "kubernetes-validate: installed $("$venv/bin/kubernetes-validate" --version) in $venv"
