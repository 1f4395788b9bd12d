# Sourced by the install scripts of the pinned Python venvs (adapters/python, scripts/ci-tools,
# scripts/kubernetes-validate): each keeps its requirements.txt beside a git-ignored .venv.
#   venv_current LABEL DIR PROGRAM   sets $venv; true (and says so) when DIR/.venv has
#                                    PROGRAM and was built from DIR/requirements.txt as it is
#   venv_build DIR [PIP FLAGS]       builds DIR/.venv from scratch from DIR/requirements.txt
# $venv is resolved, so that a .venv linked to a cache outside the checkout (.ci/run's) is built
# at the cache's own path, which its scripts' first lines name, and serves every later clone.
# Needs network access to PyPI (or a pip index / find-links configured for pip).

venv_current() {
    venv=$(realpath -m "$2/.venv")
    if [ -x "$venv/bin/$3" ] && cmp -s "$2/requirements.txt" "$venv/lockbench-requirements.txt"; then
        echo "$1: already installed in $venv"
        return 0
    fi
    return 1
}

venv_build() {
    dir=$1
    shift
    venv=$(realpath -m "$dir/.venv")
    "${PYTHON:-python3}" -m venv --clear "$venv"
    PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore \
        "$venv/bin/python" -m pip install --quiet "$@" --no-deps --only-binary=:all: \
        -r "$dir/requirements.txt"
    # --no-deps trusts requirements.txt to be complete; check that it is.
    "$venv/bin/python" -m pip check
    cp "$dir/requirements.txt" "$venv/lockbench-requirements.txt"
}
