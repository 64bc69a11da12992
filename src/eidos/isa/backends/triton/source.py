"""Generated Triton source -> the @triton.jit function it defines.

triton.jit reads a kernel's source with inspect (and hashes it for its own disk cache), so
generated text must live in a real file: each source is written once to a folder named by its
Blake3, imported from there, and memoized, so a second load in this process is a dict hit and
one in a later process reuses the file (and Triton's compiled binary keyed by it).
"""

from __future__ import annotations

import threading
from pathlib import Path

import blake3

from eidos.errors import BackendError

from ...codegen.loader import cache_root, import_source

_LOADED: dict[tuple[str, str], object] = {}
_LOCK = threading.Lock()


def cache_dir() -> Path:
    """$EIDOS_CACHE_DIR (or ~/.cache/eidos) / isa-triton."""
    return cache_root() / "isa-triton"


def key(source: str) -> str:
    return blake3.blake3(source.encode()).hexdigest()


def path_of(source: str) -> Path:
    """Where `source` is (or will be) written: <cache>/<2 hex>/<blake3>/kernel.py."""
    k = key(source)
    return cache_dir() / k[:2] / k / "kernel.py"


def load(source: str, name: str):
    """The object `name` (a @triton.jit function) that `source` defines; BackendError if it defines none."""
    k = key(source)
    fn = _LOADED.get((k, name))
    if fn is not None:
        return fn
    with _LOCK:
        fn = _LOADED.get((k, name))
        if fn is not None:
            return fn
        module = import_source(source, path_of(source), f"eidos_isa_triton_{k[:40]}")
        fn = getattr(module, name, None)
        if fn is None:
            raise BackendError(f"generated triton source {k[:16]} defines no {name!r}; it defines: "
                               f"{', '.join(n for n in vars(module) if not n.startswith('_')) or 'nothing'}")
        _LOADED[(k, name)] = fn
        return fn


__all__ = ["load", "cache_dir", "path_of", "key"]
