"""Kernel targets, one folder each, found through eidos.isa.registry (the `eidos.isa.backends` entry
points). A class name such as `CpuBackend` resolves through the registry on first use, so
`import eidos.isa.backends` needs no numba."""

from __future__ import annotations

from .. import registry


def __getattr__(name: str):
    cls = registry.class_named(name) if not name.startswith("_") else None
    if cls is None:
        raise AttributeError(f"module 'eidos.isa.backends' has no attribute {name!r}; kernel targets: "
                             f"{', '.join(registry.names())}")
    return cls


def available() -> dict[str, str | None]:
    """Each kernel target by name -> None when it runs here, or the reason it does not."""
    return {t.name: None if t.available else t.reason for t in registry.targets()}
