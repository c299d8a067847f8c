"""`kernodeck capture`: record the reference environment it runs in into repro.toml.

What is observed: the code revision (git) and configuration fingerprints, data and weight
fingerprints, and the system the reference ran on (NVIDIA driver, CUDA or ROCm as torch reports
them, devices). The file is edited with tomlkit, so every comment and the order survive.

When anything recorded changes, the reference gets a new identity (`[reference] id`, date based:
`YYYY-MM-DD.N`) and the changes are listed. With a variant name, the reference is left as it is
and the differences are written as a `[[variant]]` entry beside it: a deliberate difference,
recorded, with its own identity.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import re
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version
from tomlkit.container import Container
from tomlkit.items import Item

from kernodeck.errors import KernodeckError, UsageError
from kernodeck.fingerprint import fingerprint, keep_listing, sha256_file
from kernodeck.gitstate import git_state
from kernodeck.interpreters import choose
from kernodeck.lockfile.names import manifest_file
from kernodeck.manifest.edit import dumps_document, editing, get_value, load_document, set_value
from kernodeck.manifest.load import loads_manifest
from kernodeck.manifest.schema import Manifest, Weights
from kernodeck.probe.facts import Facts
from kernodeck.support.fsio import atomic_write_text, not_regular

_DATED_ID = re.compile(r"^(\d{4}-\d{2}-\d{2})\.(\d+)$")


@dataclass(frozen=True)
class Change:
    """One recorded value that changed; `key` is a dotted path into repro.toml."""

    key: str
    old: Any
    new: Any

    def describe(self) -> str:
        old = "(none)" if self.old is None else str(self.old)
        return f"{self.key}: {old} -> {self.new}"


@dataclass
class SystemObservation:
    """What the reference system looks like, as verify's probes saw it."""

    nvidia_driver: str | None = None
    cuda: str | None = None  # torch.version.cuda
    rocm: str | None = None  # torch.version.hip
    gpus: list[dict[str, Any]] = field(default_factory=list)  # name, compute_capability, memory_gib

    @property
    def accelerated(self) -> bool:
        return bool(self.gpus)


@dataclass
class CaptureResult:
    path: Path
    old_id: str
    new_id: str | None
    changes: list[Change] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    variant: str | None = None
    written: bool = False
    filled: list[Change] = field(default_factory=list)  # fingerprints recorded for the first time
    #: the interpreter observed and why it was chosen (kernodeck.interpreters)
    interpreter: str | None = None

    def render(self) -> str:
        lines: list[str] = [f"python: {self.interpreter}"] if self.interpreter else []
        if self.filled:
            lines.append(f"{self.path.name}: {len(self.filled)} fingerprint(s) recorded:")
            lines.extend(f"  {c.key} = {c.new}" for c in self.filled)
        if not self.changes:
            lines.append(f"{self.path.name}: nothing changed; reference id stays {self.old_id}")
        else:
            target = f"variant {self.variant!r}" if self.variant else "reference"
            lines.append(f"{self.path.name}: {len(self.changes)} change(s) recorded for the {target}:")
            lines.extend(f"  {c.describe()}" for c in self.changes)
            if self.variant:
                lines.append(f"variant {self.variant} id {self.new_id} (based on {self.old_id})")
            else:
                lines.append(f"new reference id: {self.old_id} -> {self.new_id}")
        lines.extend(f"note: {n}" for n in self.notes)
        return "\n".join(lines)


SystemProbe = Callable[[str], SystemObservation | None]


# --- observations --------------------------------------------------------------------------------


def git_revision(folder: Path) -> tuple[str | None, bool, str | None]:
    """(full sha of HEAD, whether the code has local changes, why not when None).

    Kernodeck's own files (repro.toml, the lock files) are not code: see kernodeck.gitstate.
    """
    state = git_state(folder)
    if isinstance(state, str):
        return None, False, state
    return state.revision, state.dirty, None


_PACKAGE_FILE_SCRIPT = """
import importlib.metadata as m, json, sys
try:
    d = m.distribution(sys.argv[1])
except m.PackageNotFoundError:
    print(json.dumps(None))
else:
    print(json.dumps(str(d.locate_file(sys.argv[2]))))
"""


def locate_package_file(python: str, package: str, path: str) -> Path | None:
    """Where `path` inside the installed distribution `package` is, for the interpreter `python`."""
    try:
        proc = subprocess.run(
            [python, "-I", "-c", _PACKAGE_FILE_SCRIPT, package, path],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        found = json.loads(proc.stdout) if proc.returncode == 0 else None
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    return Path(found) if isinstance(found, str) and Path(found).is_file() else None


def hub_cache_file(
    hub: str, revision: str, filename: str, environ: dict[str, str] | None = None
) -> Path | None:
    """A file of a hub repository at a pinned revision in the local Hugging Face cache, if present."""
    from kernodeck import hfcache

    candidate = hfcache.snapshot(hfcache.default_root(environ), hub, revision) / filename
    return candidate if candidate.is_file() else None


def observe_system(python: str) -> SystemObservation | None:
    """The system as the reference interpreter sees it, from verify's own probes (the environment
    probe for the NVIDIA driver, the torch probe for the CUDA/ROCm build and the devices; no
    control computation). None when the probe cannot run there: capture goes on without it."""
    from kernodeck.probe.runner import ProbeRequest, RealProbe

    try:
        probe = RealProbe(python)
        facts = probe.collect(ProbeRequest(records=False, torch=False))
        torch = (
            probe.collect_torch(ProbeRequest(records=False, torch=True, compute=False))
            if facts.torch_files.installed
            else None
        )
    except KernodeckError:
        return None
    if torch is not None:
        facts.torch = torch
    return observation_from_facts(facts)


def observation_from_facts(facts: Facts) -> SystemObservation:
    """What capture records about the system, from the facts verify checks it against."""
    driver = facts.nvidia.driver()
    gpus = [
        {
            "name": d.name,
            "compute_capability": d.capability_str,
            "memory_gib": round((d.total_memory or 0) / 2**30, 1),
        }
        for d in facts.torch.devices
        if d.name
    ]
    return SystemObservation(
        nvidia_driver=driver[0] if driver else None,
        cuda=facts.torch_cuda(),
        rocm=facts.torch_hip(),
        gpus=gpus,
    )


# --- the capture ---------------------------------------------------------------------------------


def next_reference_id(old: str, today: _dt.date, taken: set[str] | None = None) -> str:
    """`YYYY-MM-DD.N`: today's date, N one more than the old id's when that is from today."""
    day = today.isoformat()
    m = _DATED_ID.match(old)
    n = int(m.group(2)) + 1 if m and m.group(1) == day else 1
    taken = taken or set()
    while f"{day}.{n}" in taken or f"{day}.{n}" == old:
        n += 1
    return f"{day}.{n}"


def _satisfies(spec: str | None, value: str) -> bool:
    if spec is None:
        return False
    try:
        return SpecifierSet(spec).contains(Version(value), prereleases=True)
    except (InvalidSpecifier, InvalidVersion):
        return False


def _observe(
    manifest: Manifest,
    folder: Path,
    python: str,
    system: SystemObservation | None,
    notes: list[str],
) -> dict[str, Any]:
    """Dotted key -> observed value, for every recorded value that this environment can observe."""
    obs: dict[str, Any] = {}
    _observe_code(manifest, folder, obs, notes)
    _observe_data(manifest, folder, obs, notes)
    for i, w in enumerate(manifest.weights):
        _observe_weights(i, w, folder, python, obs, notes)
    if manifest.resume is not None and manifest.resume.checkpoint.sha256 is not None:
        cp = folder / manifest.resume.checkpoint.path
        if cp.is_file():
            obs["resume.checkpoint.sha256"] = sha256_file(cp)
    if system is not None:
        _observe_system_keys(manifest, system, obs, notes)
    return obs


def _observe_code(manifest: Manifest, folder: Path, obs: dict[str, Any], notes: list[str]) -> None:
    # A manifest written before the project was a git checkout (or before its first commit) has
    # no [code] table: the revision is recorded as soon as there is one.
    rev, dirty, why = git_revision(folder)
    if rev is None:
        notes.append(f"code revision not captured: {why}")
    else:
        obs["code.revision"] = rev
        if dirty and not (manifest.code is not None and manifest.code.allow_dirty):
            notes.append(
                "the working tree has local changes that the recorded revision does not include; "
                "commit them, or set [code] allow-dirty = true"
            )
    for i, cfg in enumerate(manifest.code.config if manifest.code is not None else []):
        p = folder / cfg.path
        if p.is_file():
            obs[f"code.config[{i}].sha256"] = sha256_file(p)
        else:
            notes.append(f"config file {cfg.path} {_not_read(p)}; its fingerprint was not captured")


def _observe_data(manifest: Manifest, folder: Path, obs: dict[str, Any], notes: list[str]) -> None:
    for i, d in enumerate(manifest.data):
        p = folder / d.path
        if p.is_dir():  # a folder: the digest verify computes, its listing kept (kernodeck.fingerprint)
            fp = fingerprint(p)
            keep_listing(folder, fp)
            obs[f"data[{i}].sha256"] = fp.sha256
            continue
        if not p.is_file():
            notes.append(f"data {d.name}: {d.path} {_not_read(p)}; its fingerprint was not captured")
            continue
        obs[f"data[{i}].sha256"] = sha256_file(p)
        if d.size is not None:
            obs[f"data[{i}].size"] = p.stat().st_size


def _observe_weights(
    i: int, w: Weights, folder: Path, python: str, obs: dict[str, Any], notes: list[str]
) -> None:
    if w.hub:
        for fname in sorted(w.files or {}):
            cached = hub_cache_file(w.hub, w.revision or "", fname)
            if cached is None:
                notes.append(
                    f"weights {w.name}: {fname} of {w.hub} is not in the local hub cache; not captured"
                )
            else:
                obs[f'weights[{i}].files."{fname}"'] = sha256_file(cached)
        return
    if w.path is None:
        return
    if w.package:
        wp = locate_package_file(python, w.package, w.path)
        if wp is None:
            notes.append(f"weights {w.name}: {w.path} not found in the installed {w.package}; not captured")
            return
    else:
        wp = folder / w.path
        if wp.is_dir():
            fp = fingerprint(wp)
            keep_listing(folder, fp)
            obs[f"weights[{i}].sha256"] = fp.sha256
            return
        if not wp.is_file():
            notes.append(f"weights {w.name}: {w.path} {_not_read(wp)}; its fingerprint was not captured")
            return
    obs[f"weights[{i}].sha256"] = sha256_file(wp)
    if w.size is not None:
        obs[f"weights[{i}].size"] = wp.stat().st_size


def _observe_system_keys(
    manifest: Manifest, system: SystemObservation, obs: dict[str, Any], notes: list[str]
) -> None:
    s = manifest.system
    if system.nvidia_driver and not _satisfies(s.nvidia_driver, system.nvidia_driver):
        obs["system.nvidia-driver"] = f">={system.nvidia_driver}"
    if system.cuda:
        obs["system.cuda"] = system.cuda
    if system.rocm:
        obs["system.rocm"] = system.rocm
    if not system.gpus:
        if s.require_accelerator or s.gpu is not None:
            notes.append("no accelerator observed here; the [system] GPU expectations were left as they are")
        return
    gpu = s.gpu
    count = str(len(system.gpus))
    if not _satisfies(gpu.count if gpu else None, count):
        obs["system.gpu.count"] = f">={count}"
    caps = [str(g["compute_capability"]) for g in system.gpus if g.get("compute_capability")]
    if caps:
        low = min(caps, key=Version)
        if not _satisfies(gpu.compute_capability if gpu else None, low):
            obs["system.gpu.compute-capability"] = f">={low}"
    mems = [float(g["memory_gib"]) for g in system.gpus if g.get("memory_gib") is not None]
    if mems:
        low_mem = int(min(mems))
        if not _satisfies(gpu.memory_gib if gpu else None, str(low_mem)):
            obs["system.gpu.memory-gib"] = f">={low_mem}"


def capture(
    manifest_path: str | Path = "repro.toml",
    *,
    variant: str | None = None,
    note: str | None = None,
    python: str | None = None,
    system_probe: SystemProbe | None = observe_system,
    today: _dt.date | None = None,
    dry_run: bool = False,
    only: str | None = None,
) -> CaptureResult:
    """Observe this environment, record what changed in the manifest (or as a variant), write it.

    A data or weights fingerprint that was not recorded yet (left out, or "") is filled in
    without a new reference id: the reference did not change, its fingerprint was written down.
    `only` names one [[data]] or [[weights]] entry: just its fingerprint (and size) is refreshed.
    The manifest is read, changed and written under its edit lock (`edit.editing`): concurrent
    captures each see the one before (a dry run takes no lock: it writes nothing)."""
    path = manifest_file(manifest_path)
    with contextlib.nullcontext() if dry_run else editing(path):
        return _capture(
            path,
            variant=variant,
            note=note,
            python=python,
            system_probe=system_probe,
            today=today,
            dry_run=dry_run,
            only=only,
        )


def _only_prefixes(manifest: Manifest, only: str, path: Path) -> tuple[str, ...]:
    """The key prefixes of the [[data]] or [[weights]] entry named `only`; a UsageError without one."""
    prefixes = tuple(f"data[{i}]." for i, d in enumerate(manifest.data) if d.name == only) + tuple(
        f"weights[{i}]." for i, w in enumerate(manifest.weights) if w.name == only
    )
    if not prefixes:
        known = sorted({d.name for d in manifest.data} | {w.name for w in manifest.weights})
        raise UsageError(
            f"no [[data]] or [[weights]] entry named {only!r} in {path.name}",
            hint=f"names: {', '.join(known) or 'none declared'}",
        )
    return prefixes


def _capture(
    path: Path,
    *,
    variant: str | None,
    note: str | None,
    python: str | None,
    system_probe: SystemProbe | None,
    today: _dt.date | None,
    dry_run: bool,
    only: str | None,
) -> CaptureResult:
    doc = load_document(path)
    manifest = loads_manifest(dumps_document(doc), str(path))
    folder = path.parent
    chosen = choose(python, project=folder)
    interpreter = chosen.path
    notes: list[str] = []
    prefixes = _only_prefixes(manifest, only, path) if only is not None else ()
    if only is not None:
        system_probe = None
    system = system_probe(interpreter) if system_probe is not None else None
    if system_probe is not None and system is None:
        notes.append(
            f"the system was not observed: the environment probe could not run under {interpreter} "
            f"(`kernodeck doctor --python {interpreter}` says why)"
        )
    observed = _observe(manifest, folder, interpreter, system, notes)
    if prefixes:
        observed = {k: v for k, v in observed.items() if k.startswith(prefixes)}
        notes[:] = [n for n in notes if n.startswith(("data ", "weights ")) and f" {only}:" in n]

    changes: list[Change] = []
    for key, new in observed.items():
        old_plain = _plain(get_value(doc, key))
        if old_plain != new:
            changes.append(Change(key, old_plain, new))
    # a fingerprint or revision recorded where there was none fills in the reference, it does not
    # change what it is
    fills = [
        c for c in changes if c.old in (None, "") and (c.key.endswith(".sha256") or c.key == "code.revision")
    ]
    result = CaptureResult(
        path=path,
        old_id=manifest.reference.id,
        new_id=None,
        changes=[c for c in changes if c not in fills],
        notes=notes,
        variant=variant,
        filled=fills,
        interpreter=chosen.describe(),
    )
    for c in fills:
        set_value(doc, c.key, c.new)
    return _record(doc, manifest, result, note=note, today=today, dry_run=dry_run)


def _record(
    doc: Any,
    manifest: Manifest,
    result: CaptureResult,
    *,
    note: str | None,
    today: _dt.date | None,
    dry_run: bool,
) -> CaptureResult:
    """Write what `result` holds into `doc` (fills, changes as a new reference id or a variant),
    and the manifest unless `dry_run`."""
    changes, variant, notes = result.changes, result.variant, result.notes
    if not changes and not result.filled:
        if variant:
            notes.append(f"nothing differs from the reference; variant {variant!r} was not written")
        return result
    if changes and variant:
        same = _unchanged_variant(doc, variant, changes, note)
        if same is not None:
            # the variant already records exactly these differences: keep its identity, write nothing
            result.changes = []
            notes.append(
                f"variant {variant!r} already records these differences (id {same}); nothing written"
            )
            return result
    if changes:
        taken = {v.id for v in manifest.variant}
        result.new_id = next_reference_id(result.old_id, today or _dt.date.today(), taken)
        if variant:
            _write_variant(doc, variant, result.new_id, result.old_id, note, changes, notes)
        else:
            for c in changes:
                set_value(doc, c.key, c.new)
            set_value(doc, "reference.id", result.new_id)
    text = _without_placeholder(dumps_document(doc))
    loads_manifest(text, str(result.path))  # never write a manifest that does not load
    if not dry_run:
        atomic_write_text(result.path, text)
        result.written = True
    return result


def _not_read(path: Path) -> str:
    """Why a file was not fingerprinted, truly: "not found" only when nothing is there; a socket,
    a FIFO or a device that exists is named as such (verify says the same)."""
    try:
        why = not_regular(path)
    except FileNotFoundError:
        return "not found"
    except OSError as e:
        return f"cannot be read ({e.strerror or e})"
    return f"is {why}" if why is not None else "cannot be read"


def _without_placeholder(text: str) -> str:
    """The manifest without init's "[code] revision ... not a git checkout yet" comment once it
    has a [code] table."""
    from kernodeck.manifest.init import NO_CODE_YET

    line = f"# {NO_CODE_YET}\n"
    return text.replace(line, "", 1) if line in text and "\n[code]\n" in text else text


def _plain(value: Any) -> Any:
    """A tomlkit value as plain Python (other values as they are)."""
    return value.unwrap() if isinstance(value, (Item, Container)) else value


def _unchanged_variant(doc: Any, name: str, changes: list[Change], note: str | None) -> str | None:
    """The id of the variant `name` when it already records exactly `changes` (and `note`, if given)."""
    for existing in doc.get("variant") or []:
        if existing.get("name") != name:
            continue
        recorded = existing.get("changes")
        recorded_plain = _plain(recorded)
        wanted = {c.key: str(c.new) for c in changes}
        old_note = existing.get("note")
        if recorded_plain == wanted and (note is None or str(old_note) == note):
            return str(existing.get("id"))
        return None
    return None


def _write_variant(
    doc: Any,
    name: str,
    new_id: str,
    based_on: str,
    note: str | None,
    changes: list[Change],
    notes: list[str],
) -> None:
    import tomlkit

    entry = tomlkit.table()
    entry["name"] = name
    entry["id"] = new_id
    entry["based-on"] = based_on
    if note:
        entry["note"] = note
    table = tomlkit.inline_table()
    for c in changes:
        table[c.key] = str(c.new)
    entry["changes"] = table
    variants = doc.get("variant")
    if variants is None:
        aot = tomlkit.aot()
        aot.append(entry)
        doc.append("variant", aot)
        return
    for i, existing in enumerate(variants):
        if existing.get("name") == name:
            notes.append(f"variant {name!r} existed (id {existing.get('id')}); it was replaced")
            variants[i] = entry
            return
    variants.append(entry)
