"""Signed hand-over: the bundle's sums file signed with an SSH key, as git signs commits.

`kernodeck bundle --sign KEY` signs BUNDLE.sha256 with `ssh-keygen -Y sign -n kernodeck-bundle
-f KEY` (the SSHSIG format) and writes the signature beside it as BUNDLE.sha256.sig. A receiver
names who may sign in an allowed signers file (git's `gpg.ssh.allowedSignersFile` format:
`alice@example.com namespaces="kernodeck-bundle" ssh-ed25519 AAAA...`), given as
`kernodeck rebuild --allowed-signers FILE` or `KERNODECK_ALLOWED_SIGNERS`; rebuild then finds
the signer (`ssh-keygen -Y find-principals`) and checks the signature (`ssh-keygen -Y verify`)
before anything runs, and refuses an unsigned bundle or an unknown signer.

The allowed signers are never read from the bundle: a folder cannot vouch for itself.

    sig = sign(data, Path("~/.ssh/id_ed25519"))
    signer = verify_signature(data, sig, Path("allowed_signers"))   # Signer | Rejected
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from kernodeck.errors import UsageError
from kernodeck.support import envvars

#: The SSHSIG namespace of a bundle signature: a signature made for git or for e-mail never
#: passes as one (and one made here never passes as theirs).
NAMESPACE = "kernodeck-bundle"
#: Where the receiver's allowed signers file is named when --allowed-signers is not given.
ALLOWED_SIGNERS_VARIABLE = envvars.ALLOWED_SIGNERS.name

_GOOD = re.compile(r'^Good "[^"]*" signature (?:for (?P<who>.+?) )?with (?P<key>\S+ key \S+)', re.M)
_TIMEOUT = 60


class SigningError(UsageError):
    """The key could not sign, or ssh-keygen is missing (exit 2: nothing was written)."""


@dataclass(frozen=True)
class Signer:
    """Who signed: the identity the allowed signers file gives the key ("" when not checked
    against one), and the key ("ED25519 key SHA256:...")."""

    identity: str
    key: str

    def describe(self) -> str:
        return (
            f"{self.identity} ({self.key})"
            if self.identity
            else f"{self.key} (not checked against allowed signers)"
        )


@dataclass(frozen=True)
class Rejected:
    """Why a signature is not accepted."""

    reason: str


def _ssh_keygen() -> str:
    found = shutil.which("ssh-keygen")
    if found is None:
        raise SigningError(
            "ssh-keygen is not on PATH: bundle signatures are made and checked with it",
            hint="install OpenSSH's client tools (ssh-keygen 8.2 or later)",
        )
    return found


def _run(argv: list[str], data: bytes) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(argv, input=data, capture_output=True, timeout=_TIMEOUT, check=False)


def _said(proc: subprocess.CompletedProcess[bytes]) -> str:
    text = (proc.stderr or proc.stdout).decode("utf-8", "replace").strip().splitlines()
    return text[-1] if text else f"ssh-keygen exited {proc.returncode}"


def sign(data: bytes, key: Path) -> bytes:
    """The SSHSIG signature of `data` by the private key `key` (or the agent's key for a public
    key file), in the bundle namespace."""
    if not key.is_file():
        raise SigningError(f"--sign {key}: no such key file", hint="pass the path of an SSH private key")
    proc = _run([_ssh_keygen(), "-Y", "sign", "-n", NAMESPACE, "-f", str(key)], data)
    if proc.returncode != 0 or b"BEGIN SSH SIGNATURE" not in proc.stdout:
        raise SigningError(
            f"--sign {key}: ssh-keygen could not sign: {_said(proc)}",
            hint="pass an SSH private key (ssh-keygen -t ed25519), or a public key whose private key is in ssh-agent",
        )
    return proc.stdout


def _good(output: bytes) -> Signer | None:
    m = _GOOD.search(output.decode("utf-8", "replace"))
    return Signer(m.group("who") or "", m.group("key")) if m else None


def verify_signature(data: bytes, signature: Path, allowed_signers: Path) -> Signer | Rejected:
    """The signer of `data` when `signature` is a good bundle signature by a key the allowed
    signers file lists; else why not."""
    tool = _ssh_keygen()
    found = subprocess.run(
        [tool, "-Y", "find-principals", "-s", str(signature), "-f", str(allowed_signers)],
        capture_output=True,
        timeout=_TIMEOUT,
        check=False,
    )
    identities = [
        line.strip() for line in found.stdout.decode("utf-8", "replace").splitlines() if line.strip()
    ]
    if found.returncode != 0 or not identities:
        return Rejected(f"the key that signed it is not in {allowed_signers.name} ({_said(found)})")
    for identity in identities:
        proc = _run(
            [
                tool,
                "-Y",
                "verify",
                "-f",
                str(allowed_signers),
                "-I",
                identity,
                "-n",
                NAMESPACE,
                "-s",
                str(signature),
            ],
            data,
        )
        signer = _good(proc.stdout) if proc.returncode == 0 else None
        if signer is not None:
            return Signer(signer.identity or identity, signer.key)
    return Rejected(f"the signature does not match the file it signs ({_said(proc)})")


def check_unverified(data: bytes, signature: Path) -> Signer | Rejected:
    """The key of a good bundle signature without an allowed signers file (the identity is then
    unknown): what verify reports when no allowed signers are given."""
    proc = _run([_ssh_keygen(), "-Y", "check-novalidate", "-n", NAMESPACE, "-s", str(signature)], data)
    signer = _good(proc.stdout) if proc.returncode == 0 else None
    return signer if signer is not None else Rejected(f"the signature is not good ({_said(proc)})")


def allowed_signers_file(given: str | Path | None, environ: Mapping[str, str] | None = None) -> Path | None:
    """The receiver's allowed signers file: --allowed-signers, else $KERNODECK_ALLOWED_SIGNERS,
    else None (signatures are then reported, not required). A named file that is missing is a
    usage error."""
    env = os.environ if environ is None else environ
    where, value = (
        ("--allowed-signers", given)
        if given
        else (ALLOWED_SIGNERS_VARIABLE, env.get(ALLOWED_SIGNERS_VARIABLE))
    )
    if not value:
        return None
    path = Path(value).expanduser().absolute()
    if not path.is_file():
        raise UsageError(
            f"{where} {value}: no such file",
            hint='write one line per signer: `alice@example.com namespaces="kernodeck-bundle" ssh-ed25519 AAAA...`',
        )
    return path


def bundle_signer(folder: Path, allowed_signers: Path | None) -> Signer | Rejected | None:
    """Who signed the bundle `folder`'s sums file: checked against `allowed_signers` when given,
    else only checked to be good (the key named); None when it is not signed."""
    from kernodeck.handover import sums as bundlesums

    sig = folder / bundlesums.SIGNATURE
    if not sig.is_file():
        return None
    try:
        data = (folder / bundlesums.NAME).read_bytes()
    except OSError as e:
        return Rejected(f"{bundlesums.NAME} cannot be read: {e.strerror or e}")
    if allowed_signers is not None:
        return verify_signature(data, sig, allowed_signers)
    return check_unverified(data, sig)
