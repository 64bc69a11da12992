"""The shared instruction suite runs on every kernel backend named in BACKENDS; a backend that
cannot import here is skipped with the reason. A new backend joins by adding its name."""

from __future__ import annotations

import importlib

import pytest

BACKENDS = ["reference", "cpu"]
_CLASSES = {"reference": ("eidos.isa.backends.reference", "ReferenceBackend"),
            "cpu": ("eidos.isa.backends.cpu", "CpuBackend")}


def make_backend(name: str):
    module, cls = _CLASSES[name]
    try:
        return getattr(importlib.import_module(module), cls)()
    except Exception as e:  # an absent engine skips, never fails collection
        pytest.skip(f"backend {name!r} unavailable: {type(e).__name__}: {e}")


@pytest.fixture(params=BACKENDS)
def backend(request):
    return make_backend(request.param)


@pytest.fixture
def reference():
    from eidos.isa.backends.reference import ReferenceBackend

    return ReferenceBackend()
