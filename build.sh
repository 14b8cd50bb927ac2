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
        "$VENV/bin/python" -m pip install -q -e ".[test]"
        touch "$stamp"
    fi
    # The editable install compiled the hot modules in place (setup.py); recompile those
    # whose .py/.pxd changed since, so a stale extension never shadows edited source
    # (about a second when nothing changed).
    if [ -z "${PULPIE_PURE_PYTHON:-}" ] || [ "${PULPIE_PURE_PYTHON}" = 0 ]; then
        "$VENV/bin/python" setup.py -q build_ext --inplace >/dev/null
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
