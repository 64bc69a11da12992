"""eidos.array_api against array-api-strict (the standard's reference namespace) on small inputs."""

import math

import numpy as np
import pytest

import eidos as ei
import eidos.array_api as xp

strict = pytest.importorskip("array_api_strict", reason="array-api-strict is not installed")


@pytest.fixture(autouse=True)
def _on_reference(reference):
    """Small inputs on the reference interpreter: no native compilation, so the suite stays fast cold."""
    yield

SKIPPED_MAIN = {"ArrayAPIStrictFlags", "Device", "__version__",
                "get_array_api_strict_flags", "reset_array_api_strict_flags", "set_array_api_strict_flags"}


def test_namespace_coverage():
    assert ei.tensor([1.0]).__array_namespace__() is xp
    assert xp.__array_api_version__ == "2024.12"
    assert sorted(n for n in strict.__all__ if n not in SKIPPED_MAIN and not hasattr(xp, n)) == []
    assert sorted(n for n in strict.linalg.__all__ if not hasattr(xp.linalg, n)) == []
    assert sorted(n for n in strict.fft.__all__ if not hasattr(xp.fft, n)) == []


def same(ours, theirs, rtol=1e-6):
    if isinstance(theirs, tuple):
        assert len(ours) == len(theirs)
        for o, t in zip(ours, theirs):
            same(o, t, rtol)
        return
    o, t = np.asarray(ours), np.asarray(theirs)
    assert o.shape == t.shape, (o.shape, t.shape)
    assert o.dtype == t.dtype, (o.dtype, t.dtype)
    if o.dtype.kind in "fc":
        np.testing.assert_allclose(o, t, rtol=rtol, atol=rtol, equal_nan=True)
    else:
        np.testing.assert_array_equal(o, t)


def both(fn, *arrays, **kw):
    ours = fn(xp, *[xp.asarray(a) for a in arrays], **kw)
    theirs = fn(strict, *[strict.asarray(a) for a in arrays], **kw)
    same(ours, theirs)


F = np.array([[0.5, -1.25, 2.0], [np.nan, np.inf, -0.0]], np.float64)
P = np.array([[0.5, 0.25, 0.9], [0.1, 0.75, 0.3]], np.float32)
I = np.array([[3, -2, 7], [0, 5, -9]], np.int32)
U = np.array([3, 1, 200, 0], np.uint8)
Bo = np.array([True, False, True, True])
_C = [0.5, -1.25, 2.0, -0.0, 0.0]
Z = np.array([[complex(a, b) for b in _C] for a in _C + [np.nan, np.inf, -np.inf]], np.complex128)
ZF = np.array([[0.5 - 1.25j, 2.0 + 0.25j, -0.75 + 0.0j], [1e-3 + 2j, -3.0 - 0.5j, 0.0 - 1.0j]], np.complex64)

UNARY_FLOAT = ["abs", "acos", "acosh", "asin", "asinh", "atan", "atanh", "ceil", "cos", "cosh", "exp", "expm1",
               "floor", "isfinite", "isinf", "isnan", "log", "log1p", "log2", "log10", "negative", "positive",
               "round", "sign", "signbit", "sin", "sinh", "sqrt", "square", "tan", "tanh", "trunc", "reciprocal"]


@pytest.mark.parametrize("name", UNARY_FLOAT)
@pytest.mark.parametrize("data", [F, P], ids=["f64", "f32"])
def test_unary_floats(name, data):
    both(lambda ns, x: getattr(ns, name)(x), data)


UNARY_COMPLEX = ["abs", "acos", "acosh", "asin", "asinh", "atan", "atanh", "conj", "cos", "cosh", "exp", "expm1",
                 "imag", "isfinite", "isinf", "isnan", "log", "log1p", "log2", "log10", "negative", "positive", "real",
                 "round", "sign", "sin", "sinh", "sqrt", "square", "tan", "tanh", "reciprocal"]
NOT_NUMPY_AT_SPECIALS = {"expm1", "log1p", "sign", "log2", "log10"}  # eidos follows the standard there (test_complex)


@pytest.mark.parametrize("name", UNARY_COMPLEX)
@pytest.mark.parametrize("data", [Z, ZF], ids=["c128-specials", "c64"])
def test_unary_complex(name, data):
    if name in NOT_NUMPY_AT_SPECIALS and data is Z:
        data = Z[np.isfinite(Z.real) & np.isfinite(Z.imag)].reshape(-1, 5)
    both(lambda ns, x: getattr(ns, name)(x), data)


@pytest.mark.parametrize("name", ["abs", "negative", "sign", "square", "bitwise_invert", "positive", "floor"])
def test_unary_ints(name):
    both(lambda ns, x: getattr(ns, name)(x), I)
    if name not in ("negative", "sign", "abs", "square"):
        both(lambda ns, x: getattr(ns, name)(x), U)


BINARY = ["add", "subtract", "multiply", "divide", "maximum", "minimum", "equal", "not_equal", "less",
          "less_equal", "greater", "greater_equal", "pow", "atan2", "hypot", "logaddexp", "copysign",
          "floor_divide", "remainder", "nextafter"]


@pytest.mark.parametrize("name", BINARY)
def test_binary_floats_broadcast(name):
    both(lambda ns, a, b: getattr(ns, name)(a, b), P, np.array([0.5, 2.0, -1.5], np.float32))


@pytest.mark.parametrize("name", ["add", "subtract", "multiply", "divide", "equal", "not_equal", "pow"])
def test_binary_complex_broadcast_and_mixed(name):
    w = np.array([0.5 + 1j, -2.0 + 0j, 1.5 - 0.25j], np.complex64)
    both(lambda ns, a, b: getattr(ns, name)(a, b), ZF, w)
    both(lambda ns, a, b: getattr(ns, name)(a, b), ZF, w.real.copy())          # complex64 with float32
    both(lambda ns, a, b: getattr(ns, name)(a, b), w.real.astype(np.float64), ZF)  # float64 with complex64
    both(lambda ns, a: getattr(ns, name)(a, 2.0), ZF)
    both(lambda ns, a: getattr(ns, name)(a, 0.5 - 1j), ZF)
    both(lambda ns, a: getattr(ns, name)(a, 1j), P)                             # float32 with a complex scalar


def test_complex_promotion_table():
    names = ["bool", "int8", "uint8", "int64", "float32", "float64", "complex64", "complex128"]
    for a in names:
        for b in ("complex64", "complex128"):
            try:
                theirs = strict.result_type(getattr(strict, a), getattr(strict, b))
            except TypeError:
                continue  # integer with complex: not in the standard's table (eidos promotes as NumPy)
            ours = xp.result_type(getattr(xp, a), getattr(xp, b))
            assert str(ours) == str(theirs).rsplit(".", 1)[-1], (a, b, ours, theirs)
    assert xp.result_type(xp.float32, 1j) == xp.complex64 and xp.result_type(xp.complex64, 1.0) == xp.complex64
    assert xp.result_type(xp.float64, 1j) == xp.complex128 and xp.result_type(xp.int32, 1j) == xp.complex128
    assert xp.result_type(xp.bfloat16, xp.complex64) == xp.complex64
    assert xp.isdtype(xp.complex64, "complex floating") and xp.isdtype(xp.complex128, "numeric")
    assert not xp.isdtype(xp.complex64, "real floating") and not xp.isdtype(xp.float32, "complex floating")
    assert xp.finfo(xp.complex64).eps == np.finfo(np.float32).eps and xp.finfo(xp.complex128).dtype == xp.float64
    assert xp.can_cast(xp.float32, xp.complex64) and not xp.can_cast(xp.complex64, xp.float64)
    info = xp.__array_namespace_info__()
    assert info.default_dtypes()["complex floating"] == xp.complex128
    assert set(info.dtypes(kind="complex floating")) == {"complex64", "complex128"}
    assert xp.astype(xp.asarray([1.5]), xp.complex64).dtype == xp.complex64
    assert xp.astype(xp.asarray([1j, 0j]), xp.bool).tolist() == [True, False]


def test_complex_creation():
    same(xp.asarray(1j), strict.asarray(1j))
    same(xp.asarray([1, 2j]), strict.asarray([1, 2j]))
    same(xp.asarray([1.0], dtype=xp.complex64), strict.asarray([1.0], dtype=strict.complex64))
    same(xp.full((2, 2), 1 - 1j), strict.full((2, 2), 1 - 1j))
    same(xp.full_like(xp.asarray(ZF), 3j), strict.full_like(strict.asarray(ZF), 3j))
    same(xp.zeros((2,), dtype=xp.complex64), strict.zeros((2,), dtype=strict.complex64))
    same(xp.ones((0, 2), dtype=xp.complex128), strict.ones((0, 2), dtype=strict.complex128))
    same(xp.eye(3, k=-1, dtype=xp.complex64), strict.eye(3, k=-1, dtype=strict.complex64))
    same(xp.linspace(0, 1 + 2j, 5), strict.linspace(0, 1 + 2j, 5))
    same(xp.linspace(0, 1, 4, dtype=xp.complex64), strict.linspace(0, 1, 4, dtype=strict.complex64))
    assert xp.empty((2,), dtype=xp.complex64).dtype == xp.complex64
    same(xp.tril(xp.asarray(ZF)), strict.tril(strict.asarray(ZF)))


@pytest.mark.parametrize("name", ["sum", "prod", "mean"])
@pytest.mark.parametrize("axis", [None, 0, (0, 1)])
def test_complex_statistics(name, axis):
    both(lambda ns, a: getattr(ns, name)(a, axis=axis), ZF)
    both(lambda ns, a: getattr(ns, name)(a, axis=axis, keepdims=True), Z)
    both(lambda ns, a: getattr(ns, name)(a, axis=axis), np.zeros((0, 2), np.complex64))


def test_complex_searching_and_manipulation():
    both(lambda ns, a: ns.count_nonzero(a), Z)
    both(lambda ns, a: ns.nonzero(a), ZF)
    both(lambda ns, a: ns.cumulative_sum(a, axis=1), ZF)
    both(lambda ns, a: ns.where(ns.isnan(a), ns.zeros_like(a), a), Z)
    both(lambda ns, a: ns.unique_values(a), np.array([1j, 1j, 2, 0], np.complex64))
    both(lambda ns, a: ns.concat([a, a], axis=1), ZF)
    both(lambda ns, a: ns.reshape(ns.permute_dims(a, (1, 0)), (2, 3)), ZF)
    both(lambda ns, a: ns.flip(ns.roll(a, 1, axis=0), axis=1), ZF)
    both(lambda ns, a: a[1, ::-1], ZF)
    both(lambda ns, a: ns.all(a, axis=1), Z)
    both(lambda ns, a: ns.any(a), ZF)


@pytest.mark.parametrize("name", ["add", "subtract", "multiply", "floor_divide", "remainder", "bitwise_and",
                                  "bitwise_or", "bitwise_xor", "bitwise_left_shift", "bitwise_right_shift",
                                  "maximum", "less"])
def test_binary_ints(name):
    b = np.array([2, 3, 1], np.int32)
    both(lambda ns, x, y: getattr(ns, name)(x, y), np.abs(I), b)


def test_logical_and_where_clip():
    both(lambda ns, a, b: ns.logical_and(a, b), Bo, Bo[::-1].copy())
    both(lambda ns, a, b: ns.logical_xor(a, b), Bo, Bo[::-1].copy())
    both(lambda ns, a: ns.logical_not(a), Bo)
    both(lambda ns, c, a, b: ns.where(c, a, b), Bo, np.arange(4.0), np.zeros(4))
    both(lambda ns, a: ns.clip(a, 0.2, 0.6), P)


def test_operators_and_scalars():
    both(lambda ns, a: a * 2 + 1 - a / 3, P)
    both(lambda ns, a: (a > 0.3) & (a < 0.8), P)
    both(lambda ns, a: -a ** 2, P)
    both(lambda ns, a: a @ ns.matrix_transpose(a), P)
    both(lambda ns, a: a[0, 1:], P)
    both(lambda ns, a: a[a > 0.3], P)


@pytest.mark.parametrize("name", ["sum", "prod", "max", "min", "mean", "var", "std"])
@pytest.mark.parametrize("axis", [None, 0, 1, (0, 1)])
def test_statistics(name, axis):
    both(lambda ns, a: getattr(ns, name)(a, axis=axis), P)
    both(lambda ns, a: getattr(ns, name)(a, axis=axis, keepdims=True), P)


def test_statistics_ints_and_correction():
    both(lambda ns, a: ns.sum(a, axis=1), I)
    both(lambda ns, a: ns.prod(a), I)
    both(lambda ns, a: ns.max(a, axis=0), I)
    both(lambda ns, a: ns.var(a, correction=1), P)
    both(lambda ns, a: ns.sum(a, dtype=ns.float64), P)
    both(lambda ns, a: ns.cumulative_sum(a, axis=1), I)
    both(lambda ns, a: ns.cumulative_sum(a, axis=0, include_initial=True), P)
    both(lambda ns, a: ns.all(a), Bo)
    both(lambda ns, a: ns.any(a), Bo)
    both(lambda ns, a: ns.count_nonzero(a), I)


def test_searching_sorting_sets():
    both(lambda ns, a: ns.argmax(a, axis=1), P)
    both(lambda ns, a: ns.argmin(a), I)
    both(lambda ns, a: ns.nonzero(a), I)
    both(lambda ns, a: ns.sort(a, axis=1), I)
    both(lambda ns, a: ns.sort(a, axis=0, descending=True), I)
    both(lambda ns, a: ns.argsort(a, axis=1), I)
    both(lambda ns, a: ns.argsort(a, descending=True), np.array([3, 1, 3, 2], np.int64))
    both(lambda ns, a, v: ns.searchsorted(a, v), np.array([1.0, 2.0, 3.0]), np.array([2.5, 0.0]))
    both(lambda ns, a: ns.unique_values(a), np.array([3, 1, 3, 2], np.int64))
    both(lambda ns, a: tuple(ns.unique_counts(a)), np.array([3, 1, 3, 2], np.int64))
    both(lambda ns, a: tuple(ns.unique_inverse(a)), np.array([3, 1, 3, 2], np.int64))
    both(lambda ns, a: tuple(ns.unique_all(a)), np.array([3, 1, 3, 2], np.int64))


def test_manipulation():
    both(lambda ns, a: ns.reshape(a, (3, 2)), I)
    both(lambda ns, a: ns.permute_dims(a, (1, 0)), I)
    both(lambda ns, a: ns.expand_dims(a, axis=1), I)
    both(lambda ns, a: ns.squeeze(ns.expand_dims(a, axis=0), axis=0), I)
    both(lambda ns, a: ns.flip(a, axis=1), I)
    both(lambda ns, a: ns.roll(a, 1, axis=1), I)
    both(lambda ns, a: ns.concat([a, a], axis=0), I)
    both(lambda ns, a: ns.stack([a, a], axis=2), I)
    both(lambda ns, a: ns.broadcast_to(a[0, :], (4, 3)), I)
    both(lambda ns, a: ns.tile(a, (2, 1)), I)
    both(lambda ns, a: ns.repeat(a, 2, axis=0), I)
    both(lambda ns, a: ns.moveaxis(a, 0, 1), I)
    both(lambda ns, a: ns.unstack(a, axis=0), I)
    both(lambda ns, a, i: ns.take(a, i, axis=1), I, np.array([2, 0], np.int64))
    both(lambda ns, a: tuple(ns.broadcast_arrays(a, a[:1, :])), I)
    both(lambda ns, a: ns.tril(a), I)
    both(lambda ns, a: ns.triu(a, k=1), I)


def test_creation_and_dtypes():
    same(xp.arange(5), strict.arange(5))
    same(xp.arange(0.0, 1.0, 0.25), strict.arange(0.0, 1.0, 0.25))
    same(xp.zeros((2, 3)), strict.zeros((2, 3)))
    same(xp.ones((2,), dtype=xp.int8), strict.ones((2,), dtype=strict.int8))
    same(xp.full((2,), 7), strict.full((2,), 7))
    same(xp.eye(3, k=1), strict.eye(3, k=1))
    same(xp.linspace(0, 1, 5), strict.linspace(0, 1, 5))
    same(xp.asarray([1, 2]), strict.asarray([1, 2]))
    same(xp.asarray([1.5]), strict.asarray([1.5]))
    same(xp.asarray(True), strict.asarray(True))
    assert xp.result_type(xp.int8, xp.int16) == np.int16
    assert xp.result_type(xp.float32, 1.0) == np.float32
    assert xp.can_cast(xp.int8, xp.int32) and not xp.can_cast(xp.float64, xp.int8)
    assert xp.isdtype(xp.float32, "real floating") and xp.isdtype(xp.uint8, ("integral", "bool"))
    assert xp.finfo(xp.float32).eps == np.finfo(np.float32).eps and xp.iinfo(xp.int8).max == 127
    assert xp.astype(xp.asarray([1.7]), xp.int32).tolist() == [1]
    info = xp.__array_namespace_info__()
    assert info.default_dtypes()["real floating"] == xp.float64 and "float32" in info.dtypes()
    assert xp.e == math.e and xp.newaxis is None
    x = xp.asarray([1.0, 2.0])
    assert x.to_device("cpu") is x and x.device == "cpu"
    assert xp.asarray([[1.0, 2.0]]).mT.shape == (2, 1)


def test_linalg():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((3, 3))
    spd = a @ a.T + 3 * np.eye(3)
    for fn in ("inv", "det", "cholesky", "eigvalsh", "svdvals", "pinv", "matrix_rank", "slogdet", "qr",
               "matrix_norm", "trace", "diagonal"):
        theirs = getattr(strict.linalg, fn)(strict.asarray(spd))
        ours = getattr(xp.linalg, fn)(xp.asarray(spd))
        same(tuple(ours) if isinstance(ours, tuple) else ours,
             tuple(theirs) if isinstance(theirs, tuple) else theirs, 1e-9)
    both(lambda ns, x, y: ns.linalg.solve(x, y), spd, np.arange(3.0))
    both(lambda ns, x: ns.linalg.matrix_power(x, 3), spd)
    both(lambda ns, x: ns.linalg.vector_norm(x, axis=1), a)
    both(lambda ns, x: ns.linalg.vector_norm(x, ord=1), a)
    both(lambda ns, x, y: ns.linalg.outer(x, y), np.arange(3.0), np.arange(2.0))
    both(lambda ns, x, y: ns.linalg.cross(x, y), a, a[::-1].copy())
    both(lambda ns, x, y: ns.tensordot(x, y, axes=1), a, a)
    both(lambda ns, x, y: ns.tensordot(x, y, axes=([0], [1])), a, a)
    both(lambda ns, x, y: ns.vecdot(x, y), a, a)
    both(lambda ns, x: ns.linalg.matmul(x, x), a)


def test_linalg_complex():
    rng = np.random.default_rng(1)
    a = (rng.standard_normal((3, 3)) + 1j * rng.standard_normal((3, 3))).astype(np.complex128)
    herm = a @ a.conj().T + 3 * np.eye(3)
    for fn in ("inv", "det", "cholesky", "eigvalsh", "svdvals", "pinv", "matrix_rank", "slogdet",
               "matrix_norm", "trace", "diagonal"):
        theirs = getattr(strict.linalg, fn)(strict.asarray(herm))
        ours = getattr(xp.linalg, fn)(xp.asarray(herm))
        same(tuple(ours) if isinstance(ours, tuple) else ours,
             tuple(theirs) if isinstance(theirs, tuple) else theirs, 1e-9)
    w, v = xp.linalg.eigh(xp.asarray(herm))
    np.testing.assert_allclose(herm @ v.numpy(), v.numpy() * w.numpy(), atol=1e-9)
    q, r = xp.linalg.qr(xp.asarray(a))
    np.testing.assert_allclose(q.numpy() @ r.numpy(), a, atol=1e-12)
    u, s_, vh = xp.linalg.svd(xp.asarray(a), full_matrices=False)
    np.testing.assert_allclose((u.numpy() * s_.numpy()) @ vh.numpy(), a, atol=1e-12)
    assert s_.dtype == xp.float64 and u.dtype == xp.complex128
    both(lambda ns, x: ns.linalg.cholesky(x, upper=True), herm)                # U = L^H, conjugated
    both(lambda ns, x: ns.linalg.pinv(x), np.diag([1.0, 8e-16, 1.0]) + 0j)   # default rtol max(M, N) * eps keeps 8e-16
    both(lambda ns, x, y: ns.linalg.solve(x, y), herm, np.arange(3.0) + 1j)
    both(lambda ns, x: ns.linalg.matrix_power(x, 2), a)
    for ord_ in (2, 1, math.inf, -math.inf, 0, 3):
        both(lambda ns, x, ord_=ord_: ns.linalg.vector_norm(x, axis=1, ord=ord_), a)
    both(lambda ns, x: ns.linalg.matrix_norm(x, ord="nuc"), a)
    both(lambda ns, x, y: ns.linalg.outer(x, y), a[0], a[1])
    both(lambda ns, x, y: ns.linalg.cross(x, y), a, a[::-1].copy())
    both(lambda ns, x, y: ns.vecdot(x, y), a, a[::-1].copy())                # conjugates x1
    both(lambda ns, x, y: ns.linalg.vecdot(x, y), a.astype(np.complex64), np.ones(3, np.float32))
    both(lambda ns, x, y: ns.matmul(x, y), a, a.T.copy())
    both(lambda ns, x, y: x @ y, a.astype(np.complex64), np.ones((3, 2), np.float32))
    both(lambda ns, x, y: ns.tensordot(x, y, axes=1), a, a)


FFT_ONE = [("fft", "c"), ("ifft", "c"), ("rfft", "r"), ("irfft", "c"), ("hfft", "c"), ("ihfft", "r")]
FFT_MANY = [("fftn", "c"), ("ifftn", "c"), ("rfftn", "r"), ("irfftn", "c")]


@pytest.mark.parametrize("name,kind", FFT_ONE)
@pytest.mark.parametrize("precision", [32, 64])
def test_fft_transforms(name, kind, precision):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((3, 8)) + (1j * rng.standard_normal((3, 8)) if kind == "c" else 0)
    x = x.astype({("c", 32): np.complex64, ("c", 64): np.complex128, ("r", 32): np.float32,
                  ("r", 64): np.float64}[kind, precision])
    tol = 1e-5 if precision == 32 else 1e-12
    for kw in ({}, {"n": 5}, {"n": 12, "axis": 0}, {"norm": "ortho"}, {"norm": "forward", "axis": -2}):
        theirs = getattr(strict.fft, name)(strict.asarray(x), **kw)
        ours = getattr(xp.fft, name)(xp.asarray(x), **kw)
        same(ours, theirs, tol)


@pytest.mark.parametrize("name,kind", FFT_MANY)
def test_fft_n_dimensional(name, kind):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 4, 6)) + (1j * rng.standard_normal((2, 4, 6)) if kind == "c" else 0)
    for dt in ((np.complex64, np.complex128) if kind == "c" else (np.float32, np.float64)):
        for kw in ({}, {"axes": (0, 2)}, {"s": (3, 8), "axes": (1, 2)}, {"s": (4,), "axes": (-1,), "norm": "ortho"}):
            theirs = getattr(strict.fft, name)(strict.asarray(x.astype(dt)), **kw)
            ours = getattr(xp.fft, name)(xp.asarray(x.astype(dt)), **kw)
            same(ours, theirs, 1e-5 if dt in (np.complex64, np.float32) else 1e-12)
    whole = getattr(xp.fft, name)(xp.asarray(x.astype(np.complex128 if kind == "c" else np.float64)),
                                  s=(-1, 6), axes=(0, 2))                      # -1: the whole axis (the standard)
    assert whole.shape[0] == 2


def test_fft_round_trips():
    x = xp.asarray(np.exp(2j * np.pi * np.arange(16) / 16).astype(np.complex64))
    assert xp.fft.ifft(xp.fft.fft(x)).dtype == xp.complex64
    np.testing.assert_allclose(xp.fft.ifft(xp.fft.fft(x)).numpy(), x.numpy(), atol=1e-6)
    r = xp.asarray(np.arange(7.0))
    np.testing.assert_allclose(xp.fft.irfft(xp.fft.rfft(r), n=7).numpy(), r.numpy(), atol=1e-12)
    np.testing.assert_allclose(xp.fft.hfft(xp.fft.ihfft(r), n=7).numpy(), r.numpy(), atol=1e-12)
    spectrum = xp.fft.fft(x).numpy()
    assert np.argmax(np.abs(spectrum)) == 1 and "pocketfft" in ei.tensor.explain(xp.fft.fft(x))


def test_fft_helpers():
    same(xp.fft.fftfreq(8), strict.fft.fftfreq(8))
    same(xp.fft.fftfreq(5, d=0.1), strict.fft.fftfreq(5, d=0.1))
    same(xp.fft.rfftfreq(1), strict.fft.rfftfreq(1))
    both(lambda ns, x: ns.fft.fftshift(x, axes=(1,)), ZF)
    same(xp.fft.rfftfreq(8, d=0.5), strict.fft.rfftfreq(8, d=0.5))
    both(lambda ns, x: ns.fft.fftshift(x), np.arange(6.0))
    both(lambda ns, x: ns.fft.ifftshift(x), np.arange(6.0))


# ---- 2024.12 ------------------------------------------------------------------------------------------------

def test_declares_2024_12_and_its_inspection_namespace():
    assert xp.__array_api_version__ == "2024.12"
    assert ei.tensor([1.0]).__array_namespace__(api_version="2024.12") is xp
    info = xp.__array_namespace_info__()
    caps = info.capabilities()
    assert caps["boolean indexing"] is True and caps["data-dependent shapes"] is True
    assert isinstance(caps["max dimensions"], int) and caps["max dimensions"] > 0
    assert isinstance(info.devices(), list) and info.default_device() in info.devices()
    assert info.default_dtypes()["indexing"] == xp.int64
    assert set(info.dtypes(kind="integral").values()) == {xp.int8, xp.int16, xp.int32, xp.int64, xp.uint8,
                                                           xp.uint16, xp.uint32, xp.uint64}
    assert set(info.dtypes(kind=("bool", "complex floating"))) == {"bool", "complex64", "complex128"}


def test_each_device_lists_the_dtypes_it_can_hold(monkeypatch):
    """The gpu holds no complex tensors, so its dtypes() leaves them out; every dtype a device lists makes an
    array there (the gpu is Triton's interpreter here: TRITON_INTERPRET=1)."""
    from eidos.tensor.backend import get_backend

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    info = xp.__array_namespace_info__()
    gpu = info.dtypes(device="gpu")
    assert "complex64" not in gpu and "complex128" not in gpu and "float32" in gpu
    assert "complex128" in info.dtypes(device="cpu")
    for device in info.devices():
        for name, dtype in info.dtypes(device=device).items():
            assert xp.zeros(2, dtype=dtype, device=device).dtype == dtype, (device, name)
    if not get_backend("gpu").is_available():
        pytest.skip("no gpu backend here, not even Triton's interpreter")


def test_2024_12_additions_as_array_api_strict():
    x = np.array([[1.0, 4.0, 9.0], [2.0, -0.0, 8.0]])
    both(lambda ns, a: ns.diff(a, axis=1, n=2), x)
    both(lambda ns, a, p: ns.diff(a, axis=0, prepend=p), x, x[:1])
    both(lambda ns, a: ns.reciprocal(a), x)
    both(lambda ns, a: ns.count_nonzero(a, axis=1, keepdims=True), x)
    both(lambda ns, a: ns.cumulative_prod(a, axis=1, include_initial=True), x)
    both(lambda ns, a: ns.cumulative_prod(a, dtype=ns.float32), x[0])
    both(lambda ns, a, i: ns.take_along_axis(a, i, axis=1), x, np.array([[2, 0], [1, 1]]))
    both(lambda ns, a: ns.nextafter(a, 100.0), x)                  # scalar arguments (2024.12)
    both(lambda ns, a: ns.add(2, a), I)
    both(lambda ns, a: ns.atan2(1.0, a), x)
    both(lambda ns, a: ns.where(a > 2, 0.5, a), x)
    both(lambda ns, a: ns.searchsorted(a, ns.asarray([0.0, 5.0]), side="right"), np.array([1.0, 4.0, 9.0]))
    assert xp.result_type(xp.float32, 1.0, 2) == xp.float32
    with pytest.raises(ei.errors.ShapeError, match="axis is required"):
        xp.cumulative_prod(xp.asarray(x))


def test_signatures_the_standard_asks_for():
    """expand_dims takes axis positionally (2024.12); linalg.pinv takes rtol by keyword, a float or an array."""
    assert xp.expand_dims(xp.asarray([1, 2]), 0).shape == (1, 2)
    a = np.array([[[1.0, 2.0], [3.0, 4.0]], [[1.0, 0.0], [0.0, 1e-3]]])
    same(xp.linalg.pinv(xp.asarray(a), rtol=0.01), strict.linalg.pinv(strict.asarray(a), rtol=0.01))
    same(xp.linalg.pinv(xp.asarray(a), rtol=xp.asarray([1e-6, 0.01])),
         strict.linalg.pinv(strict.asarray(a), rtol=strict.asarray([1e-6, 0.01])))


def test_vecdot_contracts_without_broadcasting_in_the_promoted_dtype():
    a, b = np.arange(6, dtype=np.int8).reshape(2, 3), np.ones((1, 3), np.int8)
    both(lambda ns, x, y: ns.vecdot(x, y), a, b)                       # int8 stays int8, rows broadcast
    both(lambda ns, x, y: ns.linalg.vecdot(x, y, axis=-2), a.T.copy(), np.ones((3, 1), np.int16))
    with pytest.raises(ei.errors.ShapeError, match="differ in length"):
        xp.vecdot(xp.asarray(a), xp.asarray(np.ones((2, 1), np.int8)))   # 3 against 1: no broadcast


def test_remainder_zero_takes_the_divisor_sign(each_backend):
    """-0 % 2 is +0 and 0 % -2 is -0 (Python, NumPy, the standard), on every kernel target."""
    a = np.array([-0.0, 0.0, 0.0, -0.0, 4.0, -4.0, 3.0, 0.0, 5.5])
    b = np.array([2.0, -2.0, 2.0, -2.0, 2.0, 2.0, np.inf, -np.inf, -2.0])
    for dt in (np.float64, np.float32):
        for got in (xp.remainder(xp.asarray(a.astype(dt)), xp.asarray(b.astype(dt))),
                    xp.asarray(a.astype(dt)) % xp.asarray(b.astype(dt))):
            want = np.remainder(a.astype(dt), b.astype(dt))
            np.testing.assert_array_equal(got.numpy(), want)
            np.testing.assert_array_equal(np.signbit(got.numpy()), np.signbit(want))


def test_expm1_of_complex_zero_is_positive_zero():
    out = xp.expm1(xp.asarray([complex(-0.0, 0.0), 0j, complex(-0.0, -0.0)])).numpy()   # (+-0 + 0j): +0 + 0j
    np.testing.assert_array_equal(np.signbit(out.real), [False, False, False])
    np.testing.assert_array_equal(np.signbit(out.imag), [False, False, True])           # conj(expm1(conj z))


def test_tanh_of_infinite_real_part_keeps_the_sign_of_b():
    """tanh(+-inf + bj), b finite: +-1 + 0j with b's sign of zero (NumPy follows sin(2b) instead)."""
    z = np.array([complex(np.inf, 8.1757834761542755e+152), complex(np.inf, -2.0), complex(-np.inf, 2.0),
                  complex(np.inf, 0.0)])
    out = xp.tanh(xp.asarray(z)).numpy()
    np.testing.assert_array_equal(out.real, [1.0, 1.0, -1.0, 1.0])
    np.testing.assert_array_equal(np.signbit(out.imag), [False, True, False, False])
