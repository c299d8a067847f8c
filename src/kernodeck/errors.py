"""One root exception for everything Kernodeck reports to a user.

Every error carries a message, optional context lines and a hint; the CLI formats them at the edge
and maps them to an exit code (2: bad input or usage, 1: a check or a resolution failed).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kernodeck.report import Report

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2


class KernodeckError(Exception):
    """Root of every error Kernodeck raises on purpose."""

    exit_code: int = EXIT_USAGE

    def __init__(self, message: str, *, context: list[str] | None = None, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.context = list(context or [])
        self.hint = hint

    def render(self) -> str:
        lines = [f"error: {self.message}"]
        lines.extend(f"  {c}" for c in self.context)
        if self.hint:
            lines.append(f"hint: {self.hint}")
        return "\n".join(lines)


class UsageError(KernodeckError):
    """Bad command-line usage or a missing input file."""


@dataclass(frozen=True)
class Issue:
    """One problem found in a manifest, with where it is."""

    file: str
    loc: str
    message: str
    line: int | None = None
    col: int | None = None
    hint: str | None = None
    excerpt: list[str] = field(default_factory=list)

    def render(self) -> str:
        where = self.file
        if self.line is not None:
            where += f":{self.line}"
            if self.col is not None:
                where += f":{self.col}"
        head = f"{where}: {self.loc + ': ' if self.loc else ''}{self.message}"
        out = [head, *self.excerpt]
        if self.hint:
            out.append(f"  hint: {self.hint}")
        return "\n".join(out)


class ManifestError(KernodeckError):
    """A manifest could not be read or is invalid; carries every problem found."""

    def __init__(self, issues: list[Issue]) -> None:
        self.issues = list(issues)
        n = len(self.issues)
        first = self.issues[0].file if self.issues else "manifest"
        super().__init__(f"{first}: {n} problem{'s' if n != 1 else ''} found")

    def render(self) -> str:
        return "\n".join(i.render() for i in self.issues) + f"\nerror: {self.message}"


class ResolutionError(KernodeckError):
    """No set of versions satisfies the manifest for a platform."""

    exit_code = EXIT_FAILED


class IndexError_(KernodeckError):
    """An index could not be read (network, HTTP status, malformed page)."""

    exit_code = EXIT_FAILED


class CheckFailed(KernodeckError):
    """A verification, check or rebuild stage failed: the summary as message, the failed steps as
    context, the first failure's hint, and the report (None where no report was made, e.g. a fleet
    exchange that broke). Its text is the whole of it and ends with the hint: a traceback at the
    top of a training script says what failed and what to do."""

    exit_code = EXIT_FAILED
    #: The report whose required steps failed.
    report: Report | None
    #: What to do about the first failure.
    hint: str | None

    def __init__(
        self,
        message: str,
        *,
        context: list[str] | None = None,
        hint: str | None = None,
        report: Report | None = None,
    ) -> None:
        super().__init__(message, context=context, hint=hint)
        self.report = report

    def __str__(self) -> str:
        return self.render().removeprefix("error: ")
