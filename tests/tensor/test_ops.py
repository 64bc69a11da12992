"""Every operation against NumPy, on the reference interpreter for every dtype (tiny tensors) and on the
compiled CPU backend for the common ones."""

import math

import ml_dtypes
import numpy as np
import pytest

import eidos as ei
import eidos.tensor as T
from eidos.tensor import dtypes as D

from .conftest import check

FLOATS = ["float16", "bfloat16", "float32", "float64"]
INTS = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
ALL = ["bool", *INTS, *FLOATS]


def data(dtype, shape=(2, 3), special=True, seed=0):
    rng = np.random.default_rng(seed)
    dt = D.as_dtype(dtype)
    if dt == D.bool_:
        return rng.random(shape) > 0.5
    if dt in D.INTEGERS:
        lo, hi = (0, 20) if dt in D.UNSIGNED else (-10, 10)
        return rng.integers(lo, hi, size=shape).astype(dt)
    x = (rng.standard_normal(shape) * 2).astype(np.float64)
    if special and x.size >= 4:
        x.flat[0], x.flat[1], x.flat[2] = np.nan, np.inf, -np.inf
    return x.astype(dt)


def f64(a):
    return np.asarray(a).astype(np.float64)


UNARY = {
    "sqrt": np.sqrt, "exp": np.exp, "log": np.log, "sin": np.sin, "cos": np.cos, "tan": np.tan, "tanh": np.tanh,
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)), "floor": np.floor, "ceil": np.ceil, "round": np.round,
    "abs": np.abs, "negative": np.negative, "relu": lambda x: np.where(np.isnan(x), x, np.maximum(x, 0)),
    "gelu": lambda x: np.array([v * (1 + math.erf(v / math.sqrt(2))) / 2 if np.isfinite(v) else
                                (v if v > 0 or np.isnan(v) else np.nan) for v in x.flat]).reshape(x.shape),
}


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("op", sorted(UNARY))
def test_unary_floats(reference, op, dtype):
    x = data(dtype, (2, 4))
    with np.errstate(all="ignore"):
        want = UNARY[op](f64(x))
    if op == "gelu":
        want[np.isinf(f64(x)) & (f64(x) < 0)] = np.nan  # docs/isa.md: GELU(-inf) is NaN
    check(getattr(T, op)(T(x)), want, dtype)


@pytest.mark.parametrize("dtype", INTS)
@pytest.mark.parametrize("op", ["abs", "negative", "relu", "floor", "sign"])
def test_unary_ints(reference, op, dtype):
    x = data(dtype, (3, 2))
    want = {"abs": np.abs, "negative": np.negative, "relu": lambda a: np.maximum(a, 0), "floor": lambda a: a,
            "sign": np.sign}[op](x)
    check(getattr(T, op)(T(x)), want, dtype)


@pytest.mark.parametrize("dtype", ["int32", "float32"])
def test_math_on_ints_is_float(reference, dtype):
    x = data(dtype, (4,), special=False)
    got = T.exp(T(x))
    assert got.dtype in (D.float64, D.float32)
    np.testing.assert_allclose(got.numpy(), np.exp(f64(x)).astype(got.dtype), rtol=1e-6)


BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "maximum": np.maximum, "minimum": np.minimum}


@pytest.mark.parametrize("dtype", [d for d in ALL if d != "bool"])
@pytest.mark.parametrize("op", sorted(BINARY))
def test_binary_broadcasting(reference, op, dtype):
    a, b = data(dtype, (2, 1), seed=1), data(dtype, (3,), seed=2)
    f = {"add": lambda x, y: x + y, "sub": lambda x, y: x - y, "mul": lambda x, y: x * y,
         "maximum": T.maximum, "minimum": T.minimum}[op]
    with np.errstate(all="ignore"):
        want = BINARY[op](f64(a), f64(b)) if dtype in FLOATS else BINARY[op](a, b)
    check(f(T(a), T(b)), want, dtype)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_divide_and_pow_floats(reference, dtype):
    a, b = data(dtype, (2, 3), seed=3), data(dtype, (2, 3), special=False, seed=4)
    with np.errstate(all="ignore"):
        check(T(a) / T(b), f64(a) / f64(b), dtype)
        check(abs(T(a)) ** T(b), np.abs(f64(a)) ** f64(b), dtype)
        check(T.atan2(T(a), T(b)), np.arctan2(f64(a), f64(b)), dtype)


@pytest.mark.parametrize("dtype", INTS)
def test_int_division_floor_mod_pow(reference, dtype):
    a, b = data(dtype, (2, 4), seed=5), data(dtype, (2, 4), seed=6)
    b[b == 0] = 3
    check(T(a) // T(b), a // b, dtype)
    check(T(a) % T(b), a % b, dtype)
    check(T(a) / T(b), a / b, "float64")
    small = np.abs(a) % 4
    check(T(small) ** 2, small ** 2, dtype)
    check(T(small) ** T(np.full_like(small, 3)), small ** 3, dtype)


def test_float_floor_mod(reference):
    a = np.array([5.5, -5.5, 5.5, -5.5, 0.0], np.float64)
    b = np.array([2.0, 2.0, -2.0, -2.0, 3.0])
    check(T(a) // T(b), a // b)
    check(T(a) % T(b), a % b)


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("op", ["eq", "ne", "lt", "le", "gt", "ge"])
def test_comparisons(reference, op, dtype):
    a, b = data(dtype, (2, 3), seed=7), data(dtype, (3,), seed=8)
    f = {"eq": "__eq__", "ne": "__ne__", "lt": "__lt__", "le": "__le__", "gt": "__gt__", "ge": "__ge__"}[op]
    want = getattr(np.asarray(a), f)(np.asarray(b)) if dtype != "bfloat16" else getattr(f64(a), f)(f64(b))
    check(getattr(T(a), f)(T(b)), want, "bool")


@pytest.mark.parametrize("dtype", ["bool", "int8", "uint16", "int64"])
def test_logical_and_bitwise(reference, dtype):
    a, b = data(dtype, (4,), seed=9), data(dtype, (4,), seed=10)
    check(T(a) & T(b), a & b, dtype)
    check(T(a) | T(b), a | b, dtype)
    check(T(a) ^ T(b), a ^ b, dtype)
    check(~T(a), ~a, dtype)
    check(T.logical_and(T(a), T(b)), np.logical_and(a, b), "bool")
    check(T.logical_not(T(a)), np.logical_not(a), "bool")


def test_where_clip_and_scalars(reference):
    x = data("float32", (2, 3))
    check(T.where(T(x) > 0, T(x), 0.5), np.where(x > 0, x, np.float32(0.5)), "float32")
    check(T(x).clip(-1, 1), np.clip(f64(x), -1, 1), "float32")
    check(T(x) * 2 + 1, f64(x) * 2 + 1, "float32")
    check(2 - T(x), 2 - f64(x), "float32")
    i = data("int16", (3,))
    check(T(i) + 1, i + 1, "int16")
    check(T(i) + 1.5, i + 1.5, "float64")


@pytest.mark.parametrize("dtype", ["bool", "int8", "int32", "uint32", "float16", "bfloat16", "float32", "float64"])
def test_casts(reference, dtype):
    x = np.array([0.0, 1.5, -2.5, 3.0, 0.0], np.float32)
    src = T(x)
    got = src.astype(dtype)
    want = x.astype(D.as_dtype(dtype)) if dtype not in ("uint32",) else np.abs(x).astype(np.uint32)
    if dtype == "uint32":
        got = T.abs(src).astype(dtype)
    check(got, want, dtype)


REDUCE = ["sum", "prod", "min", "max", "mean", "var", "std"]


@pytest.mark.parametrize("dtype", ["int8", "int32", "uint16", "float16", "bfloat16", "float32", "float64"])
@pytest.mark.parametrize("op", REDUCE)
@pytest.mark.parametrize("axis,keepdims", [(None, False), (0, False), (1, True), ((0, 2), False), (-1, False)])
def test_reductions(reference, op, dtype, axis, keepdims):
    x = data(dtype, (2, 3, 2), special=False, seed=11)
    if op == "prod" and dtype not in FLOATS:
        x = (np.abs(x) % 3 + 1).astype(x.dtype)
    got = getattr(T(x), op)(axis=axis, keepdims=keepdims)
    npx = x if dtype != "bfloat16" and dtype != "float16" else f64(x)
    want = getattr(np, op)(npx, axis=axis, keepdims=keepdims)
    if op in ("sum", "prod") and dtype in INTS:
        want_dtype = "uint64" if dtype.startswith("u") else "int64"
    elif op in ("min", "max"):
        want_dtype = dtype
    elif dtype in FLOATS:
        want_dtype = dtype
    else:
        want_dtype = "float64"
    check(got, np.asarray(want), want_dtype)


@pytest.mark.parametrize("dtype", ["int16", "uint8", "float32", "float64", "bool"])
def test_argmin_argmax(reference, dtype):
    x = data(dtype, (3, 4), special=False, seed=12)
    for op in ("argmin", "argmax"):
        check(getattr(T(x), op)(), getattr(np, op)(x), "int64")
        check(getattr(T(x), op)(axis=1), getattr(np, op)(x, axis=1), "int64")
        check(getattr(T(x), op)(axis=0, keepdims=True), getattr(np, op)(x, axis=0, keepdims=True), "int64")


def test_nan_inf_reductions(reference):
    x = np.array([1.0, np.nan, 3.0, np.nan], np.float32)
    check(T(x).argmax(), np.argmax(x), "int64")
    check(T(x).max(), np.max(x), "float32")
    check(T(x).sum(), np.sum(x), "float32")
    y = np.array([-np.inf, 1.0, np.inf], np.float64)
    check(T(y).min(), -np.inf, "float64")
    check(T(y).sum(), np.nan, "float64")


def test_empty_and_zero_dim(reference):
    e = np.zeros((0, 3), np.float32)
    check(T(e) + 1, e + 1, "float32")
    check(T(e).sum(), np.float32(0), "float32")
    check(T(e).sum(axis=0), np.zeros(3, np.float32), "float32")
    check(T(e).prod(axis=1), np.ones(0, np.float32), "float32")
    z = np.float32(2.5)
    check(T(z) * 2, np.float32(5.0), "float32")
    check(T(z).exp(), np.exp(np.float64(z)), "float32")
    assert T(z).sum().shape == ()
    with pytest.raises(ei.errors.EidosError, match="empty"):
        T(e).max()


def test_any_all(reference):
    x = np.array([[True, False], [True, True]])
    check(T(x).any(axis=0), x.any(axis=0), "bool")
    check(T(x).all(axis=1), x.all(axis=1), "bool")
    check(T(x).all(), x.all(), "bool")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_matmul_softmax_layer_norm(each_backend, dtype):
    rng = np.random.default_rng(13)
    a, b = rng.standard_normal((3, 4)).astype(dtype), rng.standard_normal((4, 5)).astype(dtype)
    check(T(a) @ T(b), f64(a) @ f64(b), dtype)
    check(T(a[0]) @ T(b), f64(a[0]) @ f64(b), dtype)
    check(T(a) @ T(b[:, 0]), f64(a) @ f64(b[:, 0]), dtype)
    batch = rng.standard_normal((2, 3, 4)).astype(dtype)
    check(T(batch) @ T(b), f64(batch) @ f64(b), dtype)
    x = f64(a)
    sm = np.exp(x - x.max(axis=-1, keepdims=True))
    check(T(a).softmax(), sm / sm.sum(axis=-1, keepdims=True), dtype)
    sm0 = np.exp(x - x.max(axis=0, keepdims=True))
    check(T.softmax(T(a), axis=0), sm0 / sm0.sum(axis=0, keepdims=True), dtype)
    ln = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5)
    w, bb = rng.standard_normal(4).astype(dtype), rng.standard_normal(4).astype(dtype)
    check(T.layer_norm(T(a), weight=T(w), bias=T(bb)), ln * f64(w) + f64(bb), dtype)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_matmul_softmax_layer_norm_half(reference, dtype):
    rng = np.random.default_rng(17)
    a, b = rng.standard_normal((3, 4)).astype(dtype), rng.standard_normal((4, 2)).astype(dtype)
    check(T(a) @ T(b), f64(a) @ f64(b), dtype)
    x = f64(a)
    sm = np.exp(x - x.max(axis=-1, keepdims=True))
    check(T(a).softmax(), sm / sm.sum(axis=-1, keepdims=True), dtype)
    ln = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5)
    check(T.layer_norm(T(a)), ln, dtype)


def test_int_matmul(reference):
    a = np.arange(6, dtype=np.int32).reshape(2, 3)
    check(T(a) @ T(a.T.copy()), a @ a.T, "int32")


def test_movement(reference):
    x = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    t = T(x)
    check(t.reshape(6, 4), x.reshape(6, 4))
    check(t.transpose(), x.transpose())
    check(t.transpose(1, 0, 2), x.transpose(1, 0, 2))
    check(T(x[:1]).squeeze(0), x[0])
    check(t.unsqueeze(1), x[:, None])
    check(T(x[:, :1]).expand(2, 3, 4), np.broadcast_to(x[:, :1], (2, 3, 4)))
    check(T.concat([t, t], axis=1), np.concatenate([x, x], axis=1))
    check(T.stack([t, t], axis=0), np.stack([x, x]))
    check(t[1, :, ::2], x[1, :, ::2])
    check(t[..., -1], x[..., -1])
    check(t[T(np.array([1, 0]))], x[[1, 0]])
    check(t[t > 20], x[x > 20])
    check((t + 1)[0].sum(axis=0), (x + 1)[0].sum(axis=0).astype(np.int64), "int64")
    u = T(x.copy())
    u[0, 0, 0] = 100
    assert u.numpy()[0, 0, 0] == 100


# ---- the compiled CPU backend, on the common dtypes -------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_cpu_fused_chain(dtype):
    rng = np.random.default_rng(14)
    x, y = rng.random(1000).astype(dtype), rng.random(1000).astype(dtype)
    got = ((T(x) * 2 + 1).exp() * T(y)).sum()
    check(got, np.sum(np.exp(f64(x) * 2 + 1) * f64(y)), dtype)
    check(((T(x) * 2 + 1).exp() * T(y)), np.exp(f64(x) * 2 + 1) * f64(y), dtype)


def test_cpu_lane_form_and_axis_reductions():
    x = data("float32", (5, 6), seed=15)
    i = data("int32", (5, 6), seed=16)
    check(T.where(T(x) > 0, T(x).floor(), -T(x)), np.where(x > 0, np.floor(x), -x), "float32")
    check((T(i) > 0) & (T(i) < 5), (i > 0) & (i < 5), "bool")
    check((T(i) * 3 + 1).sum(axis=1), (i * 3 + 1).sum(axis=1).astype(np.int64), "int64")
    check(T(x).max(axis=0), np.max(x, axis=0), "float32")
    check(T(x).argmax(axis=1), np.argmax(x, axis=1), "int64")
    check((T(i) // 4) % 3, (i // 4) % 3, "int32")
    check(T(np.abs(x)).sqrt().mean(axis=0), np.sqrt(np.abs(f64(x))).mean(axis=0), "float32")
    check(T(x) + T(x[0]), x + x[0], "float32")


def test_cpu_bfloat16_and_float16():
    x = np.linspace(-3, 3, 16).astype(ml_dtypes.bfloat16)
    check(T(x) * 2 + 1, f64(x) * 2 + 1, "bfloat16")
    h = np.linspace(-3, 3, 16).astype(np.float16)
    check(T(h).tanh() * 2, np.tanh(f64(h)) * 2, "float16")


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_mean_of_many_half_values(reference, dtype):
    x = np.full(70001, 0.5, dtype=dtype)  # 70001 is not exact in float16 (above its max) nor in bfloat16
    check(T(x).mean(), 0.5, dtype)
