"""The test suite's own layout: shared helpers and fixtures live in tests/fixtures/ (or conftest.py),
so no test module imports from another test module."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def _is_test_module(name: str) -> bool:
    """`tests.test_x`, `tests.security.test_x`: a module pytest collects, not a fixture module."""
    parts = name.split(".")
    return parts[0] == "tests" and "fixtures" not in parts and parts[-1].startswith("test_")


def imported_test_modules(source: str) -> list[str]:
    """The test modules `source` imports (absolute `tests.…` imports and relative `.test_x` ones)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if _is_test_module(a.name)]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:  # relative: `from .test_x import y`, `from . import test_x`
                names = [module] if module else [a.name for a in node.names]
                found += [n for n in names if n.split(".")[-1].startswith("test_")]
            elif _is_test_module(module):
                found.append(module)
            elif module in ("tests", "tests.security"):
                found += [f"{module}.{a.name}" for a in node.names if a.name.startswith("test_")]
    return found


def test_the_checker_sees_each_spelling_of_a_test_module_import() -> None:
    source = (
        "from tests.test_resolve import pins\n"
        "import tests.security.test_bounds\n"
        "from tests import test_diff\n"
        "from .test_probe import x\n"
        "from tests.fixtures.lock_project import pins\n"
        "from tests.fixtures.test_ca import TestCA\n"
        "import pytest\n"
    )
    assert imported_test_modules(source) == [
        "tests.test_resolve",
        "tests.security.test_bounds",
        "tests.test_diff",
        "test_probe",
    ]


def test_no_test_module_imports_another_test_module() -> None:
    offenders = {
        str(path.relative_to(TESTS)): imported
        for path in sorted(TESTS.rglob("test_*.py"))
        if "fixtures" not in path.relative_to(TESTS).parts
        and (imported := imported_test_modules(path.read_text(encoding="utf-8")))
    }
    assert offenders == {}, "move shared helpers to tests/fixtures/ (or a fixture to conftest.py)"
