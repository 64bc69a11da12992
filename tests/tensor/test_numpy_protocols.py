"""NumPy's functions on tensors (__array_ufunc__, __array_function__) against NumPy on the same arrays, and
in-place operators writing the tensor's memory."""

import numpy as np
import pytest

import eidos as ei
from eidos.errors import DTypeError, ShapeError
from eidos.tensor import protocols

A = np.array([[0.5, -1.25, 2.0], [3.0, 0.25, -0.75]])
I = np.array([[1, -2, 3], [4, 5, -6]])
B = np.array([[True, False, True], [False, False, True]])


def _same(got, want):
    assert isinstance(got, ei.Tensor), type(got)
    g = got.numpy()
    assert g.dtype == np.asarray(want).dtype, (g.dtype, np.asarray(want).dtype)
    rtol = {np.dtype(np.float16): 2e-3, np.dtype(np.float32): 2e-6}.get(g.dtype, 1e-12)
    np.testing.assert_allclose(g, want, rtol=rtol, atol=1e-12, equal_nan=True)


UNARY = ["negative", "positive", "absolute", "sign", "sqrt", "square", "exp", "log", "log2", "log10", "expm1",
         "log1p", "sin", "cos", "tan", "arcsin", "arccos", "arctan", "sinh", "cosh", "tanh", "arcsinh",
         "arccosh", "arctanh", "isnan", "isinf", "isfinite", "floor", "ceil", "trunc", "rint", "conjugate",
         "reciprocal", "logical_not", "invert", "signbit"]


@pytest.mark.parametrize("name", UNARY)
@pytest.mark.parametrize("data", [A, A.astype(np.float32), I, I.astype(np.int8), B], ids=["f8", "f4", "i8", "i1", "b"])
def test_unary_ufuncs_match_numpy(name, data):
    f = getattr(np, name)
    try:
        with np.errstate(all="ignore"):
            want = f(data)
    except TypeError:
        with pytest.raises(TypeError):   # NumPy refuses: so does eidos (DTypeError is a TypeError)
            f(ei.tensor(data)).numpy()
        return
    _same(f(ei.tensor(data)), want)


BINARY = ["add", "subtract", "multiply", "divide", "floor_divide", "remainder", "power", "arctan2", "hypot",
          "copysign", "logaddexp", "maximum", "minimum", "equal", "not_equal", "less", "less_equal", "greater",
          "greater_equal", "logical_and", "logical_or", "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor",
          "left_shift", "right_shift", "fmax", "heaviside"]


@pytest.mark.parametrize("name", BINARY)
@pytest.mark.parametrize("pair", [(A, A[::-1]), (I, np.abs(I[::-1]) % 3 + 1), (A.astype(np.float32), 2.5),
                                  (I.astype(np.int16), 3), (B, B[::-1]), (I, A)], ids=["ff", "ii", "f4s", "i2s", "bb", "if"])
def test_binary_ufuncs_match_numpy(name, pair):
    f = getattr(np, name)
    x, y = pair
    try:
        with np.errstate(all="ignore"):
            want = f(x, y)
    except TypeError:
        with pytest.raises(TypeError):
            f(ei.tensor(x), y if np.isscalar(y) else ei.tensor(y)).numpy()
        return
    _same(f(ei.tensor(x), y if np.isscalar(y) else ei.tensor(y)), want)
    if not np.isscalar(y):
        _same(f(x, ei.tensor(y)), want)   # a NumPy array first: NumPy hands the call to the tensor


def test_ufuncs_stay_lazy_and_fuse():
    t = ei.tensor(A)
    before = ei.tensor.programs_executed()
    r = np.sum(np.exp(t) * 2 + np.sin(t))
    assert not r.is_realized
    np.testing.assert_allclose(float(r), np.sum(np.exp(A) * 2 + np.sin(A)))
    assert ei.tensor.programs_executed() - before == 1


def test_numpy_scalars_are_strong_as_in_numpy():
    t = ei.tensor(I.astype(np.int8))
    _same(np.multiply(t, np.float64(2)), I.astype(np.int8) * np.float64(2))
    _same(np.float32(2) * ei.tensor(A.astype(np.float32)), np.float32(2) * A.astype(np.float32))


def test_ufunc_out_where_dtype():
    t = ei.tensor(A)
    out = ei.tensor(np.zeros_like(A))
    r = np.add(t, 1, out=out)
    assert r is out
    _same(out, A + 1)
    mask = A > 0
    out2 = ei.tensor(np.full_like(A, -9.0))
    np.multiply(t, 10, out=out2, where=mask)
    _same(out2, np.where(mask, A * 10, -9.0))
    arr = np.zeros_like(A)
    assert np.add(t, 1, out=arr) is arr
    np.testing.assert_allclose(arr, A + 1)
    _same(np.add(ei.tensor(I), 1, dtype=np.float32), np.add(I, 1, dtype=np.float32))
    with pytest.raises(ShapeError, match="out="):
        np.add(t, 1, where=mask)
    with pytest.raises(DTypeError, match="same_kind"):
        np.add(t, 1, out=ei.tensor(np.zeros_like(I)))


def test_out_into_a_tensor_leaves_earlier_readers_alone():
    t = ei.tensor(A)
    y = t * 1
    np.add(t, 1, out=t)
    _same(y, A)
    _same(t, A + 1)


def test_ndarray_inplace_with_a_tensor():
    arr = np.ones(3)
    arr += ei.tensor([1.0, 2.0, 3.0])
    np.testing.assert_allclose(arr, [2, 3, 4])


REDUCE = [("sum", {}), ("sum", {"axis": 0}), ("sum", {"axis": 1, "keepdims": True}), ("prod", {"axis": 1}),
          ("max", {}), ("amin", {"axis": 0}), ("mean", {"axis": 1}), ("var", {"ddof": 1}), ("std", {"axis": 0}),
          ("argmax", {}), ("argmin", {"axis": 1}), ("any", {"axis": 0}), ("all", {}), ("sum", {"dtype": np.float32}),
          ("median", {}), ("cumsum", {"axis": 1}), ("sort", {"axis": 0}), ("sum", {"initial": 10.0}),
          ("max", {"where": np.array([True, False, True]), "initial": -1.0}), ("ptp", {})]


@pytest.mark.parametrize("name,kw", REDUCE, ids=[f"{n}{sorted(k)}" for n, k in REDUCE])
def test_functions_match_numpy(name, kw):
    f = getattr(np, name)
    _same(f(ei.tensor(A), **kw), f(A, **kw))


def test_function_table_runs_on_eidos_and_fallback_says_so():
    t = ei.tensor(A)
    r = np.sum(np.exp(t), axis=0)
    assert not r.is_realized   # eidos's reduction, lazy
    m = np.median(t)
    assert "host NumPy np.median (eidos has no median)" in ei.tensor.explain(m)
    s = np.sum(t, initial=1.0)
    assert "eidos does not take initial" in ei.tensor.explain(s)
    _same(s, np.sum(A, initial=1.0))
    c = np.cumsum(np.ones(3, dtype=np.int8))
    assert c.dtype == np.int64   # (a NumPy-only call stays NumPy)


def test_layout_functions():
    t = ei.tensor(A)
    _same(np.concatenate([t, t]), np.concatenate([A, A]))
    _same(np.concatenate([t, A], axis=1), np.concatenate([A, A], axis=1))
    _same(np.concat([t, t], axis=None), np.concat([A, A], axis=None))
    _same(np.stack([t, t], axis=1), np.stack([A, A], axis=1))
    _same(np.reshape(t, (3, 2)), np.reshape(A, (3, 2)))
    _same(np.reshape(t, (3, 2), order="F"), np.reshape(A, (3, 2), order="F"))
    _same(np.transpose(t), A.T)
    _same(np.ravel(t), np.ravel(A))
    _same(np.expand_dims(t, 0), np.expand_dims(A, 0))
    _same(np.where(t > 0, t, 0.0), np.where(A > 0, A, 0.0))
    _same(np.clip(t, -1, 1), np.clip(A, -1, 1))
    _same(np.round(t, 1), np.round(A, 1))
    _same(np.dot(t, t.T), np.dot(A, A.T))
    _same(np.zeros_like(t), np.zeros_like(A))
    _same(np.full_like(t, 7.0), np.full_like(A, 7.0))
    _same(np.flip(t, axis=0), np.flip(A, axis=0))
    assert np.shape(t) == A.shape and np.ndim(t) == 2 and np.size(t) == 6
    assert np.allclose(t, A) is True or np.allclose(t, A) == True  # noqa: E712 (NumPy gives np.bool)
    u, counts = np.unique(ei.tensor([3, 1, 3]), return_counts=True)
    _same(u, np.array([1, 3]))
    _same(counts, np.array([1, 2]))
    parts = np.split(ei.tensor(np.arange(6)), 3)
    assert [p.tolist() for p in parts] == [[0, 1], [2, 3], [4, 5]]


def test_asarray_and_array():
    t = ei.tensor(A) * 2
    np.testing.assert_allclose(np.asarray(t), A * 2)
    assert np.array(t, dtype=np.float32).dtype == np.float32


def test_ufunc_methods():
    t = ei.tensor(I)
    _same(np.add.reduce(t, axis=1), np.add.reduce(I, axis=1))
    _same(np.maximum.reduce(t), np.maximum.reduce(I))
    _same(np.add.accumulate(t, axis=1), np.add.accumulate(I, axis=1))
    _same(np.multiply.outer(ei.tensor([1, 2]), ei.tensor([3, 4])), np.multiply.outer([1, 2], [3, 4]))
    assert "host NumPy np.add.accumulate" in ei.tensor.explain(np.add.accumulate(t))
    u = ei.tensor([0, 0, 0])
    v = u.numpy()
    np.add.at(u, [0, 0, 2], 1)
    assert u.tolist() == [2, 0, 1] and v.tolist() == [2, 0, 1]


def test_eidos_refusal_falls_back_to_numpy():
    z = ei.tensor([1 + 2j, 3 - 1j])
    _same(np.max(z), np.max(np.array([1 + 2j, 3 - 1j])))   # complex ordering: NumPy's lexicographic order
    _same(np.reciprocal(ei.tensor([1, 2])), np.reciprocal(np.array([1, 2])))
    with pytest.raises(TypeError):
        np.sign(ei.tensor([True]))


def test_tables_name_real_numpy_functions():
    for name in protocols.UFUNCS:
        assert isinstance(getattr(np, name), np.ufunc), name
    assert np.sum in protocols._functions() and np.concatenate in protocols._functions()


# ---- in-place operators: into the tensor's memory --------------------------------------------------

def test_inplace_operators_write_memory():
    a = np.zeros(3)
    t = ei.tensor(a, copy=False)
    seen = t.numpy()
    t += 1
    t *= 4
    t -= 1
    t /= 2
    np.testing.assert_allclose(a, [1.5, 1.5, 1.5])
    np.testing.assert_allclose(seen, a)
    assert "written into x's memory" in ei.tensor.explain(t)


def test_inplace_keeps_earlier_values_and_dtype_rules():
    t = ei.tensor([1, 2, 3])
    y = t * 10
    t += 1
    assert y.tolist() == [10, 20, 30] and t.tolist() == [2, 3, 4]
    with pytest.raises(DTypeError, match="same-kind"):
        t += 1.5
    with pytest.raises(DTypeError, match="same-kind"):
        t /= 2
    b = ei.tensor(np.array([1, 2], dtype=np.int8))
    b += ei.tensor([300, 1])            # int64 into int8: same kind, wraps as NumPy's
    assert b.tolist() == (np.array([1, 2], dtype=np.int8) + np.array([300, 1])).astype(np.int8).tolist()
    with pytest.raises(ShapeError):
        t += ei.tensor([[1, 2, 3]] * 2)


@pytest.mark.parametrize("op", ["+=", "-=", "*=", "//=", "%=", "**=", "&=", "|=", "^=", "<<=", ">>="])
def test_inplace_operators_match_numpy(op):
    a = np.array([5, 6, 7])
    t = ei.tensor(a.copy())
    ns = {"x": a.copy(), "t": t}
    exec(f"x {op} 2\nt {op} 2", ns)
    assert ns["t"] is t
    assert t.tolist() == ns["x"].tolist()


def test_inplace_on_a_pending_tensor_stays_lazy():
    t = ei.tensor([1.0, 2.0]) * 2
    t += 1
    assert not t.is_realized
    assert t.tolist() == [3.0, 5.0]
