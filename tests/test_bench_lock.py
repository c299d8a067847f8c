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
