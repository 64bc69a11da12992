"""Kernel targets, one folder each. Imported lazily so `import eidos.isa.backends` needs no numba."""

from __future__ import annotations

import importlib

_LAZY = {
    "ReferenceBackend": "eidos.isa.backends.reference",
    "CpuBackend": "eidos.isa.backends.cpu",
    "TritonBackend": "eidos.isa.backends.triton",
}

__all__ = list(_LAZY)


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'eidos.isa.backends' has no attribute {name!r}")


def available() -> dict[str, str | None]:
    """Each kernel target by name -> None when it runs here, or the reason it does not (a target whose
    module has `unavailable_reason()` is asked: the triton one needs torch, triton and a device)."""
    out: dict[str, str | None] = {}
    for cls_name, module in _LAZY.items():
        key = module.rsplit(".", 1)[1]
        try:
            mod = importlib.import_module(module)
            getattr(mod, cls_name)
            reason = getattr(mod, "unavailable_reason", lambda: None)()
            out[key] = None if reason is None else f"BackendUnavailable: {reason}"
        except Exception as e:  # an absent engine makes a target unavailable, never an import error
            out[key] = f"{type(e).__name__}: {e}"
    return out
