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
. "$here/../lib/venv.sh"
venv_current kubernetes-validate "$here" kubernetes-validate && exit 0
venv_build "$here"
echo "kubernetes-validate: installed $("$venv/bin/kubernetes-validate" --version) in $venv"
