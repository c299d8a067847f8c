"""The HTML reports in a real browser: headless Chromium loads them from a file URL with the
network cut off (every host name resolves to nothing, every request goes to a dead proxy), with
no console error and no network request, and at 1280×800 the first failure and the trajectory
chart are on the first screen (their DOM rectangles, not pixels)."""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kernodeck.cli import main
from kernodeck.diff import diff_reports
from kernodeck.render.html import diff_html
from kernodeck.report import Report, Step
from tests.fixtures.render_projects import ab_reports, check_project, long_report, resume_project

PY = sys.executable
WIDTH, HEIGHT = 1280, 800
NAMES = ("chromium", "chromium-browser")

# Injected first in <head>: records errors, CSP violations and console.error calls from the very
# start, and on load writes them, the resources fetched and the rectangles asked for into an
# attribute that --dump-dom shows.
PROBE = """<script>
(function () {
  var log = [];
  window.addEventListener("error", function (e) {
    var t = e.target || {};
    log.push("error: " + (e.message || t.src || t.href || "a resource failed"));
  }, true);
  window.addEventListener("unhandledrejection", function (e) { log.push("rejection: " + e.reason); });
  document.addEventListener("securitypolicyviolation", function (e) {
    log.push("csp: " + e.violatedDirective + " " + e.blockedURI);
  });
  var original = console.error;
  console.error = function () {
    log.push("console.error: " + Array.prototype.join.call(arguments, " "));
    return original.apply(console, arguments);
  };
  function rect(sel) {
    var el = document.querySelector(sel);
    if (!el) return null;
    var r = el.getBoundingClientRect();
    return {top: r.top, left: r.left, bottom: r.bottom, right: r.right, width: r.width, height: r.height};
  }
  window.addEventListener("load", function () {
    var out = {
      viewport: {w: window.innerWidth, h: window.innerHeight},
      first: rect("#first-failure"),
      trajectory: rect("[id^='chart-trajectory']"),
      changed: rect("section.layer.changed"),
      changedLayer: (document.querySelector("section.layer.changed") || {dataset: {}}).dataset.layer || null,
      resources: performance.getEntriesByType("resource").map(function (e) { return e.name; }),
      errors: log
    };
    document.documentElement.setAttribute("data-probe", JSON.stringify(out));
  });
})();
</script>"""


def _find() -> str | None:
    for name in NAMES:
        path = shutil.which(name)
        if path:
            return path
    return None


@pytest.fixture(scope="module")
def chromium() -> str:
    """Debian's chromium; installed with apt-get when missing and we may (root); skipped only
    when it can be neither found nor installed."""
    path = _find()
    if path is None and shutil.which("apt-get") and hasattr(os, "geteuid") and os.geteuid() == 0:
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(
            ["apt-get", "install", "-y", "chromium"],
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=900,
            check=False,
        )
        path = _find()
    if path is None:
        pytest.skip("chromium is not installed and cannot be installed here (needs apt-get as root)")
    return path


def load(
    chromium: str, page: Path, tmp_path: Path, probe: str = PROBE, height: int = HEIGHT
) -> tuple[dict[str, Any], str]:
    """Open `page` (a probed copy of it) in headless Chromium, network off; the probe's findings
    and Chromium's log."""
    probed = tmp_path / f"probed-{page.name}"
    text = page.read_text(encoding="utf-8")
    probed.write_text(text.replace("<head>", "<head>\n" + probe, 1), encoding="utf-8")
    profile = tmp_path / f"profile-{page.stem}"
    cmd = [
        chromium,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-extensions",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--metrics-recording-only",
        f"--user-data-dir={profile}",
        "--host-resolver-rules=MAP * ~NOTFOUND",
        "--proxy-server=127.0.0.1:9",
        f"--window-size={WIDTH},{height}",
        "--hide-scrollbars",
        "--enable-logging=stderr",
        "--v=0",
        "--virtual-time-budget=5000",
        "--dump-dom",
        probed.as_uri(),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr[-3000:]
    m = re.search(r'data-probe="([^"]*)"', done.stdout)
    assert m is not None, "the probe did not run:\n" + done.stdout[:2000] + done.stderr[-2000:]
    return json.loads(html.unescape(m.group(1))), done.stderr


def assert_clean(probe: dict[str, Any], log: str) -> None:
    assert probe["errors"] == []
    assert probe["resources"] == []  # not one network (or file) request
    console = [ln for ln in log.splitlines() if ":CONSOLE" in ln or "net::ERR" in ln]
    assert console == []


def on_first_screen(rect: dict[str, float] | None, probe: dict[str, Any]) -> bool:
    vp = probe["viewport"]
    return (
        rect is not None
        and rect["width"] > 0
        and rect["height"] > 0
        and rect["top"] >= 0
        and rect["left"] >= 0
        and rect["bottom"] <= min(vp["h"], HEIGHT)
        and rect["right"] <= min(vp["w"], WIDTH)
    )


def test_the_probe_sees_errors_and_requests(chromium: str, tmp_path: Path) -> None:
    # the same load on a page that misbehaves: the probe must report it, or the tests below prove nothing
    bad = tmp_path / "bad.html"
    bad.write_text(
        "<!doctype html><html><head><title>x</title></head><body>"
        '<img src="https://example.invalid/x.png"><script>console.error("boom"); nope();</script></body></html>'
    )
    probe, _ = load(chromium, bad, tmp_path)
    joined = " ".join(probe["errors"])
    assert "boom" in joined and "nope" in joined and "example.invalid" in joined
    # headless Chromium counts its (invisible) window frame in --window-size: the page gets 1280
    # wide and at most 800 high, so "within the viewport" below is at least as strict as 1280×800
    assert probe["viewport"]["w"] == WIDTH and 0 < probe["viewport"]["h"] <= HEIGHT
    assert probe["first"] is None and not on_first_screen(probe["first"], probe)


def test_failing_verify_report(chromium: str, tmp_path: Path) -> None:
    manifest = check_project(tmp_path / "project")
    page = tmp_path / "verify.html"
    js = tmp_path / "verify.json"
    code = main(
        [
            *("verify", str(manifest), "--python", PY, "--no-compute"),
            *("--json", str(js), "--html", str(page), "--quiet"),
        ]
    )
    report = Report.from_json(js.read_text())
    assert code == 1 and not report.ok
    probe, log = load(chromium, page, tmp_path)
    assert_clean(probe, log)
    assert on_first_screen(probe["first"], probe), probe


def test_resume_check_report(chromium: str, tmp_path: Path) -> None:
    manifest = resume_project(tmp_path / "project")
    page = tmp_path / "resume.html"
    code = main(
        [
            *("check", str(manifest), "--python", PY),
            *("--out", str(tmp_path / "out"), "--html", str(page)),
        ]
    )
    assert code == 1
    probe, log = load(chromium, page, tmp_path)
    assert_clean(probe, log)
    assert on_first_screen(probe["first"], probe), probe
    assert on_first_screen(probe["trajectory"], probe), probe


def test_diff_page_shows_the_changed_layer(chromium: str, tmp_path: Path) -> None:
    a, b = long_report(), long_report()
    b.steps[4] = Step.passed("device", "accelerator", observed="1 GPU")
    page = tmp_path / "diff.html"
    page.write_text(diff_html(a, b, diff_reports(a, b, a_name="a.json", b_name="b.json")))
    probe, log = load(chromium, page, tmp_path)
    assert_clean(probe, log)
    assert probe["changedLayer"] == "device"
    assert probe["changed"] is not None and 0 <= probe["changed"]["top"] < HEIGHT


# The A/B page's layout, measured: the page's width against the viewport, every table cell's
# content against its box, every pair of charts and of sections, and every word outside a hash
# (a text run between spaces, hyphens and <wbr> wrap points) on one line.
AB_PROBE = """<script>
window.addEventListener("load", function () {
  function box(el) { var r = el.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; }
  function overlap(p, q) { return p[0] < q[2] - 0.5 && q[0] < p[2] - 0.5 && p[1] < q[3] - 0.5 && q[1] < p[3] - 0.5; }
  function pairs(sel) {
    var els = Array.prototype.slice.call(document.querySelectorAll(sel)), out = [];
    for (var i = 0; i < els.length; i++) for (var j = i + 1; j < els.length; j++)
      if (overlap(box(els[i]), box(els[j]))) out.push((els[i].id || sel) + " / " + (els[j].id || sel));
    return out;
  }
  var spill = [], broken = [], words = 0;
  document.querySelectorAll(".ab td").forEach(function (td) {
    if (td.scrollWidth > td.clientWidth + 1) spill.push(td.textContent);
    var walker = document.createTreeWalker(td, NodeFilter.SHOW_TEXT);
    for (var n = walker.nextNode(); n; n = walker.nextNode()) {
      if (n.parentElement.closest(".hash")) continue;
      var re = /[^\\s-]+/g, m;  // a hyphen is a wrap point, as in prose
      while ((m = re.exec(n.data))) {
        var range = document.createRange();
        range.setStart(n, m.index); range.setEnd(n, m.index + m[0].length);
        var lines = {};
        Array.prototype.forEach.call(range.getClientRects(), function (r) { if (r.width > 0) lines[Math.round(r.top)] = 1; });
        words += 1;
        if (Object.keys(lines).length > 1) broken.push(m[0]);
      }
    }
  });
  var details = document.querySelector("details.folded");
  var out = {
    viewport: {w: window.innerWidth, h: window.innerHeight},
    scrollWidth: document.documentElement.scrollWidth,
    spill: spill, broken: broken, words: words,
    chartOverlaps: pairs("figure.chart"),
    sectionOverlaps: pairs("main section"),
    charts: Array.prototype.map.call(document.querySelectorAll("figure.chart"), function (f) { return f.id; }),
    folded: details ? {open: details.open, summary: details.querySelector("summary").textContent,
                       sectionVisible: details.querySelector("section").checkVisibility()} : null,
    firstSection: (document.querySelector("main section.layer") || {id: null}).id
  };
  document.documentElement.setAttribute("data-probe", JSON.stringify(out));
});
</script>"""


def test_ab_page_at_1280_px_fixed_columns_no_broken_word_no_overlap(chromium: str, tmp_path: Path) -> None:
    a, b = ab_reports()
    page = tmp_path / "ab.html"
    page.write_text(diff_html(a, b, diff_reports(a, b, a_name="a.json", b_name="b.json")))
    probe, _ = load(chromium, page, tmp_path, probe=AB_PROBE, height=2000)
    assert probe["viewport"]["w"] == WIDTH
    assert probe["scrollWidth"] <= WIDTH, probe  # no horizontal scroll
    assert probe["spill"] == [], probe
    assert probe["words"] > 50 and probe["broken"] == [], probe
    assert probe["chartOverlaps"] == [] and probe["sectionOverlaps"] == [], probe
    assert probe["charts"] == ["chart-trajectory-0", "chart-rows-1"]
    assert probe["firstSection"] == "layer-packages"  # the failure first
    folded = probe["folded"]
    assert folded["open"] is False and folded["sectionVisible"] is False
    assert folded["summary"].startswith("2 layers passed in A and B and the same")


def test_the_ab_probe_sees_broken_words_and_spilled_cells(chromium: str, tmp_path: Path) -> None:
    # the layout the issue saw (names wrapping inside words), forced: the probe must catch it
    a, b = ab_reports()
    text = diff_html(a, b, diff_reports(a, b))
    squeeze = "<style>.ab td { overflow-wrap: anywhere !important; } .ab table.ab-steps col.step { width: 40px; }</style>"
    page = tmp_path / "squeezed.html"
    page.write_text(text.replace("</head>", squeeze + "</head>", 1))
    probe, _ = load(chromium, page, tmp_path, probe=AB_PROBE, height=2000)
    assert "pin:" in " ".join(probe["broken"]), probe
    spilled = tmp_path / "spilled.html"
    spilled.write_text(text.replace("</head>", squeeze.replace("anywhere", "normal") + "</head>", 1))
    probe, _ = load(chromium, spilled, tmp_path, probe=AB_PROBE, height=2000)
    assert probe["spill"] != [], probe
