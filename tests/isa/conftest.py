"""The shared instruction suite runs on every kernel target the registry (eidos.isa.registry) finds:
the built-in ones and any installed through the `eidos.isa.backends` entry points. A target that
cannot run here is skipped with the reason."""

from __future__ import annotations

import os

import pytest

from eidos.isa import registry
from eidos.testing.strategies import examples

BACKENDS = registry.names()


def use_triton_interpreter_without_cuda() -> None:
    """Without an NVIDIA device the triton backend runs in Triton's interpreter. The switch is read when
    @triton.jit runs, so it is set here, when the suite is collected, before any kernel (and, unless
    another conftest imported triton first, before triton.language) is defined. The device files are
    the probe: importing torch here would slow every test run."""
    if "TRITON_INTERPRET" not in os.environ and not any(
            os.path.exists(p) for p in ("/dev/nvidiactl", "/dev/nvidia0", "/dev/dxg")):
        os.environ["TRITON_INTERPRET"] = "1"


use_triton_interpreter_without_cuda()


def _on_gpu() -> bool:
    return os.environ.get("TRITON_INTERPRET") != "1"


def generated_examples(n: int) -> int:
    """Examples for a test of generated register programs: on a real GPU each one compiles a new
    Triton kernel (seconds apiece), so a fifth as many there unless EIDOS_GPU_EXAMPLES=full (the slow
    tier, README's GPU section); elsewhere as many as examples(n) gives (all n in the deep tier)."""
    if not _on_gpu():
        return examples(n)
    return n if os.environ.get("EIDOS_GPU_EXAMPLES") == "full" else max(3, n // 5)


def generated_shards(n: int) -> list[tuple[int, int]]:
    """(shard, examples) pairs splitting generated_examples(n) into pytest items of at most 2 examples
    on a GPU, so pytest-xdist compiles their kernels on several cores at once instead of one test
    compiling them in turn (the longest GPU tests were these); one item under the interpreter.
    Each item's search starts at the simplest program (Hypothesis tries it first, and its kernel is
    compiled once and cached), so each takes one example more."""
    total = generated_examples(n)
    if not _on_gpu():
        return [(0, total)]
    return [(k, min(2, total - 2 * k) + 1) for k in range((total + 1) // 2)]


def make_backend(name: str):
    from eidos.errors import BackendUnavailable

    try:
        return registry.create(name)
    except BackendUnavailable as e:  # an absent engine or device skips, never fails collection
        pytest.skip(str(e))


# What a backend legitimately has no form for, and the UnsupportedError text that must name it.
# A test parametrized with such a type (or marked `extended_integers`) runs on that backend expecting
# exactly that error, so a gap is asserted, never skipped.
NO_EXTENDED_INTEGERS = {"triton"}


def _extended_type(item):
    from eidos.isa import Type

    params = getattr(getattr(item, "callspec", None), "params", {})
    for v in params.values():
        if isinstance(v, Type) and v.is_extended:
            return v
    marker = item.get_closest_marker("extended_integers")
    return marker.args[0] if marker else None


@pytest.hookimpl(hookwrapper=True)
def pytest_pyfunc_call(pyfuncitem):
    params = getattr(getattr(pyfuncitem, "callspec", None), "params", {})
    name = params.get("backend") or params.get("backend_name")
    ty = _extended_type(pyfuncitem) if name in NO_EXTENDED_INTEGERS else None
    if ty is None:
        yield
        return
    from eidos.errors import UnsupportedError

    test = pyfuncitem.obj

    def expect_unsupported(*args, **kwargs):
        with pytest.raises(UnsupportedError, match=ty.name):
            test(*args, **kwargs)
    pyfuncitem.obj = expect_unsupported
    try:
        yield
    finally:
        pyfuncitem.obj = test


def pytest_configure(config):
    config.addinivalue_line("markers", "extended_integers(ty): the test needs integers wider than 64 bits (ty); "
                                       "backends without them must raise UnsupportedError naming ty")


@pytest.fixture(params=BACKENDS)
def backend(request):
    return make_backend(request.param)


@pytest.fixture
def reference():
    from eidos.isa.backends.reference import ReferenceBackend

    return ReferenceBackend()
