"""Reports for people and for CI: one package, one module per output.

- `terminal`: the compact human report (verify, check, rebuild, doctor and diff);
- `junit`: JUnit XML (`--junit FILE`);
- `markdown`: a Markdown summary (`--markdown FILE`, the job's step summary);
- `github`: under GitHub Actions, `::error` annotations, the step summary appended, and the
  human report printed where the runner reads no workflow command;
- `html`: one self-contained HTML diagnosis (`--html FILE`, `kernodeck report`);
- `visible`: the one place control characters in untrusted text are made visible, used by all.

`emit` writes every output a command was asked for; the options themselves are declared once in
`kernodeck.commands.options` (`report_options`).
"""

from __future__ import annotations

from kernodeck.render.output import OutputOptions, emit

__all__ = ["OutputOptions", "emit"]
