#!/usr/bin/env bash
# `make demo`: the main job on an example. Usage: scripts/demo.sh PYTHON
set -euo pipefail
PY=${1:-.venv/bin/python}
KD="$PY -m kernodeck"
ROOT=$(pwd)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

echo "== validate every example manifest"
for m in manifests/*/repro.toml; do $KD validate "$m"; done

echo "== init a starter manifest in a fresh project folder"
mkdir -p "$WORK/project" && cd "$WORK/project"
printf '[project]\nname = "demo"\nversion = "0.1"\ndependencies = ["numpy>=1.26"]\n' > pyproject.toml
git init -q && git add . && git -c user.email=demo@example.com -c user.name=demo commit -qm demo
$KD init && $KD validate
cd "$ROOT"
