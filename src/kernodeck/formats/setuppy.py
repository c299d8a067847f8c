"""A setuptools project's `setup.py` or `setup.cfg`: what `kernodeck init` can take from them.

Many research repositories declare their dependencies only in `setup(install_requires=[...])` or
in setup.cfg's `[options] install_requires`. `[packages] from` does not read either (a setup.py is
a program), so `init` copies them into `[packages] requirements`, reading setup.py without running
it: only literal lists of strings count (a list written in the call, or a module-level name bound
to one). Anything computed (`open("requirements.txt").read()`, a loop) is named, not guessed.

    deps = read_setup(Path("."))
    deps.requirements   # ["torch", "numpy>=1.20", ...]
    deps.python         # ">=3.8" from python_requires
    deps.notes          # extras, what could not be read
"""

from __future__ import annotations

import ast
import configparser
import io
import tokenize
from dataclasses import dataclass, field
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement

from kernodeck.errors import Issue, ManifestError
from kernodeck.support.tomltext import MAX_DEPTH


@dataclass
class SetupDeps:
    """What `init` takes from setup.py / setup.cfg (see the module docstring)."""

    file: str = ""
    requirements: list[str] = field(default_factory=list)
    python: str | None = None  # python_requires, a PEP 440 specifier
    notes: list[str] = field(default_factory=list)


def _strings(node: ast.AST, names: dict[str, ast.AST]) -> list[str] | None:
    """The strings of a literal list or tuple (or of a module-level name bound to one)."""
    if isinstance(node, ast.Name) and node.id in names:
        node = names[node.id]
    if isinstance(node, (ast.List, ast.Tuple)) and all(
        isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts
    ):
        return [e.value for e in node.elts]  # type: ignore[attr-defined]
    return None


def _setup_call(tree: ast.Module) -> ast.Call | None:
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            if (isinstance(f, ast.Name) and f.id == "setup") or (
                isinstance(f, ast.Attribute) and f.attr == "setup"
            ):
                return node
    return None


def _valid(texts: list[str], where: str, notes: list[str]) -> list[str]:
    out = []
    for text in texts:
        try:
            Requirement(text)
        except InvalidRequirement as e:
            notes.append(f"{where}: {text!r} is not a requirement ({e}): not copied")
            continue
        out.append(text.strip())
    return out


#: The most operators one statement of a setup.py may chain: Python's parser recurses once per
#: operator (3.10's crashes the interpreter on a chain of some hundred thousand).
MAX_CHAIN = 5_000
#: Punctuation that separates items rather than chaining operators (a long list is fine).
_NOT_CHAINING = frozenset({",", ":", ";", "=", "(", ")", "[", "]", "{", "}"})


def _too_deep(filename: str, line: int | None) -> ManifestError:
    msg = "an expression nested too deep for Python's parser (brackets or operators); setup.py is never run"
    return ManifestError([Issue(filename, "", msg, line=line)])


def _check_depth(text: str, filename: str) -> None:
    """Raise a located ManifestError before the parser runs when one statement nests brackets
    deeper than MAX_DEPTH or chains more than MAX_CHAIN operators (the tokenizer does not recurse)."""
    depth = chain = 0
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type in (tokenize.NEWLINE, tokenize.ENDMARKER):
            chain = 0
        elif tok.type == tokenize.OP:
            depth += 1 if tok.string in "([{" else -1 if tok.string in ")]}" else 0
            chain += tok.string not in _NOT_CHAINING
            if depth > MAX_DEPTH or chain > MAX_CHAIN:
                raise _too_deep(filename, tok.start[0])


def _from_setup_py(path: Path) -> SetupDeps | None:
    try:
        text = path.read_text(encoding="utf-8")
        _check_depth(text, path.name)
        tree = ast.parse(text, str(path))
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError, tokenize.TokenError):
        return None
    except (RecursionError, MemoryError):  # an expression too deep for Python's own parser
        raise _too_deep(path.name, None) from None
    call = _setup_call(tree)
    if call is None:
        return None
    names: dict[str, ast.AST] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            names[node.targets[0].id] = node.value
    out = SetupDeps(file="setup.py")
    keywords = {k.arg: k.value for k in call.keywords if k.arg}
    if "install_requires" in keywords:
        got = _strings(keywords["install_requires"], names)
        if got is None:
            line = getattr(keywords["install_requires"], "lineno", call.lineno)
            out.notes.append(
                f"setup.py:{line}: install_requires is computed, not a list Kernodeck can read without "
                "running setup.py: write the dependencies in requirements"
            )
        else:
            out.requirements = _valid(got, "setup.py install_requires", out.notes)
    python = keywords.get("python_requires")
    if isinstance(python, ast.Constant) and isinstance(python.value, str):
        out.python = python.value
    extras = keywords.get("extras_require")
    if isinstance(extras, ast.Dict):
        keys = [k.value for k in extras.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
        _extras_note(out, "setup.py extras_require", keys)
    return out


def _extras_note(out: SetupDeps, where: str, keys: list[str]) -> None:
    if keys:
        out.notes.append(
            f"{where} ({', '.join(keys)}): not copied; add what the reproduction installs to requirements"
        )


def _from_setup_cfg(path: Path) -> SetupDeps | None:
    cfg = configparser.ConfigParser(interpolation=None)
    try:
        cfg.read(path, encoding="utf-8")
    except (configparser.Error, UnicodeDecodeError, OSError):
        return None
    if not cfg.has_section("options"):
        return None
    out = SetupDeps(file="setup.cfg")
    lines = cfg.get("options", "install_requires", fallback="")
    texts = [ln.split("#", 1)[0].strip() for ln in lines.splitlines()]
    out.requirements = _valid([t for t in texts if t], "setup.cfg install_requires", out.notes)
    python = cfg.get("options", "python_requires", fallback="").strip()
    out.python = python or None
    if cfg.has_section("options.extras_require"):
        _extras_note(out, "setup.cfg [options.extras_require]", cfg.options("options.extras_require"))
    return out


def read_setup(folder: Path) -> SetupDeps | None:
    """The dependencies setup.py (read, never run) or else setup.cfg in `folder` declare; None
    when neither names any nor says why it cannot."""
    for name, read in (("setup.py", _from_setup_py), ("setup.cfg", _from_setup_cfg)):
        path = folder / name
        if path.is_file():
            got = read(path)
            if got is not None and (got.requirements or got.notes):
                return got
    return None
