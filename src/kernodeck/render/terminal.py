"""The human report on a terminal or in a CI log: compact, wrapped, one line per step.

    kernodeck verify repro.toml (reference 2026-12-02.1) on platform linux-x86_64-cu126
    interpreter: 2 passed
      ✓ version  3.11.7
      ✓ implementation  cpython
    device: 1 failed, 1 skipped
      ✗ accelerator
          expected: 1 GPU
          observed: 0 GPUs
          error:    CUDA_VISIBLE_DEVICES="" hides every GPU
          hint:     unset CUDA_VISIBLE_DEVICES
      - compute (skipped: no usable cuda device)
    FAILED: 2 passed, 1 failed, 0 warnings, 1 skipped; first failure: device/accelerator

- Steps are grouped under a heading per layer that carries the layer's counts. A passed step is
  one short line (with `quiet`, passed steps are only counted in the heading); a failure or a
  warning expands below its line into expected / observed / error / hint, each on its own
  indented line. `verbose` expands every step and adds its details.
- Every line is wrapped at the width (the terminal's, else `$COLUMNS`, else 80) between words:
  a word is never cut, and hex digests are shown as their first 12 digits (the JSON report keeps
  them whole; `verbose` shows them whole too). Long values are capped at a few lines unless
  `verbose`.
- A hint that several failed steps of a layer share (five pins with one reinstall command) is
  printed once, after them, under their names.
- The last line is the summary (pytest style): the counts, the run's duration, the first
  required failure with its error.
- Control characters in any text (ESC, NUL, BEL, a carriage return ...) are shown as their escape
  (`\\x1b`), never written (`kernodeck.render.visible`); the colours are added after that.
- Colours only when asked (`always`) or on a terminal (`auto`) without a non-empty `NO_COLOR`
  (https://no-color.org: a command-line `--color always` wins over it).
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any, Literal

from kernodeck.render.visible import visible
from kernodeck.report import Report, Status, Step, counts_text, short_hashes

if TYPE_CHECKING:
    from kernodeck.diff import DiffResult

ColorMode = Literal["auto", "always", "never"]
COLOR_MODES: tuple[str, ...] = ("auto", "always", "never")

DEFAULT_WIDTH = 80
MIN_WIDTH = 40
#: Wrapped lines shown per field of a failure unless verbose.
FIELD_LINES = {"expected": 3, "observed": 3, "error": 6, "hint": 4}
DETAIL_LINES = 3
#: Step details that hold the series the HTML charts draw.
CHART_KEYS = frozenset({"series", "rows"})

STEP_INDENT = "  "
FIELD_INDENT = "      "
LABEL_WIDTH = 10


_ANSI = {
    "bold": "\x1b[1m",
    "red": "\x1b[1;31m",
    "green": "\x1b[32m",
    "yellow": "\x1b[33m",
    "dim": "\x1b[2m",
    "italic": "\x1b[3m",
}
_RESET = "\x1b[0m"

Role = Literal[
    "plain", "title", "heading", "passed", "failed", "warning", "skipped", "field", "hint", "ok", "bad"
]
_ROLE_STYLE: dict[str, str] = {
    "title": "bold",
    "heading": "bold",
    "failed": "red",
    "warning": "yellow",
    "skipped": "dim",
    "hint": "italic",
    "ok": "green",
    "bad": "red",
}


@dataclass(frozen=True)
class Line:
    text: str
    role: Role = "plain"
    mark: str = ""  # the leading symbol, coloured on its own for passed steps


_SYMBOLS = {Status.PASSED: "✓", Status.FAILED: "✗", Status.WARNING: "!", Status.SKIPPED: "-"}
_ASCII_SYMBOLS = {Status.PASSED: "+", Status.FAILED: "x", Status.WARNING: "!", Status.SKIPPED: "-"}
_DIFFERS = ("≠", "~")
_STATUS_ROLE: dict[Status, Role] = {
    Status.PASSED: "passed",
    Status.FAILED: "failed",
    Status.WARNING: "warning",
    Status.SKIPPED: "skipped",
}


# --- environment: colour, width, symbols ------------------------------------------------------


def use_color(mode: str | bool | None, stream: IO[str]) -> bool:
    """Whether to colour `stream`: `always`/`never` as given, else (`auto`) only on a terminal
    and never with a non-empty NO_COLOR."""
    if mode is True or mode == "always":
        return True
    if mode is False or mode == "never":
        return False
    if os.environ.get("NO_COLOR"):
        return False
    return _isatty(stream)


def _isatty(stream: IO[str]) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def width_of(stream: IO[str], width: int | None = None) -> int:
    """The wrap width: `width` if given, else `$COLUMNS`, else the terminal's, else 80."""
    if width:
        return max(width, MIN_WIDTH)
    cols = os.environ.get("COLUMNS", "")
    if cols.isdigit() and int(cols) > 0:
        return max(int(cols), MIN_WIDTH)
    if _isatty(stream):
        try:
            return max(os.get_terminal_size(stream.fileno()).columns, MIN_WIDTH)
        except (AttributeError, ValueError, OSError):
            pass
    return DEFAULT_WIDTH


def _unicode_ok(stream: IO[str]) -> bool:
    enc = getattr(stream, "encoding", None) or "utf-8"
    try:
        "✓✗≠·".encode(enc)
    except (UnicodeEncodeError, LookupError):
        return False
    return True


# --- text -------------------------------------------------------------------------------------


def value_text(value: Any) -> str | None:
    """A value of a step as one line of text (None: nothing to show)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)):
        return ", ".join(value_text(v) or "none" for v in value) if value else "none"
    if isinstance(value, dict):
        if not value:
            return "none"
        return ", ".join(f"{k}={_compact(v)}" for k, v in value.items())
    return str(value)


def _compact(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(value, sort_keys=True, default=str, ensure_ascii=False)
    return value_text(value) or "none"


def wrap(text: str, width: int, first: str, rest: str) -> list[str]:
    """`text` wrapped between words (never inside one), paragraphs kept; `first` prefixes the
    first line, `rest` the others."""
    out: list[str] = []
    for i, para in enumerate(text.splitlines() or [""]):
        lead = first if i == 0 else rest
        para = para.rstrip()
        if not para.strip():
            if out:
                out.append(rest.rstrip())
            continue
        wrapper = textwrap.TextWrapper(
            width=width,
            initial_indent=lead,
            subsequent_indent=rest,
            break_long_words=False,
            break_on_hyphens=False,
            replace_whitespace=True,
            drop_whitespace=True,
        )
        out.extend(wrapper.wrap(para) or [lead.rstrip()])
    while len(out) > 1 and not out[-1].strip():
        out.pop()
    return out


def _cap(lines: list[str], limit: int | None, indent: str) -> list[str]:
    if limit is None or len(lines) <= limit:
        return lines
    hidden = len(lines) - (limit - 1)
    return [*lines[: limit - 1], f"{indent}… {hidden} more line{'s' if hidden != 1 else ''} (-v shows all)"]


class _Writer:
    def __init__(self, width: int, verbose: bool, symbols: dict[Status, str], ellipsis: bool) -> None:
        self.width = width
        self.verbose = verbose
        self.symbols = symbols
        self.ellipsis = ellipsis
        self.lines: list[Line] = []

    def text(self, value: str) -> str:
        """Text to show: control characters visible (never sent to the terminal), hashes short."""
        return visible(value if self.verbose else short_hashes(value))

    def add(self, text: str, role: Role = "plain", *, indent: str = "", rest: str | None = None) -> None:
        for ln in wrap(self.text(text), self.width, indent, indent + "  " if rest is None else rest):
            self.lines.append(Line(ln, role))

    def field(self, label: str, value: Any, *, role: Role = "field", limit: int | None = None) -> None:
        text = value_text(value)
        if text is None or text == "":
            return
        head = f"{FIELD_INDENT}{label + ':':<{LABEL_WIDTH}}"
        rest = " " * len(head)
        wrapped = wrap(self.text(text), self.width, head, rest)
        if any(len(w) > self.width for w in wrapped):
            # a word too long for the hanging indent: the label on its own line, the value below
            rest = FIELD_INDENT + "  "
            wrapped = [head.rstrip(), *wrap(self.text(text), self.width, rest, rest)]
        if not self.verbose:
            wrapped = _cap(wrapped, limit, rest)
        if not self.ellipsis:
            wrapped = [w.replace("…", "...") for w in wrapped]
        self.lines.extend(Line(w, role) for w in wrapped)


# --- reports ----------------------------------------------------------------------------------


def _title(report: Report) -> str:
    title = f"kernodeck {report.kind}"
    if report.manifest:
        title += f" {report.manifest}"
    if report.reference_id:
        title += f" (reference {report.reference_id})"
    if report.platform:
        title += f" on platform {report.platform}"
    return title


def layer_counts(steps: Iterable[Step]) -> dict[str, int]:
    out = {s.value: 0 for s in Status}
    for s in steps:
        out[s.status.value] += 1
    return out


def shared_hints(steps: Iterable[Step]) -> dict[str, list[Step]]:
    """Hint -> the failed or warning steps that give it, for every hint two or more of them share
    (five pins failing for one cause share one reinstall hint): printed once, under their names."""
    by_hint: dict[str, list[Step]] = {}
    for s in steps:
        if s.hint and s.status in (Status.FAILED, Status.WARNING):
            by_hint.setdefault(s.hint, []).append(s)
    return {h: group for h, group in by_hint.items() if len(group) > 1}


def first_failure(report: Report) -> Step | None:
    return report.first_failure()


def layers_of(report: Report) -> list[str]:
    """Layers in the order their first step appears."""
    return list(dict.fromkeys(str(s.layer) for s in report.steps))


def summary_text(report: Report, width: int | None = None) -> str:
    """The summary: verdict, counts, duration and the first failure with its error."""
    return " ".join(summary_lines(report, width))


def summary_lines(report: Report, width: int | None = None) -> list[str]:
    """The summary (`Report.summary_lines`, the one wording of every front end)."""
    return report.summary_lines(width)


def report_lines(
    report: Report,
    *,
    width: int = DEFAULT_WIDTH,
    quiet: bool = False,
    verbose: bool = False,
    unicode: bool = True,
) -> list[Line]:
    """The human report as lines (uncoloured), every one at most `width` characters unless one
    word is longer."""
    w = _Writer(width, verbose, _SYMBOLS if unicode else _ASCII_SYMBOLS, unicode)
    if report.interpreter is not None:  # the interpreter looked at, and why
        w.add(f"python: {report.interpreter.path} ({report.interpreter.reason})", "title")
    for notice in report.notices:  # said once, at the top, under the interpreter it is about
        w.add(f"! {notice}", "warning")
    if report.platform and report.platform_reason:  # the platform looked at, and why
        w.add(f"platform: {report.platform} ({report.platform_reason})", "title")
    w.add(_title(report), "title")
    for layer in layers_of(report):
        steps = [s for s in report.steps if str(s.layer) == layer]
        if (
            not verbose
            and all(s.status is Status.SKIPPED for s in steps)
            and len({s.error for s in steps}) == 1
        ):
            # a layer skipped for one reason is one line
            many = f" ({len(steps)} steps)" if len(steps) > 1 else ""
            w.add(f"{layer}: {w.symbols[Status.SKIPPED]} skipped{many}: {steps[0].error}", "skipped")
            continue
        w.add(f"{layer}: {counts_text(layer_counts(steps))}", "heading")
        shared = shared_hints(steps)
        for s in steps:
            if quiet and s.status is Status.PASSED and not verbose:
                continue
            _step(w, s, show_hint=s.hint not in shared)
        for hint, group in shared.items():
            w.add(
                f"{STEP_INDENT}the same hint for {', '.join(g.name for g in group)}:",
                "hint",
                rest=FIELD_INDENT,
            )
            w.field("hint", hint, role="hint", limit=FIELD_LINES["hint"])
    for line in summary_lines(report, width):
        w.add(line, "ok" if report.ok else "bad")
    return w.lines


def _step(w: _Writer, s: Step, *, show_hint: bool = True) -> None:
    sym = w.symbols[s.status]
    role: Role = _STATUS_ROLE[s.status]
    indent = STEP_INDENT + " " * (len(sym) + 1)
    if s.status is Status.SKIPPED:
        why = (s.error or "skipped").strip()
        if not why.lower().startswith("skipped"):
            why = f"skipped: {why}"
        w.add(f"{STEP_INDENT}{sym} {s.name} ({why})", role, rest=indent)
        if w.verbose:
            _more(w, s)
        return
    if s.status is Status.PASSED:
        head = f"{STEP_INDENT}{sym} {s.name}"
        shown = value_text(s.observed)
        if shown and not w.verbose and "\n" not in shown:
            longer = f"{head}  {w.text(shown)}"
            if len(longer) <= w.width:
                head = longer
        w.add(head, role, rest=indent)
        if w.verbose:
            w.field("expected", s.expected)
            w.field("observed", s.observed)
            _more(w, s)
        return
    head = f"{STEP_INDENT}{sym} {s.name}"
    if not s.required:
        head += " (optional)"
    w.add(head, role, rest=indent)
    w.field("expected", s.expected, limit=FIELD_LINES["expected"])
    w.field("observed", s.observed, limit=FIELD_LINES["observed"])
    w.field("error", s.error, limit=FIELD_LINES["error"])
    # a hint other steps share is said once, under them all
    w.field("hint", s.hint if show_hint else None, role="hint", limit=FIELD_LINES["hint"])
    if w.verbose:
        _more(w, s)


def _more(w: _Writer, s: Step) -> None:
    if s.status is Status.SKIPPED and s.hint:
        w.field("hint", s.hint, role="hint")
    for key, value in s.details.items():
        if key in CHART_KEYS:  # a chart's data: hundreds of numbers say nothing on a terminal
            w.field(str(key), "chart data (in the JSON report; drawn by --html)")
            continue
        w.field(str(key), _compact(value), limit=DETAIL_LINES)
    for key, number in s.measured().items():  # measurements: shown, never compared
        w.field(f"measured {key}", f"{number:g}")


# --- output -----------------------------------------------------------------------------------


def paint(lines: Sequence[Line], color: bool, *, status_marks: bool = True) -> str:
    out = []
    for ln in lines:
        style = _ROLE_STYLE.get(ln.role)
        if not color:
            out.append(ln.text)
        elif ln.role == "passed" and status_marks:
            out.append(_mark_symbol(ln.text, _ANSI["green"]))
        elif style:
            out.append(f"{_ANSI[style]}{ln.text}{_RESET}")
        else:
            out.append(ln.text)
    return "\n".join(out) + "\n"


def _write(out: IO[str], text: str) -> None:
    """Write `text`; characters the stream cannot encode become '?' instead of an error."""
    enc = getattr(out, "encoding", None)
    if enc:
        try:
            text.encode(enc)
        except UnicodeEncodeError:
            text = text.encode(enc, "replace").decode(enc)
        except LookupError:
            pass
    out.write(text)
    out.flush()


def _mark_symbol(text: str, code: str) -> str:
    stripped = text.lstrip(" ")
    if not stripped:
        return text
    pad = len(text) - len(stripped)
    sym, _, rest = stripped.partition(" ")
    return f"{text[:pad]}{code}{sym}{_RESET} {rest}" if rest else f"{text[:pad]}{code}{sym}{_RESET}"


def render_report(
    report: Report,
    file: IO[str] | None = None,
    *,
    color: str | bool | None = "auto",
    quiet: bool = False,
    verbose: bool = False,
    width: int | None = None,
) -> None:
    """Print the human report of a verify, check, rebuild or doctor run to `file` (stdout)."""
    out = file if file is not None else sys.stdout
    lines = report_lines(
        report, width=width_of(out, width), quiet=quiet, verbose=verbose, unicode=_unicode_ok(out)
    )
    _write(out, paint(lines, use_color(color, out)))


# --- diff -------------------------------------------------------------------------------------


def diff_lines(
    result: DiffResult,
    *,
    width: int = DEFAULT_WIDTH,
    verbose: bool = False,
    quiet: bool = False,
    unicode: bool = True,
) -> list[Line]:
    """`kernodeck diff` as lines: a heading per layer with its count and cause, one line per
    difference with the two values below it, the summary last."""
    w = _Writer(width, verbose, _SYMBOLS if unicode else _ASCII_SYMBOLS, unicode)
    w.add("kernodeck diff", "title")
    w.add(f"A: {result.a}", indent=STEP_INDENT)
    w.add(f"B: {result.b}", indent=STEP_INDENT)
    _diff_layers(w, result, _DIFFERS[0] if unicode else _DIFFERS[1], brief=quiet and not verbose)
    _diff_tail(w, result, quiet)
    w.add(result.summary, "ok" if result.identical else "bad")
    return w.lines


def _diff_layers(w: _Writer, result: DiffResult, mark: str, *, brief: bool) -> None:
    """A heading per layer with its count and cause; unless `brief`, each difference and its values."""
    by_layer: dict[str, list[Any]] = {}
    for group in result.groups.values():
        for d in group:
            by_layer.setdefault(d.layer, []).append(d)
    order = [*result.layers, *(layer for layer in by_layer if layer not in result.layers)]
    for layer in (x for x in order if by_layer.get(x)):
        diffs = by_layer[layer]
        n = len(diffs)
        w.add(f"{layer}: {n} difference{'s' if n != 1 else ''} ({diffs[0].cause})", "heading")
        for d in [] if brief else diffs:
            w.add(f"{STEP_INDENT}{mark} {d.item}: {d.what}", "warning", rest=STEP_INDENT + "    ")
            if d.what not in ("only in A", "only in B") or d.a is not None or d.b is not None:
                w.field("A", _compact(d.a) if d.a is not None else "none", limit=FIELD_LINES["observed"])
                w.field("B", _compact(d.b) if d.b is not None else "none", limit=FIELD_LINES["observed"])


def _diff_tail(w: _Writer, result: DiffResult, quiet: bool) -> None:
    """The measurements side by side (never compared), the steps not compared, the notes."""
    if result.measurements and not quiet:
        w.add("measurements (shown, never compared): A | B", "heading")
        for m in result.measurements:
            w.add(f"{STEP_INDENT}{m.describe()}", rest=STEP_INDENT + "    ")
    if result.not_compared:
        n = len(result.not_compared)
        w.add(
            f"not compared: {n} step{'s' if n != 1 else ''} skipped in A or B ({', '.join(result.not_compared)})"
        )
    for note in result.notes:
        w.add(f"note: {note}")


def render_diff(
    result: DiffResult,
    file: IO[str] | None = None,
    *,
    color: str | bool | None = "auto",
    quiet: bool = False,
    verbose: bool = False,
    width: int | None = None,
) -> None:
    out = file if file is not None else sys.stdout
    lines = diff_lines(
        result, width=width_of(out, width), verbose=verbose, quiet=quiet, unicode=_unicode_ok(out)
    )
    _write(out, paint(lines, use_color(color, out), status_marks=False))


__all__ = [
    "COLOR_MODES",
    "DEFAULT_WIDTH",
    "Line",
    "diff_lines",
    "render_diff",
    "render_report",
    "report_lines",
    "shared_hints",
    "short_hashes",
    "summary_text",
    "use_color",
    "value_text",
    "width_of",
    "wrap",
]
