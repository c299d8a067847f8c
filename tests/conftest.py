"""Shared test setup. Fixture modules live in tests/fixtures/ and are imported by the tests that use them."""

from __future__ import annotations

import os

# Tests must pass the same way on any machine: never read the host's pip configuration.
os.environ["PIP_CONFIG_FILE"] = os.devnull
for var in (
    "PIP_FIND_LINKS",
    "PIP_INDEX_URL",
    "PIP_EXTRA_INDEX_URL",
    "PIP_CONSTRAINT",
    "UV_INDEX_URL",
    "UV_EXTRA_INDEX_URL",
):
    os.environ.pop(var, None)
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("NO_COLOR", "1")
# Commands check the activated environment when no --python is given (kernodeck.interpreters): a
# test starts from none, and a test about that choice sets VIRTUAL_ENV / CONDA_PREFIX itself.
for var in ("VIRTUAL_ENV", "CONDA_PREFIX"):
    os.environ.pop(var, None)
