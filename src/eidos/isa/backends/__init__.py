"""Kernel targets, one folder each. Imported lazily so `import eidos.isa.backends` needs no numba."""

from __future__ import annotations

import importlib

_LAZY = {
    "ReferenceBackend": "eidos.isa.backends.reference",
    "CpuBackend": "eidos.isa.backends.cpu",
}

__all__ = list(_LAZY)


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'eidos.isa.backends' has no attribute {name!r}")


def available() -> dict[str, str | None]:
    """Each kernel target by name -> None when it imports here, or the reason it does not."""
    out: dict[str, str | None] = {}
    for cls_name, module in _LAZY.items():
        key = module.rsplit(".", 1)[1]
        try:
            getattr(importlib.import_module(module), cls_name)
            out[key] = None
        except Exception as e:  # an absent engine makes a target unavailable, never an import error
            out[key] = f"{type(e).__name__}: {e}"
    return out
