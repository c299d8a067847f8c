"""`kernodeck lock --stats` (`kernodeck.lock.stats`): requests and bytes per host as the loopback
index saw them, cache hits, resolution rounds and backtracks, the CPU split; the same figures under
`stats` in `--json` (and only with --stats: the JSON stays repeatable without it)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernodeck.cli import main
from tests.fixtures.index_factory import IndexFactory, Server
from tests.fixtures.lock_project import LINUX, WINDOWS, write_manifest

pytest_plugins = ["tests.fixtures.index_fixtures"]


@pytest.fixture
def project(
    index_factory: IndexFactory, served_index: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Path:
    monkeypatch.setenv("KERNODECK_CACHE_DIR", str(tmp_path / "cache"))
    f = index_factory
    f.add_wheel("app", "1.0", requires=["dep>=1", "other"])
    f.add_wheel("dep", "1.0")
    f.add_wheel("dep", "2.0", requires=["other<2"])  # newest dep conflicts with other 2: a backtrack
    f.add_wheel("other", "1.0")
    f.add_wheel("other", "2.0")
    return write_manifest(
        tmp_path / "proj",
        requirements=["app", "other>=2"],
        default_url=served_index.url(),
        platforms=[LINUX, WINDOWS],
    )


def test_a_cold_lock_counts_what_the_index_served(
    project: Path, served_index: Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "lock.json"
    assert main(["lock", str(project), "-q", "--stats", "--json", str(out)]) == 0
    stats = json.loads(out.read_text())["stats"]
    host = served_index.url().split("/")[2]
    assert list(stats["requests"]) == [host]
    assert stats["requests"][host]["requests"] == len(served_index.requests) > 0
    assert stats["requests"][host]["bytes"] > 0
    assert stats["replayed"] is False
    assert stats["resolution"]["rounds"] > 0 and stats["resolution"]["backtracks"] >= 0
    assert set(stats["cpu_seconds"]) == {"pages", "metadata", "resolution", "process"}
    assert all(v >= 0 for v in stats["cpu_seconds"].values())
    assert set(stats["cache_hits"]) == {"pages_from_cache", "pages_revalidated", "metadata_from_cache"}
    err = capsys.readouterr().err  # --stats speaks even with -q: it was asked for
    assert err.startswith("stats:\n")
    assert f"  {host}: {len(served_index.requests)} request(s), " in err
    assert "resolution: " in err and "CPU (thread time): metadata " in err


def test_a_replayed_lock_says_it_made_no_request(
    project: Path, served_index: Server, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["lock", str(project), "-q"]) == 0
    served_index.reset()
    assert main(["lock", str(project), "-q", "--stats", "--json", "-"]) == 0
    captured = capsys.readouterr()
    stats = json.loads(captured.out)["stats"]
    assert served_index.requests == []
    assert stats["replayed"] is True and stats["requests"] == {}
    assert "replayed from the cache: no requests, no resolution" in captured.err


def test_a_resolution_on_a_warm_cache_counts_cache_hits_and_no_requests(
    project: Path, served_index: Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["lock", str(project), "-q"]) == 0
    served_index.reset()
    out = tmp_path / "lock.json"
    assert (
        main(
            [
                "lock",
                str(project),
                "-q",
                "--offline",
                "--upgrade-package",
                "other<9999",
                "--stats",
                "--json",
                str(out),
            ]
        )
        == 0
    )
    stats = json.loads(out.read_text())["stats"]
    assert served_index.requests == [] and stats["requests"] == {}
    assert stats["replayed"] is False
    hits = stats["cache_hits"]
    assert hits["pages_from_cache"] > 0 and hits["metadata_from_cache"] > 0
    assert "no requests" in capsys.readouterr().err


def test_without_stats_the_json_has_no_stats_key(project: Path, tmp_path: Path) -> None:
    out = tmp_path / "lock.json"
    assert main(["lock", str(project), "-q", "--json", str(out)]) == 0
    assert "stats" not in json.loads(out.read_text())
