"""A received bundle, attacked: nothing installs from a tampered, foreign or stale lock, and a
signed bundle proves who wrote it (issue #40: points 1 to 4 and 6).

An attacker's loopback index serves `alpha` 1.0 built with a `.pth` file that writes a marker when
any interpreter of the environment starts; the marker must never appear, and nothing is created.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from kernodeck.cli import cli
from kernodeck.handover import rebuild as rebuild_mod
from kernodeck.handover import sums as bundlesums
from kernodeck.handover.bundle import write_bundle
from kernodeck.handover.rebuild import check_bundle_sums, plan_rebuild, rebuild, run_rebuild
from kernodeck.handover.signing import NAMESPACE
from kernodeck.lock.freshness import LockNotUsable, lock_verdict
from kernodeck.report import Report, Status, Step
from tests.fixtures.fresh_lock import stamp_lock
from tests.fixtures.index_factory import IndexFactory, Server

PY = f"{sys.version_info.major}.{sys.version_info.minor}"
PLATFORM = "linux-x86_64"
LOCK = f"requirements-rebuild-{PLATFORM}.txt"


def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def indexes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[IndexFactory, Server, Path]]:
    """The good index (`default`) and the attacker's (`evil`), whose alpha writes MARKER."""
    root = tmp_path_factory.mktemp("indexes")
    marker = root / "MARKER"
    f = IndexFactory(root / "index")
    f.add_wheel("alpha", "1.0")
    pth = f"import pathlib; pathlib.Path({str(marker)!r}).write_text('attacker code ran')\n"
    f.add_wheel("alpha", "1.0", index="evil", files={"alpha_evil.pth": pth.encode()})
    with f.serve() as srv:
        yield f, srv, marker


def _manifest(url: str, requirements: str = '["alpha"]') -> str:
    return f"""schema-version = 1
[reference]
name = "tiny"
id = "2026-01-01.1"
[python]
version = "{PY}"
[packages]
requirements = {requirements}
[[packages.index]]
name = "good"
url = "{url}"
default = true
[[platform]]
name = "{PLATFORM}"
os = "linux"
arch = "x86_64"
"""


def _project(tmp_path: Path, indexes: tuple[IndexFactory, Server, Path]) -> Path:
    f, srv, _ = indexes
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "repro.toml").write_text(_manifest(srv.url()))
    wheel = f.files_dir() / "alpha-1.0-py3-none-any.whl"
    (proj / LOCK).write_text(
        f"--index-url {srv.url()}\n--only-binary :all:\n\nalpha==1.0 \\\n    --hash=sha256:{_sha(wheel)}\n"
    )
    stamp_lock(proj / "repro.toml", PLATFORM)
    return proj


def _bundle(tmp_path: Path, indexes: tuple[IndexFactory, Server, Path], **kw: Any) -> Path:
    out = tmp_path / "bundle"
    write_bundle(out, manifest=_project(tmp_path, indexes), environ={}, home=tmp_path, **kw)
    return out


def _evil_hash(indexes: tuple[IndexFactory, Server, Path]) -> str:
    return _sha(indexes[0].files_dir("evil") / "alpha-1.0-py3-none-any.whl")


def _point_lock_at_the_attacker(bundle: Path, indexes: tuple[IndexFactory, Server, Path]) -> None:
    lock = bundle / LOCK
    good = indexes[1].url()
    text = lock.read_text()
    text = text.replace(good, indexes[1].url("evil"))
    text = text.replace(text.split("--hash=sha256:")[1][:64], _evil_hash(indexes))
    lock.write_text(text)


def _recompute_sums(bundle: Path) -> None:
    files = {
        p.relative_to(bundle).as_posix(): p.read_bytes()
        for p in bundle.rglob("*")
        if p.is_file() and p.name != bundlesums.NAME
    }
    (bundle / bundlesums.NAME).write_text(bundlesums.render(files))


class _NoVerify:
    def __call__(self, path: Path, **kw: Any) -> Report:
        r = Report()
        r.add(Step.passed("application", "sample"))
        return r


def _env(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return {"PATH": os.environ["PATH"], "HOME": str(home)}


def _refused(tmp_path: Path, bundle: Path, marker: Path, stage: str, *needles: str) -> Report:
    dest = tmp_path / "venv"
    report = rebuild(bundle, dest=dest, platform=PLATFORM, verify=_NoVerify(), environ=_env(tmp_path))
    step = next(s for s in report.steps if s.name == stage)
    assert step.status is Status.FAILED, report.summary()
    said = f"{step.error} hint: {step.hint}"
    for needle in needles:
        assert needle in said, said
    later = [s for s in report.steps if s.layer == "rebuild" and s.name not in ("bundle", "lock")]
    assert later and all(s.status is Status.SKIPPED for s in later)
    assert report.exit_code == 1 and not dest.exists() and not marker.exists()
    return report


# --- the five attacks of issue #40 -------------------------------------------------------------


def test_the_locks_line_deleted_from_the_sums(
    tmp_path: Path, indexes: tuple[IndexFactory, Server, Path]
) -> None:
    bundle = _bundle(tmp_path, indexes)
    _point_lock_at_the_attacker(bundle, indexes)
    sums = bundle / bundlesums.NAME
    sums.write_text(
        "".join(line for line in sums.read_text().splitlines(True) if not line.endswith(f"  {LOCK}\n"))
    )
    _refused(tmp_path, bundle, indexes[2], "bundle", f"{LOCK} is not listed in BUNDLE.sha256")


def test_sums_recomputed_after_pointing_the_lock_at_another_index(
    tmp_path: Path, indexes: tuple[IndexFactory, Server, Path]
) -> None:
    bundle = _bundle(tmp_path, indexes)
    _point_lock_at_the_attacker(bundle, indexes)
    _recompute_sums(bundle)
    _refused(
        tmp_path, bundle, indexes[2], "lock", LOCK, indexes[1].url("evil"), "repro.toml does not declare"
    )


def test_the_sums_file_emptied(tmp_path: Path, indexes: tuple[IndexFactory, Server, Path]) -> None:
    bundle = _bundle(tmp_path, indexes)
    _point_lock_at_the_attacker(bundle, indexes)
    (bundle / bundlesums.NAME).write_text("")
    _refused(tmp_path, bundle, indexes[2], "bundle", "BUNDLE.sha256 lists no files")


def test_the_sums_file_deleted(tmp_path: Path, indexes: tuple[IndexFactory, Server, Path]) -> None:
    bundle = _bundle(tmp_path, indexes)
    _point_lock_at_the_attacker(bundle, indexes)
    (bundle / bundlesums.NAME).unlink()
    assert plan_rebuild(bundle, dest=tmp_path / "venv", platform=PLATFORM).bundle_sums is not None
    _refused(tmp_path, bundle, indexes[2], "bundle", "BUNDLE.sha256 is missing")


def test_an_extra_index_added_with_a_swapped_hash_and_recomputed_sums(
    tmp_path: Path, indexes: tuple[IndexFactory, Server, Path]
) -> None:
    bundle = _bundle(tmp_path, indexes)
    lock = bundle / LOCK
    text = lock.read_text()
    good_hash = text.split("--hash=sha256:")[1][:64]
    text = text.replace("--only-binary", f"--extra-index-url {indexes[1].url('evil')}\n--only-binary")
    lock.write_text(text.replace(good_hash, _evil_hash(indexes)))
    _recompute_sums(bundle)
    _refused(tmp_path, bundle, indexes[2], "lock", indexes[1].url("evil"), "kernodeck lock --platform")


def test_a_file_added_to_the_bundle_is_refused_and_an_untouched_bundle_passes(
    tmp_path: Path, indexes: tuple[IndexFactory, Server, Path]
) -> None:
    bundle = _bundle(tmp_path, indexes)
    assert check_bundle_sums(bundle / bundlesums.NAME).status is Status.PASSED
    # what rebuild, verify and the checks write there later is no input
    (bundle / "installed-after.txt").write_text("alpha==1.0\n")
    (bundle / "out" / "main").mkdir(parents=True)
    (bundle / "out" / "main" / "ids.json").write_text("[]")
    assert check_bundle_sums(bundle / bundlesums.NAME).status is Status.PASSED
    (bundle / "sitecustomize.py").write_text("print('planted')\n")
    step = check_bundle_sums(bundle / bundlesums.NAME)
    assert step.status is Status.FAILED and "sitecustomize.py is not listed in BUNDLE.sha256" in (
        step.error or ""
    )


# --- stale locks --------------------------------------------------------------------------------


def test_a_stale_lock_is_refused_before_a_venv_exists(
    tmp_path: Path, indexes: tuple[IndexFactory, Server, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    proj = _project(tmp_path, indexes)
    (proj / "repro.toml").write_text(_manifest(indexes[1].url(), '["alpha>=1"]'))
    dest = tmp_path / "venv"
    res = CliRunner().invoke(cli, ["rebuild", str(proj), "--dest", str(dest), "--platform", PLATFORM])
    assert res.exit_code == 1, res.output
    said = " ".join(res.output.split())  # the terminal report wraps long lines
    assert f"{LOCK}: repro.toml changed its lock inputs since the file was written" in said
    assert f"kernodeck lock --platform {PLATFORM}" in said and "Traceback" not in said
    assert not dest.exists()
    # --allow-stale: the deliberate case, a warning in the report (never silent)
    monkeypatch.setattr(rebuild_mod, "STAGES", rebuild_mod.STAGES[:2])
    plan = plan_rebuild(proj, dest=dest, platform=PLATFORM, allow_stale=True)
    report = run_rebuild(plan, environ=_env(tmp_path)).report
    (step,) = report.steps
    assert step.name == "lock" and step.status is Status.WARNING and not step.required
    assert "--allow-stale" in (step.error or "") and report.exit_code == 0


def test_allow_stale_never_accepts_an_undeclared_index(
    tmp_path: Path, indexes: tuple[IndexFactory, Server, Path]
) -> None:
    proj = _project(tmp_path, indexes)
    lock = proj / LOCK
    lock.write_text(lock.read_text().replace(indexes[1].url(), indexes[1].url("evil")))
    plan = plan_rebuild(proj, dest=tmp_path / "v", platform=PLATFORM, allow_stale=True)
    report = run_rebuild(plan, environ=_env(tmp_path), verify=_NoVerify()).report
    step = next(s for s in report.steps if s.name == "lock")
    assert step.status is Status.FAILED and step.details["cause"] == "foreign-index"
    assert report.exit_code == 1 and not (tmp_path / "v").exists()


def test_the_rule_accepts_the_default_and_the_backends_pytorch_index(tmp_path: Path) -> None:
    manifest = tmp_path / "repro.toml"
    manifest.write_text(
        f'schema-version = 1\n[reference]\nname = "t"\nid = "1"\n[python]\nversion = "{PY}"\n'
        '[packages]\nrequirements = ["torch"]\npytorch-index = "http://127.0.0.1:9/whl"\n'
        '[[platform]]\nname = "cpu"\nos = "linux"\narch = "x86_64"\nbackend = "cpu"\n'
    )
    from kernodeck.index.sources import builtin_index_url

    lock = tmp_path / "requirements-rebuild-cpu.txt"
    lock.write_text(f"--index-url {builtin_index_url()}\n--extra-index-url http://127.0.0.1:9/whl/cpu/\n")
    stamp_lock(manifest, "cpu")
    assert lock_verdict(manifest, "cpu").ok
    lock.write_text(lock.read_text().replace("/whl/cpu/", "/whl/cu126/"))
    verdict = lock_verdict(manifest, "cpu")
    assert verdict.foreign == (
        "it names http://127.0.0.1:9/whl/cu126, a package location repro.toml does not declare",
    )


# --- bundle refuses what it would hand over stale, and lists exactly its platforms -------------


def test_bundle_refuses_a_stale_or_missing_lock_unless_platform_narrows(
    tmp_path: Path, indexes: tuple[IndexFactory, Server, Path]
) -> None:
    proj = _project(tmp_path, indexes)
    text = (proj / "repro.toml").read_text()
    (proj / "repro.toml").write_text(text + '[[platform]]\nname = "mac"\nos = "macos"\narch = "arm64"\n')
    # a new platform changes every lock's inputs (same-versions: platforms locked jointly)
    with pytest.raises(LockNotUsable) as e:
        write_bundle(tmp_path / "b", manifest=proj, environ={}, home=tmp_path)
    said = e.value.render()
    assert f"{LOCK}: repro.toml changed its lock inputs" in said
    assert "requirements-rebuild-mac.txt: it is missing" in said and "kernodeck lock --platform mac" in said
    assert e.value.exit_code == 1 and not (tmp_path / "b").exists()
    lock = proj / LOCK  # stamped again: a fresh lock of the narrowed platform
    lock.write_text("\n".join(lock.read_text().splitlines()[1:]) + "\n")
    stamp_lock(proj / "repro.toml", PLATFORM)
    res = CliRunner().invoke(cli, ["bundle", str(proj), str(tmp_path / "b"), "--platform", PLATFORM])
    assert res.exit_code == 0, res.output
    md = (tmp_path / "b" / "REBUILD.md").read_text()
    assert f"| `{PLATFORM}` |" in md and "| `mac` |" not in md
    assert not (tmp_path / "b" / "requirements-rebuild-mac.txt").exists()


def test_bundle_allow_stale_warns(tmp_path: Path, indexes: tuple[IndexFactory, Server, Path]) -> None:
    proj = _project(tmp_path, indexes)
    (proj / "repro.toml").write_text(_manifest(indexes[1].url(), '["alpha>=1"]'))
    result = write_bundle(tmp_path / "b", manifest=proj, environ={}, home=tmp_path, allow_stale=True)
    assert any("--allow-stale" in w and LOCK in w for w in result.warnings)


# --- signed hand-over, with real ssh-keygen keys --------------------------------------------------


def _key(folder: Path, who: str) -> Path:
    key = folder / who
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", who, "-f", str(key)], check=True)
    return key


def _allowed(folder: Path, *keys: Path) -> Path:
    lines = [
        f'{k.name}@example.com namespaces="{NAMESPACE}" {k.with_suffix(".pub").read_text().strip()}'
        for k in keys
    ]
    path = folder / "allowed_signers"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_signed_bundle_names_its_signer_and_an_unknown_one_is_refused(
    tmp_path: Path, indexes: tuple[IndexFactory, Server, Path]
) -> None:
    keys = tmp_path / "keys"
    keys.mkdir()
    alice, mallory = _key(keys, "alice"), _key(keys, "mallory")
    res = CliRunner().invoke(
        cli, ["bundle", str(_project(tmp_path, indexes)), str(tmp_path / "bundle"), "--sign", str(alice)]
    )
    assert res.exit_code == 0 and "signed BUNDLE.sha256 with alice" in res.output, res.output
    bundle = tmp_path / "bundle"
    assert (bundle / bundlesums.SIGNATURE).read_text().startswith("-----BEGIN SSH SIGNATURE-----")
    sums = bundle / bundlesums.NAME
    step = check_bundle_sums(sums, _allowed(keys, alice))
    assert step.status is Status.PASSED and step.details["signer"] == "alice@example.com"
    assert "signed by alice@example.com (ED25519 key SHA256:" in str(step.observed)
    # without allowed signers the signature is still checked, and its key named
    step = check_bundle_sums(sums)
    assert step.status is Status.PASSED and "not checked against allowed signers" in str(step.observed)
    # a key the receiver does not allow
    step = check_bundle_sums(sums, _allowed(keys, mallory))
    assert step.status is Status.FAILED and "not in allowed_signers" in (step.error or "")
    # the sums changed and recomputed after signing: the signature no longer matches
    (bundle / "REBUILD.md").write_text("# run this\n")
    _recompute_sums(bundle)
    step = check_bundle_sums(sums, _allowed(keys, alice))
    assert step.status is Status.FAILED and step.details["cause"] == "bad-signature"


def test_allowed_signers_refuse_an_unsigned_bundle_before_anything_runs(
    tmp_path: Path, indexes: tuple[IndexFactory, Server, Path]
) -> None:
    keys = tmp_path / "keys"
    keys.mkdir()
    allowed = _allowed(keys, _key(keys, "alice"))
    bundle = _bundle(tmp_path, indexes)
    env = {**_env(tmp_path), "KERNODECK_ALLOWED_SIGNERS": str(allowed)}
    plan = plan_rebuild(bundle, dest=tmp_path / "venv", platform=PLATFORM, environ=env)
    assert plan.allowed_signers == allowed
    report = run_rebuild(plan, environ=env, verify=_NoVerify()).report
    step = report.steps[0]
    assert step.name == "bundle" and step.status is Status.FAILED and "is not signed" in (step.error or "")
    assert report.exit_code == 1 and not (tmp_path / "venv").exists()
    res = CliRunner().invoke(cli, ["rebuild", str(bundle), "--allowed-signers", str(tmp_path / "nope")])
    assert res.exit_code == 2 and "--allowed-signers" in res.output and "no such file" in res.output


# --- relative paths -------------------------------------------------------------------------------


def test_a_rebuild_with_relative_bundle_and_dest_paths(
    tmp_path: Path, indexes: tuple[IndexFactory, Server, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    bundle = _bundle(tmp_path, indexes)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    report = rebuild(
        Path("..") / bundle.name, dest="venv", platform=PLATFORM, verify=_NoVerify(), environ=_env(tmp_path)
    )
    assert report.ok, report.summary()
    assert (elsewhere / "venv" / "bin" / "python").exists() and not indexes[2].exists()
    assert report.settings["dest"] == "venv" and report.manifest == "repro.toml"
    shutil.rmtree(elsewhere / "venv")


def test_verify_of_a_signed_bundle_names_the_signer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kernodeck.api import verify
    from tests.fixtures.bundle_project import bundle_project

    keys = tmp_path / "keys"
    keys.mkdir()
    alice = _key(keys, "alice")
    out = tmp_path / "signed"
    write_bundle(out, manifest=bundle_project(tmp_path), environ={}, home=tmp_path, sign=alice)
    monkeypatch.setenv("KERNODECK_ALLOWED_SIGNERS", str(_allowed(keys, alice)))
    (step,) = [s for s in verify(out / "repro.toml", only=["code"]).steps if s.name == "signature"]
    assert step.status is Status.PASSED and "signed by alice@example.com (ED25519 key" in str(step.observed)
    monkeypatch.setenv("KERNODECK_ALLOWED_SIGNERS", str(_allowed(keys, _key(keys, "mallory"))))
    (step,) = [s for s in verify(out / "repro.toml", only=["code"]).steps if s.name == "signature"]
    assert step.status is Status.FAILED and "not in allowed_signers" in (step.error or "")


def test_an_index_a_from_source_names_is_declared(tmp_path: Path) -> None:
    """`[packages] from` files are lock inputs: the indexes they name are the manifest's too."""
    manifest = tmp_path / "repro.toml"
    manifest.write_text(
        f'schema-version = 1\n[reference]\nname = "t"\nid = "1"\n[python]\nversion = "{PY}"\n'
        '[packages]\nfrom = ["requirements.txt"]\n'
        '[[packages.index]]\nname = "good"\nurl = "http://127.0.0.1:9/good/simple"\ndefault = true\n'
        '[[platform]]\nname = "p"\nos = "linux"\narch = "x86_64"\n'
    )
    (tmp_path / "requirements.txt").write_text("--extra-index-url http://127.0.0.1:9/team/simple\nalpha\n")
    lock = tmp_path / "requirements-rebuild-p.txt"
    lock.write_text(
        "--index-url http://127.0.0.1:9/good/simple\n--extra-index-url http://127.0.0.1:9/team/simple\n"
    )
    stamp_lock(manifest, "p")
    assert lock_verdict(manifest, "p").ok
    (tmp_path / "requirements.txt").write_text("alpha\n")
    verdict = lock_verdict(manifest, "p")
    assert verdict.stale == ("requirements.txt changed since the file was written",)
    assert verdict.foreign == (
        "it names http://127.0.0.1:9/team/simple, a package location repro.toml does not declare",
    )


def test_direct_references_and_query_strings_are_no_false_alarm(tmp_path: Path) -> None:
    from kernodeck.lock.freshness import foreign_locations, named_locations

    text = (
        "--index-url=http://127.0.0.1:9/simple?token=x\n--extra-index-url http://127.0.0.1:9/b/?x=1\n"
        "-f http://127.0.0.1:9/links/\nfoo @ http://127.0.0.1:9/foo-1.0-py3-none-any.whl \\\n"
        "    --hash=sha256:" + "0" * 64 + "\n"
    )
    assert named_locations(text) == [
        "http://127.0.0.1:9/simple?token=x",
        "http://127.0.0.1:9/b/?x=1",
        "http://127.0.0.1:9/links/",
        "http://127.0.0.1:9/foo-1.0-py3-none-any.whl",
    ]
    declared = {"http://127.0.0.1:9/simple?token=x", "http://127.0.0.1:9/b/?x=1", "http://127.0.0.1:9/links"}
    assert foreign_locations(text, declared) == [
        "it names http://127.0.0.1:9/foo-1.0-py3-none-any.whl, a package location repro.toml does not declare"
    ]
    manifest = tmp_path / "repro.toml"
    manifest.write_text(
        f'schema-version = 1\n[reference]\nname = "t"\nid = "1"\n[python]\nversion = "{PY}"\n'
        '[packages]\nrequirements = ["foo @ http://127.0.0.1:9/foo-1.0-py3-none-any.whl"]\n'
        '[[packages.index]]\nname = "good"\nurl = "http://127.0.0.1:9/good/simple"\ndefault = true\n'
        '[[platform]]\nname = "p"\nos = "linux"\narch = "x86_64"\n'
    )
    lock = tmp_path / "requirements-rebuild-p.txt"
    lock.write_text(
        "--index-url http://127.0.0.1:9/good/simple\nfoo @ http://127.0.0.1:9/foo-1.0-py3-none-any.whl \\\n"
        "    --hash=sha256:" + "0" * 64 + "\n"
    )
    stamp_lock(manifest, "p")
    assert lock_verdict(manifest, "p").ok


def test_a_no_code_bundle_copied_into_a_checkout_of_its_revision(
    tmp_path: Path, indexes: tuple[IndexFactory, Server, Path]
) -> None:
    """REBUILD.md of a --no-code bundle: check out the revision, copy the folder's files into it.
    The checkout's committed files are tied to the revision by git (verify checks it), so only what
    differs from HEAD, or is not in it, must be listed."""
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    (checkout / "app.py").write_text("print('hi')\n")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", "-c", "commit.gpgsign=false"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "code"]):
        subprocess.run([*git, *args], cwd=checkout, check=True, capture_output=True)
    proj = _project(tmp_path, indexes)
    with open(proj / "repro.toml", "a") as f:
        f.write(f'[code]\nrevision = "{"1" * 40}"\n')
    stamp_lock(proj / "repro.toml", PLATFORM, proj / LOCK)
    write_bundle(tmp_path / "b", manifest=proj, environ={}, home=tmp_path, include_code=False)
    shutil.copytree(tmp_path / "b", checkout, dirs_exist_ok=True)
    sums = checkout / bundlesums.NAME
    assert check_bundle_sums(sums).status is Status.PASSED
    (checkout / "app.py").write_text("print('changed')\n")
    (checkout / "extra.py").write_text("x = 1\n")
    step = check_bundle_sums(sums)
    assert step.status is Status.FAILED
    assert step.observed == [
        "app.py is not listed in BUNDLE.sha256",
        "extra.py is not listed in BUNDLE.sha256",
    ]
