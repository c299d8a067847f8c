"""What start-up imports: the command line's help, `kernodeck.require` and a replayed lock load
neither the HTTP client (httpx), nor rich, nor the resolver; verify and require() do not load
tomlkit. Each case runs in a fresh interpreter and reads `sys.modules` (nothing is timed), so that
the start-up cost measured by benchmarks/startup.py cannot silently come back."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from kernodeck.lock.orchestrate import lock_manifest
from tests.fixtures.index_factory import IndexFactory, Server
from tests.fixtures.lock_project import LINUX, WINDOWS, write_manifest

pytest_plugins = ["tests.fixtures.index_fixtures"]

HEAVY = (
    "httpx",
    "rich",
    "resolvelib",
    "kernodeck.resolve",
    "kernodeck.index.client",
    "kernodeck.index.transport",
)
TIMEOUT = 120


def _loaded(code: str, watch: tuple[str, ...], cwd: Path | None = None) -> list[str]:
    """The modules of `watch` that a fresh interpreter holds after running `code`."""
    probe = f"{code}\nimport sys\nprint('LOADED=' + ','.join(m for m in {watch!r} if m in sys.modules))\n"
    proc = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=TIMEOUT, cwd=cwd
    )
    assert proc.returncode == 0, proc.stderr
    line = next(x for x in proc.stdout.splitlines() if x.startswith("LOADED="))
    return [m for m in line.removeprefix("LOADED=").split(",") if m]


@pytest.mark.parametrize(
    "module", ["kernodeck.lock.replay", "kernodeck.lock.orchestrate", "kernodeck.commands.lock"]
)
def test_the_lock_modules_import_no_http_client_rich_or_resolver(module: str) -> None:
    assert _loaded(f"import {module}", HEAVY) == []


def test_kernodeck_require_imports_no_pydantic_and_nothing_heavy() -> None:
    # a training script's `import kernodeck; kernodeck.require`: the manifest models load only
    # when require() runs (after the environment probe has started)
    watch = (*HEAVY, "pydantic", "tomlkit", "kernodeck.manifest", "kernodeck.report")
    assert _loaded("import kernodeck; kernodeck.require", watch) == []


def test_a_lock_from_the_cache_imports_no_tls_http_client_html_or_tar_modules() -> None:
    """Everything a lock that needs no network imports (the command, the resolver, the index
    client): ssl, urllib.request (http.client, ssl, email), html.parser and tarfile come with the
    first request, the first HTML page and the first sdist."""
    code = (
        "import kernodeck.cli, kernodeck.commands.lock, kernodeck.lock.orchestrate, kernodeck.resolve\n"
        "import kernodeck.index.client, kernodeck.index.collector, kernodeck.index.fetcher\n"
    )
    assert _loaded(code, ("ssl", "urllib.request", "http.client", "html.parser", "tarfile")) == []


@pytest.mark.parametrize("args", [["--help"], ["lock", "--help"], ["verify", "--help"]])
def test_command_help_imports_only_click(args: list[str]) -> None:
    code = f"from kernodeck.cli import main\nassert main({args!r}) == 0\n"
    watch = (*HEAVY, "pydantic", "tomlkit", "kernodeck.lock.orchestrate", "kernodeck.manifest")
    assert _loaded(code, watch) == []


def _data_project(tmp_path: Path) -> Path:
    data = b"start-up\n" * 100
    (tmp_path / "train.bin").write_bytes(data)
    py = f"{sys.version_info[0]}.{sys.version_info[1]}"
    (tmp_path / "repro.toml").write_text(
        f'schema-version = 1\n[reference]\nname = "s"\nid = "1"\n[python]\nversion = "{py}"\n'
        f'[[data]]\nname = "train"\npath = "train.bin"\nsha256 = "{hashlib.sha256(data).hexdigest()}"\n'
        '[[platform]]\nname = "linux-x86_64"\nos = "linux"\narch = "x86_64"\n',
        encoding="utf-8",
    )
    return tmp_path / "repro.toml"


def test_require_and_verify_load_neither_heavy_modules_nor_tomlkit(tmp_path: Path) -> None:
    manifest = _data_project(tmp_path)
    # nor the project readers init needs (Pipfile, Poetry): verify asks them only for a hint
    watch = (*HEAVY, "tomlkit", "kernodeck.formats.pipfile", "kernodeck.formats.poetrydeps")
    code = f"import kernodeck\nprint(kernodeck.require({str(manifest)!r}, only=['data']).summary())"
    assert _loaded(code, watch, cwd=tmp_path) == []
    cli = (
        f"from kernodeck.cli import main\nassert main(['verify', '--only', 'data', {str(manifest)!r}]) == 0\n"
    )
    assert _loaded(cli, watch, cwd=tmp_path) == []


def _replayed(manifest: Path, cache: Path) -> tuple[dict[str, object], list[str]]:
    """A re-lock in a fresh interpreter: its statuses, resolutions and the heavy modules it loaded."""
    code = (
        "import json, kernodeck.lock.orchestrate as L\n"
        "calls = []\n"
        "real = L._resolve_and_render\n"
        "L._resolve_and_render = lambda *a, **k: (calls.append(1), real(*a, **k))[1]\n"
        f"r = L.lock_manifest({str(manifest)!r}, cache_dir={str(cache)!r})\n"
        "print('RESULT=' + json.dumps({'statuses': [p.status for p in r.platforms], 'resolutions': len(calls),"
        " 'differences': [d.to_json() for d in r.differences]}))\n"
    )
    # nor what only a platform's first lock reads (the project's other lock files: adopt, pinreport)
    # and no pydantic: the manifest is checked by its declared models (kernodeck.manifest.model)
    watch = (*HEAVY, "tomlkit", "kernodeck.manifest.adopt", "kernodeck.manifest.pinreport", "pydantic")
    probe = f"{code}import sys\nprint('LOADED=' + ','.join(m for m in {watch!r} if m in sys.modules))\n"
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    result = json.loads(next(x for x in lines if x.startswith("RESULT=")).removeprefix("RESULT="))
    loaded = next(x for x in lines if x.startswith("LOADED=")).removeprefix("LOADED=")
    return result, [m for m in loaded.split(",") if m]


def test_a_replayed_lock_loads_no_http_client_and_no_resolver(
    index_factory: IndexFactory, served_index: Server, tmp_path: Path
) -> None:
    index_factory.add_wheel("app", "1.0", requires=["dep>=1"])
    index_factory.add_wheel("dep", "1.0")
    manifest = write_manifest(
        tmp_path / "proj", requirements=["app"], default_url=served_index.url(), platforms=[LINUX, WINDOWS]
    )
    cache = tmp_path / "cache"
    assert {p.status for p in lock_manifest(manifest, cache_dir=cache).platforms} == {"written"}
    served_index.reset()
    result, loaded = _replayed(manifest, cache)
    assert result == {"statuses": ["unchanged", "unchanged"], "resolutions": 0, "differences": []}
    assert served_index.requests == []
    assert loaded == []


def test_a_replayed_lock_with_differences_loads_no_http_client(
    index_factory: IndexFactory, served_index: Server, tmp_path: Path
) -> None:
    # dep 1.0 only for Windows, dep 2.0 only for Linux: the difference remains, and the replay
    # rebuilds it (kernodeck.resolve.joint) without the index client
    index_factory.add_wheel("app", "1.0", requires=["dep>=1"])
    index_factory.add_wheel("dep", "1.0", tags="py3-none-win_amd64")
    index_factory.add_wheel("dep", "2.0", tags="py3-none-manylinux_2_17_x86_64")
    manifest = write_manifest(
        tmp_path / "proj", requirements=["app"], default_url=served_index.url(), platforms=[LINUX, WINDOWS]
    )
    cache = tmp_path / "cache"
    first = lock_manifest(manifest, cache_dir=cache)
    assert [d.name for d in first.differences] == ["dep"]
    served_index.reset()
    result, loaded = _replayed(manifest, cache)
    assert result["resolutions"] == 0 and result["statuses"] == ["unchanged", "unchanged"]
    assert result["differences"] == [d.to_json() for d in first.differences]
    assert served_index.requests == []
    assert "httpx" not in loaded and "kernodeck.index.transport" not in loaded
    assert "kernodeck.index.client" not in loaded and "rich" not in loaded
    assert "pydantic" not in loaded


def test_importing_the_manifest_models_does_not_read_their_source() -> None:
    # the field descriptions (attribute docstrings) are read for the JSON Schema and the docs only
    code = (
        "import inspect\n"
        "calls = []\n"
        "real = inspect.getsource\n"
        "inspect.getsource = lambda obj: (calls.append(obj), real(obj))[1]\n"
        "import kernodeck.manifest.load as load\n"
        "from kernodeck.manifest.schema import Manifest\n"
        "from kernodeck.manifest.model import pydantic_model\n"
        "assert calls == [], calls\n"
        "assert pydantic_model(Manifest).model_fields['python'].description is None\n"
        "from kernodeck.manifest.jsonschema import schema_dict\n"
        "assert schema_dict()['properties']['python']['description'] == 'The interpreter.'\n"
        "assert pydantic_model(Manifest).model_fields['python'].description == 'The interpreter.'\n"
    )
    assert _loaded(code, ()) == []


def _locked_with_fresh_pages(
    index_factory: IndexFactory, served_index: Server, tmp_path: Path
) -> tuple[Path, Path]:
    """(manifest, cache) of a project locked once, every page in its cache read after
    exclude-newer (fresh: a lock may use them without asking the index)."""
    old = "2024-01-01T00:00:00Z"
    index_factory.add_wheel("app", "1.0", requires=["dep>=1"], upload_time=old)
    index_factory.add_wheel("dep", "1.0", upload_time=old)
    manifest = write_manifest(
        tmp_path / "proj",
        requirements=["app"],
        default_url=served_index.url(),
        platforms=[LINUX, WINDOWS],
        exclude_newer="2025-01-01T00:00:00Z",
    )
    cache = tmp_path / "cache"
    lock_manifest(manifest, cache_dir=cache)
    served_index.reset()
    return manifest, cache


def test_a_lock_that_resolves_from_a_fresh_cache_loads_no_http_client(
    index_factory: IndexFactory, served_index: Server, tmp_path: Path
) -> None:
    """An input changed (a one-off constraint: no replay), every page in the cache is fresh (read
    after exclude-newer): the resolver runs, the index hears nothing and httpx is never imported
    (nor the CA bundle read)."""
    manifest, cache = _locked_with_fresh_pages(index_factory, served_index, tmp_path)
    code = (
        "import kernodeck.lock.orchestrate as L\n"
        f"r = L.lock_manifest({str(manifest)!r}, cache_dir={str(cache)!r}, upgrade_packages=['dep<9'])\n"
        "assert [p.status for p in r.platforms] == ['unchanged', 'unchanged'], r\n"
    )
    watch = ("httpx", "kernodeck.resolve", "pydantic", "importlib.metadata")
    loaded = _loaded(code, watch)
    assert loaded == ["kernodeck.resolve"]  # it resolved, without pydantic or importlib.metadata
    assert served_index.requests == []


def test_the_lock_command_loads_only_its_own_command_and_what_a_lock_without_sources_runs(
    index_factory: IndexFactory, served_index: Server, tmp_path: Path
) -> None:
    """`kernodeck lock` resolving from a fresh cache (a one-off constraint): the other commands'
    modules are not imported (click loads a command when it runs), nor the requirements-file
    readers (the manifest has no `from`), tempfile (atomic writes make their own temporary
    names), ctypes (the allocator is tuned before the first page body, none here), or the
    build-requirements installer's temporary folders."""
    manifest, cache = _locked_with_fresh_pages(index_factory, served_index, tmp_path)
    code = (
        "import os\n"
        f"os.environ['KERNODECK_CACHE_DIR'] = {str(cache)!r}\n"
        "from kernodeck.cli import main\n"
        f"assert main(['lock', {str(manifest)!r}, '-q', '--upgrade-package', 'dep<9']) == 0\n"
    )
    from kernodeck.commands import COMMANDS

    others = sorted({where.split(":")[0] for where in COMMANDS.values()} - {"lock"})
    watch = (
        "kernodeck.commands.lock",
        "kernodeck.resolve",
        *(f"kernodeck.commands.{c}" for c in others),
        "kernodeck.reqfile",
        "tempfile",
        "ctypes",
        "httpx",
    )
    assert _loaded(code, watch) == ["kernodeck.commands.lock", "kernodeck.resolve"]
    assert served_index.requests == []
