#!/usr/bin/env bash
# One entry point for set-up, tests and the demo.
#   ./build.sh setup   create .venv and install the package with its test extras
#   ./build.sh test    set up (if needed) and run the test suite (fast tier, < 10 min on 2 cores)
#   ./build.sh test-all  the same plus the slow tier (standalone cluster faults, adversarial corpus)
#   ./build.sh demo    set up (if needed) and run jobs/extract.py on the bundled sample
set -euo pipefail
cd "$(dirname "$0")"
VENV=${VENV:-.venv}
PY=${PYTHON:-python3}
TORCH_VERSION=${TORCH_VERSION:-2.13.0}

setup() {
    if [ ! -x "$VENV/bin/python" ]; then
        "$PY" -m venv "$VENV"
    fi
    local stamp="$VENV/.installed-$(cat pyproject.toml setup.py | sha256sum | cut -c1-16)"
    if [ ! -f "$stamp" ]; then
        "$VENV/bin/python" -m pip install -q --upgrade pip
        # The CPU wheel first: an open torch requirement would otherwise pull a CUDA build.
        "$VENV/bin/python" -m pip install -q "torch==${TORCH_VERSION}"
        # The editable install compiles nothing: build_ext below compiles in place, once
        # (a fresh clone otherwise compiled every module twice).
        PULPIE_PURE_PYTHON=1 "$VENV/bin/python" -m pip install -q -e ".[test]"
        touch "$stamp"
    fi
    # Compile the hot modules in place (setup.py), and later only those whose .py/.pxd
    # changed, so a stale extension never shadows edited source (about a second when
    # nothing changed). Compiler output goes to a log; tests/test_compiled.py fails on a
    # missing or stale extension where a C compiler exists.
    if [ -z "${PULPIE_PURE_PYTHON:-}" ] || [ "${PULPIE_PURE_PYTHON}" = 0 ]; then
        if ! "$VENV/bin/python" setup.py build_ext --inplace -j 2 >"$VENV/build_ext.log" 2>&1; then
            cat "$VENV/build_ext.log" >&2
            return 1
        fi
    fi
}

cmd=${1:-setup}
shift || true
case "$cmd" in
    setup) setup ;;
    test) setup; exec "$VENV/bin/python" -m pytest "$@" ;;
    test-all) setup; PULPIE_SLOW_TESTS=1 exec "$VENV/bin/python" -m pytest "$@" ;;
    demo) setup; exec "$VENV/bin/python" jobs/extract.py "$@" ;;
    *) echo "usage: $0 setup|test|test-all|demo [args]" >&2; exit 2 ;;
esac
