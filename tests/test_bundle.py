"""bundle: the hand-over folder, and the scrubbing that keeps secrets and host paths out of it."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from kernodeck.cli import cli
from kernodeck.handover import selfwheel
from kernodeck.handover.bundle import BundleError, report_markdown, verify_bundle, write_bundle
from kernodeck.handover.scrub import Scrubber, is_secret_name
from kernodeck.report import Report, Step
from tests.fixtures.bundle_project import bundle_project
from tests.fixtures.fresh_lock import stamp_lock

SECRET = "planted-S3cret-value-0451"


# --- scrubbing ------------------------------------------------------------------------------------


def test_secret_names() -> None:
    for name in ("HF_TOKEN", "AWS_SECRET_ACCESS_KEY", "DB_PASSWORD", "CORP_INDEX_TOKEN", "API_KEY", "TOKEN"):
        assert is_secret_name(name), name
    for name in ("PATH", "HOME", "PYTHONHASHSEED", "SSH_AUTH_SOCK", "AWS_PROFILE", "TOKENIZERS_PARALLELISM"):
        assert not is_secret_name(name), name


def test_scrubber_replaces_values_urls_assignments_and_paths(tmp_path: Path) -> None:
    proj = tmp_path / "proj"
    proj.mkdir()
    s = Scrubber.for_project(
        proj,
        environ={"HF_TOKEN": SECRET, "AWS_PROFILE": "prod-profile-x", "PATH": "/usr/bin"},
        credential_names=["AWS_PROFILE"],
        home=tmp_path,
    )
    text = (
        f"token {SECRET}; profile prod-profile-x; https://bob:hunter22@pkgs.example/simple; "
        'https://${U}:${T}@pkgs.example/simple; MY_API_KEY=abc123; "DB_PASSWORD": "pw"; '
        f"Authorization: Bearer xyz.abc; {proj}/data/x.jsonl; {tmp_path}/other; {proj}. "
        "tokenizer_config.json ids-key = 'id' HF_TOKEN=<your token>"
    )
    clean = s.text(text)
    for leak in (SECRET, "prod-profile-x", "hunter22", "abc123", '"pw"', "xyz.abc", str(tmp_path)):
        assert leak not in clean, leak
    assert "<redacted:HF_TOKEN>" in clean and "<redacted:AWS_PROFILE>" in clean
    assert "https://${U}:${T}@pkgs.example/simple" in clean  # placeholders are names, not secrets
    assert "<project>/data/x.jsonl" in clean and "<home>/other" in clean and "<project>." in clean
    assert "tokenizer_config.json" in clean and "ids-key = 'id'" in clean and "HF_TOKEN=<your token>" in clean
    assert s.leaks(clean) == []
    assert "the value of HF_TOKEN" in s.leaks(text)
    assert s.data({"a": [f"{proj}/x", {SECRET: 1}]}) == {"a": ["<project>/x", {"<redacted:HF_TOKEN>": 1}]}


def _all_bytes(out: Path) -> dict[str, bytes]:
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


def test_bundle_layout_scrubbing_and_checksums(tmp_path: Path) -> None:
    proj = bundle_project(tmp_path)
    out = tmp_path / "out" / "bundle"
    env = {"PATH": "/usr/bin", "CORP_TOKEN": SECRET, "AWS_PROFILE": "author-profile"}
    result = write_bundle(out, manifest=proj / "repro.toml", environ=env, home=tmp_path)
    files = _all_bytes(out)
    assert set(files) == {
        "BUNDLE.sha256",
        "REBUILD.md",
        "references.json",
        "repro.toml",
        "requirements-rebuild-linux-x86_64.txt",
        "requirements-rebuild-macos-arm64.txt",
        "observed/installed-after.txt",
        "observed/verify-report.json",
        "observed/verify-report.md",
        "observed/verify-report.html",
        "configs/run.yaml",
        "reference/out.json",
        "app/main.py",
        f"_kernodeck/{selfwheel.wheel_filename()}",
        "_kernodeck/requirements.txt",
    }
    for name, data in files.items():
        for leak in (SECRET.encode(), str(tmp_path).encode(), b"author-profile"):
            assert leak not in data, (name, leak)
    assert b"${CORP_TOKEN}" in files["requirements-rebuild-linux-x86_64.txt"]  # placeholders survive
    assert b"<project>/wheels/local-1.0" in files["observed/installed-after.txt"]
    report = Report.from_json(files["observed/verify-report.json"].decode())
    assert report.steps[0].observed == "<project>/data/samples.jsonl"
    assert result.report_included and "observed/verify-report.json" in result.scrubbed
    code, *refs = json.loads(files["references.json"])
    assert code == {"kind": "code", "revision": None, "dirty": False, "included": True, "files": 1}
    assert refs == [
        {
            "access": ["AWS_PROFILE"],
            "included": False,
            "kind": "data",
            "name": "samples",
            "path": "data/samples.jsonl",
            "sha256": hashlib.sha256(b'{"id": 1}\n').hexdigest(),
            "size": None,
            "source": "s3://bucket/samples.jsonl",
        }
    ]
    md = files["REBUILD.md"].decode()
    for name in ("`CORP_USER`", "`CORP_TOKEN`", "`AWS_PROFILE`"):
        assert name in md
    assert "s3://bucket/samples.jsonl" in md
    assert "kernodeck rebuild . --dest .venv-rebuild --platform linux-x86_64" in md
    assert "kernodeck rebuild . --dest .venv-rebuild --json" in md  # no --platform: rebuild picks
    assert "pip install kernodeck" not in md
    done = subprocess.run(
        ["sha256sum", "-c", "BUNDLE.sha256"], cwd=out, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout
    assert verify_bundle(out) == []
    (out / "app" / "main.py").write_text("print('changed')\n")
    assert verify_bundle(out) == ["app/main.py differs from its sha256 in BUNDLE.sha256"]


def test_include_data_and_no_code(tmp_path: Path) -> None:
    proj = bundle_project(tmp_path)
    out = tmp_path / "b"
    write_bundle(out, manifest=proj, include_data=True, include_code=False, environ={}, home=tmp_path)
    files = _all_bytes(out)
    assert "data/samples.jsonl" in files and "app/main.py" not in files
    refs = json.loads(files["references.json"])
    assert refs[0]["kind"] == "code" and refs[0]["included"] is False
    assert refs[1]["kind"] == "data" and refs[1]["included"] is True
    assert "revision `" + "1" * 40 + "`" in files["REBUILD.md"].decode()


def test_same_inputs_same_bytes(tmp_path: Path) -> None:
    proj = bundle_project(tmp_path)
    write_bundle(tmp_path / "b1", manifest=proj, environ={}, home=tmp_path)
    write_bundle(tmp_path / "b2", manifest=proj, environ={}, home=tmp_path)
    assert _all_bytes(tmp_path / "b1") == _all_bytes(tmp_path / "b2")


def test_a_secret_in_a_fingerprinted_file_stops_the_bundle(tmp_path: Path) -> None:
    proj = bundle_project(tmp_path, config_text=f"batch: 16\napi: {SECRET}\n")
    out = tmp_path / "b"
    with pytest.raises(BundleError) as e:
        write_bundle(out, manifest=proj, environ={"SERVICE_TOKEN": SECRET}, home=tmp_path)
    assert "configs/run.yaml" in e.value.render() and "SERVICE_TOKEN" in e.value.render()
    assert SECRET not in e.value.render()
    assert not out.exists()
    assert not list(tmp_path.glob(".b.*"))


def test_existing_folders(tmp_path: Path) -> None:
    proj = bundle_project(tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    (other / "keep.txt").write_text("mine")
    res = CliRunner().invoke(cli, ["bundle", str(proj), str(other)])
    assert res.exit_code == 2 and "not a bundle" in res.output
    assert (other / "keep.txt").read_text() == "mine"
    out = tmp_path / "bundle"
    write_bundle(out, manifest=proj, environ={}, home=tmp_path)
    (out / "stale.txt").write_text("old")
    write_bundle(out, manifest=proj, environ={}, home=tmp_path)  # an existing bundle is replaced
    assert not (out / "stale.txt").exists()
    res = CliRunner().invoke(cli, ["bundle", str(proj), str(proj.parent)])
    assert res.exit_code == 2


def test_cli_bundle_with_explicit_report(tmp_path: Path) -> None:
    proj = bundle_project(tmp_path)
    (proj / "verify-report.json").unlink()
    rep = Report(reference_id="x")
    rep.add(Step.failed("device", "gpu", "no GPU visible"))
    rep.write_json(tmp_path / "last.json")
    res = CliRunner().invoke(
        cli, ["bundle", str(proj), str(tmp_path / "b"), "--report", str(tmp_path / "last.json")]
    )
    assert res.exit_code == 0, res.output
    assert "has failures" in res.output
    assert "no GPU visible" in (tmp_path / "b" / "observed" / "verify-report.md").read_text()


def test_report_markdown() -> None:
    r = Report(reference_id="2026-01-01.1", platform="p")
    r.add(
        Step.passed("data", "a|b", observed={"x": 1}),
        Step.failed("device", "gpu", "none", hint="install a driver"),
    )
    md = report_markdown(r)
    assert "| data | a\\|b | passed |" in md and "hint: install a driver" in md and "FAILED" in md


def test_bundle_of_the_embeddings_example(tmp_path: Path) -> None:
    src = Path(__file__).resolve().parents[1] / "manifests" / "embeddings"
    proj = tmp_path / "embeddings"
    shutil.copytree(src, proj, ignore=shutil.ignore_patterns("__pycache__", "out"))
    for platform in ("linux-x86_64-cu126", "linux-x86_64-cpu", "macos-arm64"):  # locked (empty) for each
        (proj / f"requirements-rebuild-{platform}.txt").write_text("--only-binary :all:\n")
        stamp_lock(proj / "repro.toml", platform)
    write_bundle(tmp_path / "b", manifest=proj, include_data=True, environ={}, home=tmp_path)
    files = _all_bytes(tmp_path / "b")
    assert {"app/embed.py", "data/samples.jsonl", "reference/embeddings.npy", "repro.toml"} <= set(files)
    md = files["REBUILD.md"].decode()
    assert "np.load('out/embeddings/embeddings.npy')" in md and "cosine-min 0.9999" in md


def test_the_bundled_kernodeck_installs_from_the_bundle_alone(tmp_path: Path) -> None:
    """The receiver installs Kernodeck from the bundle's wheel (no index), and its CLI runs from the
    new venv; the dependency pins name every runtime dependency at the version that wrote it."""
    import sysconfig
    import zipfile

    proj = bundle_project(tmp_path)
    out = tmp_path / "out"
    write_bundle(out, manifest=proj, environ={}, home=tmp_path)
    wheel = out / "_kernodeck" / selfwheel.wheel_filename()
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        assert "kernodeck/cli.py" in names and "kernodeck/handover/sums.py" in names
        assert not any("__pycache__" in n for n in names)
    pins = (out / "_kernodeck" / "requirements.txt").read_text().splitlines()
    assert any(p.startswith("click==") for p in pins) and any(p.startswith("pydantic==") for p in pins)
    venv = tmp_path / "tool"
    subprocess.run(["python3", "-m", "venv", str(venv)], check=True, timeout=120)
    py = venv / "bin" / "python"
    done = subprocess.run(
        [str(py), "-m", "pip", "install", "--isolated", "--no-index", "--no-deps", str(wheel)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PIP_CONFIG_FILE": os.devnull},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    # the dependencies come from this interpreter's site-packages (a .pth), Kernodeck from the wheel
    site = subprocess.run(
        [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.strip()
    Path(site, "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    where = subprocess.run(
        [str(py), "-c", "import kernodeck; print(kernodeck.__file__)"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
    ).stdout.strip()
    assert where.startswith(str(venv)), where
    help_text = subprocess.run(
        [str(venv / "bin" / "kernodeck"), "rebuild", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
    )
    assert help_text.returncode == 0 and "--platform" in help_text.stdout, help_text.stderr
