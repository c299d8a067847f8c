"""The `kernodeck` process loads no pydantic plugins (kernodeck.support.pydanticplugins); a program that
imports kernodeck keeps its own. A real plugin is registered the way packages register one (an
entry point of the `pydantic` group in a dist-info folder on sys.path); each case runs in a fresh
interpreter and reads whether the plugin's module ran and what was imported."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

TIMEOUT = 120


@pytest.fixture
def plugin_site(tmp_path: Path) -> Path:
    """A folder holding a distribution that registers a pydantic plugin; its module appends a
    line to `$KD_PLUGIN_MARK` when it is imported."""
    site = tmp_path / "site"
    dist = site / "kdplug-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: kdplug\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[pydantic]\nkdplug = kdplug:plugin\n")
    (site / "kdplug.py").write_text(
        "import os\n"
        "with open(os.environ['KD_PLUGIN_MARK'], 'a') as f:\n"
        "    f.write('loaded\\n')\n"
        "class Plugin:\n"
        "    def new_schema_validator(self, *args, **kwargs):\n"
        "        return None, None, None\n"
        "plugin = Plugin()\n"
    )
    return site


def _run(code: str, site: Path, tmp_path: Path) -> tuple[str, str]:
    """(stdout, the plugin's marker file) of `code` in a fresh interpreter with `site` on its path."""
    mark = tmp_path / "mark.txt"
    env = {
        **{k: v for k, v in os.environ.items() if k != "PYDANTIC_DISABLE_PLUGINS"},
        "PYTHONPATH": os.pathsep.join([str(site), *filter(None, [os.environ.get("PYTHONPATH")])]),
        "KD_PLUGIN_MARK": str(mark),
    }
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=TIMEOUT, env=env, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout, mark.read_text() if mark.exists() else ""


def test_the_kernodeck_process_builds_pydantic_models_without_loading_pydantic_plugins(
    plugin_site: Path, tmp_path: Path
) -> None:
    # `kernodeck schema` builds the manifest's pydantic models (a valid manifest needs none)
    code = (
        "import atexit, sys\n"
        "from kernodeck.cli import run\n"
        "atexit.register(lambda: print('METADATA=' + str('importlib.metadata' in sys.modules)))\n"
        "sys.argv = ['kernodeck', 'schema']\n"
        "run()\n"
    )
    out, mark = _run(code, plugin_site, tmp_path)
    assert mark == ""
    # nor did pydantic's loader import importlib.metadata to look for plugins
    assert "METADATA=False" in out.splitlines()


def test_a_program_that_imports_kernodeck_keeps_its_pydantic_plugins(
    plugin_site: Path, tmp_path: Path
) -> None:
    # require() and the API run in the user's own process: the plugin registered there loads (and
    # so the case above would see it, had the command line not left plugins out)
    code = "from kernodeck.manifest.jsonschema import schema_dict\nprint(schema_dict()['title'].split()[0])\n"
    out, mark = _run(code, plugin_site, tmp_path)
    assert out.split() == ["Kernodeck"]
    assert mark == "loaded\n"


def test_a_loader_already_imported_is_left_as_it_is(tmp_path: Path, plugin_site: Path) -> None:
    code = (
        "import pydantic.plugin._loader as real, sys\n"
        "from kernodeck.support.pydanticplugins import LOADER, load_none\n"
        "load_none()\n"
        "print(sys.modules[LOADER] is real)\n"
    )
    out, _mark = _run(code, plugin_site, tmp_path)
    assert out.split() == ["True"]


def test_what_else_pydantic_asks_of_its_loader_comes_from_the_real_one(
    tmp_path: Path, plugin_site: Path
) -> None:
    # a later pydantic may import more than get_plugins from its loader: the stand-in hands the
    # real module's names on instead of failing the import (and still loads no plugin itself)
    code = (
        "from kernodeck.support.pydanticplugins import load_none\n"
        "load_none()\n"
        "from pydantic.plugin._loader import PYDANTIC_ENTRY_POINT_GROUP, get_plugins\n"
        "print(PYDANTIC_ENTRY_POINT_GROUP, list(get_plugins()))\n"
    )
    out, mark = _run(code, plugin_site, tmp_path)
    assert out.split() == ["pydantic", "[]"] and mark == ""
