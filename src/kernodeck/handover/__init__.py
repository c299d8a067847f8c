"""Rebuild and hand-over: `rebuild` (the stage table), `bundle` (the hand-over folder), `sums`
(BUNDLE.sha256), `selfwheel` (Kernodeck's own wheel for the receiver), `scrub` (secrets and host
paths out of what leaves the machine), `installer_env` and `installer_errors` (every pip/uv run's
environment, and what its failures mean)."""
