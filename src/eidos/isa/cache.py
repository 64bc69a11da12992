"""ProgramCache: compiled artifacts keyed by Blake3 of the canonical program, the target,
its options and the library versions; an in-memory LRU in front of an optional directory
so a second process finds what the first compiled.

The compiled-kernel cache on disk (kernel_dir, seal/unseal, trim, clear): one folder per kernel target under
cache_root() ($EIDOS_CACHE_DIR, else $XDG_CACHE_HOME/eidos, else ~/.cache/eidos), then one per build tag
(the versions of Python, eidos, NumPy, numba and llvmlite, the machine and its CPU features), so code built by
other libraries or for another CPU is never looked at. Files are written atomically (a temporary file, then a
rename) and sealed with a keyed Blake3 tag (a random key kept in the root, mode 600): a damaged or foreign file
fails the check and is compiled again, never loaded. The root must belong to this user and not be writable by
others. trim() keeps it under EIDOS_CACHE_MAX_MB (default 1024), dropping other build tags first, then the files
used least recently."""

from __future__ import annotations

import functools
import hmac
import json
import os
import platform
import shutil
import sys
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from importlib import metadata
from pathlib import Path

import blake3

from eidos.errors import BackendError
from eidos.hal.devices import cache_root, cpu_features


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
        self._libraries = tuple(libraries)
        self._versions: dict | None = None
        self.hits = self.misses = 0
        self._lock = threading.Lock()  # backends may compile from several threads

    @property
    def versions(self) -> dict[str, str]:
        """build_versions() (Python, eidos, NumPy, numba, llvmlite, the CPU) and the other named libraries',
        read on first need (importlib.metadata walks sys.path: milliseconds, kept off a warm start's path)."""
        if self._versions is None:
            v = build_versions()
            extra = [n for n in self._libraries if n not in v]
            more = library_versions(extra) if extra else {}
            self._versions = {**v, **{n: more[n] for n in extra}}
        return self._versions

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


# ---- the compiled-kernel cache on disk ----------------------------------------------------------------

MAX_MB_DEFAULT = 1024
_SEAL = b"eidos-sealed-1\n"   # then 32 bytes of keyed Blake3 over the file's name and its payload
_TAG_BYTES = 32


def _dist_version(name: str) -> str:
    """A library's version without importing it: the package's dist-info folder beside it (an os.listdir, about
    a tenth of importlib.metadata's cost, which walks all of sys.path), else importlib.metadata."""
    import importlib.util

    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return "absent"
    site = Path(next(iter(spec.submodule_search_locations))).parent
    prefix = f"{name}-"
    for entry in _listdir(str(site)):
        if entry.startswith(prefix) and entry.endswith(".dist-info"):
            return entry[len(prefix):-len(".dist-info")]
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "absent"


@functools.cache
def _listdir(path: str) -> tuple[str, ...]:
    try:
        return tuple(os.listdir(path))
    except OSError:
        return ()


@functools.cache
def build_versions() -> dict[str, str]:
    """What compiled code depends on besides its source: Python, eidos, NumPy, numba, llvmlite, the machine and
    its CPU features. Read without importing numba or llvmlite (a warm start never imports them)."""
    import numpy

    import eidos

    return {"python": f"{platform.python_version()} {sys.implementation.cache_tag}", "eidos": eidos.__version__,
            "numpy": numpy.__version__, "numba": _dist_version("numba"), "llvmlite": _dist_version("llvmlite"),
            "machine": platform.machine(), "cpu": blake3.blake3(cpu_features().encode()).hexdigest()[:16]}


def build_tag(versions: dict[str, str] | None = None) -> str:
    """A short digest of build_versions() (or of `versions`): the name of the folder compiled code lives in."""
    v = build_versions() if versions is None else versions
    return blake3.blake3(json.dumps(v, sort_keys=True).encode()).hexdigest()[:16]


def check_root(root: Path) -> None:
    """The cache root must be this user's and not writable by others: code loaded from it runs in this process."""
    st = root.stat()
    if hasattr(os, "getuid") and (st.st_uid != os.getuid() or st.st_mode & 0o022):
        raise BackendError(f"the eidos cache folder {root} belongs to another user or is writable by others "
                           f"(mode {oct(st.st_mode & 0o777)}); compiled code is loaded from it, so eidos will not "
                           "use it: chmod 700 it, or set EIDOS_CACHE_DIR to a folder of your own")


def kernel_dir(target: str, root: str | os.PathLike | None = None) -> Path:
    """root / target / build_tag(): where one kernel target keeps its compiled code for these libraries.
    Created (the root with mode 700) and checked (check_root)."""
    base = Path(root) if root is not None else cache_root()
    base.mkdir(mode=0o700, parents=True, exist_ok=True)
    check_root(base)
    d = base / target / build_tag()
    d.mkdir(parents=True, exist_ok=True)
    return d


def _key_of(root: Path) -> bytes:
    """The cache's sealing key: 32 random bytes in root/.key (mode 600), made once. Published whole by a hard link
    (which fails if the name exists), so a reader never sees half a key and two makers agree on the first one."""
    path = root / ".key"
    for _ in range(3):
        try:
            data = path.read_bytes()
            if len(data) == 32:
                return data
            path.unlink(missing_ok=True)   # damaged: every sealed file becomes foreign and is rebuilt
        except FileNotFoundError:
            pass
        fd, tmp = tempfile.mkstemp(dir=root, prefix=".tmp-key-")   # mkstemp: mode 600
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(os.urandom(32))
            os.link(tmp, path)
        except FileExistsError:
            pass
        finally:
            os.unlink(tmp)
    raise BackendError(f"the eidos cache key {path} could not be read or made; remove it and retry")


@functools.cache
def _key(root: str) -> bytes:
    return _key_of(Path(root))


def _tag(path: Path, payload: bytes) -> bytes:
    root = cache_root()
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    h = blake3.blake3(key=_key(str(root)))
    h.update(path.name.encode() + b"\0")
    h.update(payload)
    return h.digest()


def seal(path: Path, payload: bytes) -> None:
    """Write payload to path atomically, sealed: unseal returns it only if neither changed since."""
    write_atomic(path, _SEAL + _tag(path, payload) + payload)


def unseal(path: Path) -> bytes | None:
    """The payload seal() wrote to path; None when absent, and None (the file removed, so it is rebuilt) when
    damaged, written by something else, or moved from another name."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    head = len(_SEAL)
    payload = data[head + _TAG_BYTES:]
    if data[:head] == _SEAL and hmac.compare_digest(data[head:head + _TAG_BYTES], _tag(path, payload)):
        return payload
    path.unlink(missing_ok=True)
    return None


def usage(root: str | os.PathLike | None = None) -> dict:
    """{"root", "bytes", "files", "targets": {target: bytes}} of the kernel cache."""
    base = Path(root) if root is not None else cache_root()
    out = {"root": str(base), "bytes": 0, "files": 0, "targets": {}}
    if not base.is_dir():
        return out
    for target in sorted(p for p in base.iterdir() if p.is_dir()):
        n = 0
        for f in target.rglob("*"):
            if f.is_file():
                n += f.stat().st_size
                out["files"] += 1
        out["targets"][target.name] = n
        out["bytes"] += n
    return out


def clear(root: str | os.PathLike | None = None) -> int:
    """Remove every compiled kernel under the cache root (the key and other files stay); the bytes freed."""
    base = Path(root) if root is not None else cache_root()
    freed = usage(base)["bytes"]
    if base.is_dir():
        for target in base.iterdir():
            if target.is_dir():
                shutil.rmtree(target, ignore_errors=True)
    return freed


def max_bytes() -> int:
    raw = os.environ.get("EIDOS_CACHE_MAX_MB", "")
    try:
        mb = int(raw) if raw else MAX_MB_DEFAULT
    except ValueError:
        raise BackendError(f"EIDOS_CACHE_MAX_MB must be a whole number of MiB, got {raw!r}") from None
    return max(mb, 0) << 20


def _entry(path: Path) -> str:
    """The entry a file belongs to: a generated module and numba's files for it share the module's stem."""
    return path.name.split(".", 1)[0].split("-", 1)[0] if path.parent.name == "__pycache__" else path.stem


def _is_tag(name: str) -> bool:
    return len(name) == 16 and all(c in "0123456789abcdef" for c in name)


def trim(root: str | os.PathLike | None = None, limit: int | None = None) -> int:
    """Keep the cache under `limit` bytes (default max_bytes()): drop folders of other build tags first, then
    this tag's entries least recently modified, down to 80% of the limit. The bytes freed."""
    base = Path(root) if root is not None else cache_root()
    limit = max_bytes() if limit is None else limit
    if not base.is_dir():
        return 0
    total, freed = usage(base)["bytes"], 0
    if total <= limit:
        return 0
    goal, tag = int(limit * 0.8), build_tag()
    entries: dict[tuple, list] = {}
    for target in (p for p in base.iterdir() if p.is_dir()):
        for item in target.iterdir():
            if item.is_dir() and item.name != tag and _is_tag(item.name):   # another build's folder: all of it
                n = sum(f.stat().st_size for f in item.rglob("*") if f.is_file())
                shutil.rmtree(item, ignore_errors=True)
                total, freed = total - n, freed + n
                continue
            for f in (item.rglob("*") if item.is_dir() else (item,)):   # this build's, or a target's own layout
                if f.is_file() and not f.name.startswith(".lock"):
                    st = f.stat()
                    e = entries.setdefault((f.parent.parent if f.parent.name == "__pycache__" else f.parent,
                                            _entry(f)), [0.0, 0, []])
                    e[0], e[1] = max(e[0], st.st_mtime), e[1] + st.st_size
                    e[2].append(f)
    for _mtime, size, files in sorted(entries.values(), key=lambda e: e[0]):
        if total <= goal:
            break
        for f in files:
            f.unlink(missing_ok=True)
        total, freed = total - size, freed + size
    return freed
