# Sourced by every bin/ command: on the first run (or after pyproject.toml changes) create
# .venv and install the project into it; later runs go straight on.
KEEL_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
KEEL_PY="$KEEL_ROOT/.venv/bin/python"
KEEL_STAMP="$KEEL_ROOT/.venv/.keel-installed"

keel_bootstrap() {
    if [ -x "$KEEL_PY" ] && [ -f "$KEEL_STAMP" ] && [ ! "$KEEL_ROOT/pyproject.toml" -nt "$KEEL_STAMP" ]; then
        return 0
    fi
    local python="${PYTHON:-python3}"
    if ! command -v "$python" >/dev/null 2>&1; then
        echo "keel: Python 3.11 or newer is required (set PYTHON=/path/to/python3.11)" >&2
        exit 1
    fi
    if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
        echo "keel: Python 3.11 or newer is required; $python is $("$python" -V 2>&1)" >&2
        exit 1
    fi
    echo "keel: first run: creating .venv and installing Keel (pyspark is large; this takes a minute)" >&2
    if [ ! -x "$KEEL_PY" ]; then
        "$python" -m venv "$KEEL_ROOT/.venv" || exit 1
    fi
    "$KEEL_PY" -m pip install --quiet --disable-pip-version-check -e "$KEEL_ROOT[test]" || {
        echo "keel: installing the project failed" >&2
        exit 1
    }
    touch "$KEEL_STAMP"
}

keel_need_java() {
    if [ -n "${JAVA_HOME:-}" ] && [ -x "$JAVA_HOME/bin/java" ]; then
        return 0
    fi
    if ! command -v java >/dev/null 2>&1; then
        echo "keel: Java 17 or newer is required to run ZooKeeper (e.g. apt-get install openjdk-17-jre-headless)" >&2
        exit 1
    fi
}

keel_bootstrap
export PYTHONPATH="$KEEL_ROOT${PYTHONPATH:+:$PYTHONPATH}"
