from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from kernodeck.index.evaluate import Accepted, Rejected, evaluate
from kernodeck.index.models import IndexFile
from kernodeck.targets import Target

LINUX = Target.build(name="linux", os="linux", arch="x86_64", python="3.11", backend="cu126")
MAC = Target.build(name="mac", os="macos", arch="arm64", python="3.11")
CUTOFF = datetime(2026, 11, 30, tzinfo=timezone.utc)


def _file(
    filename: str,
    *,
    requires_python: str | None = None,
    yanked: str | None = None,
    upload_time: datetime | None = None,
) -> IndexFile:
    return IndexFile(
        filename=filename,
        url=f"http://127.0.0.1/files/{filename}",
        hashes={"sha256": "0" * 64},
        requires_python=requires_python,
        yanked=yanked,
        upload_time=upload_time,
        size=10,
        core_metadata=None,
        index="default",
    )


def _ev(f: IndexFile, target: Target = LINUX, **kw: object) -> Accepted | Rejected:
    args: dict[str, Any] = {"allow_sdist": False, "exclude_newer": None}
    args.update(kw)
    return evaluate(f, target, **args)


def test_wheel_ranks_by_tag() -> None:
    best = _ev(_file("torch-2.6.0+cu126-cp311-cp311-manylinux_2_28_x86_64.whl"))
    old = _ev(_file("numpy-2.1.0-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"))
    pure = _ev(_file("six-1.16.0-py2.py3-none-any.whl"))
    assert isinstance(best, Accepted) and isinstance(old, Accepted) and isinstance(pure, Accepted)
    assert best.rank == 0
    assert best.rank < old.rank < pure.rank
    assert str(best.version) == "2.6.0+cu126"


def test_wrong_tag_reason_names_both_sides() -> None:
    r = _ev(_file("numpy-2.1.0-cp312-cp312-win_amd64.whl"))
    assert isinstance(r, Rejected)
    assert r.reason == "no wheel tag matches cp311-manylinux_2_28_x86_64 (file has cp312-cp312-win_amd64)"
    assert isinstance(_ev(_file("numpy-2.1.0-cp311-cp311-macosx_14_0_arm64.whl"), MAC), Accepted)
    assert isinstance(_ev(_file("numpy-2.1.0-cp311-cp311-macosx_15_0_arm64.whl"), MAC), Rejected)


def test_requires_python() -> None:
    r = _ev(_file("x-1.0-py3-none-any.whl", requires_python=">=3.12"))
    assert isinstance(r, Rejected) and r.reason == "requires-python >=3.12"
    assert isinstance(_ev(_file("x-1.0-py3-none-any.whl", requires_python=">=3.9,<4")), Accepted)
    bad = _ev(_file("x-1.0-py3-none-any.whl", requires_python=">=3.x"))
    assert isinstance(bad, Rejected) and "invalid requires-python" in bad.reason


def test_yanked_only_for_exact_pins() -> None:
    f = _file("x-1.0-py3-none-any.whl", yanked="broken build")
    r = _ev(f)
    assert isinstance(r, Rejected) and r.reason == "yanked: broken build"
    assert isinstance(_ev(f, pinned_exactly=True), Accepted)
    r2 = _ev(_file("x-1.0-py3-none-any.whl", yanked=""))
    assert isinstance(r2, Rejected) and r2.reason == "yanked"


def test_exclude_newer() -> None:
    late = _file("x-1.0-py3-none-any.whl", upload_time=datetime(2026, 12, 1, 10, 0, tzinfo=timezone.utc))
    r = _ev(late, exclude_newer=CUTOFF)
    assert isinstance(r, Rejected)
    assert r.reason == "uploaded 2026-12-01T10:00:00Z after exclude-newer 2026-11-30T00:00:00Z"
    early = _file("x-1.0-py3-none-any.whl", upload_time=datetime(2026, 1, 1, tzinfo=timezone.utc))
    assert isinstance(_ev(early, exclude_newer=CUTOFF), Accepted)
    # no upload time (PEP 503 pages, file:// indexes) cannot be judged and passes
    assert isinstance(_ev(_file("x-1.0-py3-none-any.whl"), exclude_newer=CUTOFF), Accepted)
    assert isinstance(_ev(late), Accepted)


def test_sdists() -> None:
    f = _file("x-1.0.tar.gz")
    r = _ev(f)
    assert isinstance(r, Rejected) and r.reason == "sdist not allowed (add to allow-sdist)"
    a = _ev(f, allow_sdist=True)
    assert isinstance(a, Accepted)
    assert a.rank == len(LINUX.tags)  # after every wheel
    zip_sdist = _ev(_file("x-1.0.zip"), allow_sdist=True)
    assert isinstance(zip_sdist, Accepted)


def test_invalid_filename_rejected() -> None:
    r = _ev(_file("not-a-wheel.whl"))
    assert isinstance(r, Rejected) and "invalid distribution filename" in r.reason
    r2 = _ev(_file("x-1.0.exe"))
    assert isinstance(r2, Rejected)


def test_requires_python_is_judged_once_per_specifier_and_python() -> None:
    from kernodeck.index.evaluate import python_allowed

    python_allowed.cache_clear()
    assert python_allowed(">=3.9", "3.11.9") is True
    assert python_allowed(">=3.12", "3.11.9") is False
    assert python_allowed(">=3.12", "3.12.0") is True
    assert python_allowed(">=3.9,<3.11", "3.11.9") is False
    assert python_allowed(">=3.9.*", "3.11.9") is None  # invalid specifier
    assert python_allowed(">=3.9", "3.11.9") is True
    assert python_allowed.cache_info().hits == 1


def test_a_rejection_is_worded_when_asked_and_equal_to_its_text(monkeypatch: Any) -> None:
    """A lock rejects thousands of files (every other platform's wheels): the reason is worded
    when a message asks for it, once, with the text the rejection always had."""
    worded: list[str] = []
    real = IndexFile.tag_text

    def counted(self: IndexFile) -> str:
        worded.append(self.filename)
        return real.fget(self)  # type: ignore[attr-defined,no-any-return]

    monkeypatch.setattr(IndexFile, "tag_text", property(counted))
    files = [_file(f"numpy-2.1.{i}-cp312-cp312-win_amd64.whl") for i in range(50)]
    rejected = [_ev(f) for f in files]
    assert all(isinstance(r, Rejected) for r in rejected) and worded == []
    first = rejected[0]
    assert isinstance(first, Rejected)
    text = "no wheel tag matches cp311-manylinux_2_28_x86_64 (file has cp312-cp312-win_amd64)"
    assert first.reason == text and first.reason == text and len(worded) == 1
    assert first == Rejected(files[0], text) and hash(first) == hash(Rejected(files[0], text))
    late = _ev(
        _file("x-1.0-py3-none-any.whl", upload_time=datetime(2026, 12, 1, tzinfo=timezone.utc)),
        exclude_newer=CUTOFF,
    )
    assert isinstance(late, Rejected)
    assert late.reason == "uploaded 2026-12-01T00:00:00Z after exclude-newer 2026-11-30T00:00:00Z"
