"""What one lock did (`kernodeck lock --stats`, and `stats` in `lock --json` with it): requests and
bytes per host, cache hits, resolution rounds and backtracks, and where the CPU went.

The figures are gathered where the work happens and only read here: requests and bytes by the
index client's transport (`IndexHttp.traffic`, per host, every answer received counted, retries
included), cache hits by its `ClientStats`, rounds, backtracks and restarts by the resolver
(`kernodeck.resolve.rounds.Counts`, summed over every resolution of the lock by the session),
and CPU as thread CPU time (`time.thread_time`) measured in the threads doing the work: pages
(fetching and decoding project pages on the I/O threads), metadata (reading core metadata on the
I/O threads) and resolution (the resolving threads, which also answer pages and metadata from
the memory or disk cache themselves). `process` is the CPU time of the whole process over the
lock (`time.process_time`), so what the three leave out (start-up, followers' walks, rendering,
the cache) shows as the difference. Measurements are shown, never compared as facts.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kernodeck.resolve.factory import Session


@dataclass
class LockStats:
    """One lock's figures; `replayed` when the lock was replayed from the cache (no resolution)."""

    started_cpu: float = field(default_factory=time.process_time)
    process_cpu: float = 0.0
    replayed: bool = False
    traffic: dict[str, tuple[int, int]] = field(default_factory=dict)  # host -> (requests, bytes)
    cache: dict[str, int] = field(default_factory=dict)
    rounds: int = 0
    backtracks: int = 0
    restarts: int = 0
    cpu: dict[str, float] = field(default_factory=dict)  # pages, metadata, resolution

    def take(self, session: Session) -> None:
        """Read the session's figures (once it is closed: its threads have made their last request)."""
        client = session.client
        self.traffic = client.traffic_by_host()
        c = client.stats
        self.cache = {
            "pages from cache": c.pages_from_cache,
            "pages revalidated": c.pages_revalidated,
            "metadata from cache": c.metadata_from_cache,
        }
        counts = session.counts
        self.rounds, self.backtracks, self.restarts = counts.rounds, counts.backtracks, counts.restarts
        self.cpu = dict(session.cpu)

    def done(self) -> LockStats:
        """Stop the process CPU clock; returns self."""
        self.process_cpu = time.process_time() - self.started_cpu
        return self

    def to_json(self) -> dict[str, Any]:
        return {
            "replayed": self.replayed,
            "requests": {h: {"requests": n, "bytes": b} for h, (n, b) in sorted(self.traffic.items())},
            "cache_hits": {k.replace(" ", "_"): v for k, v in self.cache.items()},
            "resolution": {"rounds": self.rounds, "backtracks": self.backtracks, "restarts": self.restarts},
            "cpu_seconds": {
                **{k: round(v, 3) for k, v in sorted(self.cpu.items())},
                "process": round(self.process_cpu, 3),
            },
        }

    def lines(self) -> list[str]:
        """The figures for a person, one fact a line."""
        if self.replayed:
            return [
                "replayed from the cache: no requests, no resolution",
                f"CPU: {self.process_cpu:.2f} s in the process",
            ]
        out = []
        for host, (n, b) in sorted(self.traffic.items()):
            out.append(f"{host}: {n} request(s), {_size(b)}")
        if not self.traffic:
            out.append("no requests")
        out.append("cache hits: " + ", ".join(f"{k} {v}" for k, v in self.cache.items()))
        out.append(
            f"resolution: {self.rounds} round(s), {self.backtracks} backtrack(s), "
            f"{self.restarts} run again with conflicting direct requirements decided later"
        )
        split = ", ".join(f"{k} {v:.2f} s" for k, v in sorted(self.cpu.items()))
        out.append(f"CPU (thread time): {split}; {self.process_cpu:.2f} s in the process")
        return out


def _size(n: int) -> str:
    if n >= 1 << 20:
        return f"{n / (1 << 20):.1f} MiB"
    if n >= 1 << 10:
        return f"{n / (1 << 10):.1f} KiB"
    return f"{n} bytes"
