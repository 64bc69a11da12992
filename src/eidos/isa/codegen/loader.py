"""Generated source -> a module, written once under the cache directory and imported from there.

numba's and Triton's own on-disk caches are keyed by the file a function comes from, so a source is
written once (the same name, the same bytes) and a later process imports the file instead of
compiling again; a generator's version is part of what it writes, so changed generator code never
loads stale code.
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
import threading
from pathlib import Path

from eidos.errors import BackendError

from ..cache import cache_root, write_atomic

_LOCK = threading.Lock()
_HERE = Path(__file__).parent


def generator_version(*files: Path) -> str:
    """A short digest of a target's generator files and of this skeleton's, for generated code to name."""
    texts = [f.read_bytes() for f in (*files, *sorted(_HERE.glob("*.py")))]
    return hashlib.blake2b(b"".join(texts), digest_size=6).hexdigest()


def import_source(source: str, path: Path, modname: str):
    """The module `modname` holding `source`, written to `path` unless it holds those bytes already
    (atomically: another process never imports half a file); imported once per process."""
    with _LOCK:
        module = sys.modules.get(modname)
        if module is not None:
            return module
        if not path.exists() or path.read_text() != source:
            write_atomic(path, source.encode())
        spec = importlib.util.spec_from_file_location(modname, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[modname] = module
        try:
            spec.loader.exec_module(module)
        except Exception as e:
            del sys.modules[modname]
            raise BackendError(f"generated source {path} does not load: {type(e).__name__}: {e}") from e
        return module


__all__ = ["cache_root", "generator_version", "import_source"]
