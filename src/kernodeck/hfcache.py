"""The Hugging Face hub cache layout: the one owner of where a repository's pinned snapshot lives.

    <root>/<kind>--<org>--<name>/snapshots/<revision>/<file>

`kind` is `models`, `datasets` or `spaces` (a hub id written `datasets/org/name` or
`spaces/org/name`; a bare `org/name` is a model). The root is `HF_HUB_CACHE`, else `$HF_HOME/hub`,
else `$XDG_CACHE_HOME/huggingface/hub` (default `~/.cache/huggingface/hub`). The environment probe
(`kernodeck.probe.script`) applies the same root rules under the target interpreter, where
Kernodeck itself cannot be imported; verify uses the root the probe reported.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

KINDS = ("models", "datasets", "spaces")


def default_root(environ: Mapping[str, str] | None = None) -> Path:
    """The hub cache folder these environment variables name."""
    env = os.environ if environ is None else environ
    if env.get("HF_HUB_CACHE"):
        return Path(env["HF_HUB_CACHE"])
    if env.get("HF_HOME"):
        return Path(env["HF_HOME"]) / "hub"
    xdg = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(xdg) / "huggingface" / "hub"


def repo_folder(root: str | os.PathLike[str], hub: str) -> Path:
    """The cache folder of the hub repository `hub` (`org/name`, `datasets/org/name`, ...)."""
    kind, repo = "models", hub
    for k in KINDS:
        if hub.startswith(f"{k}/"):
            kind, repo = k, hub[len(k) + 1 :]
    return Path(root) / f"{kind}--{repo.replace('/', '--')}"


def snapshot(root: str | os.PathLike[str], hub: str, revision: str) -> Path:
    """The folder of `hub` at `revision` in the cache under `root`."""
    return repo_folder(root, hub) / "snapshots" / revision
