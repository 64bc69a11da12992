"""Who may use a service: one shared token (compared in constant time) and, when configured, TLS.

The token is read from a file (never a command-line argument, which every user of the machine can
read in the process list) and never printed: messages name the file, not its content.
"""

from __future__ import annotations

import hmac
import os
import ssl
import stat
from dataclasses import dataclass
from pathlib import Path

from eidos.errors import BackendUnavailable, PlanError

HEADER = b"authorization"
MIN_TOKEN_CHARS = 16


def read_token(path: str | os.PathLike) -> str:
    """The token in `path` (its first line, stripped); PlanError when missing, empty, too short or
    readable by others (a token any user can read protects nothing)."""
    p = Path(path)
    try:
        mode = p.stat().st_mode
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise PlanError(f"cannot read the token file {str(p)!r}: {e.strerror}") from e
    token = text.strip().splitlines()[0].strip() if text.strip() else ""
    check_token(token, f"the token in {str(p)!r}")
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise PlanError(f"the token file {str(p)!r} can be read by other users (mode {stat.filemode(mode)}); "
                        f"restrict it with: chmod 600 {p}")
    return token


def check_token(token: object, what: str = "the token") -> str:
    if not isinstance(token, str) or len(token) < MIN_TOKEN_CHARS or not token.isprintable() or " " in token:
        raise PlanError(f"{what} must be a string of at least {MIN_TOKEN_CHARS} printable characters without "
                        "spaces (make one with: python -c 'import secrets; print(secrets.token_urlsafe(32))')")
    return token


def bearer(token: str) -> tuple[bytes, bytes]:
    """The header a client sends with every control call."""
    return HEADER, b"Bearer " + token.encode()


def valid(headers: dict, token: str) -> bool:
    """Whether the call's headers carry `token`; the comparison takes the same time wherever they differ."""
    sent = headers.get(HEADER.decode(), [""])
    given = sent[0] if sent else ""
    given = given.encode() if isinstance(given, str) else bytes(given)
    return hmac.compare_digest(given, b"Bearer " + token.encode())


@dataclass(frozen=True)
class Tls:
    """TLS for both planes: the server's certificate and key; a client checks the server against `ca`."""

    cert: Path
    key: Path

    def read(self) -> tuple[bytes, bytes]:
        try:
            return self.cert.read_bytes(), self.key.read_bytes()
        except OSError as e:
            raise PlanError(f"cannot read the TLS certificate or key ({e.filename}): {e.strerror}") from e

    def server_context(self) -> ssl.SSLContext:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        try:
            ctx.load_cert_chain(self.cert, self.key)
        except (OSError, ssl.SSLError) as e:
            raise PlanError(f"cannot load the TLS certificate {str(self.cert)!r} and key: {e}") from e
        return ctx


def client_context(ca: str | os.PathLike | None) -> ssl.SSLContext:
    """A client's TLS context: the server's certificate must chain to `ca` (or the system's roots)."""
    try:
        return ssl.create_default_context(cafile=os.fspath(ca) if ca is not None else None)
    except (OSError, ssl.SSLError) as e:
        raise BackendUnavailable(f"cannot load the CA certificate {ca!r} for TLS: {e}") from e
