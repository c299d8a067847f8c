"""One environment probe per host and interpreter in a fleet: ranks on the same host with the same
interpreter and the same request share the probe of the first one to claim it.

The first rank to claim `probe/<key>` (an atomic counter on the job's store) runs the probe and
publishes its facts; the others wait for them and replace the per-process parts (the environment
variables the probe read) with their own. The torch probe (devices, control computation) stays per
rank: each rank has its own device. A rank that waits in vain runs its own probe, so sharing never
makes a verify fail that would have passed.
"""

from __future__ import annotations

import hashlib
import json
import time
from typing import Any

from kernodeck.fleet.exchange import Channel
from kernodeck.fleet.facts import Identity
from kernodeck.probe import launch
from kernodeck.probe.facts import Facts, TorchFacts
from kernodeck.probe.runner import ProbeFailed, ProbeRequest, RealProbe


class SharedProbe:
    """A RealProbe whose environment probe is shared by the ranks of one host and interpreter."""

    def __init__(self, inner: RealProbe, ch: Channel, ident: Identity, wait: float) -> None:
        self.inner = inner
        self.wait = wait  # how long to wait for the claimer's facts before probing here
        self.ch = ch
        self.ident = ident
        self.shared_from: bool | None = None  # True: this rank ran it for others; False: reused

    @property
    def python(self) -> str:
        return self.inner.python

    def _key(self, request: ProbeRequest) -> str:
        text = json.dumps([self.ident.host, self.inner.python, repr(request)])
        return "probe/" + hashlib.sha256(text.encode()).hexdigest()[:24]

    def collect(self, request: ProbeRequest) -> Facts:
        key = self._key(request)
        if int(self.ch.store.add(key + "/claim", 1)) == 1:
            self.ch.bump("n:probe-runs")
            try:
                facts = self.inner.collect(request)
            except ProbeFailed as e:
                self.ch.put(key, {"error": e.message})
                raise
            self.ch.put(key, {"facts": facts.model_dump(mode="json")})
            self.shared_from = True
            return facts
        if not self.ch.wait_key(key, time.monotonic() + self.wait):
            return self.inner.collect(request)  # the claimer is gone: probe here
        (got,) = self.ch.get_many([key])
        if "facts" not in got:
            return self.inner.collect(request)
        facts = Facts.model_validate(got["facts"])
        env = launch.probe_env()
        facts.env = {k: env.get(k) for k in facts.env}
        facts.env_present = {k: k in env for k in facts.env_present}
        tf = facts.torch_files
        self.inner._torch_absent = not tf.installed and tf.importable is False  # as RealProbe.collect
        self.shared_from = False
        return facts

    def collect_torch(self, request: ProbeRequest) -> TorchFacts:
        return self.inner.collect_torch(request)


def probe_runs(ch: Channel) -> int:
    return ch.count("n:probe-runs")


def make(
    python: str | None,
    rehash: bool,
    ch: Channel,
    ident: Identity,
    wait: float,
    *,
    isolate_torch: bool = False,
) -> Any:
    from kernodeck.fingerprint import FingerprintCache

    cache = FingerprintCache.open(None, rehash=rehash)
    return SharedProbe(
        RealProbe(python, cache=cache, rehash=rehash, isolate_torch=isolate_torch), ch, ident, wait
    )
