#!/usr/bin/env bash
# `make demo`: the main job on the examples, in a scratch folder. Usage: scripts/demo.sh PYTHON
#
#  1. validate every example manifest
#  2. init a starter manifest for a fresh project
#  3. embeddings example, as its author would: commit it, capture the revision and fingerprints,
#     lock it against the index pip is configured to use, verify this environment layer by layer
#     (the real model runs on the CPU, and its outputs are read back and judged)
#  4. training-resume example: checkpoint state, resume run, loss trajectory vs the reference
#  5. a caught problem: the same resume with a doubled learning rate drifts from the reference;
#     the check fails at the first step outside the tolerance and writes the HTML diagnosis
set -euo pipefail
PY=${1:-.venv/bin/python}
PY=$(cd "$(dirname "$PY")" && pwd)/$(basename "$PY")
KD="$PY -m kernodeck"
ROOT=$(pwd)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
export HF_HUB_OFFLINE=1
git_commit() { git -c user.email=demo@example.com -c user.name=demo -c commit.gpgsign=false commit -qm "$1"; }
step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "1. validate every example manifest"
for m in manifests/*/repro.toml; do $KD validate "$m"; done

step "2. kernodeck init in a fresh project"
mkdir -p "$WORK/project" && cd "$WORK/project"
printf '[project]\nname = "demo"\nversion = "0.1"\ndependencies = ["numpy>=1.26"]\n' > pyproject.toml
git init -q && git add . && git_commit "demo project"
$KD init && $KD validate
cd "$ROOT"

step "3. embeddings: capture, lock, verify"
cp -r manifests/embeddings "$WORK/embeddings" && cd "$WORK/embeddings"
git init -q && git add . && git_commit "embeddings app"
$KD capture                                  # records HEAD as [code] revision and gives the reference a new id
git add repro.toml && git_commit "capture"   # the manifest may move on; the code stays at the captured revision
# The torch builds for the cpu/cu126 platforms live on the PyTorch index, which this machine may not reach;
# the macOS platform takes everything from the default index, so it locks anywhere.
$KD lock --platform macos-arm64
sed -n '1,12p' requirements-rebuild-macos-arm64.txt
echo "   ... $(grep -c '^[a-z0-9].*==' requirements-rebuild-macos-arm64.txt) pins, $(grep -c -- '--hash=sha256' requirements-rebuild-macos-arm64.txt) hashes"
# This .venv is Kernodeck's own, not one built from the lock, so the packages layer is skipped here;
# `kernodeck rebuild` builds one from the lock and verifies it (see tests/test_e2e_handover.py).
# started as repro.toml's [determinism] env says: verify checks those variables in the process it looks at
PYTHONHASHSEED=0 TOKENIZERS_PARALLELISM=false \
  $KD verify --platform linux-x86_64-cpu --skip packages --json "$WORK/report.json"
echo "JSON report: $(wc -c < "$WORK/report.json") bytes, $(grep -c '"layer"' "$WORK/report.json") steps"
cd "$ROOT"

step "4. training-resume: checkpoint state, resume, loss trajectory"
$KD check manifests/training-resume/repro.toml --out "$WORK/resume-out"

step "5. a caught problem: the resume run with a doubled learning rate"
# The HTML report outlives the scratch folder: a folder of its own, printed at the end.
REPORT_DIR=${KERNODECK_DEMO_REPORTS:-$(mktemp -d "${TMPDIR:-/tmp}/kernodeck-demo-report.XXXXXX")}
set +e
TRAIN_LR_SCALE=2 $KD check manifests/training-resume/repro.toml resume --out "$WORK/drift-out" \
    --json "$REPORT_DIR/drifted-resume.json" --html "$REPORT_DIR/drifted-resume.html"
code=$?
set -e
if [ "$code" -ne 1 ]; then
    echo "expected the drifted resume to fail the check (exit 1), got exit $code" >&2
    exit 1
fi
echo "caught: the drifted run left the reference trajectory (exit 1, as it should)"
echo "HTML report: $REPORT_DIR/drifted-resume.html"

step "done"
