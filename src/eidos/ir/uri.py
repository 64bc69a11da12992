"""Database uris: the secrets they hold split from the rest by parsing, so that what eidos shows,
logs or stores as a plan never holds a password.

A PostgreSQL uri is read by libpq's rules ("Connection URIs" in its manual): after `scheme://`,
the text up to an `@` that comes before any `/` is the user information, `user[:password]`; then
hosts `host[:port]` separated by commas (IPv6 addresses in brackets), `/dbname`, and
`?key=value&...` parameters, each part percent-decoded. The secrets are the user information's
text after its first colon and the `password` and `sslpassword` parameters. Other schemes with an
authority are read alike; `duckdb:` and `sqlite:` uris name files and hold no secrets.

A uri that libpq would read otherwise than its writer meant is refused, naming the fix and never
echoing the text: an `@` past the user information (a password holding `@` or `/`), a port that
is not a number, a `%` not followed by two hex digits, a parameter without `=`.

Examples:
    >>> split("postgresql://app:p%40ss/w@db.example:5432/sales")
    Traceback (most recent call last):
    ...
    eidos.errors.PlanError: the uri is ambiguous: an '@' follows its user name and password...
    >>> split("postgresql://app:p%40ss%2Fw@db.example:5432/sales?sslmode=require")
    ('postgresql://app@db.example:5432/sales?sslmode=require', (('password', 'p@ss/w'),))
    >>> print(redact("FATAL for host=db password='x y' user=app, postgresql://app:secret@db/sales"))
    FATAL for host=db password=*** user=app, postgresql://app:***@db/sales
"""

from __future__ import annotations

import posixpath
import re
from urllib.parse import quote, unquote, urlsplit

from eidos.errors import PlanError

SECRET_KEYS = frozenset({"password", "sslpassword"})
FILE_SCHEMES = frozenset({"duckdb", "sqlite"})
POSTGRES_SCHEMES = frozenset({"postgresql", "postgres"})

_FIX = "percent-encode it (@ as %40, / as %2F, % as %25, & as %26)"


def _refuse(what: str) -> PlanError:
    return PlanError(f"the uri is ambiguous: {what}; if a password holds such a character, {_FIX} "
                     "(the uri is not shown, as it may hold a password)")


def _decode(text: str, what: str) -> str:
    if re.search(r"%(?![0-9A-Fa-f]{2})|%00", text):
        raise _refuse(f"its {what} holds a '%' that is not followed by two hex digits")
    return unquote(text)


def _ports(hosts: str) -> None:
    for host in hosts.split(","):
        _, colon, port = (host.rsplit("]", 1)[-1] if host.startswith("[") else host).partition(":")
        if colon and port and not port.isdigit():
            raise _refuse("a host's port is not a number (a password holding '/' ends the user "
                          "information early)")


def split(uri: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    """(the uri without its secrets, the secrets as decoded (key, value) pairs in the order libpq
    applies them). Raises PlanError for a uri libpq would read otherwise than meant."""
    scheme, sep, rest = uri.partition("://")
    if not sep or scheme.lower() in FILE_SCHEMES:
        return uri, ()
    secrets: list[tuple[str, str]] = []
    head = ""
    slash, at = rest.find("/"), rest.find("@")
    if at >= 0 and (slash < 0 or at < slash):
        info, rest = rest[:at], rest[at + 1:]
        user, colon, password = info.partition(":")
        if "?" in user:
            raise _refuse("its user name holds '?' (an '@' in a parameter reads as the end of a user name)")
        _decode(user, "user name")
        if colon:
            secrets.append(("password", _decode(password, "password")))
        head = user + "@" if user else ""
    authority_end = min((i for i in (rest.find("/"), rest.find("?")) if i >= 0), default=len(rest))
    hosts, tail = rest[:authority_end], rest[authority_end:]
    path, qmark, query = tail.partition("?")
    if "@" in hosts or "@" in path:
        raise _refuse("an '@' follows its user name and password")
    if scheme.lower() in POSTGRES_SCHEMES:
        _ports(hosts)
    kept = []
    for param in query.split("&") if qmark else ():
        key, eq, value = param.partition("=")
        if not eq:
            raise _refuse("a parameter has no '=' (a password holding '&' splits a parameter)")
        if _decode(key, "parameter name").lower() in SECRET_KEYS:
            secrets.append((unquote(key).lower(), _decode(value, "password")))
        else:
            kept.append(param)
    public = f"{scheme}://{head}{hosts}{path}" + ("?" + "&".join(kept) if kept else "")
    return public, tuple(secrets)


def join(public: str, secrets: tuple[tuple[str, str], ...]) -> str:
    """The uri a driver connects with: `public` with `secrets` as percent-encoded parameters, which
    libpq reads as it reads the user information's password."""
    if not secrets:
        return public
    params = "&".join(f"{key}={quote(value, safe='')}" for key, value in secrets)
    return public + ("&" if "?" in public.partition("://")[2] else "?") + params


_URI = r"(?P<uri>\b[A-Za-z][A-Za-z0-9+.-]*://\S+)"
_KEYVALUE = r"(?P<kv>\b(?:ssl)?password\s*=\s*)(?P<value>'(?:[^'\\]|\\.)*'?|\S+)"
_TEXT = re.compile(f"{_URI}|{_KEYVALUE}", re.IGNORECASE)


def redact(text: str) -> str:
    """`text` (a uri or a message) with every secret of every uri and libpq keyword/value string in
    it masked. Conservative where parsing cannot be sure: in a uri whose user information cannot be
    told apart, everything from the first ':' to the last '@' goes."""
    return _TEXT.sub(_mask, text)


def _mask(m: re.Match) -> str:
    if m.group("kv"):
        return m.group("kv") + "***"
    uri = m.group("uri")
    scheme, _, rest = uri.partition("://")
    if scheme.lower() in FILE_SCHEMES:
        return uri
    rest = re.sub(r"((?:ssl)?password=)[^&]*", r"\1***", rest, flags=re.IGNORECASE)
    at = rest.rfind("@")
    colon = rest.find(":")
    if 0 <= colon < at:
        rest = rest[:colon + 1] + "***" + rest[at:]
    return f"{scheme}://{rest}"


# ---------------------------------------------------------------- paths a source reads

STORE_SCHEMES = frozenset({"s3", "gs", "gcs", "http", "https"})
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://")


def scheme_of(path: str) -> str | None:
    """The scheme of an object-store path ('s3', 'https', ...), None for a local path."""
    m = _SCHEME.match(path)
    return m.group(1).lower() if m else None


def check_path(path: str, allowed_urls: tuple[str, ...] | None = None) -> None:
    """A PlanError unless a source may read `path`: a local path, or an s3://, gs:// or http(s):// URL
    without user information or a query (secrets go in storage_options, where nothing shows them).
    `allowed_urls` None: the caller wrote the path. Otherwise the path comes from a plan read from JSON,
    whose author is not trusted: an http(s) URL there could reach any host the process can (a cloud's
    metadata service, an intranet), so it must lie below one of `allowed_urls` (same scheme and host,
    below its path, with no '..' segment); s3:// and gs:// reach only the stores the process is
    configured for, as local paths reach only its files (docs/security.md)."""
    scheme = scheme_of(path)
    if scheme is None:
        return
    if scheme not in STORE_SCHEMES:
        raise PlanError(f"eidos reads local files and s3://, gs:// and https:// objects, not {scheme}:// paths")
    parts = urlsplit(path)
    if "@" in parts.netloc or parts.query or parts.fragment:
        raise PlanError(f"a {scheme}:// path holding a user name, password or query string is not read (it may hold "
                        "a secret, which eidos would show): give credentials as storage_options")
    if allowed_urls is None or scheme not in ("http", "https"):
        return
    segments = unquote(parts.path).split("/")
    for prefix in allowed_urls:
        allowed = urlsplit(prefix)
        base = allowed.path if allowed.path.endswith("/") else allowed.path + "/"
        if ((allowed.scheme.lower(), allowed.netloc.lower()) == (scheme, parts.netloc.lower())
                and ".." not in segments and (posixpath.normpath(parts.path) + "/").startswith(base)):
            return
    raise PlanError(f"the plan reads {path!r}, a URL outside those this process lets plans reach (an http(s) URL "
                    "in a plan could make eidos fetch from any host it can reach); allow it: "
                    f"Flow.from_json(text, allowed_urls=({prefix_of(path)!r},))")


def prefix_of(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}/"
