"""Write docs/environment.md from the declarations in kernodeck.support.envvars."""

from __future__ import annotations

from pathlib import Path

from kernodeck.support.envvars import markdown

if __name__ == "__main__":
    page = Path(__file__).resolve().parent.parent / "docs" / "environment.md"
    page.write_text(markdown(), encoding="utf-8")
    print(f"wrote {page}")
