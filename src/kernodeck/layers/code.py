"""Layer `code`: the code against `[code] revision`, a clean tree, config files by sha256.

In a git checkout: HEAD against the revision and `git status` for local changes. In a folder
written by `kernodeck bundle` outside any checkout (references.json and BUNDLE.sha256 beside the
manifest): the revision and the dirty state the bundle recorded when it copied the code, and the
bundled code files against BUNDLE.sha256. Anywhere else the layer fails: there is nothing that
ties the code to a revision.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
from pathlib import Path, PurePosixPath
from typing import Any

from kernodeck.gitstate import GitState, git_state, later_commits_touch_only_kernodeck_files, run_git
from kernodeck.handover import sums as bundlesums
from kernodeck.layers.causes import StepCause
from kernodeck.layers.context import Context, short
from kernodeck.layers.data import file_step, located
from kernodeck.lockfile.names import INVENTORY_NAME
from kernodeck.manifest.schema import Code, Manifest
from kernodeck.probe.facts import Facts
from kernodeck.report import Status, Step

LAYER = "code"

#: What `kernodeck bundle` writes beside the manifest (see kernodeck.handover.bundle, kernodeck.handover.sums).
BUNDLE_SUMS = bundlesums.NAME
REFERENCES = "references.json"
#: Files a bundle generates that are not the project's code; any depth for the prefixed names.
_GENERATED = frozenset(
    {
        "repro.toml",
        REFERENCES,
        "REBUILD.md",
        "observed/installed-after.txt",
        "observed/verify-report.json",
        "observed/verify-report.md",
    }
)
_GENERATED_NAMES = ("requirements-rebuild-", "pylock.")
#: The folder where a bundle carries Kernodeck itself (kernodeck.handover.bundle.TOOL_DIR).
_TOOL_DIR = "_kernodeck/"
_GENERATED_BASENAMES = frozenset({INVENTORY_NAME, BUNDLE_SUMS})


def _git(ctx: Context, *args: str) -> subprocess.CompletedProcess[str] | None:
    return run_git(ctx.root, *args)


def is_bundle(folder: Path) -> bool:
    """Whether `folder` is a hand-over folder written by `kernodeck bundle`."""
    return bundlesums.is_bundle(folder) and (folder / REFERENCES).is_file()


def check(manifest: Manifest, facts: Facts | None, ctx: Context) -> list[Step]:
    """The revision, the tree and the config files, each pointing at its `[code]` key (a config
    file whose bytes differ: the file itself)."""
    code = manifest.code
    if code is None:
        return []
    configs = {f"config:{cf.path}": i for i, cf in enumerate(code.config)}
    steps = []
    for step in _steps(manifest, code, ctx):
        if step.name in configs:
            steps.append(located(step, ctx, "code", "config", configs[step.name]))
        else:
            step.where = ctx.lines.where("code", "allow-dirty" if step.name == "clean-tree" else "revision")
            steps.append(step)
    return steps


def _steps(manifest: Manifest, code: Code, ctx: Context) -> list[Step]:
    """The steps of the `[code]` table, in order."""
    steps: list[Step] = []
    git = shutil.which("git") is not None
    head = _git(ctx, "rev-parse", "HEAD") if git else None
    not_a_repository = head is not None and head.returncode != 0 and "not a git repository" in head.stderr
    if head is not None and head.returncode == 0:
        steps += _git_steps(code, head.stdout.strip(), ctx)
    elif (head is None or not_a_repository) and is_bundle(ctx.root):
        steps += bundle_steps(manifest, code, ctx) + _signature_steps(ctx.root)
    elif head is None:
        steps.append(
            Step.failed(
                LAYER,
                "revision",
                "git is not installed, and this folder is not a kernodeck bundle",
                expected=code.revision,
                hint="install git",
                details={"cause": "no-git"},
            )
        )
    elif not_a_repository:
        steps.append(
            Step.failed(
                LAYER,
                "revision",
                f"{ctx.root.name or ctx.root}: not a git checkout and not a kernodeck bundle",
                expected=code.revision,
                hint=f"run verify in the project's git checkout at {code.revision[:12]}, or in a folder "
                f"written by `kernodeck bundle` (it holds {BUNDLE_SUMS} and {REFERENCES})",
                details={"cause": "not-a-repository"},
            )
        )
    else:
        first = (head.stderr.strip().splitlines() or ["git rev-parse HEAD failed"])[0]
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
    for cf in code.config:
        steps.append(
            file_step(
                LAYER,
                f"config:{cf.path}",
                ctx.root / cf.path,
                cf.sha256,
                None,
                ctx,
                hint=None,
                bounded=True,
                external=cf.external,
            )
        )
    return steps


def _git_steps(code: Code, sha: str, ctx: Context) -> list[Step]:
    steps: list[Step] = []
    later = (
        None
        if sha == code.revision
        else later_commits_touch_only_kernodeck_files(ctx.root, code.revision, sha)
    )
    if sha == code.revision:
        steps.append(Step.passed(LAYER, "revision", expected=code.revision, observed=sha))
    elif later is not None:
        steps.append(
            Step.passed(
                LAYER,
                "revision",
                expected=code.revision,
                observed=f"{sha} (later commits change only {short(sorted(set(later)))})",
                details={"head": sha, "kernodeck-files-changed-since": sorted(set(later))},
            )
        )
    else:
        steps.append(
            Step.failed(
                LAYER,
                "revision",
                f"HEAD is {sha[:12]}, the manifest pins {code.revision[:12]}",
                expected=code.revision,
                observed=sha,
                hint=f"git checkout {code.revision}, or record this code with `kernodeck capture` "
                "(it gives the reference a new identity)",
                details={"cause": "wrong-revision"},
            )
        )
    state = git_state(ctx.root)
    changed = list(state.changed) if isinstance(state, GitState) else []
    own = list(state.own_changed) if isinstance(state, GitState) else []
    if not changed:
        observed = "clean" + (f" (only {short(own)} changed)" if own else "")
        steps.append(Step.passed(LAYER, "clean-tree", expected="no local changes", observed=observed))
    else:
        msg = f"{len(changed)} tracked file{'s' if len(changed) != 1 else ''} changed: {short(changed)}"
        hint = "commit or stash the changes, or set [code] allow-dirty = true"
        steps.append(_dirty_step(code, msg, changed, hint, {}))
    return steps


def _dirty_step(code: Code, msg: str, observed: Any, hint: str, details: dict[str, Any]) -> Step:
    """Local changes: a warning under allow-dirty, else a failure."""
    if code.allow_dirty:
        return Step.warning(
            LAYER,
            "clean-tree",
            msg,
            expected="allow-dirty",
            observed=observed,
            required=False,
            details=details,
        )
    return Step.failed(
        LAYER,
        "clean-tree",
        msg,
        expected="no local changes",
        observed=observed,
        hint=hint,
        details={**details, "cause": "dirty"},
    )


# --- a bundle outside git ---------------------------------------------------------------------


def _not_code(manifest: Manifest, manifest_file: Path) -> set[str]:
    """Bundle files that are not the project's code: what the manifest names as config, data,
    weights, checkpoint or reference output (each checked by its own step or layer), and the files
    `[packages] from` reads (the bundle carries them as lock inputs, not as code)."""
    from kernodeck.errors import KernodeckError
    from kernodeck.manifest.sources import input_files

    paths = {cf.path for cf in (manifest.code.config if manifest.code else [])}
    with contextlib.suppress(KernodeckError):  # the packages layer says why they cannot be read
        paths |= set(input_files(manifest, manifest_file))
    paths |= {d.path for d in manifest.data}
    paths |= {w.path for w in manifest.weights if w.path and not w.package and not w.hub}
    paths |= {o.reference for c in manifest.check for o in c.output if o.reference}
    if manifest.resume is not None:
        paths.add(manifest.resume.checkpoint.path)
        if manifest.resume.trajectory is not None:
            paths.add(manifest.resume.trajectory.reference)
    return {str(PurePosixPath(p.replace("\\", "/"))) for p in paths}


def _is_code(rel: str, not_code: set[str]) -> bool:
    base = PurePosixPath(rel).name
    return not (
        rel.startswith(_TOOL_DIR)
        or rel in _GENERATED
        or rel in not_code
        or base in _GENERATED_BASENAMES
        or base.startswith(_GENERATED_NAMES)
    )


_HINT_INTACT = "the bundle was modified after it was written; get an intact copy or write it again"


def bundle_steps(manifest: Manifest, code: Code, ctx: Context) -> list[Step]:
    """revision, clean-tree and files for a bundle folder outside any git checkout."""
    folder = ctx.root
    try:
        sums = bundlesums.read(folder)
    except (OSError, UnicodeDecodeError) as e:
        return [
            Step.failed(
                LAYER,
                "revision",
                f"{BUNDLE_SUMS} is unreadable: {e}",
                expected=code.revision,
                hint=_HINT_INTACT,
                details={"cause": "bundle-unreadable", "source": "bundle"},
            )
        ]
    # The recorded revision counts only if references.json is the file the bundle wrote.
    refs_digest = sums.get(REFERENCES)
    refs_ok = refs_digest is not None and _sha256(ctx, folder / REFERENCES) == refs_digest
    entry = _code_entry(folder) if refs_ok else None
    steps = _recorded_steps(code, entry) if refs_ok else [_untrusted_references_step(code, refs_digest)]
    steps.append(_files_step(manifest, sums, entry, ctx))
    if steps[0].status is Status.FAILED and not any(s.name == "clean-tree" for s in steps):
        steps.insert(
            1,
            Step.skipped(
                LAYER,
                "clean-tree",
                "no trustworthy record of the code's state",
                details={"cause": "earlier-failure"},
            ),
        )
    return steps


def _code_entry(folder: Path) -> dict[str, Any] | None:
    """The `code` entry of the bundle's references.json; None when there is none or it is unreadable."""
    try:
        refs = json.loads((folder / REFERENCES).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(refs, list):
        return None
    return next((r for r in refs if isinstance(r, dict) and r.get("kind") == "code"), None)


def _untrusted_references_step(code: Code, refs_digest: str | None) -> Step:
    """`revision` failed: references.json is not the file the bundle wrote."""
    return Step.failed(
        LAYER,
        "revision",
        f"{REFERENCES} "
        + ("is not listed in" if refs_digest is None else "does not match")
        + f" {BUNDLE_SUMS}: the revision it records cannot be trusted",
        expected=code.revision,
        hint=_HINT_INTACT,
        details={"source": "bundle", "cause": "bundle-modified"},
    )


def _recorded_steps(code: Code, entry: dict[str, Any] | None) -> list[Step]:
    """revision and clean-tree from the trusted references.json's code entry."""
    details: dict[str, Any] = {"source": "bundle"}
    if entry is None:
        return [
            Step.failed(
                LAYER,
                "revision",
                f"the bundle's {REFERENCES} records no code",
                expected=code.revision,
                hint="write the bundle again from the project's git checkout",
                details={**details, "cause": "no-code-reference"},
            )
        ]
    if entry.get("included") is not True:
        return [
            Step.failed(
                LAYER,
                "revision",
                "the bundle does not carry the code (written with --no-code) and this folder is not a git checkout",
                expected=code.revision,
                observed=entry.get("revision"),
                hint=f"check out revision {code.revision} and copy this folder's files into it (see REBUILD.md)",
                details={**details, "cause": "code-not-included"},
            )
        ]
    details["files"] = entry.get("files")
    steps = [_recorded_revision_step(code, entry, details)]
    tree = _recorded_tree_step(code, entry, details)
    if tree is not None:
        steps.append(tree)
    return steps


def _recorded_revision_step(code: Code, entry: dict[str, Any], details: dict[str, Any]) -> Step:
    """`revision`: the revision the bundle recorded against the pinned one."""
    recorded = entry.get("revision")
    later = entry.get("kernodeck-files-changed-since")
    if recorded == code.revision:
        return Step.passed(LAYER, "revision", expected=code.revision, observed=recorded, details=details)
    if entry.get("pinned") == code.revision and isinstance(later, list):
        return Step.passed(
            LAYER,
            "revision",
            expected=code.revision,
            observed=f"{recorded} (later commits change only {short(later)})",
            details={**details, "head": recorded, "kernodeck-files-changed-since": later},
        )
    return Step.failed(
        LAYER,
        "revision",
        "the bundle's code was copied outside a git checkout, so it is not tied to any revision"
        if recorded is None
        else f"the bundle's code is from {str(recorded)[:12]}, the manifest pins {code.revision[:12]}",
        expected=code.revision,
        observed=recorded,
        hint="write the bundle from the project's git checkout at the pinned revision"
        " (kernodeck capture records it)",
        details={**details, "cause": "wrong-revision"},
    )


def _recorded_tree_step(code: Code, entry: dict[str, Any], details: dict[str, Any]) -> Step | None:
    """`clean-tree`: the dirty state the bundle recorded; None when it recorded no revision."""
    if entry.get("dirty") and entry.get("allow-dirty"):
        changed = entry.get("changed") or []
        return Step.warning(
            LAYER,
            "clean-tree",
            "the bundle was written with --allow-dirty: its code has uncommitted changes"
            + (f" ({short(changed)})" if changed else "")
            + " that no revision records",
            expected="no local changes",
            observed=changed or "dirty",
            required=False,
            details={**details, "cause": "bundled-dirty"},
        )
    if entry.get("dirty"):
        msg = "the code had local changes when the bundle was written"
        hint = "commit the changes, capture, and write the bundle again"
        return _dirty_step(code, msg, "dirty", hint, details)
    if entry.get("revision") is not None:
        return Step.passed(
            LAYER, "clean-tree", expected="no local changes", observed="clean", details=details
        )
    return None


def _signature_steps(folder: Path) -> list[Step]:
    """The bundle's signer (`kernodeck.handover.signing`), checked against
    $KERNODECK_ALLOWED_SIGNERS when it is set; no step for an unsigned bundle."""
    from kernodeck.errors import UsageError
    from kernodeck.handover import signing

    try:
        found = signing.bundle_signer(folder, signing.allowed_signers_file(None))
    except UsageError as e:
        found = signing.Rejected(e.message)
    if found is None:
        return []
    details: dict[str, Any] = {"source": "bundle"}
    if isinstance(found, signing.Rejected):
        return [
            Step.failed(
                LAYER,
                "signature",
                f"{bundlesums.SIGNATURE}: {found.reason}",
                hint="the bundle was not signed by someone you trust, or was modified after it was signed",
                details={**details, "cause": StepCause.BAD_SIGNATURE},
            )
        ]
    details.update(signer=found.identity, key=found.key)
    return [Step.passed(LAYER, "signature", observed=f"signed by {found.describe()}", details=details)]


def _sha256(ctx: Context, path: Path) -> str | None:
    try:
        return ctx.cache.file_sha256(path)
    except OSError:
        return None


def _files_step(manifest: Manifest, sums: dict[str, str], entry: dict[str, Any] | None, ctx: Context) -> Step:
    not_code = _not_code(manifest, ctx.manifest_file)
    names = sorted(n for n in sums if _is_code(n, not_code))
    bad: list[str] = []
    for name in names:
        path = ctx.root / name
        if not path.is_file():
            bad.append(f"{name} (missing)")
        elif _sha256(ctx, path) != sums[name]:
            bad.append(f"{name} (changed)")
    recorded = entry.get("files") if entry is not None else None
    expected = f"{len(names)} code files as in {BUNDLE_SUMS}"
    details: dict[str, Any] = {"source": "bundle", "files": len(names), "recorded_files": recorded}
    if bad:
        return Step.failed(
            LAYER,
            "files",
            f"{len(bad)} bundled code file{'s' if len(bad) != 1 else ''} differ from {BUNDLE_SUMS}: {short(bad, 3)}",
            expected=expected,
            observed=bad,
            hint="the code was modified after the bundle was written; get an intact copy or write it again",
            details={**details, "cause": "bundle-modified"},
        )
    if isinstance(recorded, int) and recorded != len(names):
        return Step.failed(
            LAYER,
            "files",
            f"{BUNDLE_SUMS} lists {len(names)} code files, the bundle recorded {recorded}",
            expected=f"{recorded} code files",
            observed=len(names),
            hint="the bundle was modified after it was written; get an intact copy or write it again",
            details={**details, "cause": "bundle-modified"},
        )
    return Step.passed(
        LAYER, "files", expected=expected, observed=f"{len(names)} files match", details=details
    )
