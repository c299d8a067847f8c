"""GitHub Actions outputs of a report: annotations, the step summary, and a log the runner cannot
misread.

The runner reads every line a step prints (split at `\\n`, `\\r` and `\\r\\n`) for workflow
commands: `::name props::data` at the start of the line once leading whitespace is trimmed, and
the older `##[name props]data` anywhere in it. Text from a checked program (its stderr in an
error, a step name from a manifest, a path) could therefore mask the log (`::add-mask::`), forge
annotations or end a group. So under GitHub Actions (`GITHUB_ACTIONS=true`):

- every failed step becomes one `::error title=…::message` (an optional one, and every warning,
  `::warning`; a hint it shares with an earlier one is given there only: `hint: as for
  packages/pin:torch`), its title naming the step once, with `file=`, `line=` (and `endLine=`) where the
  step says what explains it (`Step.where`: its manifest entry, its lock-file pin, the data file),
  the file relative to the repository root ($GITHUB_WORKSPACE, else the folder holding `.git`,
  else the manifest's folder), so it shows on the pull request's diff; properties and the
  message are escaped the way the runner's toolkit escapes them (`%`, `\\r`, `\\n`; in
  properties also `:` and `,`), after control characters were made visible;
- the human report that follows is printed between `::stop-commands::TOKEN` and `::TOKEN::`, with
  a token drawn at random for each run: the runner processes no command in between, whatever the
  report's lines hold;
- the Markdown summary is appended to `$GITHUB_STEP_SUMMARY` in one `O_APPEND` write, as GitHub
  documents, so concurrent steps lose nothing and a symbolic link there is written through.
"""

from __future__ import annotations

import os
import posixpath
import secrets
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from kernodeck.layers.causes import NAMED_WITH_LAYER
from kernodeck.render.visible import visible
from kernodeck.report import Report, Status, Step, Where, short_hashes
from kernodeck.support.fsio import append_text


def in_github_actions(env: Mapping[str, str] | None = None) -> bool:
    return (env if env is not None else os.environ).get("GITHUB_ACTIONS") == "true"


def escape_data(text: str) -> str:
    """A command's data as the runner's toolkit escapes it (control characters visible first)."""
    return visible(text).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """A command's property value as the runner's toolkit escapes it."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def step_label(step: Step) -> str:
    """The step named once: `data:samples`, `pin:torch` (not `data/data:samples`); `layer/name`
    where the name does not say its layer."""
    return step.name if step.what() in NAMED_WITH_LAYER else f"{step.layer.value}/{step.name}"


def annotated(step: Step) -> str | None:
    """The annotation level of a step: `error` for a required failure, `warning` for an optional
    one or a warning, None for the others."""
    if step.status is Status.FAILED:
        return "error" if step.required else "warning"
    return "warning" if step.status is Status.WARNING else None


def location(where: Where | None, folder: str | None) -> dict[str, str]:
    """`file`, `line`, `endLine` of an annotation: `where`'s file under `folder`, the manifest's
    folder relative to the repository root ('' for the root itself; None: outside it, nothing)."""
    if where is None or folder is None:
        return {}
    out = {"file": posixpath.normpath(posixpath.join(folder, where.file))}
    if where.line is not None:
        out["line"] = str(where.line)
        if where.end_line is not None:
            out["endLine"] = str(where.end_line)
    return out


def github_annotations(report: Report, folder: str | None = "") -> list[str]:
    """`::error` for every failed step, `::warning` for an optional one and every warning,
    pointing at what explains it (`location`; `folder`: the manifest's folder relative to the
    repository root)."""
    out = []
    hinted: dict[str, str] = {}  # hint -> the step whose annotation gave it
    for s in report.steps:
        level = annotated(s)
        if level is None:
            continue
        message = short_hashes(s.error or s.status.value)
        if s.hint in hinted:  # one hint per cause: given on the first annotation that shares it
            message += f"\nhint: as for {hinted[s.hint]}"
        elif s.hint:
            message += f"\nhint: {short_hashes(s.hint)}"
            hinted[s.hint] = step_label(s)
        props = {**location(s.where, folder), "title": f"kernodeck {report.kind}: {step_label(s)}"}
        shown = ",".join(f"{k}={escape_property(v)}" for k, v in props.items())
        out.append(f"::{level} {shown}::{escape_data(message)}")
    return out


def repository_folder(folder: Path, env: Mapping[str, str]) -> str | None:
    """`folder` (the manifest's) relative to the repository root: $GITHUB_WORKSPACE when set, else
    the folder holding `.git`, else `folder` itself; None when it lies outside that root."""
    from kernodeck.gitstate import git_toplevel

    here = folder.resolve()
    workspace = env.get("GITHUB_WORKSPACE")
    root = Path(workspace).resolve() if workspace else (git_toplevel(here) or here)
    try:
        return here.relative_to(root).as_posix()
    except ValueError:
        return None


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


def github_outputs(
    report: Report, stream: IO[str], env: Mapping[str, str] | None = None, folder: Path | None = None
) -> None:
    """Under GitHub Actions: the annotations on `stream` (their files found from `folder`, the
    manifest's; None: the current one), the summary appended to $GITHUB_STEP_SUMMARY. Elsewhere
    nothing."""
    from kernodeck.render.markdown import markdown_summary

    environ = env if env is not None else os.environ
    if not in_github_actions(environ):
        return
    lines = github_annotations(report, repository_folder(folder or Path.cwd(), environ))
    if lines:
        stream.write("\n".join(lines) + "\n")
        stream.flush()
    target = environ.get("GITHUB_STEP_SUMMARY")
    if target:
        # after a blank line: the summary's heading starts a line whatever the file ended with
        append_text(target, markdown_summary(report), after="\n")


__all__ = [
    "annotated",
    "commands_stopped",
    "escape_data",
    "escape_property",
    "github_annotations",
    "github_outputs",
    "in_github_actions",
    "location",
    "repository_folder",
    "step_label",
    "stop_token",
]
