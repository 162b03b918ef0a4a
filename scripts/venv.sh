# Sourced by the scripts that set up a Python environment: setup.sh (the project's .venv) and the
# side environments of tools whose pins clash with it (setup-nnmeter-env.sh,
# setup-litert-torch-env.sh). The caller sets NAME (its messages' prefix), VENV and PY first.

# make_venv: creates $VENV with $PY unless it is there.
make_venv() {
    command -v "$PY" >/dev/null || { echo "$NAME: $PY not found (set PYTHON=...)" >&2; exit 1; }
    if [ ! -x "$VENV/bin/python" ]; then
        echo "$NAME: creating $VENV with $PY ($("$PY" --version 2>&1))"
        "$PY" -m venv "$VENV"
    fi
}

# venv_pip ARGS...: pip of $VENV, without the location warnings of a user install; a failing
# pip stops the script with pip's exit status (the callers run with pipefail).
venv_pip() {
    local status=0
    "$VENV/bin/python" -m pip "$@" 2>&1 | { grep -v "^WARNING: Location" || true; } || status=$?
    if [ "$status" != 0 ]; then
        echo "$NAME: pip $* failed (exit $status; see its output above)" >&2
        exit "$status"
    fi
}
