"""Layer `packages`: installed distributions against requirements-rebuild-<platform>.txt
(missing, wrong version, wrong local label, not in the lock), the manifest's own requirements
against what is installed whatever the lock's state (`kernodeck.layers.requirements`), and
installed files against RECORD.

When most of the lock is missing, the checked interpreter is probably not the project's
environment: the missing pins become one step (`environment`, cause `wrong-environment`) instead
of a step and a hint each, and verify says so once at the top of the report."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from collections.abc import Set as AbstractSet
from pathlib import Path

from packaging.utils import NormalizedName, canonicalize_name
from packaging.version import InvalidVersion, Version

from kernodeck.layers import requirements
from kernodeck.layers.causes import StepKind
from kernodeck.layers.context import Context, short
from kernodeck.layers.contract import required_by
from kernodeck.layers.unselected import part_hint, unselected
from kernodeck.lockfile.read import LockFile, LockfileError, Pin, lockfile_path, read_lockfile
from kernodeck.manifest.schema import Manifest, Platform
from kernodeck.manifest.where import lock_where
from kernodeck.probe.facts import Distribution, Facts
from kernodeck.report import Status, Step

LAYER = "packages"

#: Installers and build tools a fresh environment brings along; not "extra" when unlocked.
TOOLING = frozenset(canonicalize_name(n) for n in ("pip", "setuptools", "wheel", "distribute"))

#: Kernodeck itself, installed into the project's environment for `kernodeck.require()`.
KERNODECK = canonicalize_name("kernodeck")

#: The cause of the one step that lists every missing pin when most of the lock is missing.
WRONG_ENVIRONMENT = "wrong-environment"
#: Fewer missing pins than this are reported one by one, whatever the share.
WRONG_ENV_MIN = 3

_PROBLEM_WORDS = {
    "hash": "content differs",
    "size": "size differs",
    "missing": "missing",
    "unreadable": "unreadable",
    "unhashed": "no sha256 in RECORD",
    "not-a-file": "not a regular file",
}


def load_lock(ctx: Context) -> tuple[LockFile | None, Step]:
    assert ctx.platform is not None
    path = lockfile_path(ctx.manifest_file.parent, ctx.platform.name)
    hint = f"kernodeck lock --platform {ctx.platform.name}"
    if not path.exists():
        return None, Step.failed(
            LAYER,
            "lockfile",
            f"{path.name} not found next to {ctx.manifest_file.name}",
            expected=path.name,
            hint=hint,
            details={"cause": "no-lockfile"},
        )
    try:
        lock = read_lockfile(path)
    except LockfileError as e:
        return None, Step.failed(
            LAYER, "lockfile", e.message, expected=path.name, hint=hint, details={"cause": "bad-lockfile"}
        )
    return lock, Step.passed(LAYER, "lockfile", expected=path.name, observed=f"{len(lock.pins)} pins")


def _version(text: str) -> Version | None:
    try:
        return Version(text)
    except InvalidVersion:
        return None


def install_prefix(facts: Facts, ctx: Context) -> str:
    """How to install into the checked environment: its own pip, else uv (a venv uv made has no
    pip, and `python -m pip` there says only "No module named pip")."""
    if canonicalize_name("pip") in facts.dists():
        return f"{ctx.python} -m pip install"
    return f"uv pip install --python {ctx.python}"


def _reinstall_hint(install: str, lock_name: str) -> str:
    return f"{install} --no-deps --require-hashes -r {lock_name}"


def check(manifest: Manifest, facts: Facts, ctx: Context) -> list[Step]:
    """The lock's pins, the manifest's own requirements (whatever the lock's state), then what is
    installed beyond the lock and whether installed files match their RECORD."""
    if ctx.platform is None:
        steps = [Step.skipped(LAYER, "lockfile", "no platform selected", details={"cause": "no-platform"})]
        return steps + requirements.check(manifest, facts, ctx, reported=set())
    lock, lock_step = load_lock(ctx)
    if lock_step.details.get("cause") == "no-lockfile":  # what it would be locked from
        lock_step.where = ctx.lines.where("packages")
    elif lock_step.status is Status.FAILED:
        path = lockfile_path(ctx.manifest_file.parent, ctx.platform.name)
        lock_step.where = lock_where(path, ctx.root)
    steps = [lock_step]
    if lock is None:
        steps.append(
            Step.skipped(
                LAYER, "pins", "no requirements file to compare with", details={"cause": "no-lockfile"}
            )
        )
        return steps + requirements.check(manifest, facts, ctx, reported=set())
    for stale in _stale(lock, ctx):
        stale.where = lock_where(lock.path, ctx.root)
        steps.append(stale)
    pin_steps, wrong_env, pins = _pin_steps(lock, facts, ctx)
    steps += pin_steps
    failed = {canonicalize_name(s.subject) for s in pin_steps if s.what() is StepKind.PIN}
    if wrong_env:
        failed |= {p.key for p in pins if p.key not in facts.dists()}
    steps += requirements.check(manifest, facts, ctx, reported=failed)
    if wrong_env:
        # what else is installed here, and whether its files match, says nothing about the project
        return steps
    if not pin_steps:
        steps.append(
            Step.passed(
                LAYER,
                "pins",
                expected=f"{len(pins)} pins",
                observed=f"{len(pins)} of {len(pins)} installed as locked",
            )
        )
    return steps + _beyond_lock(manifest, facts, ctx, lock)


def _pin_steps(lock: LockFile, facts: Facts, ctx: Context) -> tuple[list[Step], bool, list[Pin]]:
    """(a failed step per pin not installed as locked, whether most of the lock is missing, the
    pins that apply here)."""
    installed = facts.dists()
    install = install_prefix(facts, ctx)
    pins = [p for p in lock.pins if p.applies(dict(facts.markers))]
    missing = [pin for pin in pins if pin.key not in installed]
    wrong_env = is_wrong_environment(len(missing), len(pins))
    steps = [_wrong_environment_step(missing, len(pins), install, lock.path.name)] if wrong_env else []
    for env_step in steps:
        env_step.where = lock_where(lock.path, ctx.root)
    for pin in pins:
        d = installed.get(pin.key)
        if d is None and wrong_env:
            continue  # listed in the one "environment" step
        step = _pin_step(pin, d, _reinstall_hint(install, lock.path.name))
        if step is not None:
            step.tagged(StepKind.PIN, package=pin.key)
            step.where = lock_where(lock.path, ctx.root, pin.line)
            steps.append(step)
    return steps, wrong_env, pins


def _pin_step(pin: Pin, d: Distribution | None, reinstall: str) -> Step | None:
    """The failed step of one pin, or None when it is installed as locked."""
    want = f"{pin.name}=={pin.version}" if pin.version else f"{pin.name} @ {pin.url}"
    name = f"pin:{pin.key}"
    if d is None:
        return Step.failed(
            LAYER,
            name,
            f"{pin.name} is not installed (locked {pin.version or pin.url})",
            expected=want,
            observed=None,
            hint=reinstall,
            details={"cause": "missing", "via": list(pin.via)},
        )
    if pin.version is None:
        url = ((d.direct_url or {}).get("url")) or None
        if url == pin.url:
            return None
        return Step.failed(
            LAYER,
            name,
            f"{pin.name} was installed from {url or 'an index'}, the lock names {pin.url}",
            expected=want,
            observed=url,
            hint=reinstall,
            details={"cause": "wrong-source"},
        )
    have, locked = _version(d.version), _version(pin.version)
    if d.version == pin.version or (have is not None and have == locked):
        return None
    if have is not None and locked is not None and have.public == locked.public:
        hl = f"+{have.local}" if have.local else "no local label"
        ll = f"+{locked.local}" if locked.local else "no local label"
        return Step.failed(
            LAYER,
            name,
            f"{pin.name} {d.version} is installed where the lock pins {pin.version} (local label {hl}, expected {ll})",
            expected=pin.version,
            observed=d.version,
            hint=f"the wrong build variant is installed; {reinstall} (the lock's --extra-index-url names the right index)",
            details={
                "cause": "wrong-local-label",
                "expected_local": locked.local,
                "observed_local": have.local,
            },
        )
    return Step.failed(
        LAYER,
        name,
        f"{pin.name} {d.version} is installed where the lock pins {pin.version}",
        expected=pin.version,
        observed=d.version,
        hint=reinstall,
        details={"cause": "wrong-version"},
    )


def _beyond_lock(manifest: Manifest, facts: Facts, ctx: Context, lock: LockFile) -> list[Step]:
    """What is installed that the lock does not name (Kernodeck itself, the project, strangers),
    copies shadowing each other, and installed files against RECORD."""
    assert ctx.platform is not None
    installed = facts.dists()
    steps: list[Step] = []
    locked_keys = {p.key for p in lock.pins}
    unlocked = {k for k in installed if k not in locked_keys and k not in TOOLING}
    # Kernodeck in the project's environment (for kernodeck.require()) and what only it brings:
    # said once as what it is, not as strangers among the project's packages
    own = unlocked & required_by(facts, {KERNODECK}) if KERNODECK in unlocked else set()
    if own:
        steps.append(_kernodeck_step(installed, own))
    # The project itself, installed from its own folder (`pip install -e .`, `uv sync`, `poetry
    # install`): what is checked, not a stranger among its packages
    project = project_distributions([installed[k] for k in unlocked - own], ctx.manifest_file.parent)
    steps += [_project_step(d) for d in project]
    strangers = unlocked - own - {d.key for d in project}
    if strangers:
        step = _unlocked_step(manifest, facts, ctx, strangers)
        step.where = ctx.lines.where("packages")  # where they would be added
        steps.append(step)
    shadowed = facts.duplicated()
    if shadowed:
        steps.append(
            Step.warning(
                LAYER,
                "duplicates",
                f"more than one copy on sys.path (the first wins): {short(shadowed)}",
                observed=shadowed,
                required=False,
                details={"cause": "duplicate"},
            )
        )
    return steps + _records(facts, ctx, locked_keys, install_prefix(facts, ctx))


def _kernodeck_step(installed: dict[NormalizedName, Distribution], own: set[NormalizedName]) -> Step:
    names = sorted(installed[k].name for k in own - {KERNODECK})
    return Step.passed(
        LAYER,
        "kernodeck",
        expected="the project's packages, as locked",
        observed=f"kernodeck {installed[KERNODECK].version} is installed beside them, with the "
        f"{len(names)} distribution{'s' if len(names) != 1 else ''} it requires that the lock does not name",
        details={"cause": "kernodeck-beside-the-lock", "distributions": names},
    )


def _project_step(d: Distribution) -> Step:
    how = "editable" if d.editable else "from its folder"
    return Step.passed(
        LAYER,
        f"project:{d.key}",
        expected="the project's packages, as locked",
        observed=f"{d.name} {d.version} is this project, installed {how} ({d.direct_url_path})",
        details={"cause": "the-project-itself", "editable": d.editable},
    )


def _unlocked_step(manifest: Manifest, facts: Facts, ctx: Context, strangers: set[NormalizedName]) -> Step:
    assert ctx.platform is not None
    installed = facts.dists()
    extra = sorted(installed[k].name for k in strangers)
    msg = f"{len(extra)} installed distribution{'s are' if len(extra) != 1 else ' is'} not in the lock: {short(extra, 8)}"
    hint = f"uninstall them, or add them to [packages] requirements and run `kernodeck lock --platform {ctx.platform.name}`"
    details: dict[str, object] = {"cause": "not-in-lock"}
    parts = unselected(manifest, ctx.manifest_file.parent, facts, strangers, ctx.platform.extras)
    if parts:
        for key in ("groups", "extras"):
            chosen = {p.name: sorted(installed[k].name for k in p.brings) for p in parts if p.key == key}
            if chosen:
                details[key] = chosen
        hint = part_hint(parts, strangers, lambda ks: short(sorted(installed[k].name for k in ks), 3), hint)
    if ctx.strict:
        return Step.failed(LAYER, "unlocked", msg, observed=extra, hint=hint, details=details)
    return Step.warning(LAYER, "unlocked", msg, observed=extra, hint=hint, required=False, details=details)


def project_distributions(dists: list[Distribution], folder: Path) -> list[Distribution]:
    """The distributions installed from the project's own folder: a PEP 610 `direct_url.json`
    naming a local directory that is the manifest's folder, lies inside it, or holds it (a
    repository whose package root is above the manifest)."""
    root = folder.resolve()
    out = []
    for d in dists:
        path = d.direct_url_path
        if path is None:
            continue
        where = Path(path).resolve()
        if where == root or root in where.parents or where in root.parents:
            out.append(d)
    return sorted(out, key=lambda d: d.key)


def is_wrong_environment(missing: int, pins: int) -> bool:
    """Most locked packages missing (more than half, and at least WRONG_ENV_MIN): the interpreter
    checked is probably not the project's environment at all."""
    return missing >= WRONG_ENV_MIN and 2 * missing > pins


def wrong_environment(facts: Facts, ctx: Context) -> bool:
    """Whether `check` will find most of the lock missing (decided before the torch probe runs)."""
    if ctx.platform is None:
        return False
    try:
        lock = read_lockfile(lockfile_path(ctx.manifest_file.parent, ctx.platform.name))
    except LockfileError:  # reported by `check`
        return False
    installed = facts.dists()
    env = dict(facts.markers)
    pins = [p for p in lock.pins if p.applies(env)]
    return is_wrong_environment(sum(1 for p in pins if p.key not in installed), len(pins))


def installed_names(paths: Iterable[str]) -> set[NormalizedName]:
    """The names of the distributions whose metadata folders (`.dist-info`, `.egg-info`) lie in
    the folders `paths` (sys.path), read from the folder names alone: `mostly_installed`'s."""
    names: set[NormalizedName] = set()
    for entry in paths:
        try:
            listing = os.listdir(entry or ".")
        except OSError:
            continue
        for n in listing:
            if n.endswith((".dist-info", ".egg-info")):
                names.add(canonicalize_name(n.rsplit(".", 1)[0].split("-", 1)[0]))
    return names


def mostly_installed(
    manifest_file: Path, platform: Platform, names: AbstractSet[str], markers: dict[str, str]
) -> bool:
    """Whether the platform's lock is mostly installed by `names` (`installed_names`) under the
    marker environment `markers`: not `is_wrong_environment`, decided before the probe's facts
    (require() imports torch while the probe runs only then). False when the lock cannot be read.
    A name its folder spells differently from its METADATA counts as missing: this errs towards
    False, which only leaves torch to be imported later (`wrong_environment` gives the verdict)."""
    try:
        lock = read_lockfile(lockfile_path(manifest_file.parent, platform.name))
    except LockfileError:
        return False
    pins = [p for p in lock.pins if p.applies(markers)]
    return not is_wrong_environment(sum(1 for p in pins if p.key not in names), len(pins))


def _wrong_environment_step(missing: list[Pin], pins: int, install: str, lock_name: str) -> Step:
    names = [p.name for p in missing]
    return Step.failed(
        LAYER,
        "environment",
        f"{len(missing)} of {pins} locked packages are not installed: {short(names, 12)}",
        expected=f"{pins} pins",
        observed=f"{pins - len(missing)} of {pins} installed",
        hint="activate the project's venv or pass --python PATH",
        details={
            "cause": WRONG_ENVIRONMENT,
            "install": _reinstall_hint(install, lock_name),
            "missing": [{"name": p.name, "locked": p.version or p.url, "via": list(p.via)} for p in missing],
        },
    )


def _stale(lock: LockFile, ctx: Context) -> list[Step]:
    from kernodeck.support.fsio import interrupted_set

    if interrupted_set(lock.path.parent):
        return [
            Step.warning(
                LAYER,
                "lock-current",
                f"an earlier `kernodeck lock` was interrupted while it replaced the files beside "
                f"{ctx.manifest_file.name}: {lock.path.name} may come from another run than the others",
                hint="kernodeck lock (it finishes the interrupted set)",
                required=False,
                details={"cause": "interrupted-lock"},
            )
        ]
    if lock.lock_inputs_sha256 and ctx.platform is not None:
        return _unusable(lock, ctx, ctx.platform.name)
    recorded = lock.manifest_sha256
    try:
        actual = hashlib.sha256(ctx.manifest_file.read_bytes()).hexdigest()
    except OSError:
        return []
    if not recorded or actual == recorded:
        return []
    return [
        Step.warning(
            LAYER,
            "lock-current",
            f"{ctx.manifest_file.name} changed since {lock.path.name} was written",
            expected=recorded,
            observed=actual,
            hint=f"kernodeck lock --platform {ctx.platform.name if ctx.platform else 'NAME'}",
            required=False,
            details={"cause": "stale-lock"},
        )
    ]


def _unusable(lock: LockFile, ctx: Context, platform: str) -> list[Step]:
    """The shared rule (`kernodeck.lock.freshness`, which rebuild and bundle enforce) on a lock
    file Kernodeck wrote: a warning here, since verify only compares the environment with it."""
    from kernodeck.lock.freshness import lock_verdict

    verdict = lock_verdict(ctx.manifest_file, platform, path=lock.path)
    if verdict.ok:
        return []
    return [
        Step.warning(
            LAYER,
            "lock-current",
            f"{'; '.join(verdict.problems)} ({lock.path.name})",
            expected="locked from the manifest as it is now, from declared indexes",
            hint=verdict.fix,
            required=False,
            details={"cause": "stale-lock" if verdict.stale else "foreign-index"},
        )
    ]


def _records(facts: Facts, ctx: Context, locked: set[NormalizedName], install: str) -> list[Step]:
    r = facts.records
    if not r.checked:
        return []
    steps: list[Step] = []
    bad = 0
    no_record: list[str] = []
    for d in sorted(facts.dists().values(), key=lambda d: d.key):
        if d.record is None:
            no_record.append(d.name)
            continue
        if not d.record_problems:
            continue
        bad += 1
        steps.append(_record_step(d, ctx, d.key in locked, install))
    if no_record:
        msg = f"no readable RECORD, installed files cannot be checked: {short(no_record)}"
        hint = "reinstall them with pip or uv (which write a RECORD), or uninstall them"
        kw = {
            "observed": no_record,
            "hint": hint,
            "details": {"cause": "no-record"},
            "kind": StepKind.RECORDS_MISSING,
        }
        if ctx.strict:
            steps.append(Step.failed(LAYER, "records-missing", msg, **kw))
        else:
            steps.append(Step.warning(LAYER, "records-missing", msg, required=False, **kw))
    if r.unlisted or r.unlisted_more:
        steps.append(_unlisted_step(facts, ctx))
    if not bad:
        steps.append(
            Step.passed(
                LAYER,
                "records",
                expected="installed files match RECORD",
                observed=f"{r.files} files of {sum(1 for d in facts.dists().values() if d.record)} distributions match",
                details={"files": r.files},
                kind=StepKind.RECORDS,
                # the work this run did (a warm cache hashes nothing): measured, not a fact
                measurements={"hashed": r.hashed, "from_cache": r.cache_hits},
            )
        )
    return steps


def _unlisted_step(facts: Facts, ctx: Context) -> Step:
    """Files no RECORD lists: a `.pth` runs code at every start, a module in a package directory
    is imported like its neighbours; no installer put them there."""
    r = facts.records
    items = [f.path for f in r.unlisted]
    pth = [f.path for f in r.unlisted if f.kind == "pth"]
    total = len(items) + r.unlisted_more
    what = f"{total} file{'s' if total != 1 else ''} that no RECORD lists"
    if pth:
        what += f" (.pth, run at every start: {short(pth, 3)})"
    msg = f"{what}: {short(items, 5)}"
    kw = {
        "expected": "every file in a package directory, and every .pth, listed in a RECORD",
        "observed": [f.model_dump() for f in r.unlisted[:50]],
        "hint": "delete what no installer put there; a tool that writes into site-packages belongs in the lock",
        "details": {"cause": "unlisted-files", "files": total, "pth": len(pth)},
    }
    if ctx.strict:
        return Step.failed(LAYER, "records-unlisted", msg, **kw)
    return Step.warning(LAYER, "records-unlisted", msg, required=False, **kw)


def _record_step(d: Distribution, ctx: Context, locked: bool, install: str) -> Step:
    items = [f"{p.path} ({_PROBLEM_WORDS.get(p.problem, p.problem)})" for p in d.record_problems]
    kinds = {p.problem for p in d.record_problems}
    if kinds == {"missing"}:
        cause = "record-missing-files"
    elif any(p.path == "RECORD" and p.problem == "unreadable" for p in d.record_problems):
        cause = "record-unreadable"
    elif "unhashed" in kinds:
        cause = "record-unhashed"
    else:
        cause = "record-mismatch"
    n = len(items)
    files, differ = ("file", "differs") if n == 1 else ("files", "differ")
    msg = f"{n} installed {files} of {d.name} {d.version} {differ} from its RECORD: {short(items, 3)}"
    if cause == "record-unreadable":
        why = next(str(p.observed) for p in d.record_problems if p.path == "RECORD")
        msg = f"the RECORD of {d.name} {d.version} cannot be read ({why}): its files cannot be checked"
    again = "--force-reinstall" if install.endswith(" -m pip install") else "--reinstall"
    hint = f"{install} {again} --no-deps {d.name}=={d.version}"
    kw = {
        "expected": "files as in RECORD",
        "observed": [p.model_dump() for p in d.record_problems[:20]],
        "hint": hint,
        "details": {"cause": cause, "files": len(items), "package": d.key},
        "kind": StepKind.RECORD,
    }
    if locked or ctx.strict:
        return Step.failed(LAYER, f"record:{d.key}", msg, **kw)
    return Step.warning(LAYER, f"record:{d.key}", msg, required=False, **kw)
