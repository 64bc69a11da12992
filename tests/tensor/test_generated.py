"""Generated element-wise expressions (with broadcasting, scalars and a trailing reduction) against NumPy,
on the reference interpreter."""

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import eidos.tensor as T
from eidos.tensor import backend as B
from eidos.testing.strategies import examples

DTYPES = ["int32", "int64", "uint8", "float32", "float64"]


def expressions(dtype):
    is_float = dtype.startswith("float")
    leaves = st.sampled_from(["a", "b", "s"])
    ops2 = ["add", "sub", "mul", "maximum", "minimum", "where_gt"]
    ops1 = ["neg", "abs", "square", "plus2", "times3"] + (["floor", "exp_small", "sqrt_abs", "tanh"] if is_float else [])
    if dtype == "uint8":
        ops1 = ["abs", "square", "plus2", "times3"]
        ops2 = [o for o in ops2 if o != "sub"]
    return st.recursive(leaves, lambda inner: st.one_of(
        st.tuples(st.sampled_from(ops1), inner),
        st.tuples(st.sampled_from(ops2), inner, inner)), max_leaves=6)


def evaluate(expr, env, lib):
    if isinstance(expr, str):
        return env[expr]
    op, *args = expr
    v = [evaluate(a, env, lib) for a in args]
    if lib == "np":
        f = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "maximum": np.maximum, "minimum": np.minimum,
             "neg": np.negative, "abs": np.abs, "square": np.square, "floor": np.floor, "tanh": np.tanh,
             "exp_small": lambda x: np.exp(np.clip(x, -5, 5)), "sqrt_abs": lambda x: np.sqrt(np.abs(x)),
             "where_gt": lambda x, y: np.where(x > y, x, y), "plus2": lambda x: x + 2,
             "times3": lambda x: 3 * x}[op]
        return f(*v)
    f = {"add": lambda x, y: x + y, "sub": lambda x, y: x - y, "mul": lambda x, y: x * y,
         "maximum": T.maximum, "minimum": T.minimum, "neg": lambda x: -x, "abs": T.abs, "square": T.square,
         "floor": T.floor, "tanh": T.tanh, "exp_small": lambda x: T.exp(T.clip(x, -5, 5)),
         "sqrt_abs": lambda x: T.sqrt(T.abs(x)), "where_gt": lambda x, y: T.where(x > y, x, y),
         "plus2": lambda x: x + 2, "times3": lambda x: 3 * x}[op]
    return f(*v)


@st.composite
def cases(draw):
    dtype = draw(st.sampled_from(DTYPES))
    expr = draw(expressions(dtype))
    shape_a = draw(st.sampled_from([(3, 1), (2, 3, 4), (4,), (), (0, 4)]))
    shape_b = draw(st.sampled_from([(1, 4), (4,), ()]))
    reduce = draw(st.sampled_from([None, "sum", "max", "min"]))
    axis = draw(st.sampled_from([None, -1]))
    return dtype, expr, shape_a, shape_b, reduce, axis


def data(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    if dtype.startswith("float"):
        return (rng.standard_normal(shape) * 2).astype(dtype)
    lo = 0 if dtype.startswith("u") else -5
    return rng.integers(lo, 6, size=shape).astype(dtype)


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases(), st.integers(0, 2**16))
def test_generated_expressions(case, seed):
    B.set_backend("reference")
    try:
        check_case(case, seed, T)
    finally:
        B.reset()


def check_case(case, seed, make, device="cpu"):
    """One generated case against NumPy, its inputs made into tensors by `make` (tests/tensor/test_gpu.py
    puts them on the gpu); the result must stay on `device`."""
    dtype, expr, shape_a, shape_b, reduce, axis = case
    if "'a'" not in repr(expr) and "'b'" not in repr(expr) and expr not in ("a", "b"):
        return  # only scalars: Python arithmetic, not tensors
    a, b = data(shape_a, dtype, seed), data(shape_b, dtype, seed + 1)
    s = np.array(2, dtype=dtype)
    want = evaluate(expr, {"a": a, "b": b, "s": s}, "np")
    got = evaluate(expr, {"a": make(a), "b": make(b), "s": make(s)}, "T")
    want = np.asarray(want)
    if not isinstance(got, T.Tensor):
        got = make(np.asarray(got))
    if reduce is not None:
        if want.size == 0 and reduce != "sum" or (axis is not None and want.ndim == 0):
            return
        if axis is not None and want.shape[axis] == 0 and reduce != "sum":
            return
        want = getattr(np, reduce)(want, axis=axis)
        got = getattr(got, reduce)(axis=axis)
        if reduce == "sum" and not dtype.startswith("float"):
            want = want.astype("uint64" if dtype.startswith("u") else "int64")
    assert got.device == device, (got.device, device, expr)
    g = got.numpy()
    want = np.broadcast_to(want, g.shape) if want.shape != g.shape and want.size == 1 and g.ndim == 0 else want
    assert g.shape == want.shape and g.dtype == want.dtype, (g.shape, want.shape, g.dtype, want.dtype, expr)
    if dtype.startswith("float"):
        np.testing.assert_allclose(g, want, rtol=1e-5 if dtype == "float32" else 1e-12, atol=1e-5, equal_nan=True)
    else:
        np.testing.assert_array_equal(g, want)
