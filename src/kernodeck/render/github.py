"""GitHub Actions outputs of a report: annotations, the step summary, and a log the runner cannot
misread.

The runner reads every line a step prints (split at `\\n`, `\\r` and `\\r\\n`) for workflow
commands: `::name props::data` at the start of the line once leading whitespace is trimmed, and
the older `##[name props]data` anywhere in it. Text from a checked program (its stderr in an
error, a step name from a manifest, a path) could therefore mask the log (`::add-mask::`), forge
annotations or end a group. So under GitHub Actions (`GITHUB_ACTIONS=true`):

- every failed step becomes one `::error title=…::message` (an optional one `::warning`; a hint
  it shares with an earlier one is given there only: `hint: as for packages/pin:torch`), its
  title escaped as a property and its message as data, the way the runner's toolkit escapes them
  (`%`, `\\r`, `\\n`; in properties also `:` and `,`), after control characters were made visible;
- the human report that follows is printed between `::stop-commands::TOKEN` and `::TOKEN::`, with
  a token drawn at random for each run: the runner processes no command in between, whatever the
  report's lines hold;
- the Markdown summary is appended to `$GITHUB_STEP_SUMMARY` in one `O_APPEND` write, as GitHub
  documents, so concurrent steps lose nothing and a symbolic link there is written through.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import IO

from kernodeck.render.visible import visible
from kernodeck.report import Report, Status, short_hashes
from kernodeck.support.fsio import append_text


def in_github_actions(env: Mapping[str, str] | None = None) -> bool:
    return (env if env is not None else os.environ).get("GITHUB_ACTIONS") == "true"


def escape_data(text: str) -> str:
    """A command's data as the runner's toolkit escapes it (control characters visible first)."""
    return visible(text).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """A command's property value as the runner's toolkit escapes it."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def github_annotations(report: Report) -> list[str]:
    """`::error title=…::message` for every failed step (`::warning` for an optional one)."""
    out = []
    hinted: dict[str, str] = {}  # hint -> the step whose annotation gave it
    for s in report.steps:
        if s.status is not Status.FAILED:
            continue
        level = "error" if s.required else "warning"
        title = f"kernodeck {report.kind}: {s.layer}/{s.name}"
        message = short_hashes(s.error or "failed")
        if s.hint in hinted:  # one hint per cause: given on the first annotation that shares it
            message += f"\nhint: as for {hinted[s.hint]}"
        elif s.hint:
            message += f"\nhint: {short_hashes(s.hint)}"
            hinted[s.hint] = f"{s.layer}/{s.name}"
        out.append(f"::{level} title={escape_property(title)}::{escape_data(message)}")
    return out


def stop_token() -> str:
    """A fresh token for `::stop-commands::`: random, so no text printed before it can end it."""
    return f"kernodeck-{secrets.token_hex(16)}"


@contextmanager
def commands_stopped(stream: IO[str], env: Mapping[str, str] | None = None) -> Iterator[None]:
    """Under GitHub Actions, what is written to `stream` inside is read by the runner as plain
    text (`::stop-commands::TOKEN` before, `::TOKEN::` after); elsewhere nothing is added."""
    if not in_github_actions(env):
        yield
        return
    token = stop_token()
    stream.write(f"::stop-commands::{token}\n")
    stream.flush()
    try:
        yield
    finally:
        stream.write(f"::{token}::\n")
        stream.flush()


def github_outputs(report: Report, stream: IO[str], env: Mapping[str, str] | None = None) -> None:
    """Under GitHub Actions: the annotations on `stream`, the summary appended to
    $GITHUB_STEP_SUMMARY. Elsewhere nothing."""
    from kernodeck.render.markdown import markdown_summary

    environ = env if env is not None else os.environ
    if not in_github_actions(environ):
        return
    lines = github_annotations(report)
    if lines:
        stream.write("\n".join(lines) + "\n")
        stream.flush()
    target = environ.get("GITHUB_STEP_SUMMARY")
    if target:
        # after a blank line: the summary's heading starts a line whatever the file ended with
        append_text(target, markdown_summary(report), after="\n")


__all__ = [
    "commands_stopped",
    "escape_data",
    "escape_property",
    "github_annotations",
    "github_outputs",
    "in_github_actions",
    "stop_token",
]
