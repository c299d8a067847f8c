#!/usr/bin/env bash
# `make test-pythons`: Kernodeck under each further interpreter the machine has (Python 3.10, the oldest
# requires-python allows, and the newest): a venv .venv-<version> with Kernodeck and the test runner (no
# torch, no uv, no real wheels), the CLI smoke (tests/test_cli_smoke.py: --version, init, validate, lock
# against a loopback index, verify of itself) and the fast tests named in FAST_TESTS.
# Usage: scripts/test_pythons.sh VERSION...   (FAST_TESTS, JOBS and UV from the environment: with UV, the
# path of a uv, the venvs are made and filled by uv, seconds instead of minutes of pip)
set -euo pipefail
cd "$(dirname "$0")/.."

interpreter() {  # python3.X on PATH, else pyenv's newest 3.X.*
    local version=$1 found
    if "python$version" -c '' >/dev/null 2>&1; then command -v "python$version"; return; fi
    if command -v pyenv >/dev/null 2>&1; then
        found=$(ls -d "$(pyenv root)/versions/$version".*/bin/python"$version" 2>/dev/null | sort -V | tail -n 1)
        if [ -n "$found" ]; then echo "$found"; return; fi
    fi
    echo "no Python $version on this machine (python$version, pyenv)" >&2
    return 1
}

for version in "$@"; do
    venv=".venv-$version"
    stamp="$venv/.installed"
    if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
        base=$(interpreter "$version")
        rm -rf "$venv"
        packages=(-e '.[checks]' 'pytest>=8' 'pytest-xdist>=3.5' 'hypothesis>=6.100')
        if [ -n "${UV:-}" ]; then
            "$UV" venv -q --python "$base" "$venv"
            VIRTUAL_ENV="$PWD/$venv" "$UV" pip install -q "${packages[@]}"
        else
            "$base" -m venv "$venv"
            "$venv/bin/python" -m pip install -q --upgrade 'pip>=24'
            "$venv/bin/python" -m pip install -q "${packages[@]}"
        fi
        touch "$stamp"
    fi
    echo "== $("$venv/bin/python" --version)"
    "$venv/bin/kernodeck" --version
    "$venv/bin/python" -m pytest -q -n "${JOBS:-2}" -p no:cacheprovider tests/test_cli_smoke.py ${FAST_TESTS:-}
done
