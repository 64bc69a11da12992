"""ProgramCache: compiled artifacts keyed by Blake3 of the canonical program, the target,
its options and the library versions; an in-memory LRU in front of an optional directory
so a second process finds what the first compiled."""

from __future__ import annotations

import json
import os
import platform
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from importlib import metadata
from pathlib import Path

import blake3

from eidos.errors import BackendError


def library_versions(libraries: Iterable[str] = ()) -> dict[str, str]:
    """Python, eidos, numpy and the named libraries' versions ('absent' when not installed)."""
    out = {"python": platform.python_version()}
    for name in ("eidos", "numpy", *libraries):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "absent"
    return out


def write_atomic(path: Path, data: bytes) -> None:
    """Write `data` to `path` through a temporary file and a rename: another process never reads half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class DiskCache:
    """Bytes by key in a directory, written atomically (temporary file, then rename)."""

    def __init__(self, directory: str | os.PathLike) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)

    def path(self, key: str) -> Path:
        return self.directory / key[:2] / f"{key}.bin"

    def get(self, key: str) -> bytes | None:
        try:
            return self.path(key).read_bytes()
        except FileNotFoundError:
            return None

    def put(self, key: str, data: bytes) -> None:
        write_atomic(self.path(key), data)

    def __contains__(self, key: str) -> bool:
        return self.path(key).exists()


class ProgramCache:
    """LRU of `capacity` entries. get(program)/insert(program) cache programs themselves (the
    spec's use); get_or_compile caches anything a backend builds from a program."""

    def __init__(self, capacity: int = 128, directory: str | os.PathLike | None = None,
                 libraries: Iterable[str] = ()) -> None:
        if not isinstance(capacity, int) or capacity < 1:
            raise BackendError(f"ProgramCache: capacity must be a positive int, got {capacity!r}")
        self._capacity = capacity
        self._entries: OrderedDict[str, object] = OrderedDict()
        self.disk = DiskCache(directory) if directory is not None else None
        self.versions = library_versions(libraries)
        self.hits = self.misses = 0
        self._lock = threading.Lock()  # backends may compile from several threads

    def capacity(self) -> int:
        return self._capacity

    def __len__(self) -> int:
        return len(self._entries)

    def key(self, program, target: str = "", options: dict | None = None) -> str:
        """Blake3 hex of the program's digest (computed once per Program), target, options and versions."""
        extra = json.dumps({"target": target, "options": options or {}, "versions": self.versions},
                           sort_keys=True, default=str)
        return blake3.blake3(f"{program.digest()}\n{extra}".encode()).hexdigest()

    def _lookup(self, key: str):
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                self.hits += 1
                return self._entries[key]
            self.misses += 1
            return None

    def _store(self, key: str, value) -> None:
        with self._lock:
            self._entries[key] = value
            self._entries.move_to_end(key)
            while len(self._entries) > self._capacity:
                self._entries.popitem(last=False)

    def get(self, program, target: str = "", options: dict | None = None):
        return self._lookup(self.key(program, target, options))

    def insert(self, program, value=None, target: str = "", options: dict | None = None) -> None:
        self._store(self.key(program, target, options), program if value is None else value)

    def __contains__(self, program) -> bool:
        return self.key(program) in self._entries

    def get_or_compile(self, program, compile: Callable[[object], object], target: str = "",
                       options: dict | None = None, *, dumps: Callable[[object], bytes] | None = None,
                       loads: Callable[[bytes], object] | None = None):
        """Memory, then disk (when a directory and dumps/loads are given), then compile(program)."""
        key = self.key(program, target, options)
        value = self._lookup(key)
        if value is not None:
            return value
        persist = self.disk is not None and dumps is not None and loads is not None
        if persist:
            data = self.disk.get(key)
            if data is not None:
                try:
                    value = loads(data)
                except Exception:  # a damaged or foreign entry: compile again and overwrite it
                    value = None
                if value is not None:
                    self._store(key, value)
                    return value
        value = compile(program)
        self._store(key, value)
        if persist:
            self.disk.put(key, dumps(value))
        return value

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
