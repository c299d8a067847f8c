"""The declared models (kernodeck.manifest.model): the checker that validates a manifest without
pydantic accepts only what the pydantic models built from the same declarations accept, with the
same values and the same dumps; everything else goes to pydantic, whose messages are unchanged."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from datetime import date, datetime, time, timedelta, timezone
from typing import Any

import pytest
import tomlkit
from pydantic import ValidationError

from kernodeck.errors import ManifestError
from kernodeck.manifest.load import loads_manifest
from kernodeck.manifest.model import _check_model, _Fallback, pydantic_model
from kernodeck.manifest.schema import Manifest, Packages, Platform

SHA = "a" * 64
REV = "b" * 40

#: Every table and (nearly) every key of the schema, each with a valid value.
RICH: dict[str, Any] = {
    "schema-version": 1,
    "reference": {"name": "emb", "id": "2026-12-06.1", "description": "embeddings"},
    "code": {
        "revision": REV,
        "allow-dirty": True,
        "entry-point": "python -m app",
        "config": [{"path": "conf/a.yaml", "sha256": SHA, "external": False}],
    },
    "python": {"version": "3.11", "implementation": "cpython"},
    "packages": {
        "from": ["pyproject.toml"],
        "extras": ["gpu"],
        "groups": ["dev"],
        "requirements": ["torch==2.13.0", "numpy>=1.26; python_version >= '3.10'"],
        "constraints": ["urllib3<3"],
        "allow-sdist": ["oldpkg"],
        "build-constraints": ["setuptools<81"],
        "prereleases": False,
        "exclude-newer": datetime(2025, 6, 1, tzinfo=timezone.utc),
        "pytorch-index": "https://download.example/whl",
        "sources": {"torch": "torch-cpu"},
        "index": [
            {"name": "default", "url": "https://mirror.example/simple", "default": True},
            {
                "name": "torch-cpu",
                "url": "https://download.example/whl/cpu",
                "format": "simple",
                "packages": ["torch"],
                "platforms": ["linux"],
            },
        ],
        "same-versions": "require",
    },
    "platform": [
        {
            "name": "linux",
            "os": "linux",
            "arch": "x86_64",
            "glibc": "2.28",
            "python": "3.11.7",
            "backend": "cpu",
            "markers": {"platform_release": "6.8.0"},
            "indexes": [],
        },
        {"name": "mac", "os": "macos", "arch": "arm64", "macos": "14.0", "backend": "mps"},
    ],
    "system": {
        "require-accelerator": False,
        "nvidia-driver": ">=560",
        "cuda": "12.6",
        "gpu": {"count": ">=1", "name": "H200", "compute-capability": ">=9.0", "memory-gib": ">=80"},
    },
    "data": [{"name": "set", "path": "data/set.bin", "sha256": SHA, "size": 10, "access": ["HF_TOKEN"]}],
    "weights": [
        {"name": "w", "path": "w.safetensors", "sha256": "", "size": 3},
        {"name": "hub", "hub": "org/model", "revision": REV, "files": {"model.bin": SHA}},
        {"name": "pkgw", "package": "gt-model", "path": "model/w.bin", "sha256": SHA},
    ],
    "determinism": {
        "seed": 3,
        "deterministic-algorithms": True,
        "cudnn-benchmark": False,
        "float32-matmul-precision": "high",
        "env": {"CUBLAS_WORKSPACE_CONFIG": ":4096:8"},
    },
    "check": [
        {
            "name": "emb",
            "run": ["python", "app.py", "{out}"],
            "timeout": 60,
            "env": {"HF_HUB_OFFLINE": "1"},
            "output": [
                {
                    "path": "emb.npy",
                    "shape": [-1, 384],
                    "dtype": "float32",
                    "finite": True,
                    "min": -1,
                    "max": 1.5,
                    "reference": "ref/emb.npy",
                    "atol": 1e-6,
                    "rtol": 0,
                    "cosine-min": 0.99,
                    "count": 4,
                },
                {"path": "ids.json", "key": "ids", "ids-from": "in.jsonl#id", "equals": [1, "a", [2]]},
            ],
        }
    ],
    "resume": {
        "checkpoint": {"path": "ckpt/step.pt", "sha256": SHA},
        "required-state": ["optimizer"],
        "run": ["python", "resume.py"],
        "trajectory": {"log": "log.jsonl", "reference": "ref.jsonl", "metric": "loss", "rtol": 0.01},
    },
    "variant": [{"name": "fp16", "id": "2026-12-06.2", "based-on": "2026-12-06.1", "changes": {"a": "b"}}],
}

#: Values of every TOML type (and a few shapes) put in place of each leaf.
SUBSTITUTES: list[Any] = [
    "5",
    "",
    "linux",
    5,
    0,
    -2,
    2.5,
    float("inf"),
    True,
    [],
    ["x"],
    {},
    {"k": "v"},
    date(2026, 11, 30),
    datetime(2026, 11, 30, 12, 0),
    time(7, 32, 0, 500000),
    float("nan"),
    "2026-11-30",
    "2026-11-30T00:00:00Z",
    "2026-11-30T00:00:00.25+05:30",
    "2026-13-30T00:00:00Z",
    "3.11",
    SHA,
    REV,
]


def _leaves(doc: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    if isinstance(doc, dict):
        return [p for k, v in doc.items() for p in _leaves(v, (*path, k))] + ([path] if path else [])
    if isinstance(doc, list):
        return [p for i, v in enumerate(doc) for p in _leaves(v, (*path, i))] + [path]
    return [path]


def _replaced(doc: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    out = copy.deepcopy(doc)
    cur: Any = out
    for part in path[:-1]:
        cur = cur[part]
    cur[path[-1]] = value
    return out


def _pydantic(doc: dict[str, Any], alias_only: bool = True) -> Any:
    twin = pydantic_model(Manifest)
    if alias_only:
        return twin.model_validate(doc, by_alias=True, by_name=False)
    return twin.model_validate(doc)


def _dumps(m: Any) -> list[Any]:
    return [
        m.model_dump(),
        m.model_dump(mode="json", by_alias=True),
        m.model_dump(mode="json", by_alias=True, exclude_defaults=True),
    ]


def _agree(doc: dict[str, Any], alias_only: bool = True) -> str:
    """'checked' when the checker vouched for `doc` (pydantic must agree, value for value),
    'pydantic' when it handed it on."""
    try:
        fast = _check_model(Manifest, doc, alias_only)
    except _Fallback:
        return "pydantic"
    try:
        slow = _pydantic(doc, alias_only)
    except ValidationError as e:  # pragma: no cover - the failure this test exists to catch
        raise AssertionError(f"the checker accepted what pydantic rejects: {e}") from None
    assert _dumps(fast) == _dumps(slow)
    return "checked"


def test_the_rich_manifest_is_checked_without_pydantic_and_equals_pydantics() -> None:
    assert _agree(RICH) == "checked"
    assert _agree(json.loads(json.dumps(RICH, default=str))) == "checked"  # exclude-newer as text


def test_every_leaf_with_every_toml_type_the_checker_never_disagrees_with_pydantic() -> None:
    seen = {"checked": 0, "pydantic": 0}
    for path in _leaves(RICH):
        for value in SUBSTITUTES:
            seen[_agree(_replaced(RICH, path, value))] += 1
    # both ways are exercised: wrong types go to pydantic, right ones are checked here
    assert seen["checked"] > 150 and seen["pydantic"] > 1000, seen


def test_unknown_and_doubled_keys_go_to_pydantic() -> None:
    for table in ([], ["packages"], ["platform", 0], ["check", 0, "output", 1], ["system", "gpu"]):
        doc = copy.deepcopy(RICH)
        cur: Any = doc
        for part in table:
            cur = cur[part]
        cur["nmae"] = "x"
        assert _agree(doc) == "pydantic"
        with pytest.raises(ValidationError):
            _pydantic(doc)
    # a snake_case spelling is a key of the model only for keyword construction, not in TOML
    doc = _replaced(RICH, ("code",), {"revision": REV, "allow_dirty": True})
    assert _agree(doc) == "pydantic" and _agree(doc, alias_only=False) == "checked"


def test_keyword_construction_defaults_copies_and_dumps() -> None:
    a = Platform(name="l", os="linux", arch="x86_64")
    b = Platform(name="l", os="linux", arch="x86_64")
    a.markers["os_name"] = "posix"
    assert b.markers == {} and Platform.markers == {}  # a default is every instance's own copy
    assert Packages.model_validate({"from": ["pyproject.toml"]}).from_ == ["pyproject.toml"]
    assert Packages(from_=["x.txt"]).model_dump(by_alias=True, exclude_defaults=True) == {"from": ["x.txt"]}
    c = a.model_copy(update={"arch": "aarch64"})
    assert (a.arch, c.arch, c.markers is a.markers) == ("x86_64", "aarch64", True)
    assert a != c and a == a.model_copy() and "arch='x86_64'" in repr(a)
    with pytest.raises(ValidationError, match="Input should be 'linux', 'macos' or 'windows'"):
        Platform(name="l", os="plan9", arch="x86_64")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "when",
    [
        datetime(2025, 6, 1, 1, 2, 3, 450000, tzinfo=timezone.utc),
        datetime(2025, 6, 1, tzinfo=timezone(timedelta(hours=5, minutes=30))),
        datetime(2025, 6, 1, tzinfo=timezone(timedelta(hours=-8))),
        datetime(2025, 6, 1, tzinfo=timezone(timedelta(hours=-3, seconds=-90))),
        date(2025, 6, 1),
    ],
)
def test_exclude_newer_dumps_as_pydantic_writes_it(when: datetime) -> None:
    doc = _replaced(RICH, ("packages", "exclude-newer"), when)
    assert _agree(doc) == "checked"


def test_a_valid_manifest_loads_without_importing_pydantic() -> None:
    text = tomlkit.dumps(_replaced(RICH, ("packages", "exclude-newer"), "2025-06-01T00:00:00Z"))
    code = (
        "import sys\n"
        "from kernodeck.manifest.load import loads_manifest\n"
        f"m = loads_manifest({text!r})\n"
        "assert m.packages.exclude_newer.isoformat() == '2025-06-01T00:00:00+00:00'\n"
        "print(sorted(n for n in sys.modules if n.split('.')[0] in ('pydantic', 'pydantic_core')))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_a_bad_manifest_is_still_told_with_pydantics_located_messages() -> None:
    doc = _replaced(RICH, ("platform", 1, "arch"), "sparc")
    doc["packages"]["exclude-newer"] = "2025-06-01"  # a date alone is fine; the arch is not
    with pytest.raises(ManifestError) as e:
        loads_manifest(tomlkit.dumps(doc))
    (issue,) = e.value.issues
    assert issue.loc == "platform[1].arch"
    assert issue.message.startswith("Input should be 'x86_64', 'aarch64'") and "got 'sparc'" in issue.message
