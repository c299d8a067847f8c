"""Every `KERNODECK_*` environment variable is declared once (kernodeck.support.envvars) and read through
its declaration; docs/environment.md is generated from the declarations and committed current."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from kernodeck.errors import IndexError_
from kernodeck.index.transport import IndexHttp
from kernodeck.support import envvars

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src" / "kernodeck"


def test_the_committed_page_is_generated_from_the_declarations() -> None:
    page = (ROOT / "docs" / "environment.md").read_text(encoding="utf-8")
    assert page == envvars.markdown(), "run: python scripts/gen_environment_docs.py"
    for var in envvars.ALL:
        assert f"`{var.name}`" in page


def test_no_variable_name_is_spelled_outside_its_declaration() -> None:
    """A string that is exactly a variable's name appears only in envvars.py (messages may mention it)."""
    names = {var.name for var in envvars.ALL}
    spelled = []
    for path in sorted(SRC.rglob("*.py")):
        if path.name == "envvars.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names:
                spelled.append(f"{path.relative_to(SRC)}:{node.lineno}: {node.value}")
    assert spelled == []


def test_every_name_mentioned_in_the_source_is_declared() -> None:
    import re

    mentioned = set()
    for path in SRC.rglob("*.py"):
        mentioned |= set(re.findall(r"\bKERNODECK_[A-Z0-9_]*[A-Z0-9]\b", path.read_text(encoding="utf-8")))
    assert mentioned - {var.name for var in envvars.ALL} == set()
    assert len(envvars.ALL) == len({var.name for var in envvars.ALL})


def test_typed_reads() -> None:
    env = {"KERNODECK_HTTP_TIMEOUT": "2.5", "KERNODECK_HTTP2": "Yes", "KERNODECK_MIRRORS": " a=x  b=y "}
    assert envvars.HTTP_TIMEOUT.number(300.0, env) == 2.5
    assert envvars.LOCK_TIMEOUT.number(3600.0, env) == 3600.0
    assert envvars.HTTP2.flag(env) and not envvars.HTTP2.flag({"KERNODECK_HTTP2": "0"})
    assert envvars.MIRRORS.words(env) == ["a=x", "b=y"]
    assert envvars.CACHE_DIR.path({"KERNODECK_CACHE_DIR": ""}) is None
    with pytest.raises(envvars.BadValue, match="must be positive"):
        envvars.HTTP_TIMEOUT.number(1.0, {"KERNODECK_HTTP_TIMEOUT": "-1"})


def test_a_bad_number_is_a_located_error_of_the_index_client(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("KERNODECK_MAX_PAGE_BYTES", "lots")
    with pytest.raises(IndexError_) as caught:
        IndexHttp(cache_dir=tmp_path)
    assert "KERNODECK_MAX_PAGE_BYTES='lots' is not a number" in str(caught.value)
    assert "unset KERNODECK_MAX_PAGE_BYTES" in (caught.value.hint or "")
