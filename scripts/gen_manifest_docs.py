"""Write docs/manifest.md, the repro.toml reference, from the schema models.

    python scripts/gen_manifest_docs.py           # write it
    python scripts/gen_manifest_docs.py --check   # exit 1 when the committed file is stale

tests/test_manifest_docs.py fails when the committed file differs from what this writes.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from kernodeck.manifest.docs import manifest_reference  # noqa: E402

TARGET = ROOT / "docs" / "manifest.md"


def examples() -> list[Path]:
    return sorted((ROOT / "manifests").glob("*/repro.toml"))


def generate() -> str:
    return manifest_reference(examples(), ROOT)


def main(argv: list[str]) -> int:
    text = generate()
    if "--check" in argv:
        current = TARGET.read_text(encoding="utf-8") if TARGET.exists() else ""
        if current != text:
            print(
                f"{TARGET.relative_to(ROOT)} is stale: run python scripts/gen_manifest_docs.py",
                file=sys.stderr,
            )
            return 1
        return 0
    TARGET.write_text(text, encoding="utf-8")
    print(f"wrote {TARGET.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
