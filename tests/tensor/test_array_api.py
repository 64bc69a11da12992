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

SKIPPED_MAIN = {"ArrayAPIStrictFlags", "Device", "__version__", "complex64", "complex128",
                "get_array_api_strict_flags", "reset_array_api_strict_flags", "set_array_api_strict_flags"}
FFT_TRANSFORMS = {"fft", "fftn", "hfft", "ifft", "ifftn", "ihfft", "irfft", "irfftn", "rfft", "rfftn"}


def test_namespace_coverage():
    assert ei.tensor([1.0]).__array_namespace__() is xp
    assert xp.__array_api_version__ == "2023.12"
    assert sorted(n for n in strict.__all__ if n not in SKIPPED_MAIN and not hasattr(xp, n)) == []
    assert sorted(n for n in strict.linalg.__all__ if not hasattr(xp.linalg, n)) == []
    assert sorted(n for n in strict.fft.__all__ if not hasattr(xp.fft, n)) == sorted(FFT_TRANSFORMS)


def same(ours, theirs, rtol=1e-6):
    if isinstance(theirs, tuple):
        assert len(ours) == len(theirs)
        for o, t in zip(ours, theirs):
            same(o, t, rtol)
        return
    o, t = np.asarray(ours), np.asarray(theirs)
    assert o.shape == t.shape, (o.shape, t.shape)
    assert o.dtype == t.dtype, (o.dtype, t.dtype)
    if o.dtype.kind == "f":
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

UNARY_FLOAT = ["abs", "acos", "acosh", "asin", "asinh", "atan", "atanh", "ceil", "cos", "cosh", "exp", "expm1",
               "floor", "isfinite", "isinf", "isnan", "log", "log1p", "log2", "log10", "negative", "positive",
               "round", "sign", "signbit", "sin", "sinh", "sqrt", "square", "tan", "tanh", "trunc", "reciprocal"]


@pytest.mark.parametrize("name", UNARY_FLOAT)
@pytest.mark.parametrize("data", [F, P], ids=["f64", "f32"])
def test_unary_floats(name, data):
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


def test_fft_helpers():
    same(xp.fft.fftfreq(8), strict.fft.fftfreq(8))
    same(xp.fft.rfftfreq(8, d=0.5), strict.fft.rfftfreq(8, d=0.5))
    both(lambda ns, x: ns.fft.fftshift(x), np.arange(6.0))
    both(lambda ns, x: ns.fft.ifftshift(x), np.arange(6.0))
