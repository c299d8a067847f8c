"""The whole hand-over sequence, end to end, as a new user would run it.

1. lock a small example against a local test index (tiny real wheels over loopback);
2. bundle it, with secrets planted in the environment and in the report;
3. copy ONLY the bundle into a new folder and run `kernodeck rebuild` there as a subprocess with
   a scrubbed environment (`env -i` with only PATH and HOME): every stage passes;
4. tamper with one artifact on the index: the rebuild fails at install, naming the hash error.

And the embeddings example, rebuilt from its bundle with the real interpreter and real packages
(`slow`: it installs torch; wheels are downloaded once per machine and cached).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kernodeck.report import Report, Status
from tests.fixtures.index_factory import IndexFactory, Server
from tests.fixtures.real_wheels import ensure_real_wheels

ROOT = Path(__file__).resolve().parents[1]
KERNODECK = [sys.executable, "-m", "kernodeck"]
SECRET = "kd-planted-Secret-7f3a9c1e55"
URL_SECRET = "pl4nted-url-pass-92ab"

TINY_APP = '''\
"""A tiny application: reads the sample ids, records which package versions it ran with."""
import argparse, json
from pathlib import Path

import alpha
import beta

p = argparse.ArgumentParser()
p.add_argument("--input", type=Path, required=True)
p.add_argument("--out", type=Path, required=True)
a = p.parse_args()
ids = [json.loads(line)["id"] for line in a.input.read_text().splitlines() if line.strip()]
a.out.mkdir(parents=True, exist_ok=True)
(a.out / "ids.json").write_text(json.dumps(ids))
(a.out / "versions.json").write_text(json.dumps({"versions": [alpha.__version__, beta.__version__]}))
'''


def _sha256(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def _tiny_manifest(index_url: str, samples_sha: str) -> str:
    return f"""\
# A tiny example: two small packages from a local index and a sample that uses them.
schema-version = 1

[reference]
name = "tiny-handover"
id = "2026-01-15.1"   # identity of this reference

[python]
version = "{sys.version_info.major}.{sys.version_info.minor}"

[packages]
requirements = ["alpha==1.0"]

[[packages.index]]
name = "local"
url = "{index_url}"
default = true

[[platform]]
name = "linux-x86_64"
os = "linux"
arch = "x86_64"

[[data]]
name = "samples"
path = "data/samples.jsonl"
sha256 = "{samples_sha}"
access = ["KD_TEST_DATA_TOKEN"]

[[check]]
name = "tiny"
run = ["python", "tinyapp.py", "--input", "data/samples.jsonl", "--out", "{{out}}"]
timeout = 120

[[check.output]]
path = "ids.json"
count = 3
ids-from = "data/samples.jsonl#id"

[[check.output]]
path = "versions.json"
key = "versions"
equals = ["1.0", "2.0"]
"""


@pytest.fixture
def tiny_index(tmp_path: Path) -> Iterator[tuple[IndexFactory, Server]]:
    factory = IndexFactory(tmp_path / "index")
    factory.add_wheel("alpha", "1.0", requires=["beta>=2"])
    factory.add_wheel("beta", "2.0")
    with factory.serve() as server:
        yield factory, server


def _clean_env(home: Path) -> dict[str, str]:
    """`env -i PATH=... HOME=...`: nothing else from this session leaks into the rebuild."""
    return {"PATH": os.environ["PATH"], "HOME": str(home)}


def _run(
    argv: list[str], *, cwd: Path, env: dict[str, str], timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def _stage(report: Report, name: str) -> Status:
    step = next(s for s in report.steps if s.layer == "rebuild" and s.name == name)
    return step.status


def test_lock_bundle_rebuild_in_a_clean_folder_then_tamper(
    tmp_path: Path, tiny_index: tuple[IndexFactory, Server]
) -> None:
    from kernodeck.lock.orchestrate import lock_manifest

    factory, server = tiny_index
    proj = tmp_path / "author" / "project"
    (proj / "data").mkdir(parents=True)
    samples = proj / "data" / "samples.jsonl"
    samples.write_text("".join(json.dumps({"id": f"t{i}", "text": f"ticket {i}"}) + "\n" for i in range(3)))
    (proj / "tinyapp.py").write_text(TINY_APP)
    (proj / "repro.toml").write_text(_tiny_manifest(server.url(), _sha256(samples)))

    # 1. lock against the local index
    lock_manifest(proj / "repro.toml")
    reqs = proj / "requirements-rebuild-linux-x86_64.txt"
    assert "--hash=sha256:" in reqs.read_text()

    # an author's report with secrets and host paths in it (as a careless run could produce)
    author_report = Report(
        manifest=str(proj / "repro.toml"), reference_id="2026-01-15.1", platform="linux-x86_64"
    )
    from kernodeck.report import Step

    author_report.add(
        Step.passed("data", "samples", observed=f"{proj}/data/samples.jsonl"),
        Step.warning(
            "packages", "index", f"fetched https://user:{URL_SECRET}@corp.example/simple with {SECRET}"
        ),
    )
    author_report.write_json(proj / "verify-report.json")

    # 2. bundle, with credentials in the environment
    out = tmp_path / "author" / "bundle"
    author_env = {
        **os.environ,
        "KD_TEST_API_TOKEN": SECRET,
        "KD_TEST_DATA_TOKEN": "data-token-value-1234",
    }
    done = _run(
        [*KERNODECK, "bundle", str(proj / "repro.toml"), str(out), "--include-data"],
        cwd=tmp_path,
        env=author_env,
    )
    assert done.returncode == 0, done.stderr + done.stdout
    files = sorted(p for p in out.rglob("*") if p.is_file())
    names = {p.relative_to(out).as_posix() for p in files}
    assert {
        "repro.toml",
        "requirements-rebuild-linux-x86_64.txt",
        "REBUILD.md",
        "BUNDLE.sha256",
        "references.json",
        "observed/verify-report.json",
        "observed/verify-report.md",
        "observed/verify-report.html",
        "data/samples.jsonl",
        "tinyapp.py",
    } <= names
    for p in files:
        data = p.read_bytes()
        for leak in (SECRET, URL_SECRET, "data-token-value-1234", str(tmp_path), str(Path.home())):
            assert leak.encode() not in data, f"{leak!r} in {p.relative_to(out)}"
    sums = subprocess.run(
        ["sha256sum", "-c", "BUNDLE.sha256"], cwd=out, capture_output=True, text=True, check=False
    )
    assert sums.returncode == 0, sums.stdout + sums.stderr
    rebuild_md = (out / "REBUILD.md").read_text()
    order = [
        rebuild_md.index(h)
        for h in ("## 1. Rebuild", "## 2. Diagnose", "## 3. Run the sample", "## 4. Read the outputs back")
    ]
    assert order == sorted(order)
    assert "`KD_TEST_DATA_TOKEN`" in rebuild_md

    # 3. only the bundle, in a new folder, with a scrubbed environment
    clean = tmp_path / "elsewhere" / "handover"
    shutil.copytree(out, clean)
    home = tmp_path / "home1"
    home.mkdir()
    done = _run([*KERNODECK, "rebuild", ".", "--json", "rebuild.json"], cwd=clean, env=_clean_env(home))
    assert done.returncode == 0, done.stdout + done.stderr
    report = Report.from_json((clean / "rebuild.json").read_text())
    for stage in ("bundle", "lock", "interpreter", "venv", "pip-version", "install", "contract", "inventory"):
        assert _stage(report, stage) is Status.PASSED, stage
    assert not [s for s in report.steps if s.status is Status.FAILED], report.summary()
    inventory = (clean / "installed-after.txt").read_text()
    assert "not a lock" in inventory.lower() and "alpha==1.0" in inventory and "beta==2.0" in inventory
    if any(s.layer != "rebuild" for s in report.steps):  # verify ran: the sample passed too
        app = [s for s in report.steps if s.layer == "application"]
        assert app and all(s.status is Status.PASSED for s in app), [(s.name, s.error) for s in app]
    assert (clean / ".venv-rebuild" / "bin" / "python").exists()

    # 4. one artifact changes on the index: the rebuild stops at install and names the hash error
    factory.tamper("alpha-1.0-py3-none-any.whl")
    home2 = tmp_path / "home2"
    home2.mkdir()
    done = _run(
        [*KERNODECK, "rebuild", ".", "--force", "--json", "tampered.json"], cwd=clean, env=_clean_env(home2)
    )
    assert done.returncode == 1, done.stdout + done.stderr
    bad = Report.from_json((clean / "tampered.json").read_text())
    install = next(s for s in bad.steps if s.name == "install")
    assert install.status is Status.FAILED
    assert "DO NOT MATCH THE HASHES" in (install.error or "") and "alpha" in (install.error or "")
    for stage in ("contract", "inventory"):
        assert _stage(bad, stage) is Status.SKIPPED
    assert "install" in done.stdout and "DO NOT MATCH THE HASHES" in " ".join(done.stdout.split())


# --- the embeddings example, for real -------------------------------------------------------------

EMBEDDINGS = ROOT / "manifests" / "embeddings"


@pytest.fixture(scope="session")
def real_wheels() -> Path:
    """The example's real wheels; `make test` fetches them while it installs (see the Makefile)."""
    try:
        return ensure_real_wheels()
    except RuntimeError as e:
        pytest.fail(str(e))


def _publish_real_wheels(factory: IndexFactory, wheels: Path) -> None:
    """Publish downloaded wheels on the test index as they are (with their real METADATA for PEP 658);
    the torch family goes to the PyTorch-like `cpu` index, like the real one."""
    from packaging.utils import canonicalize_name, parse_wheel_filename

    from kernodeck.backends import TORCH_FAMILY

    for whl in sorted(wheels.glob("*.whl")):
        name = parse_wheel_filename(whl.name)[0]
        factory.add_file(whl, index="cpu" if canonicalize_name(name) in TORCH_FAMILY else "default")


@pytest.mark.slow
def test_embeddings_example_rebuilt_from_its_bundle_passes_its_checks(
    tmp_path: Path, real_wheels: Path
) -> None:
    import tomlkit

    from kernodeck.lock.orchestrate import lock_manifest

    factory = IndexFactory(tmp_path / "index")
    _publish_real_wheels(factory, real_wheels)
    with factory.serve() as server:
        proj = tmp_path / "author" / "embeddings"
        shutil.copytree(
            EMBEDDINGS,
            proj,
            ignore=shutil.ignore_patterns("__pycache__", ".venv*", "requirements-rebuild-*", "out"),
        )
        doc = tomlkit.parse((proj / "repro.toml").read_text())
        packages = doc["packages"]
        packages["pytorch-index"] = server.pytorch_base
        index = tomlkit.aot()
        local = tomlkit.table()
        local.update({"name": "local", "url": server.url(), "default": True})
        index.append(local)
        packages["index"] = index
        (proj / "repro.toml").write_text(tomlkit.dumps(doc))
        # the author's checkout: commit, then record the reference (revision, fingerprints)
        git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", "-c", "commit.gpgsign=false"]
        for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "example"]):
            subprocess.run([*git, *args], cwd=proj, check=True, capture_output=True)
        done = _run([*KERNODECK, "capture", "--no-system"], cwd=proj, env=dict(os.environ))
        assert done.returncode == 0 and "code.revision" in done.stdout, done.stdout + done.stderr

        lock_manifest(proj / "repro.toml", ["linux-x86_64-cpu"])
        out = tmp_path / "author" / "bundle"
        done = _run(
            [
                *KERNODECK,
                *("bundle", str(proj / "repro.toml"), str(out), "--include-data"),
                *("--platform", "linux-x86_64-cpu"),  # the only platform locked here
            ],
            cwd=tmp_path,
            env=dict(os.environ),
        )
        assert done.returncode == 0, done.stderr

        clean = tmp_path / "elsewhere" / "embeddings"
        shutil.copytree(out, clean)
        home = tmp_path / "home"
        home.mkdir()
        done = _run(
            [*KERNODECK, "rebuild", ".", "--platform", "linux-x86_64-cpu", "--json", "rebuild.json"],
            cwd=clean,
            env=_clean_env(home),
            timeout=1500,
        )
        report = Report.from_json((clean / "rebuild.json").read_text())
        for stage in (
            "bundle",
            "lock",
            "interpreter",
            "venv",
            "pip-version",
            "install",
            "contract",
            "inventory",
        ):
            assert _stage(report, stage) is Status.PASSED, (stage, done.stdout[-3000:])
        print(
            "\n".join(
                f"{s.layer}/{s.name}: {s.status.value} {s.seconds} {s.error} {s.observed}"
                for s in report.steps
            )
        )
        code = [s for s in report.steps if s.layer == "code"]
        assert code and code[0].name == "revision" and code[0].status is Status.PASSED, code
        app = [s for s in report.steps if s.layer == "application"]
        assert app, "verify did not run the application checks:\n" + done.stdout[-3000:]
        assert all(s.status is Status.PASSED for s in app), [(s.name, s.status, s.error) for s in app]
        assert any("cosine" in s.name for s in app) and any("ids" in s.name for s in app)
        assert report.ok, report.summary()
        assert done.returncode == 0
