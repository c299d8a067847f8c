"""The package's structure, checked on its source: no import cycle among kernodeck's modules (function-level
imports included), data and verdict modules depend on no renderer and no API, and no function grows past
McCabe complexity 10 or 100 lines unless the shrinking allowlist (tests/structure_allowlist.txt) names it."""

from __future__ import annotations

import ast
import functools
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"
ALLOWLIST = Path(__file__).resolve().parent / "structure_allowlist.txt"
MAX_COMPLEXITY = 10
MAX_LINES = 100

# Modules that hold data and verdicts: a renderer and the API sit above them.
DATA_MODULES = ("kernodeck.report", "kernodeck.diff", "kernodeck.layers")
ABOVE_DATA = ("kernodeck.render", "kernodeck.api", "kernodeck.commands", "kernodeck.cli")


# --- the import graph ---------------------------------------------------------------------------------


def modules_under(src: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every module and package below `src`."""
    found = {}
    for path in sorted(src.rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _import_nodes(node: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement below `node` (in functions too), except under `if TYPE_CHECKING:`."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.Import, ast.ImportFrom)):
            yield child
        elif isinstance(child, ast.If) and _is_type_checking(child.test):
            for sub in child.orelse:
                yield from _import_nodes(ast.Module(body=[sub], type_ignores=[]))
        else:
            yield from _import_nodes(child)


def _named(node: ast.Import | ast.ImportFrom, package: str) -> list[str]:
    """The dotted names an import statement may load (a `from m import x` may load the module m.x)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        parts = package.split(".")
        parts = parts[: len(parts) - (node.level - 1)]
        base = ".".join([*parts, *([node.module] if node.module else [])])
    return [base, *(f"{base}.{alias.name}" for alias in node.names)]


def imports_of(module: str, source: str, known: set[str], is_package: bool) -> set[str]:
    """The known modules `module` imports: `import a.b.c` imports a.b.c, a.b and a (the packages it
    runs); a module's own ancestor packages are already imported before it runs, so they are not edges."""
    package = module if is_package else module.rpartition(".")[0]
    edges = set()
    for node in _import_nodes(ast.parse(source)):
        for name in _named(node, package):
            while name:
                if name in known and name != module and not module.startswith(name + "."):
                    edges.add(name)
                name = name.rpartition(".")[0]
    return edges


def import_graph(src: Path) -> dict[str, set[str]]:
    files = modules_under(src)
    known = set(files)
    return {
        name: imports_of(name, path.read_text(encoding="utf-8"), known, path.name == "__init__.py")
        for name, path in files.items()
    }


@functools.cache
def kernodeck_graph() -> dict[str, set[str]]:
    return import_graph(SRC)


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            for nxt in successors:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return sorted(found)


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for nxt in graph[todo.pop()]:
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def _write_package(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


def test_the_checker_sees_function_level_and_package_imports_and_skips_type_checking(tmp_path: Path) -> None:
    src = _write_package(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a.py": "def f():\n    import pkg.sub.c\n",
            "pkg/sub/__init__.py": "from pkg import b\n",
            "pkg/sub/c.py": "",
            "pkg/b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import a\n",
            "pkg/d.py": "from .b import x\nif TYPE_CHECKING:\n    pass\nelse:\n    from . import e\n",
            "pkg/e.py": "class C:\n    def m(self):\n        from pkg.d import y\n",
        },
    )
    graph = import_graph(src)
    assert graph["pkg.a"] == {"pkg.sub", "pkg.sub.c"}  # a function-level import; the package it runs
    assert graph["pkg.sub"] == {"pkg.b"}
    assert graph["pkg.b"] == set()  # only under TYPE_CHECKING
    assert graph["pkg.d"] == {"pkg.b", "pkg.e"}
    assert cycles(graph) == [["pkg.d", "pkg.e"]]
    assert reachable(graph, "pkg.a") == {"pkg.sub", "pkg.sub.c", "pkg.b"}


def test_no_import_cycle_among_kernodeck_modules() -> None:
    found = cycles(kernodeck_graph())
    assert found == [], "import cycles (function-level imports count): " + "; ".join(
        " <-> ".join(c) for c in found
    )


@pytest.mark.parametrize("module", DATA_MODULES)
def test_data_modules_import_no_renderer_and_no_api(module: str) -> None:
    graph = kernodeck_graph()
    upward = sorted(m for m in reachable(graph, module) if m.startswith(ABOVE_DATA))
    assert upward == [], f"{module} imports (directly or through others) {upward}"


# --- complexity and length -----------------------------------------------------------------------------


def over_complexity(src: Path) -> set[str]:
    """`path:function` of every function over MAX_COMPLEXITY, as ruff's C901 counts it."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "ruff",
            "check",
            "--isolated",
            "--select",
            "C901",
            "--config",
            f"lint.mccabe.max-complexity = {MAX_COMPLEXITY}",
            "--output-format",
            "json",
            "--exit-zero",
            str(src),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    found = set()
    for item in json.loads(done.stdout):
        name = item["message"].split("`")[1]
        found.add(f"{Path(item['filename']).relative_to(ROOT).as_posix()}:{name}")
    return found


def over_length(src: Path, root: Path = ROOT) -> set[str]:
    """`path:function` of every function (or method) longer than MAX_LINES, decorators left out; paths
    relative to `root`."""
    found = set()
    for path in sorted(src.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MAX_LINES:
                    found.add(f"{path.relative_to(root).as_posix()}:{node.name}")
    return found


def allowlist(kind: str) -> set[str]:
    """The entries of one kind (`complexity` or `length`) in the allowlist file."""
    entries = set()
    for line in ALLOWLIST.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            entry_kind, _, entry = line.partition(" ")
            if entry_kind == kind:
                entries.add(entry.strip())
    return entries


def test_the_allowlist_is_sorted_one_entry_per_line() -> None:
    lines = [
        line
        for line in ALLOWLIST.read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert lines == sorted(set(lines))
    assert all(line.split(" ")[0] in ("complexity", "length") and line.count(" ") == 1 for line in lines)


def test_the_length_checker_counts_a_function_over_the_limit(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text("def short():\n    pass\n\ndef long():\n" + "    x = 1\n" * MAX_LINES)
    assert over_length(tmp_path, tmp_path) == {"m.py:long"}


def test_no_function_over_complexity_10_beyond_the_allowlist() -> None:
    found, allowed = over_complexity(SRC), allowlist("complexity")
    assert sorted(found - allowed) == [], "split these functions (ruff C901 at 10)"
    assert sorted(allowed - found) == [], "no longer over 10: remove them from tests/structure_allowlist.txt"


def test_no_function_over_100_lines_beyond_the_allowlist() -> None:
    found, allowed = over_length(SRC), allowlist("length")
    assert sorted(found - allowed) == [], f"split these functions (over {MAX_LINES} lines)"
    assert sorted(allowed - found) == [], (
        "no longer over the limit: remove them from tests/structure_allowlist.txt"
    )
