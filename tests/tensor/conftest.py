import numpy as np
import pytest

from eidos.tensor import backend as B


@pytest.fixture(autouse=True)
def _defaults():
    B.reset()
    yield
    B.reset()


@pytest.fixture
def reference():
    """Run every program on the ISA reference interpreter (tiny tensors only: it is pure Python)."""
    B.set_backend("reference")
    yield "reference"


@pytest.fixture(params=["reference", "cpu"])
def each_backend(request):
    B.set_backend(request.param)
    yield request.param


TOL = {"float16": 2e-3, "bfloat16": 1.6e-2, "float32": 2e-6, "float64": 1e-13}


def check(got, want, dtype=None):
    """got (Tensor) equals want (NumPy array, computed in float64 where that differs) in value, shape, dtype."""
    g = got.numpy()
    want = np.asarray(want)
    dt = np.dtype(dtype) if dtype is not None else want.dtype
    assert g.shape == want.shape, (g.shape, want.shape)
    assert g.dtype == dt, (g.dtype, dt)
    if dt.kind in "biu":
        np.testing.assert_array_equal(g, want.astype(dt))
    else:
        tol = TOL[str(dt)]
        np.testing.assert_allclose(g.astype(np.float64), want.astype(dt).astype(np.float64), rtol=tol * 4,
                                   atol=tol * 4, equal_nan=True)
