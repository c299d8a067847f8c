"""Layer `code`: git HEAD against `[code] revision`, a clean tree, config files by sha256."""

from __future__ import annotations

import shutil
import subprocess

from kernodeck.manifest.schema import Manifest
from kernodeck.probe.facts import Facts
from kernodeck.report import Step
from kernodeck.verify.context import Context, short
from kernodeck.verify.data import file_step

LAYER = "code"


def _git(ctx: Context, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "-C", str(ctx.root), *args], capture_output=True, text=True, timeout=60, check=False
    )


def check(manifest: Manifest, facts: Facts | None, ctx: Context) -> list[Step]:
    code = manifest.code
    if code is None:
        return []
    steps: list[Step] = []
    if shutil.which("git") is None:
        steps.append(
            Step.failed(
                LAYER,
                "revision",
                "git is not installed",
                expected=code.revision,
                hint="install git",
                details={"cause": "no-git"},
            )
        )
    else:
        head = _git(ctx, "rev-parse", "HEAD")
        if head.returncode != 0:
            first = (head.stderr.strip().splitlines() or ["not a git repository"])[0]
            steps.append(
                Step.failed(
                    LAYER,
                    "revision",
                    f"{ctx.root.name or ctx.root}: {first}",
                    expected=code.revision,
                    hint="run verify in the project's git checkout",
                    details={"cause": "not-a-repository"},
                )
            )
        else:
            sha = head.stdout.strip()
            if sha == code.revision:
                steps.append(Step.passed(LAYER, "revision", expected=code.revision, observed=sha))
            else:
                steps.append(
                    Step.failed(
                        LAYER,
                        "revision",
                        f"HEAD is {sha[:12]}, the manifest pins {code.revision[:12]}",
                        expected=code.revision,
                        observed=sha,
                        hint=f"git checkout {code.revision}, or give the reference a new identity",
                        details={"cause": "wrong-revision"},
                    )
                )
            status = _git(ctx, "status", "--porcelain", "--untracked-files=no")
            changed = sorted(line[3:] for line in status.stdout.splitlines() if line.strip())
            if not changed:
                steps.append(Step.passed(LAYER, "clean-tree", expected="no local changes", observed="clean"))
            else:
                msg = (
                    f"{len(changed)} tracked file{'s' if len(changed) != 1 else ''} changed: {short(changed)}"
                )
                if code.allow_dirty:
                    steps.append(
                        Step.warning(
                            LAYER, "clean-tree", msg, expected="allow-dirty", observed=changed, required=False
                        )
                    )
                else:
                    steps.append(
                        Step.failed(
                            LAYER,
                            "clean-tree",
                            msg,
                            expected="no local changes",
                            observed=changed,
                            hint="commit or stash the changes, or set [code] allow-dirty = true",
                            details={"cause": "dirty"},
                        )
                    )
    for cf in code.config:
        steps.append(
            file_step(LAYER, f"config:{cf.path}", ctx.root / cf.path, cf.sha256, None, ctx, hint=None)
        )
    return steps
