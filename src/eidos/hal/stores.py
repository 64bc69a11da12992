"""Object stores: s3://, gs:// and http(s):// paths opened through pyarrow's file systems (and a plain GET).

Credentials come from `storage_options` (Polars' names, e.g. aws_access_key_id) or, without them, from the
standard provider chains (AWS_* variables, ~/.aws, instance roles; GOOGLE_APPLICATION_CREDENTIALS, ...);
an S3 endpoint from `aws_endpoint_url` or AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL, as the AWS SDKs read it.
A source keeps the options apart from what it shows or stores (eidos.ir.sources.FileSource.storage).
http(s) objects are read whole with one GET that follows no redirect (a redirect could lead anywhere,
https to http included); plain http needs `allow_http`. Which URLs a plan read from JSON may reach is
eidos.ir.uri.check_path's rule.
"""

from __future__ import annotations

import functools
import io
import os
import urllib.error
import urllib.request
from urllib.parse import urlsplit

from eidos.errors import PlanError
from eidos.ir.uri import scheme_of

S3_KEYS = {"aws_access_key_id": "access_key", "aws_secret_access_key": "secret_key",
           "aws_session_token": "session_token", "aws_region": "region", "aws_endpoint_url": "endpoint"}
KEYS = frozenset(S3_KEYS) | {"allow_http", "timeout", "google_anonymous", "google_endpoint_url"}
ENVIRONMENT = ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ACCESS_KEY_ID",
               "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE")


def options(storage_options) -> tuple[tuple[str, str], ...]:
    """`storage_options` checked and kept as text pairs (a PlanError names an unknown key, never a value)."""
    if storage_options is None:
        return ()
    if not isinstance(storage_options, dict):
        raise PlanError(f"storage_options is a dict of option to value, got {type(storage_options).__name__}")
    unknown = sorted(k for k in storage_options if k not in KEYS)
    if unknown:
        raise PlanError(f"storage_options has no option {unknown[0]!r}; options: {', '.join(sorted(KEYS))}")
    if "timeout" in storage_options and not isinstance(storage_options["timeout"], (int, float)):
        raise PlanError("storage_options timeout is a number of seconds")
    return tuple(sorted((k, str(v)) for k, v in storage_options.items() if v is not None))


def is_remote(path: str) -> bool:
    return scheme_of(path) is not None


@functools.lru_cache(maxsize=32)
def _filesystem(scheme: str, storage: tuple[tuple[str, str], ...], environment: tuple):
    import datetime

    import pyarrow.fs as pafs

    given = dict(storage)
    timeout = float(given["timeout"]) if "timeout" in given else None
    if scheme == "s3":
        args = {S3_KEYS[k]: v for k, v in given.items() if k in S3_KEYS}
        if timeout:
            args.update(connect_timeout=timeout, request_timeout=timeout)
        endpoint = args.pop("endpoint", None) or os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get(
            "AWS_ENDPOINT_URL")
        if endpoint:
            parts = urlsplit(endpoint if "://" in endpoint else "https://" + endpoint)
            args.update(endpoint_override=parts.netloc, scheme=parts.scheme)
        args.setdefault("region", os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1")
        return pafs.S3FileSystem(**args)
    endpoint = given.get("google_endpoint_url")
    parts = urlsplit(endpoint) if endpoint else None
    return pafs.GcsFileSystem(anonymous=given.get("google_anonymous", "").lower() == "true",
                              **({"endpoint_override": parts.netloc, "scheme": parts.scheme} if parts else {}),
                              **({"retry_time_limit": datetime.timedelta(seconds=timeout)} if timeout else {}))


def filesystem(path: str, storage: tuple[tuple[str, str], ...]):
    """(pyarrow FileSystem, the path inside it) for an s3:// or gs:// path."""
    scheme = scheme_of(path)
    environment = tuple(os.environ.get(k) for k in ENVIRONMENT)   # a changed environment: a new file system
    return _filesystem("s3" if scheme == "s3" else "gs", storage, environment), path.split("://", 1)[1]


def open_input(path: str, storage: tuple[tuple[str, str], ...]):
    """A pyarrow file to read `path` (an object-store path) from, with random access."""
    import pyarrow as pa

    if scheme_of(path) in ("http", "https"):
        return pa.BufferReader(_get(path, storage))
    fs, inner = filesystem(path, storage)
    return fs.open_input_file(inner)


def open_binary(path: str, storage: tuple[tuple[str, str], ...]) -> io.BufferedReader:
    """`path` as a Python binary file, read in order (lines for the csv module)."""
    return io.BufferedReader(_Raw(open_input(path, storage)))


class _Raw(io.RawIOBase):
    def __init__(self, native):
        self.native = native

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        data = self.native.read(len(buffer))
        buffer[:len(data)] = data
        return len(data)

    def close(self) -> None:
        self.native.close()
        super().close()


def info(path: str, storage: tuple[tuple[str, str], ...]) -> tuple[int, int]:
    """(size, modification time in ns) of an object; (0, 0) for http(s), which is read whole each time."""
    if scheme_of(path) in ("http", "https"):
        return 0, 0
    fs, inner = filesystem(path, storage)
    got = fs.get_file_info(inner)
    if got.type.name == "NotFound":
        raise FileNotFoundError(f"no such object: {path!r}")
    return got.size or 0, got.mtime_ns or 0


def kind(path: str, storage: tuple[tuple[str, str], ...]) -> str:
    """'file', 'folder' (a prefix holding objects) or 'missing'; http(s) URLs are taken as files."""
    if scheme_of(path) in ("http", "https"):
        return "file"
    fs, inner = filesystem(path, storage)
    return {"File": "file", "Directory": "folder"}.get(fs.get_file_info(inner).type.name, "missing")


def listing(path: str, storage: tuple[tuple[str, str], ...]) -> list[str]:
    """Every object below prefix `path` (s3://bucket/folder), as full paths, sorted."""
    import pyarrow.fs as pafs

    fs, inner = filesystem(path, storage)
    found = fs.get_file_info(pafs.FileSelector(inner.rstrip("/"), recursive=True, allow_not_found=True))
    return sorted(f"{scheme_of(path)}://{f.path}" for f in found if f.type.name == "File")


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        raise PlanError(f"{req.full_url!r} answered with a redirect (HTTP {code}); eidos follows none, since it "
                        "could lead anywhere: give the URL it leads to")


def _get(url: str, storage: tuple[tuple[str, str], ...]) -> bytes:
    if scheme_of(url) == "http" and dict(storage).get("allow_http", "").lower() != "true":
        raise PlanError(f"{url!r} is plain http; reading it needs storage_options={{'allow_http': True}} "
                        "(https is read without it)")
    opener = urllib.request.build_opener(_NoRedirect)
    try:
        timeout = float(dict(storage).get("timeout", 60))
        with opener.open(urllib.request.Request(url, headers={"User-Agent": "eidos"}), timeout=timeout) as answer:
            return answer.read()
    except urllib.error.HTTPError as e:
        raise OSError(f"HTTP {e.code} {e.reason} for {url!r}") from None
    except urllib.error.URLError as e:
        raise OSError(f"cannot reach {url!r}: {e.reason}") from None


def upload(local: str, path: str, storage: tuple[tuple[str, str], ...]) -> None:
    """Copy the complete file `local` to object `path` (s3, gs): the store shows the object only once whole."""
    import pyarrow.fs as pafs

    if scheme_of(path) not in ("s3", "gs", "gcs"):
        raise PlanError(f"cannot write {path!r}: eidos writes local files and s3:// or gs:// objects")
    fs, inner = filesystem(path, storage)
    pafs.copy_files(local, inner, source_filesystem=pafs.LocalFileSystem(), destination_filesystem=fs)
