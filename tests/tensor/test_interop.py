"""DLPack and NumPy interchange, errors, import lightness."""

import subprocess
import sys

import numpy as np
import pytest

import eidos as ei
import eidos.tensor as T
from eidos.errors import EidosError


def test_numpy_round_trips():
    a = np.arange(6, dtype=np.int16).reshape(2, 3)
    t = T(a, copy=False)
    assert np.asarray(t) is a or np.shares_memory(np.asarray(t), a)
    assert not np.shares_memory(T(a).numpy(), a)   # by default a copy: NumPy may write a later
    b = np.from_dlpack(t)
    assert np.shares_memory(b, a)
    c = ei.from_dlpack(a)
    assert np.shares_memory(c.numpy(), a)
    np.testing.assert_array_equal(np.from_dlpack(T(a) + 1), a + 1)
    assert t.__dlpack_device__() == (1, 0)


def test_torch_round_trip():
    torch = pytest.importorskip("torch", reason="torch is not installed here")
    x = torch.arange(6, dtype=torch.float32)
    t = ei.from_dlpack(x)
    np.testing.assert_array_equal((t * 2).numpy(), np.arange(6) * 2)
    back = torch.from_dlpack(t * 2)
    assert back.tolist() == [0, 2, 4, 6, 8, 10]


def test_shape_mismatch_names_shapes():
    with pytest.raises(EidosError, match=r"\(2, 3\) and \(4,\)"):
        T(np.zeros((2, 3))) + T(np.zeros(4))
    with pytest.raises(EidosError, match=r"\(2, 3\) and \(2, 3\) do not align"):
        T(np.zeros((2, 3))) @ T(np.zeros((2, 3)))
    with pytest.raises(EidosError, match="cannot reshape a tensor of shape"):
        T(np.zeros((2, 3))).reshape(4)


def test_bad_dtype_and_axis():
    with pytest.raises(EidosError, match="not supported"):
        T(np.array(["a"]))
    with pytest.raises(EidosError, match="not supported"):
        T([1.0]).astype("float128")
    with pytest.raises(EidosError, match="floating-point|bitwise"):
        T([1.0]) & T([2.0])
    with pytest.raises(EidosError, match="axis 2 is out of range for a tensor of 2"):
        T(np.zeros((2, 3))).sum(axis=2)
    with pytest.raises(EidosError, match="ambiguous"):
        bool(T([1, 2]))


def test_repr_and_scalars():
    t = T(np.array([1.5, 2.5], np.float32))
    assert repr(t) == "Tensor([1.5, 2.5], dtype=float32, device='cpu')"
    assert float(t.sum()) == 4.0 and int(T(3)) == 3 and t.shape == (2,) and t.dtype == np.float32
    assert t.tolist() == [1.5, 2.5] and len(t) == 2


def test_import_eidos_stays_light():
    code = ("import sys, eidos as ei; t = ei.Tensor; "
            "print([m for m in ('numba', 'torch') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
