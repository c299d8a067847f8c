"""Score Kernodeck's secret scan, and optionally detect-secrets, on the two corpora: recall on
tests/data/secret_corpus.toml's positives, precision over everything reported (the corpus's
negatives and every line of tests/data/ml_corpus.toml, files in the styles of real ML repositories).

    PYTHONPATH=src:. .venv/bin/python benchmarks/secret_scanners.py [--detect-secrets PYTHON]

PYTHON is an interpreter with detect-secrets installed (a throw-away venv outside the repository,
e.g. `python3 -m venv /tmp/ds && /tmp/ds/bin/pip install detect-secrets`); it runs with its
default plugins and filters, each sample written to a file of its own (`sample.txt` for the secret
corpus, the corpus's path for ML files).
"""

from __future__ import annotations

import argparse
import json
import subprocess

from tests.fixtures.secret_corpora import Scanner, Score, kernodeck_scanner, ml_corpus, score, secret_corpus

#: Runs under detect-secrets' interpreter: reads [[path, text], ...] on stdin, prints the reported
#: line numbers of each.
_DETECT_SECRETS = """
import json, os, sys, tempfile
from detect_secrets import SecretsCollection
from detect_secrets.settings import default_settings
out = []
with tempfile.TemporaryDirectory() as d:
    for i, (path, text) in enumerate(json.load(sys.stdin)):
        p = os.path.join(d, str(i), path)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w") as f:
            f.write(text)
        found = SecretsCollection()
        with default_settings():
            found.scan_file(p)
        out.append(sorted({s.line_number for name in found.files for s in found[name]}))
print(json.dumps(out))
"""


def detect_secrets_scanner(python: str) -> Scanner:
    corpus = secret_corpus()
    items = [("sample.txt", s["text"]) for s in corpus["positive"] + corpus["negative"]]
    items += [(f["path"], f["text"].lstrip("\n")) for f in ml_corpus()]
    proc = subprocess.run(
        [python, "-c", _DETECT_SECRETS], input=json.dumps(items), capture_output=True, text=True, check=True
    )
    answers = {item: set(lines) for item, lines in zip(items, json.loads(proc.stdout), strict=True)}
    return lambda path, text: answers[(path, text)]


def _row(name: str, s: Score) -> str:
    return (
        f"| {name} | {s.recall:.3f} ({s.found}/{s.positives}) | "
        f"{s.precision:.3f} ({s.found}/{s.found + len(s.false_alarms)}) | {len(s.false_alarms)} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--detect-secrets", metavar="PYTHON", help="an interpreter with detect-secrets installed"
    )
    args = parser.parse_args()
    print("| scanner | recall | precision | false alarms |\n|---|---|---|---|")
    print(_row("kernodeck", score(kernodeck_scanner)))
    if args.detect_secrets:
        result = score(detect_secrets_scanner(args.detect_secrets))
        print(_row("detect-secrets (default settings)", result))
        print("\ndetect-secrets' false alarms: " + ", ".join(result.false_alarms))


if __name__ == "__main__":
    main()
