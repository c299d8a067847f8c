"""The bundle's secret scan: findings located by file, line and rule; ML code and prose pass; the
inline marker and the allowlist file accept a finding while its line is unchanged; precision and
recall on the two corpora stay above fixed floors."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernodeck.errors import UsageError
from kernodeck.handover import secretscan
from kernodeck.handover.bundle import BundleError, write_bundle
from kernodeck.handover.scrub import Scrubber
from tests.fixtures.fresh_lock import empty_lock
from tests.fixtures.secret_corpora import kernodeck_scanner, ml_corpus, score

#: Fixed floors; the figures measured when they were set are in docs/secret-scanning.md.
PRECISION_FLOOR = 0.95
RECALL_FLOOR = 0.95


def test_precision_and_recall_on_the_corpora_stay_above_the_floors() -> None:
    result = score(kernodeck_scanner)
    assert result.positives >= 45
    assert result.recall >= RECALL_FLOOR, result
    assert result.precision >= PRECISION_FLOOR, result.false_alarms


def test_the_ml_corpus_covers_many_kinds_of_files() -> None:
    files = ml_corpus()
    assert len(files) >= 25 and len({f["kind"] for f in files}) >= 25
    assert sum(f["text"].count("\n") for f in files) >= 250


@pytest.mark.parametrize(
    "line",
    [
        "num_flops_per_token = 6 * n",
        "- **token:** the unit a tokenizer produces",
        '"gemini_api_key": "test"',
        'sep_token: "[SEP]"',
        "max_token = 131072",
        "OPENAI_API_KEY=your-api-key-here",
        'log({"password": "****"})',
    ],
)
def test_ml_identifiers_prose_and_placeholders_are_not_findings(line: str) -> None:
    assert secretscan.scan_text(Scrubber(), "x.py", line, generated=False) == []


def test_real_credentials_are_findings_with_line_and_rule() -> None:
    text = (
        "import os\n"
        'AWS_KEY_ID = "AKIAQWERTYUIOPASDFGH"\n'
        "# nothing here\n"
        'db_password = "Tr0ub4dor&3"\n'
        "url = 'https://bob:hunter22@pkgs.example/simple'\n"
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----\n"
    )
    found = secretscan.scan_text(Scrubber(), "src/app.py", text, generated=False)
    assert [(f.line, f.rule) for f in found] == [
        (2, "token-format"),
        (4, "credential-assignment"),
        (5, "url-credentials"),
        (6, "private-key"),
    ]
    assert found[0].path == "src/app.py" and found[0].kind == "a token"


def test_a_multi_line_finding_is_keyed_by_all_its_lines() -> None:
    key = "-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n"
    one = secretscan.scan_text(Scrubber(), "k.pem", key.format("MC4CAQAwBQYDK2VwBCIEIJ"), generated=False)
    two = secretscan.scan_text(Scrubber(), "k.pem", key.format("MC4CAQAwBQYDK2VwBCIEIK"), generated=False)
    assert one[0].line == two[0].line == 1 and one[0].line_sha != two[0].line_sha


def _project(tmp_path: Path, code: str) -> Path:
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "app.py").write_text(code)
    (proj / "repro.toml").write_text(
        'schema-version = 1\n[reference]\nname = "s"\nid = "1"\n[python]\nversion = "3.11"\n'
        '[[platform]]\nname = "linux-x86_64"\nos = "linux"\narch = "x86_64"\n'
    )
    empty_lock(proj / "repro.toml", "linux-x86_64")  # a bundle needs a usable lock per platform
    return proj


SECRET_LINE = 'db_password = "Tr0ub4dor&3"'


def test_bundle_refuses_a_secret_naming_file_line_rule_and_how_to_accept(tmp_path: Path) -> None:
    proj = _project(tmp_path, f"import os\n{SECRET_LINE}\n")
    with pytest.raises(BundleError) as err:
        write_bundle(tmp_path / "out", manifest=proj, environ={}, home=tmp_path)
    (problem,) = err.value.context
    sha = secretscan.line_sha([SECRET_LINE])
    assert (
        problem
        == f"app.py:2: a credential assignment [credential-assignment] (code; to accept: app.py {sha})"
    )
    assert secretscan.ALLOW_MARKER in (err.value.hint or "")
    assert not (tmp_path / "out").exists()


def test_an_inline_marker_accepts_the_finding_on_its_line_and_the_bundle_says_so(tmp_path: Path) -> None:
    proj = _project(tmp_path, f"{SECRET_LINE}  # kernodeck: allow-secret (a fixture's password)\n")
    result = write_bundle(tmp_path / "out", manifest=proj, environ={}, home=tmp_path)
    assert "Tr0ub4dor&3" in (tmp_path / "out" / "app.py").read_text()
    assert any("app.py:1 [credential-assignment]" in w for w in result.warnings)


def test_the_allowlist_accepts_a_finding_until_its_line_changes(tmp_path: Path) -> None:
    proj = _project(tmp_path, f"{SECRET_LINE}\n")
    sha = secretscan.line_sha([SECRET_LINE])
    (proj / secretscan.ALLOWLIST_FILE).write_text(
        f"# reviewed: test database only\napp.py {sha}  # fixture\n"
    )
    write_bundle(tmp_path / "out", manifest=proj, environ={}, home=tmp_path)
    (proj / "app.py").write_text('db_password = "Tr0ub4dor&4"\n')
    with pytest.raises(BundleError) as err:
        write_bundle(tmp_path / "out2", manifest=proj, environ={}, home=tmp_path)
    assert err.value.context[0].startswith("app.py:1: a credential assignment")
    assert not (tmp_path / "out2").exists()


def test_an_allowlist_entry_for_another_file_accepts_nothing(tmp_path: Path) -> None:
    proj = _project(tmp_path, f"{SECRET_LINE}\n")
    (proj / secretscan.ALLOWLIST_FILE).write_text(f"other.py {secretscan.line_sha([SECRET_LINE])}\n")
    with pytest.raises(BundleError):
        write_bundle(tmp_path / "out", manifest=proj, environ={}, home=tmp_path)


def test_a_malformed_allowlist_line_is_a_located_usage_error(tmp_path: Path) -> None:
    (tmp_path / secretscan.ALLOWLIST_FILE).write_text("# ok\napp.py\n")
    with pytest.raises(UsageError, match=r"^\.kernodeck-secrets-allow:2: expected `PATH SHA`"):
        secretscan.Allowlist.read(tmp_path)
