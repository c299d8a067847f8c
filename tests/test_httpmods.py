"""The `kernodeck` process keeps httpx's command line, httpcore's async backends and, unless
KERNODECK_HTTP2 asks for it, the HTTP/2 stack out of its imports; a program that imports
kernodeck is never changed. Each case runs in a fresh interpreter and reads `sys.modules`."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pytest

WATCH = ("h2", "hpack", "anyio", "pygments")


def _loaded(code: str, **env: str) -> dict[str, bool]:
    """Which of WATCH `code` leaves imported (a name set to None is not: "not importable")."""
    clean = {k: v for k, v in os.environ.items() if k != "KERNODECK_HTTP2"}
    probe = f"import sys\n{code}\nprint(*(sys.modules.get(m) is not None for m in {WATCH!r}))\n"
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, env={**clean, **env}
    )
    assert out.returncode == 0, out.stderr
    return dict(zip(WATCH, (w == "True" for w in out.stdout.split()), strict=True))


def test_the_modules_are_installed_here() -> None:
    # otherwise the cases below would pass for want of the modules
    assert all(importlib.util.find_spec(m) is not None for m in WATCH)


def test_the_kernodeck_process_imports_httpx_without_what_it_never_runs() -> None:
    code = "from kernodeck.support.httpmods import keep_unused_out\nkeep_unused_out()\nimport httpx\nhttpx.Client().close()"
    assert _loaded(code) == {"h2": False, "hpack": False, "anyio": False, "pygments": False}


@pytest.mark.parametrize("value", ["1", "true", "on"])
def test_http2_asked_for_keeps_the_http2_stack(value: str) -> None:
    code = (
        "from kernodeck.support.httpmods import keep_unused_out\nkeep_unused_out()\n"
        "import httpx\nhttpx.Client(http2=True).close()"
    )
    got = _loaded(code, KERNODECK_HTTP2=value)
    assert got["h2"] and got["hpack"]
    assert not got["anyio"]


def test_a_program_that_imports_kernodeck_keeps_its_modules() -> None:
    # the API and the CLI's main() never mark anything; only run() (the kernodeck process) does
    code = "import kernodeck.cli, kernodeck.index.transport\nimport httpx, anyio\nhttpx.Client().close()"
    got = _loaded(code)
    assert got["h2"] and got["anyio"]


def test_nothing_is_marked_once_httpx_is_imported() -> None:
    code = "import httpx\nfrom kernodeck.support.httpmods import keep_unused_out\nkeep_unused_out()\nimport anyio"
    assert _loaded(code)["anyio"]


def test_let_back_makes_the_kept_out_modules_importable_again() -> None:
    code = (
        "import sys\nfrom kernodeck.support import httpmods\nhttpmods.keep_unused_out({})\n"
        "try:\n    import anyio\nexcept ImportError:\n    print('kept out')\n"
        "httpmods.let_back()\nimport anyio\nprint('back', anyio.__name__)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.split("\n")[:2] == ["kept out", "back anyio"], done.stderr
