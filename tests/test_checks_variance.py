"""`kernodeck check --repeat N --vary ...`: real runs of a small numpy program, spreads measured
and checked against the files the runs left behind, proposals written as comments."""

from __future__ import annotations

import html
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from kernodeck.checks.conditions import THREAD_VARIABLES, Axis, parse_vary
from kernodeck.checks.propose import round_up, variance
from kernodeck.checks.variance import DATA, Request
from kernodeck.cli import main
from kernodeck.manifest import load_manifest

PY = sys.executable

# Row sums of a fixed float32 matrix accumulated in chunks of {batch} (the summation order moves
# the float32 result), scaled into an [6, 8] "embedding"; JITTER adds fresh noise in every process;
# env.json records the thread variables the process was given.
APP = """\
import json, os, sys
from pathlib import Path
import numpy as np
out, batch = Path(sys.argv[1]), int(sys.argv[2])
x = np.random.default_rng(0).standard_normal((6, 4000)).astype(np.float32)
acc = np.zeros(6, np.float32)
for i in range(0, x.shape[1], batch):
    acc += x[:, i : i + batch].sum(axis=1, dtype=np.float32)
emb = np.outer(acc, np.linspace(0.5, 1.5, 8, dtype=np.float32)).astype(np.float32)
jitter = float(os.environ.get("JITTER", "0"))
if jitter:
    noise = np.random.default_rng(int.from_bytes(os.urandom(4), "little")).standard_normal(emb.shape)
    emb += (jitter * noise).astype(np.float32)
np.save(out / "emb.npy", emb)
(out / "metrics.json").write_text(json.dumps({"loss": float(np.abs(emb).mean())}))
(out / "env.json").write_text(json.dumps({k: os.environ.get(k) for k in THREADS}))
""".replace("THREADS", repr(list(THREAD_VARIABLES)))

MANIFEST = """\
schema-version = 1   # kept

[reference]
name = "v"
id = "1"

[python]
version = "3.11"

[[platform]]
name = "linux"
os = "linux"
arch = "x86_64"

[[check]]
name = "emb"
run = ["python", "app.py", "{out}", "{batch}"]

[[check.output]]
path = "emb.npy"
reference = "reference/emb.npy"
atol = 1e-3   # chosen by hand
cosine-min = 0.9999

[[check.output]]
path = "metrics.json"
metric = "loss"
min = 0.0
max = 100.0

[[check.output]]
path = "metrics.json"
metric = "loss"
reference = "reference/metrics.json"
atol = 1e-3

[[check.output]]
path = "env.json"
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "app.py").write_text(APP)
    (tmp_path / "repro.toml").write_text(MANIFEST)
    (tmp_path / "reference").mkdir()
    import subprocess

    subprocess.run([PY, "app.py", "reference", "16"], cwd=tmp_path, check=True)
    return tmp_path


def _variance(project: Path, vary: list[str], repeats: int = 2) -> tuple[dict, Path]:  # type: ignore[type-arg]
    manifest = load_manifest(project / "repro.toml")
    checks = list(manifest.check)
    request = Request(checks, parse_vary(vary, checks), repeats, 2)
    evidence = variance(manifest, project, PY, request)
    data = json.loads((evidence.folder / DATA).read_text())
    return data, evidence.folder


def _output(data: dict, name: str) -> dict:  # type: ignore[type-arg]
    return next(o for o in data["outputs"] if o["output"] == name)


def _arrays(folder: Path, data: dict, condition: int) -> list[np.ndarray]:  # type: ignore[type-arg]
    return [
        np.load(folder / r["out"] / "emb.npy")
        for r in data["runs"]
        if r["condition"] == condition and r["ok"]
    ]


def test_spreads_match_the_files_the_runs_wrote(project: Path) -> None:
    data, folder = _variance(project, ["batch=16,1", "threads=1,2"])
    assert data["conditions"] == ["baseline (batch=16, threads=1)", "batch=1", "threads=2"]
    assert len(data["runs"]) == 6 and all(r["ok"] for r in data["runs"])
    assert folder.is_relative_to(project / ".kernodeck" / "variance")
    emb = _output(data, "emb.npy")
    anchor = _arrays(folder, data, 0)[0]
    for ci, cond in enumerate(emb["conditions"]):
        runs = _arrays(folder, data, ci)
        # repeats against the condition's own first run
        rep = max((float(np.abs(r.astype(np.float64) - runs[0]).max()) for r in runs[1:]), default=0.0)
        assert cond["repeats"].get("max-abs", 0.0) == rep
        if ci:
            across = max(float(np.abs(r.astype(np.float64) - anchor).max()) for r in runs)
            assert cond["vs-baseline"]["max-abs"] == across
            same = sum(bool(np.array_equal(r, anchor)) for r in runs)
            assert cond["vs-baseline"]["identical"] == same
            if same == len(runs):
                assert cond["effect"].startswith("changes nothing")
            else:
                assert cond["effect"].startswith(f"changes it by up to {across:.2g}")
    # the margin: the worst run's share of the declared atol against the reference
    ref = np.load(project / "reference" / "emb.npy").astype(np.float64)
    every = [a for ci in range(3) for a in _arrays(folder, data, ci)]
    worst = max(float(np.abs(a - ref).max()) for a in every)
    assert emb["reference"]["max-abs"] == worst
    assert emb["used"]["tolerance"] == pytest.approx(worst / 1e-3)
    # a metric against its reference: the worst run's share of atol
    ref_loss = json.loads((project / "reference" / "metrics.json").read_text())["loss"]
    losses = [json.loads((folder / r["out"] / "metrics.json").read_text())["loss"] for r in data["runs"]]
    vs_ref = next(o for o in data["outputs"] if o["output"] == "metrics.json" and o["criteria"].get("atol"))
    assert vs_ref["used"]["tolerance"] == pytest.approx(max(abs(v - ref_loss) for v in losses) / 1e-3)
    # the proposal stands on the spread between runs, times the safety factor, rounded up
    noise = max(
        [c["repeats"].get("max-abs", 0.0) for c in emb["conditions"]]
        + [c["vs-baseline"]["max-abs"] for c in emb["conditions"][1:]]
    )
    if noise > 0:
        assert emb["proposal"]["values"]["atol"] == round_up(10 * noise) >= 10 * noise
    else:
        assert emb["proposal"]["values"] == {}


def test_threads_reach_the_process_and_the_summation_order_moves_float32(project: Path) -> None:
    data, folder = _variance(project, ["batch=16,1", "threads=1,2"], repeats=1)
    env = _output(data, "env.json")
    assert env["kind"] == "exact"
    assert [c["vs-baseline"]["identical"] for c in env["conditions"][1:]] == [1, 0]  # batch: same env
    got = json.loads((folder / data["runs"][2]["out"] / "env.json").read_text())
    assert got == dict.fromkeys(THREAD_VARIABLES, "2")
    # chunked float32 sums: 1 vs 16 at a time differ here, as the files show
    a, b = _arrays(folder, data, 0)[0], _arrays(folder, data, 1)[0]
    assert not np.array_equal(a, b)
    assert _output(data, "emb.npy")["conditions"][1]["vs-baseline"]["max-abs"] > 0


def test_repeat_noise_and_a_metric_output(project: Path) -> None:
    data, folder = _variance(project, ["batch=16", "JITTER=0,1e-3"], repeats=3)
    emb = _output(data, "emb.npy")
    base, jit = emb["conditions"]
    assert base["repeats"] == {"runs": 2, "identical": 2, "max-abs": 0.0, "max-rel": 0.0,
                               "min-cosine": 1.0, "rows": 6, "rows-changed": 0,
                               "p50-abs": 0.0, "p90-abs": 0.0, "p99-abs": 0.0}  # fmt: skip
    runs = _arrays(folder, data, 1)
    rep = max(float(np.abs(r.astype(np.float64) - runs[0]).max()) for r in runs[1:])
    assert jit["repeats"]["max-abs"] == rep > 0
    assert jit["effect"].endswith(f"repeats differ by up to {rep:.2g} (2 of 2 runs moved)")
    metric = next(o for o in data["outputs"] if o["output"] == "metrics.json" and "max" in o["criteria"])
    losses = [json.loads((folder / r["out"] / "metrics.json").read_text())["loss"] for r in data["runs"]]
    assert metric["kind"] == "metric"
    assert metric["conditions"][1]["vs-baseline"]["max-abs"] == max(abs(v - losses[0]) for v in losses[3:])
    assert metric["closest"]["bound"] == 0.0 and metric["closest"]["value"] == min(losses)


def test_zero_spread_proposes_nothing(project: Path) -> None:
    data, _ = _variance(project, ["batch=16", "threads=1,2"], repeats=2)
    emb = _output(data, "emb.npy")
    assert emb["reference"]["identical"] == emb["reference"]["runs"] == 4  # the reference ran batch=16
    assert emb["proposal"]["values"] == {}
    assert "zero spread supports no tolerance" in emb["proposal"]["note"]


def test_propose_writes_a_comment_block_and_replaces_its_own(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = project / "repro.toml"
    before = load_manifest(path)
    args = ["check", str(path), "--python", PY, "--repeat", "2", "--vary", "batch=16,1", "--propose"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "batch=1: changes it by up to" in out and "wrote the evidence of 4 output(s) as comments" in out
    assert "\nbatch=1 moved: emb/emb.npy (up to " in out  # chunked float32 sums, as measured above
    # only the outputs whose proposal names a value count as proposed
    proposed = int(out.split("with a proposed criterion for ")[1].split(" ")[0])
    assert proposed == out.count("proposed (")
    assert "\nmoved nothing: repeats of the baseline\n" in out
    text = path.read_text()
    assert "atol = 1e-3   # chosen by hand\ncosine-min = 0.9999\n# variance " in text
    assert "schema-version = 1   # kept" in text
    assert text.count("\n# variance 20") == 4
    after = load_manifest(path)
    assert after.check == before.check  # nothing applied: every criterion as it was
    assert main([*args, "-q"]) == 0
    assert path.read_text().count("\n# variance 20") == 4  # replaced, not added


def test_a_criterion_failing_in_a_run_exits_1(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = project / "repro.toml"
    path.write_text(path.read_text().replace("atol = 1e-3", "atol = 1e-9"))
    assert main(["check", str(path), "--python", PY, "--repeat", "1", "--vary", "batch=16,1"]) == 1
    out = capsys.readouterr().out
    assert "FAILS" in out and "criterion 'vs reference' failed in 1 run(s)" in out


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--vary", "batch=1,2"], "give --repeat N too"),
        (["--repeat", "2", "--record"], "does not go with --repeat"),
        (["--repeat", "2", "--html", "x.html"], "kernodeck report FOLDER"),
        (["--repeat", "2"], "which only --vary sets"),
        (["--repeat", "2", "--vary", "batch=1", "--vary", "threads=0"], "threads takes positive integers"),
        (["--repeat", "2", "--vary", "batch=1", "--vary", "determinism=maybe"], "on, off"),
        (["--repeat", "2", "--vary", "batch=1,1"], "a value is repeated"),
        (["--repeat", "2", "--vary", "batch"], "expected NAME=V1,V2"),
        (["--repeat", "2", "--vary", "batch=1", "--vary", "no-such"], "expected NAME=V1,V2"),
        (["--repeat", "2", "--vary", "batch=1", "--vary", "a-b=1"], "nor an environment variable"),
        (["--repeat", "0"], "0"),
    ],
)
def test_bad_requests_are_usage_errors(
    project: Path, extra: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["check", str(project / "repro.toml"), "--python", PY, *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not (project / ".kernodeck").exists()  # nothing ran


def test_builtin_conditions_set_their_variables() -> None:
    axes = parse_vary(["determinism=on,off", "matmul-precision=highest,high", "device=cpu,cuda:1"], [])
    assert [a.kind for a in axes] == ["builtin"] * 3
    det, prec, dev = axes
    assert det.env("off")["KERNODECK_DETERMINISTIC_ALGORITHMS"] == "0"
    assert det.env("on")["KERNODECK_CUDNN_BENCHMARK"] == "0"
    assert prec.env("high") == {"KERNODECK_FLOAT32_MATMUL_PRECISION": "high"}
    assert dev.env("cpu") == {"CUDA_VISIBLE_DEVICES": ""}
    assert dev.env("cuda:1") == {"CUDA_VISIBLE_DEVICES": "1"}
    assert Axis("X", ("1",), "env").env("1") == {"X": "1"}


def test_round_up() -> None:
    assert round_up(3.2e-7) == 4e-7
    assert round_up(4e-7) == 4e-7
    assert round_up(9.5e-3) == 1e-2
    assert round_up(0.0) == 0.0


def test_report_renders_the_folder(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data, folder = _variance(project, ["batch=16,1"], repeats=1)
    assert main(["report", str(folder)]) == 0
    page = (folder / "variance.html").read_text()
    emb = _output(data, "emb.npy")
    assert page.count("<svg") == 1  # one array output, one chart
    assert "emb/emb.npy" in page and html.escape(emb["conditions"][1]["effect"]) in page
    assert html.escape(emb["proposal"]["text"]) in page
    (folder / DATA).write_text(json.dumps({"kind": "variance", "outputs": [{"check": 1}]}))
    assert main(["report", str(folder)]) == 2
    assert "malformed" in capsys.readouterr().err


def test_a_dollar_in_a_name_is_drawn_as_itself() -> None:
    from kernodeck.render.variance import distribution_svg

    output = {
        "check": "c",
        "output": "cost$a$.npy",
        "criteria": {"atol": 1e-6},
        "chart": {
            "against": "reference",
            "series": [{"condition": "PRICE=$5", "row": [0, 1], "abs": [0.0, 1e-7]}],
        },
        "proposal": {"values": {"atol": 1e-6}},
    }
    svg = distribution_svg(output)
    assert svg is not None and "cost$a$.npy" in svg and "PRICE=$5" in svg


def test_capture_never_changes_a_criterion(project: Path) -> None:
    import datetime as dt
    import subprocess

    from kernodeck.capture import capture

    path = project / "repro.toml"
    assert (
        main(["check", str(path), "--python", PY, "--repeat", "1", "--vary", "batch=16,1", "--propose", "-q"])
        == 0
    )
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "x"]):
        subprocess.run(
            [
                "git",
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@example.invalid",
                "-c",
                "commit.gpgsign=false",
                *args,
            ],
            cwd=project,
            check=True,
        )
    before, text = load_manifest(path), path.read_text()
    capture(path, python=PY, system_probe=None, today=dt.date(2026, 12, 2))
    after = load_manifest(path)
    assert after.check == before.check
    block = [line for line in text.splitlines() if line.startswith("# variance")]
    assert len(block) > 3 and all(line in path.read_text().splitlines() for line in block)


class _Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, object]] = []

    def start(self, total: int, jobs: int) -> None:
        self.calls.append(("start", (total, jobs)))

    def done(self, run: object, estimate: float | None) -> None:
        self.calls.append(("done", estimate))

    def close(self) -> None:
        self.calls.append(("close", None))


def test_progress_gets_an_estimate_after_the_first_run(project: Path) -> None:
    manifest = load_manifest(project / "repro.toml")
    checks = list(manifest.check)
    rec = _Recorder()
    evidence = variance(
        manifest, project, PY, Request(checks, parse_vary(["batch=16,1"], checks), 2, 1), progress=rec
    )
    assert rec.calls[0] == ("start", (4, 1)) and rec.calls[-1] == ("close", None)
    estimates = [e for name, e in rec.calls if name == "done"]
    first = evidence.runs[0].seconds  # one worker: runs finish in order
    assert estimates == [pytest.approx(first * left) for left in (3, 2, 1, 0)]


def test_the_bar_only_on_a_terminal() -> None:
    import io

    from kernodeck.commands.variance import BarProgress, progress_for

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    assert progress_for(False, io.StringIO()) is None
    assert progress_for(True, Tty()) is None
    bar = progress_for(False, Tty())
    assert isinstance(bar, BarProgress)


def test_json_to_stdout_and_resume_alone(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = str(project / "repro.toml")
    assert main(["check", path, "--python", PY, "--repeat", "1", "--vary", "batch=16,1", "--json", "-"]) == 0
    captured = capsys.readouterr()
    data = json.loads(captured.out)
    assert data["kind"] == "variance" and len(data["runs"]) == 2
    assert "batch=1: changes it by up to" in captured.err  # the human report moved to stderr
    e = data["outputs"][0]["conditions"][1]["vs-baseline"]
    assert e["p50-abs"] <= e["p90-abs"] <= e["p99-abs"] <= e["max-abs"]
    assert main(["check", path, "resume", "--python", PY, "--repeat", "2"]) == 2
    assert "the resume check is not repeated" in capsys.readouterr().err


def test_a_run_that_fails_is_reported_not_measured(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = str(project / "repro.toml")
    assert main(["check", path, "--python", PY, "--repeat", "1", "--vary", "batch=16,0"]) == 1
    out = capsys.readouterr().out
    assert "! emb batch=0 run 1: exit code 1: ValueError" in out
    assert "batch=0: 1 of 1 comparisons without a readable output on one side" in out
    assert "nothing proposed: 1 comparison(s) without a readable output on one side" in out
    assert "current criteria: passed in all 1 run(s) that ran to the end" in out
