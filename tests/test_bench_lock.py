"""benchmarks/lock.py measures every tool in interleaved rounds (the order rotated each round), and
with --baseline-src runs another Kernodeck source tree in the same rounds: a real run against a
loopback index, each tool once per round, every lock succeeding with the same pins."""

from __future__ import annotations

from pathlib import Path

import pytest
from benchmarks import lock as bench

from tests.fixtures.index_factory import IndexFactory, Server

pytest_plugins = ["tests.fixtures.index_fixtures"]  # fixtures: index_factory, served_index

ROOT = Path(__file__).resolve().parents[1]
OLD = "2024-01-01T00:00:00Z"  # before the benchmark's exclude-newer


def test_rounds_rotate_so_no_tool_always_runs_first() -> None:
    calls: list[tuple[str, int]] = []

    def suite(name: str) -> bench.Suite:
        return [bench.Row(name, "", "cold")], lambda i: calls.append((name, i))

    rows = bench.interleaved([suite("a"), suite("b"), suite("c")], runs=4)
    assert [r.tool for r in rows] == ["a", "b", "c"]
    assert calls == [
        *[("a", 0), ("b", 0), ("c", 0)],
        *[("b", 1), ("c", 1), ("a", 1)],
        *[("c", 2), ("a", 2), ("b", 2)],
        *[("a", 3), ("b", 3), ("c", 3)],
    ]


def test_a_run_with_a_baseline_source_tree_on_a_loopback_index(
    index_factory: IndexFactory, served_index: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    index_factory.add_wheel("app", "1.0", requires=["dep>=1"], upload_time=OLD)
    index_factory.add_wheel("dep", "1.0", upload_time=OLD)
    index_factory.add_wheel("dep", "2.0", upload_time="2026-01-01T00:00:00Z")  # after exclude-newer
    monkeypatch.setattr(bench, "RESULTS", tmp_path / "results")
    argv = ["--runs", "2", "--skip-pip-compile", "--index-url", served_index.url(), "--requirements", "app"]
    assert bench.main([*argv, "--baseline-src", str(ROOT / "src")]) == 0

    text = (tmp_path / "results" / "lock.md").read_text()
    assert "Requirements: app;" in text and "2 interleaved round(s)" in text
    rows = [
        line.strip("| ").split(" | ") for line in text.splitlines() if line.startswith("| kernodeck lock")
    ]
    tools = {(r[0], r[2]) for r in rows}
    for tool in ("kernodeck lock", "kernodeck lock (same-versions=no)", "kernodeck lock [baseline]"):
        assert {(tool, c) for c in ("cold", "warm", "warm, resolves")} <= tools
    # every run of every row succeeded, with both pins on each of the 4 platforms
    assert all(r[5:8] == ["8", "8", "2/2 runs"] for r in rows), rows
    uv = [line for line in text.splitlines() if line.startswith("| uv pip compile")]
    assert len(uv) == 5 and all("2/2 runs" in line for line in uv), uv
    for cache in ("cold", "warm", "warm, resolves"):
        assert f"| kernodeck / its baseline source (after/before), {cache} |" in text


def test_pin_age_counts_pins_uploaded_more_than_a_year_before_uvs(
    index_factory: IndexFactory, served_index: Server, tmp_path: Path
) -> None:
    """The 100-dependency stack's pin-age column: upload times from the index's JSON pages (PEP
    700), a pin counted only when its release is more than a year older than uv's pin."""
    index_factory.add_wheel("old-fs", "0.4.2", upload_time="2020-03-01T00:00:00Z")
    index_factory.add_wheel("old-fs", "2026.7.0", upload_time="2026-07-28T00:00:00Z")
    index_factory.add_wheel("aws", "1.43.110", upload_time="2026-10-20T00:00:00Z")
    index_factory.add_wheel("aws", "1.43.117", upload_time="2026-10-31T00:00:00Z")
    ours = tmp_path / "requirements-rebuild-linux.txt"
    ours.write_text("old_fs==0.4.2 \\\n    --hash=sha256:00\naws==1.43.117 \\\nsame==1.0\nonly-ours==1\n")
    uv = tmp_path / "uv.txt"
    uv.write_text("old-fs==2026.7.0 \\\naws==1.43.110\nsame==1.0\n")
    times = bench.UploadTimes(served_index.url())
    assert bench.pins_of(ours) == {"old-fs": "0.4.2", "aws": "1.43.117", "same": "1.0", "only-ours": "1"}
    # aws is newer than uv's, same is equal, only-ours has no uv pin: only old-fs counts
    assert bench.older_pins(bench.pins_of(ours), bench.pins_of(uv), times) == ["old-fs 0.4.2 (uv: 2026.7.0)"]
    assert times.of("old-fs", "0.4.2") == 1583020800.0
    assert times.of("missing", "1.0") is None  # a page that is not there: no time, never counted


def test_the_100_dependency_section_on_a_loopback_index(
    index_factory: IndexFactory, served_index: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--only-stack100 with the stack replaced by one project: Kernodeck, uv --universal and uv once
    per platform, and the pin-age column (zero: every tool pins the same versions)."""
    index_factory.add_wheel("app", "1.0", requires=["dep>=1"], upload_time=OLD)
    index_factory.add_wheel("dep", "1.0", upload_time=OLD)
    monkeypatch.setattr(bench, "RESULTS", tmp_path / "results")
    monkeypatch.setattr(bench, "STACK_100", ["app"])
    assert bench.main(["--runs", "1", "--only-stack100", "--index-url", served_index.url()]) == 0

    text = (tmp_path / "results" / "lock.md").read_text()
    assert "load average (1 min) " in text and " before, " in text and "Requirements:" not in text
    rows = {line.split(" | ")[0].strip("| "): line for line in text.splitlines() if line.startswith("| ")}
    assert rows["kernodeck lock"].endswith("| 8 | 1/1 | 0 / 0 / 0 / 0 |"), rows
    assert "| 8 | 1/1 |" in rows["uv x4"] and "| 2 | 1/1 |" in rows["uv --universal"], rows
    assert "Pins more than a year older" not in text
