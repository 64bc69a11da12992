"""The shared instruction suite runs on every kernel backend named in BACKENDS; a backend that
cannot import here is skipped with the reason. A new backend joins by adding its name."""

from __future__ import annotations

import importlib
import os

import pytest

BACKENDS = ["reference", "cpu", "triton"]
_CLASSES = {"reference": ("eidos.isa.backends.reference", "ReferenceBackend"),
            "cpu": ("eidos.isa.backends.cpu", "CpuBackend"),
            "triton": ("eidos.isa.backends.triton", "TritonBackend")}


def use_triton_interpreter_without_cuda() -> None:
    """Without an NVIDIA device the triton backend runs in Triton's interpreter. The switch is read when
    @triton.jit runs, so it is set here, when the suite is collected, before any kernel (and, unless
    another conftest imported triton first, before triton.language) is defined. The device files are
    the probe: importing torch here would slow every test run."""
    if "TRITON_INTERPRET" not in os.environ and not any(
            os.path.exists(p) for p in ("/dev/nvidiactl", "/dev/nvidia0", "/dev/dxg")):
        os.environ["TRITON_INTERPRET"] = "1"


use_triton_interpreter_without_cuda()


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
