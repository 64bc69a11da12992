"""Laziness and fusion: program counts, eager mode, the lowering cache."""

import math

import numpy as np
import pytest

import eidos as ei
import eidos.tensor as T
from eidos.tensor import lower


def ran(fn):
    before = T.programs_executed()
    out = fn()
    return out, T.programs_executed() - before


def test_operations_are_lazy_until_needed():
    x, y = T(np.arange(8, dtype=np.float32)), T(np.ones(8, np.float32))
    z, n = ran(lambda: ((x * 2 + 1).exp() * y).sum())
    assert n == 0 and not z.is_realized
    _, n = ran(z.numpy)
    assert n == 1


def test_fused_chain_is_one_program():
    x, y = T(np.random.rand(1000).astype(np.float32)), T(np.random.rand(1000).astype(np.float32))
    z, n = ran(lambda: float(((x * 2 + 1).exp() * y).sum()))
    assert n == 1
    assert "map form, reduction" in T.explain(((x * 2 + 1).exp() * y).sum().realize())


def test_lane_form_chain_and_axis_reduction_are_one_program():
    x = T(np.random.rand(6, 5).astype(np.float32))
    _, n = ran(lambda: T.where(x > 0.5, x.floor(), x * 3).sum(axis=1).numpy())
    assert n == 1
    _, n = ran(lambda: ((x - 1) * (x + 1)).max(axis=0, keepdims=True).numpy())
    assert n == 1


def test_realize_bool_print_trigger():
    x = T(np.array([1.0, 2.0]))
    t = x + 1
    ei.realize(t)
    assert t.is_realized
    assert bool((x.sum() > 2))
    assert "Tensor([2., 3.]" in repr(t)


def test_shared_subexpression_and_repeated_realize():
    x = T(np.arange(4, dtype=np.float64))
    a = x * 2
    b = a + a
    np.testing.assert_array_equal(b.numpy(), np.arange(4) * 4)
    _, n = ran(b.numpy)
    assert n == 0


def test_eager_runs_each_operation():
    x = T(np.arange(4, dtype=np.float32))
    with ei.eager():
        assert T.is_eager()
        y, n = ran(lambda: (x * 2 + 1).exp())
        assert y.is_realized and n == 3
    assert not T.is_eager()
    _, n = ran(lambda: (x * 2 + 1).exp().numpy())
    assert n == 1


def test_lowering_cache_reuses_programs():
    x = T(np.arange(16, dtype=np.float32))
    (x * 3 - 1).numpy()
    hits = lower.CACHE.hits
    (T(np.ones(16, np.float32)) * 3 - 1).numpy()
    assert lower.CACHE.hits == hits + 1


def test_kernel_nodes_are_exact_cache_keys():
    """An input slot and a constant of the same index and dtype are different kernels (and programs)."""
    x_plus_input = lower.Apply("add", "float32", (lower.Input(0, "float32"), lower.Input(1, "float32")))
    x_plus_const = lower.Apply("add", "float32", (lower.Input(0, "float32"), lower.Scalar(0, "float32")))
    assert lower.Input(1, "float32") != lower.Scalar(1, "float32")
    a = lower.lower(lower.Kernel(x_plus_input, 2, "float32", 8))
    b = lower.lower(lower.Kernel(x_plus_const, 1, "float32", 8))
    assert a is not b and a.form == b.form == "map" and [p[0] for p in b.params] == [0]
    assert lower.lower(lower.Kernel(x_plus_const, 1, "float32", 8)) is b  # the same kernel: cached


def test_mean_var_programs():
    x = T(np.random.rand(10).astype(np.float64))
    _, n = ran(lambda: x.mean().numpy())
    assert n == 1  # the sum and the division by the count: one program
    _, n = ran(lambda: x.var().numpy())
    assert n == 2  # the mean, then the sum of squared deviations and its division
    np.testing.assert_allclose(x.var().numpy(), np.var(x.numpy()))


def test_constants_do_not_rebuild_programs():
    """A kernel's constants are bound at run time: kernel arguments (starting registers; in the map form the
    array instructions' scalar operands)."""
    x = T(np.arange(6, dtype=np.float32))
    (T.where(x > 0.5, x, 2.0)).numpy()
    (x * 1.5 + 2).numpy()
    misses = lower.CACHE.misses
    for c in (1.5, 2.5, 3.5):
        np.testing.assert_array_equal(T.where(x > c, x, c).numpy(), np.where(x.numpy() > c, x.numpy(), c))
        np.testing.assert_allclose((x * c + 2).numpy(), x.numpy() * c + 2)
        np.testing.assert_array_equal((T(np.arange(6)) % int(c + 1)).numpy(), np.arange(6) % int(c + 1))
    assert lower.CACHE.misses == misses + 1  # only the integer modulo's first structure


@pytest.mark.parametrize("n", [1000, (1 << 17) * 2 + 3])   # one chunk; chunks over the threads
def test_float_sum_within_the_reduction_tolerance(n):
    """The CPU backend's float Sum (binary64 partial sums) against math.fsum, and IEEE's infinities and NaN;
    the fused map-and-sum the same way."""
    x = np.random.default_rng(1).random(n).astype(np.float32)
    exact = math.fsum(x.astype(np.float64).tolist())
    for got in (float(T(x).sum()), float((T(x) * 1).sum())):
        assert abs(got - exact) <= np.spacing(np.float32(exact))  # binary64 sums: within one float32 step
    x[10] = np.inf
    assert float(T(x).sum()) == np.inf and float((T(x) * 2).sum()) == np.inf
    x[-1] = -np.inf
    assert np.isnan(float(T(x).sum())) and np.isnan(float((T(x) + 1).sum()))
    x[-1] = np.nan
    assert np.isnan(float(T(x).exp().sum()))


def test_reshape_fuses_when_nothing_broadcasts_inside():
    xs = np.arange(12, dtype=np.float64)
    x, y = T(xs), T(np.ones((3, 4)))
    got, n = ran(lambda: ((x * 2 + 1).reshape(3, 4) + y).sum(axis=1).numpy())
    assert n == 1
    np.testing.assert_array_equal(got, ((xs * 2 + 1).reshape(3, 4) + 1).sum(axis=1))
    got, n = ran(lambda: (x.exp().reshape(2, 6).squeeze() * 3).max(axis=0).numpy())
    assert n == 1
    np.testing.assert_allclose(got, (np.exp(xs).reshape(2, 6) * 3).max(axis=0))
    b = T(np.arange(3.0).reshape(3, 1))
    got, n = ran(lambda: (b + T(np.zeros((3, 4)))).reshape(12).sum().numpy())
    assert n == 2  # broadcasting inside the reshaped subgraph: it runs first
    assert got == 4 * 3


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "uint8", "int64"])
def test_small_eager_operations_call_the_cpu_kernel_and_equal_the_map_form(dtype):
    """Eager element-wise operations on small realized operands take the small path (explain says so, one
    program each) and give the map form's bytes; everything else takes the general path."""
    pytest.importorskip("numba", reason="the small path calls the cpu backend's kernels, which numba compiles")
    rng = np.random.default_rng(3)
    raw = rng.standard_normal((4, 25)) * 50
    xs, ys = raw.astype(dtype), (raw[::-1] + 1).astype(dtype)
    x, y = T(xs), T(ys)
    floats = np.dtype(dtype).kind == "f"
    cases = [lambda a, b: a + b, lambda a, b: a - b, lambda a, b: a * b, T.maximum, T.minimum]
    if np.dtype(dtype).kind != "u":  # (abs of an unsigned tensor is the tensor: nothing runs)
        cases.append(lambda a, b: abs(a))
    if floats:
        cases += [lambda a, b: a / b, lambda a, b: a.exp(), lambda a, b: a.sqrt(), lambda a, b: a.tanh()]
    for f in cases:
        with np.errstate(all="ignore"):
            lazy = f(x * 1, y * 1).numpy()   # the map form (two operations: a program)
            with ei.eager():
                t, n = ran(lambda f=f: f(x, y))
        assert n == 1 and "small eager path" in T.explain(t)
        assert t.dtype == lazy.dtype and t.shape == lazy.shape and t.numpy().tobytes() == lazy.tobytes()
        t, n = ran(lambda f=f: f(x, y).numpy())   # a lazy graph of one operation takes it too
        assert n == 1 and t.tobytes() == lazy.tobytes()


def test_the_small_path_only_where_it_applies():
    pytest.importorskip("numba", reason="the small path calls the cpu backend's kernels, which numba compiles")
    x = T(np.arange(12, dtype=np.float32).reshape(3, 4))
    with ei.eager():
        assert "small eager path" in T.explain(x + x)
        assert "small eager path" not in T.explain(x.T + x.T)               # not contiguous
        assert "small eager path" not in T.explain(x + T(np.ones(4, np.float32)))   # broadcasting
        mixed = x + x.astype("float64")   # the cast runs as a program, then the add (one dtype now) small
        assert mixed.dtype == np.float64 and "small eager path" in T.explain(mixed)
        ro = np.arange(12, dtype=np.float32)
        ro.flags.writeable = False
        shared = T(ro, copy=False)                                           # (T(ro) copies: writable)
        assert "small eager path" not in T.explain(shared + shared)         # read-only input
        big = T(np.ones(T.backend.SMALL_MAX_ELEMENTS + 1, np.float32))
        assert "small eager path" not in T.explain(big + big)
        np.testing.assert_array_equal((T(ro) + T(ro)).numpy(), ro + ro)
        i, four = np.arange(12, dtype=np.int32).reshape(3, 4), np.full((3, 4), 4, np.int32)
        q = T(i) / T(four)   # true division of integers: float64 (never the integer Div loop the operator memo has)
        assert q.dtype == np.float64 and q.numpy().tobytes() == (i / four).tobytes()
    T.backend.set_backend("reference")
    with ei.eager():
        r = x + x
    assert "small eager path" not in T.explain(r) and "backend: reference" in T.explain(r)
    T.backend.set_backend(None)

    class Recorder(T.backend.CPUBackend):
        name = "recorder"
    T.backend.register_backend("recorder", Recorder(), priority=0)
    try:
        with ei.eager():
            r = x + x
        assert "small eager path" not in T.explain(r) and "backend: recorder" in T.explain(r)
    finally:
        T.backend.unregister_backend("recorder")
    with ei.eager():
        assert "small eager path" in T.explain(x + x)
