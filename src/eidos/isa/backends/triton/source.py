"""Generated Triton source -> the @triton.jit function it defines.

triton.jit reads a kernel's source with inspect (and hashes it for its own disk cache), so
generated text must live in a real file: each source is written once to a folder named by its
Blake3, imported from there, and memoized, so a second load in this process is a dict hit and
one in a later process reuses the file (and Triton's compiled binary keyed by it).
"""

from __future__ import annotations

import importlib.util
import os
import sys
import tempfile
import threading
from pathlib import Path

import blake3

from eidos.errors import BackendError

_LOADED: dict[tuple[str, str], object] = {}
_LOCK = threading.Lock()


def cache_dir() -> Path:
    """$EIDOS_CACHE_DIR (or ~/.cache/eidos) / isa-triton."""
    root = os.environ.get("EIDOS_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "eidos")
    return Path(root) / "isa-triton"


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
        modname = f"eidos_isa_triton_{k[:40]}"
        module = sys.modules.get(modname)
        if module is None:
            module = _import(source, path_of(source), modname)
        fn = getattr(module, name, None)
        if fn is None:
            raise BackendError(f"generated triton source {k[:16]} defines no {name!r}; it defines: "
                               f"{', '.join(n for n in vars(module) if not n.startswith('_')) or 'nothing'}")
        _LOADED[(k, name)] = fn
        return fn


def _import(source: str, path: Path, modname: str):
    if not path.exists() or path.read_text() != source:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".py")
        try:
            with os.fdopen(fd, "w") as f:
                f.write(source)
            os.replace(tmp, path)  # atomic: another process never imports half a file
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    spec = importlib.util.spec_from_file_location(modname, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[modname] = module
    try:
        spec.loader.exec_module(module)
    except Exception as e:
        del sys.modules[modname]
        raise BackendError(f"generated triton source {path} does not load: {type(e).__name__}: {e}") from e
    return module


__all__ = ["load", "cache_dir", "path_of", "key"]
