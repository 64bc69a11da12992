"""The small eager path (the operator methods' and _small's; docs/tensor.md, "Small eager operations") against the
general path on generated operands: the same values, dtypes, shapes, errors and warnings; and no result it gives
is stale after the operands are written in place or change dtype or device."""

from __future__ import annotations

import operator
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import eidos as ei
import eidos.tensor as T
from eidos.tensor import backend as B
from eidos.testing.strategies import examples

pytest.importorskip("numba", reason="the small path calls the cpu backend's loops, which numba compiles")

BINARY = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv, "maximum": T.maximum,
          "minimum": T.minimum, "**": operator.pow, "atan2": T.atan2, "//": operator.floordiv, "<": operator.lt}
UNARY = {"neg": operator.neg, "abs": abs, "exp": T.exp, "sqrt": T.sqrt, "tanh": T.tanh, "sin": T.sin, "relu": T.relu}
DTYPES = ["float32", "float64", "int8", "int32", "int64", "uint8", "uint16", "bool", "float16"]
OPS = ["add", "sub", "mul", "div", "maximum", "minimum", "pow", "atan2", "floordiv", "lt", "neg", "abs", "exp",
       "sqrt", "tanh", "sin", "relu", "mod", "logical_or", "logical_and"]


def _general_only():
    """Every operation's small-path memo says 'no loop' for every dtype: the general path runs (B.reset, which the
    tests' fixture calls, empties the memo again)."""
    for op in OPS:
        table = B.small_table(op)
        for d in DTYPES:
            table[np.dtype(d)] = None


def _outcome(f, x, y):
    """What f(x[, y]) gives in eager mode: (dtype, shape, bytes) or (error type, message); warnings are errors."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            with ei.eager():
                r = f(x) if y is None else f(x, y)
            a = r.numpy()
            return "value", r.dtype, r.shape, a.dtype, a.tobytes()
        except Exception as e:   # noqa: BLE001 (the two paths must raise the same)
            return "error", type(e), str(e)


def _elements(dt):
    bounds = {"i": {"min_value": -8, "max_value": 8}, "u": {"min_value": 0, "max_value": 16}}.get(dt.kind, {})
    return hnp.from_dtype(dt, allow_subnormal=False, **bounds)


@st.composite
def operands(draw):
    dt = np.dtype(draw(st.sampled_from(DTYPES)))
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=3, max_side=4))
    x = draw(hnp.arrays(dt, shape, elements=_elements(dt)))
    how = draw(st.sampled_from(["same", "same", "same", "broadcast", "other dtype", "scalar", "view"]))
    if how == "scalar":
        y = draw(st.sampled_from([2, -1, 0.5, True]))
    else:
        ydt = np.dtype(draw(st.sampled_from(DTYPES))) if how == "other dtype" else dt
        yshape = draw(hnp.broadcastable_shapes(shape, min_dims=0, max_dims=3)) if how == "broadcast" else shape
        y = draw(hnp.arrays(ydt, yshape, elements=_elements(ydt)))
    tx = T(x)
    if how == "view" and x.ndim >= 2:
        tx = T(np.ascontiguousarray(x.swapaxes(-1, -2))).mT   # x's values and shape, not contiguous
    ty = T(y) if isinstance(y, np.ndarray) else y
    return tx, ty


@settings(max_examples=examples(300), deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_the_small_path_gives_what_the_general_path_gives(data):
    tx, ty = data.draw(operands())
    name = data.draw(st.sampled_from(sorted(BINARY) + sorted(UNARY)))
    f, y = (BINARY[name], ty) if name in BINARY else (UNARY[name], None)
    B.reset()
    fast = _outcome(f, tx, y)
    _general_only()
    slow = _outcome(f, tx, y)
    B.reset()
    assert fast == slow, (name, tx, y)


def test_the_small_path_runs_on_these_operands():
    """(So that the test above compares two paths:) same-shape, same-dtype contiguous host tensors take it."""
    x = T(np.arange(6, dtype=np.float32).reshape(2, 3))
    with ei.eager():
        for r in (x + x, x - x, x * x, x / x, T.maximum(x, x), x.exp(), abs(x), T(np.float64(2)) * T(np.float64(3))):
            assert "small eager path" in T.explain(r)
    _general_only()
    with ei.eager():
        assert "small eager path" not in T.explain(x + x)


def test_no_stale_result_after_writes_in_place():
    base = np.arange(5, dtype=np.float32)
    with ei.eager():
        a = T(base)
        r1 = a + a
        a += 1
        r2 = a + a
        a.add_(T(np.full(5, 10, np.float32)))
        r3 = a + a
        a[1] = 100
        r4 = a * a
        a.mul_(2)
        r5 = a - a
        r6 = a.exp()
    np.testing.assert_array_equal(r1.numpy(), base * 2)
    np.testing.assert_array_equal(r2.numpy(), (base + 1) * 2)
    np.testing.assert_array_equal(r3.numpy(), (base + 11) * 2)
    want = base + 11
    want[1] = 100
    np.testing.assert_array_equal(r4.numpy(), want * want)
    np.testing.assert_array_equal(r5.numpy(), np.zeros(5, np.float32))
    assert r6.numpy()[1] == np.float32(np.inf)   # exp(200) in float32
    for r in (r1, r2, r3, r4, r5):
        assert not np.shares_memory(r.numpy(), a.numpy())


def test_no_stale_result_after_numpy_writes_shared_memory():
    arr = np.arange(4, dtype=np.int64)
    with ei.eager():
        s = T(arr, copy=False)
        r1 = s * s
        arr[:] = 7
        r2 = s * s
    np.testing.assert_array_equal(r1.numpy(), np.arange(4) ** 2)
    np.testing.assert_array_equal(r2.numpy(), np.full(4, 49))


def test_no_stale_result_after_a_dtype_or_device_change():
    x = T(np.array([1.5, 2.5, -3.5], np.float32))
    with ei.eager():
        r1 = x + x
        i = x.astype("int32")
        r2 = i + i
        d = x.to(dtype="float64")
        r3 = d * d
        x = x.to("cpu")
        r4 = x + x
    assert r1.dtype == np.float32 and r2.dtype == np.int32 and r3.dtype == np.float64
    np.testing.assert_array_equal(r2.numpy(), np.array([2, 4, -6], np.int32))
    np.testing.assert_array_equal(r3.numpy(), np.array([1.5, 2.5, -3.5]) ** 2)
    np.testing.assert_array_equal(r4.numpy(), r1.numpy())
    if B.detect_devices().gpu_count == 0:
        return   # (the device half needs a GPU)
    g = x.to("gpu")
    with ei.eager():
        r = g + g
    assert r.device == "gpu" and "small eager path" not in T.explain(r)
    np.testing.assert_array_equal(r.numpy(), r1.numpy())


def test_a_change_of_backends_empties_the_memo():
    x = T(np.ones(3, np.float32))
    with ei.eager():
        assert "small eager path" in T.explain(x + x)
    B.set_backend("reference")
    with ei.eager():
        r = x + x
    assert "small eager path" not in T.explain(r) and "backend: reference" in T.explain(r)
    np.testing.assert_array_equal(r.numpy(), np.full(3, 2, np.float32))
