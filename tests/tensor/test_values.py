"""Tensors are values: 0-d results (indexing, reductions, scalars) behave as every other tensor, through
ei.tensor and eidos.array_api, checked against array-api-strict and NumPy."""

import operator
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

import eidos as ei
import eidos.array_api as xp
from eidos.errors import DTypeError, ShapeError
from eidos.tensor import storage

strict = pytest.importorskip("array_api_strict", reason="array-api-strict is not installed")


@pytest.fixture(autouse=True)
def _on_reference(reference):
    """Tiny inputs on the reference interpreter: nothing compiles."""
    yield


# ---- 0-d tensors --------------------------------------------------------------------------------

def test_an_integer_index_gives_a_host_array_not_a_scalar():
    t = ei.tensor([1.0, 2.0, 3.0])[0]
    assert float(t + 1) == 2.0
    assert type(t.numpy()) is np.ndarray and t.numpy().shape == ()
    assert type(np.asarray(t)) is np.ndarray
    assert not storage.is_device_array(np.float64(1.0)) and not storage.is_device_array(np.zeros(2))


def test_a_0d_layer_norm_keeps_its_shape():
    """np.ascontiguousarray makes a 0-d array 1-d: the host storage keeps 0-d as 0-d."""
    for x in (ei.tensor(2.0), ei.tensor([3.0, 4.0])[0]):
        r = ei.tensor.layer_norm(x)
        assert r.shape == () and r.numpy().shape == () and float(r) == 0.0


def _zero_d(value, dtype, ns):
    """0-d arrays of namespace ns made four ways: from a scalar, an integer index, a reduction, `[()]`."""
    pair = ns.asarray([value, value], dtype=dtype)
    reduced = ns.all(pair) if dtype == ns.bool else ns.max(pair)
    lazy = pair[1] if dtype == ns.bool else (pair + ns.zeros_like(pair))[1]
    return {"scalar": ns.asarray(value, dtype=dtype), "index": pair[0], "lazy index": lazy, "reduction": reduced,
            "[()]": ns.asarray(value, dtype=dtype)[()]}


def _same(ours, theirs):
    if isinstance(theirs, (tuple, list)):  # (broadcast_arrays: a list in 2023.12, a tuple in 2024.12)
        assert isinstance(ours, (tuple, list)) and len(ours) == len(theirs)
        for o, t in zip(ours, theirs):
            _same(o, t)
        return
    o, t = np.asarray(ours), np.asarray(theirs)
    assert (o.shape, str(o.dtype)) == (t.shape, str(t.dtype))
    np.testing.assert_allclose(o.astype(t.dtype.kind == "c" and complex or float),
                               t.astype(t.dtype.kind == "c" and complex or float), rtol=1e-6, equal_nan=True)


# the standard's functions of arrays alone (creation and dtype functions take other arguments)
NOT_OF_ARRAYS = {"asarray", "arange", "empty", "empty_like", "eye", "full", "full_like", "linspace", "meshgrid",
                 "ones", "ones_like", "zeros", "zeros_like", "from_dlpack", "finfo", "iinfo", "isdtype", "result_type",
                 "can_cast", "astype", "tril", "triu", "broadcast_shapes", "broadcast_to", "__array_namespace_info__",
                 "set_array_api_strict_flags", "get_array_api_strict_flags", "reset_array_api_strict_flags",
                 "ArrayAPIStrictFlags", "Device"}
FUNCTIONS = sorted(n for n in strict.__all__ if n not in NOT_OF_ARRAYS and callable(getattr(strict, n)))
CASES = [(0.5, "float64"), (0.25, "float32"), (3, "int64"), (2, "uint8"), (True, "bool")]


@pytest.mark.parametrize("value,dtype", CASES, ids=[d for _, d in CASES])
def test_every_array_api_function_of_0d_arrays_as_array_api_strict(value, dtype):
    """Each function with one and with two 0-d operands, the operands made four ways; where strict answers, eidos
    gives the same shape, dtype and value (where strict raises, eidos may answer too: it is not checked)."""
    theirs = _zero_d(value, getattr(strict, dtype), strict)["scalar"]
    failures = []
    for how, x in _zero_d(value, getattr(xp, dtype), xp).items():
        for name in FUNCTIONS:
            for n in (1, 2):
                try:
                    want = getattr(strict, name)(*[theirs] * n)
                except Exception:
                    continue
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    try:
                        _same(getattr(xp, name)(*[x] * n), want)
                    except Exception as e:
                        failures.append(f"{name} of {n} 0-d {dtype} ({how}): {type(e).__name__}: {e}")
                break
    assert not failures, "\n".join(failures)


BINARY = [operator.add, operator.sub, operator.mul, operator.truediv, operator.floordiv, operator.mod, operator.pow,
          operator.and_, operator.or_, operator.xor, operator.lshift, operator.rshift, operator.eq, operator.ne,
          operator.lt, operator.le, operator.gt, operator.ge]
UNARY = {"neg": operator.neg, "pos": operator.pos, "abs": operator.abs, "invert": operator.invert, "float": float,
         "int": int, "bool": bool, "[()]": lambda a: a[()], "[...]": lambda a: a[...], "[None]": lambda a: a[None]}
SCALARS = {"float64": 3.0, "float32": 2.0, "int64": 2, "uint8": 1, "bool": True}


def _operator_cases(py, integer: bool) -> dict:
    """name -> f(x, x1): x a 0-d array, x1 a 1-d one of the same namespace, py a Python scalar."""
    cases = {}
    for f in BINARY:
        cases.update({f"{f.__name__}(x, x)": lambda x, x1, f=f: f(x, x), f"{f.__name__}(x, py)": lambda x, x1, f=f: f(x, py),
                      f"{f.__name__}(py, x)": lambda x, x1, f=f: f(py, x), f"{f.__name__}(x, 1-d)": lambda x, x1, f=f: f(x, x1),
                      f"{f.__name__}(1-d, x)": lambda x, x1, f=f: f(x1, x)})
    for name, f in UNARY.items():
        cases[name] = lambda x, x1, f=f: f(x)
    if integer:
        cases["1-d[x]"] = lambda x, x1: x1[x]
    return cases


@pytest.mark.parametrize("value,dtype", CASES, ids=[d for _, d in CASES])
def test_operators_on_0d_arrays_as_array_api_strict(value, dtype):
    """Operators between 0-d arrays, Python scalars and 1-d arrays, and the unary ones and conversions."""
    sx, s1 = strict.asarray(value, dtype=getattr(strict, dtype)), strict.asarray([value] * 2, dtype=getattr(strict, dtype))
    x1 = xp.asarray([value] * 2, dtype=getattr(xp, dtype))
    failures = []
    for how, x in _zero_d(value, getattr(xp, dtype), xp).items():
        for name, f in _operator_cases(SCALARS[dtype], dtype in ("int64", "uint8")).items():
            try:
                want = f(sx, s1)
            except Exception:
                continue
            try:
                got = f(x, x1)
                if isinstance(want, (int, float, bool)):
                    assert type(got) is type(want) and got == want
                else:
                    _same(got, want)
            except Exception as e:
                failures.append(f"{name}, x a 0-d {dtype} ({how}): {type(e).__name__}: {e}")
    assert not failures, "\n".join(failures)


def test_tensor_functions_of_0d_tensors_as_of_one_element_tensors():
    """Every eidos.tensor operation of one or two operands gives on a 0-d tensor what it gives on a 1-element one."""
    from eidos.tensor import ops

    skip = {"sum_dtype", "concat", "stack", "reshape", "transpose", "permute_dims", "expand", "broadcast_to",
            "matmul", "layer_norm"}
    failures = []
    for value, dtype in [(0.5, "float64"), (3, "int64"), (True, "bool"), (1 + 2j, "complex128")]:
        pair = ei.tensor([value, value], dtype=dtype)
        one = ei.tensor([value], dtype=dtype)
        for how, x in {"scalar": ei.tensor(value, dtype=dtype), "index": pair[0], "sum": pair[:1].sum().astype(dtype),
                       "[()]": ei.tensor(value, dtype=dtype)[()]}.items():
            for name in ops.__all__:
                if name in skip:
                    continue
                for n in (1, 2):
                    try:
                        want = getattr(ops, name)(*[one] * n).numpy()
                    except Exception:
                        continue
                    try:
                        got = getattr(ops, name)(*[x] * n).numpy()
                        assert got.dtype == want.dtype and got.size == 1
                        np.testing.assert_allclose(got.reshape(1), want.reshape(-1)[:1], equal_nan=True)
                    except Exception as e:
                        failures.append(f"{name} of {n} 0-d {dtype} ({how}): {type(e).__name__}: {e}")
                    break
    assert not failures, "\n".join(failures)


SCIPY = """
import os, numpy as np, scipy.special as sp, scipy.stats as st
import eidos.array_api as xp
from eidos.tensor import backend
backend.set_backend("reference")
data = [1.0, 2.0, 3.0, 4.0, 10.0, 0.5]
checks = {"moment": lambda a: st.moment(a, order=3), "skew": st.skew, "kurtosis": st.kurtosis, "zscore": st.zscore,
          "variation": st.variation, "sem": st.sem, "gmean": st.gmean, "tmean": st.tmean, "tvar": st.tvar,
          "tstd": st.tstd, "tmin": st.tmin, "tmax": st.tmax, "iqr": st.iqr, "circmean": st.circmean,
          "ttest_1samp": lambda a: st.ttest_1samp(a, 0.0).statistic, "jarque_bera": lambda a: st.jarque_bera(a).statistic,
          "pearsonr": lambda a: st.pearsonr(a, a * 2 + 1).statistic, "logsumexp": sp.logsumexp,
          "boxcox_llf": lambda a: st.boxcox_llf(1.0, a)}
for name, f in checks.items():
    got, want = f(xp.asarray(data)), f(np.asarray(data))
    assert type(got).__name__ == "Tensor", (name, type(got))
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-12, err_msg=name)
print("ok", len(checks))
"""


def test_scipy_stats_through_the_array_api():
    """SciPy's Array API support (SCIPY_ARRAY_API=1, read when SciPy is imported: a fresh interpreter) runs its
    statistics on eidos arrays, which reach 0-d results and index them."""
    pytest.importorskip("scipy", reason="scipy is not installed (the test extra has it)")
    env = {**os.environ, "SCIPY_ARRAY_API": "1"}
    out = subprocess.run([sys.executable, "-c", SCIPY], capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.startswith("ok")


# ---- value semantics: a graph computes with the values its inputs had when it was built -----------

def test_a_numpy_array_written_after_the_graph_was_built():
    x = np.zeros(3)
    y = ei.tensor(x) * 2 + 1
    x[0] = 100
    np.testing.assert_array_equal(y.numpy(), [1, 1, 1])            # as NumPy: (x * 2 + 1) was [1, 1, 1]
    shared = ei.tensor(x, copy=False)
    z = shared * 2 + 1
    x[0] = 200
    np.testing.assert_array_equal(z.numpy(), [401, 1, 1])          # shared on request: read when it runs
    assert not np.shares_memory(ei.tensor(x).numpy(), x) and np.shares_memory(shared.numpy(), x)
    assert np.shares_memory(ei.tensor(x, dtype="float64", copy=False).numpy(), x)
    assert not np.shares_memory(ei.tensor(x, copy=True).numpy(), x)
    assert ei.tensor(shared) is shared and ei.tensor(shared, copy=True)._data is not shared._data
    assert not np.shares_memory(xp.asarray(x, copy=True).numpy(), x)
    assert np.shares_memory(xp.asarray(x).numpy(), x)                # the standard: copy=None reuses memory


def test_setitem_after_the_graph_was_built():
    t = ei.tensor([1.0, 2.0, 3.0])
    y, total, view = t * 10, t.sum(), t[1:]
    t[0] = 5
    t[1:] = ei.tensor([7.0, 8.0])
    assert y.tolist() == [10, 20, 30] and float(total) == 6 and view.tolist() == [2, 3] and t.tolist() == [5, 7, 8]


def test_in_place_operators_change_the_tensor_and_nothing_built_before():
    t = ei.tensor([1.0, 2.0, 3.0])
    alias, y = t, t * 10
    t += 1
    t *= ei.tensor([2.0, 2.0, 2.0])
    assert alias is t and t.tolist() == [4, 6, 8] and y.tolist() == [10, 20, 30]
    i = ei.tensor([5, 6, 7], dtype="int8")
    before = i + 0
    i -= 1
    i //= 2
    i %= 2
    i **= 2
    i <<= 1
    i >>= 1
    i |= 2
    i &= 3
    i ^= 1
    assert i.dtype == np.int8 and i.tolist() == [3, 3, 2] and before.tolist() == [5, 6, 7]
    m = ei.tensor([[1.0, 2.0], [3.0, 4.0]])
    m @= ei.tensor([[0.0, 1.0], [1.0, 0.0]])
    assert m.tolist() == [[2, 1], [4, 3]]


def test_in_place_operators_keep_dtype_and_shape_or_say_why():
    t = ei.tensor([1, 2, 3])
    with pytest.raises(DTypeError, match="same-kind rule.*x = x / y"):
        t /= 2
    f = ei.tensor([1.0, 2.0])
    with pytest.raises(ShapeError, match=r"result has shape \(2, 2\), x has \(2,\)"):
        f += ei.tensor([[1.0], [2.0]])
    assert t.tolist() == [1, 2, 3] and f.tolist() == [1, 2]
    f32 = ei.tensor([1.0, 2.0], dtype="float32")
    f32 += ei.tensor([0.5, 0.5], dtype="float64")   # same kind: kept float32, as NumPy
    assert f32.dtype == np.float32 and f32.tolist() == [1.5, 2.5]


def test_writes_never_reach_another_tensor_through_shared_memory():
    x = ei.tensor([1.0, 2.0, 3.0])
    v = x[0:2].realize()           # a realized NumPy view of x's memory
    w = v[1:].realize()            # a view of the view
    r = x.reshape(3, 1).realize()
    v[1] = 50                      # a view written: x does not change
    x[1] = 9                       # x written: the views keep what they were
    assert x.tolist() == [1, 9, 3] and v.tolist() == [1, 50] and w.tolist() == [2] and r.tolist() == [[1], [2], [3]]
    with ei.eager():
        e = ei.tensor([1.0, 2.0, 3.0])
        head = e[:2]
        e[0] = 7
    assert head.tolist() == [1, 2]
    z = ei.tensor([1 + 1j, 2 + 0j])
    re = ei.tensor.real(z).realize()   # np.real is a view of the complex memory
    z[0] = 9
    assert re.tolist() == [1, 2]


def test_no_copy_where_nothing_reads_the_tensor():
    """Copy-on-write copies only for a reader still there: a write into a tensor nobody reads goes into its memory
    (where NumPy arrays taken from it with .numpy() see it)."""
    t = ei.tensor([1.0, 2.0, 3.0])
    mem = t.numpy()
    (t * 2).numpy()                # ran: reads t no more
    t[0] = 5
    assert t.numpy() is mem and mem[0] == 5
    y = t * 2                      # pending: t's value is copied for it, and t is still written in place
    t[1] = 6
    assert t.numpy() is mem and mem[1] == 6 and y.tolist() == [10, 4, 6]


def test_keys_are_read_when_the_index_is_taken():
    x = ei.tensor([1.0, 2.0, 3.0])
    idx, mask, lst, tkey = np.array([0, 1]), np.array([True, False, True]), [2, 0], ei.tensor([1, 2])
    a, b, c, d = x[idx], x[mask], x[lst], x[tkey]
    idx[0], mask[1], lst[0], tkey[0] = 2, True, 1, 0
    assert a.tolist() == [1, 2] and b.tolist() == [1, 3] and c.tolist() == [3, 1] and d.tolist() == [2, 3]


def test_array_api_results_are_not_views_of_their_inputs():
    x = xp.asarray([[1.0, 2.0], [3.0, 4.0]])
    flipped, moved, diag = xp.flip(x), xp.moveaxis(x, 0, 1), xp.linalg.diagonal(x)
    x[0, 0] = 100
    assert flipped.tolist() == [[4, 3], [2, 1]] and moved.tolist() == [[1, 3], [2, 4]] and diag.tolist() == [1, 4]
    flipped[0, 0] = -1
    assert x.tolist() == [[100, 2], [3, 4]]


# Generated: sequences of graphs, writes and in-place operators on a few tensors against NumPy copies.

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_OPS = {"add": lambda a, b: a + b, "mul": lambda a, b: a * b, "sub": lambda a, b: a - b}
_LAYOUT = {"slice": lambda a: a[1:], "reverse": lambda a: a[::-1], "reshape": lambda a: a.reshape(2, 2),
           "index": lambda a: a[2], "sum": lambda a: a.sum()}


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["build", "layout", "setitem", "inplace", "realize", "write_numpy",
                                           "write_derived"]),
                          st.integers(0, 99), st.integers(0, 99), st.integers(-5, 5)), min_size=1, max_size=14))
def test_generated_writes_and_graphs_as_numpy(steps):
    """Each tensor against a NumPy array computed when the tensor was defined (views copied: tensors are values).
    The third input shares a NumPy array that the steps write into (copy=False): it and what is built on it are
    read when they run, so only the shared tensor itself is compared among them."""
    source = np.arange(4, dtype=np.float64)
    tensors = [ei.tensor(source), ei.tensor([5.0, 6.0, 7.0, 8.0]), ei.tensor(source, copy=False)]
    values = [source.copy(), np.array([5.0, 6.0, 7.0, 8.0]), source]
    shared = [False, False, True]
    for kind, i, j, c in steps:
        a, b = i % len(tensors), j % len(tensors)
        if kind == "build" and tensors[a].shape == tensors[b].shape:
            name = sorted(_OPS)[(i + j) % len(_OPS)]
            tensors.append(_OPS[name](tensors[a], tensors[b]))
            values.append(_OPS[name](values[a], values[b]))
            shared.append(shared[a] or shared[b])
        elif kind == "layout" and tensors[a].shape == (4,):
            name = sorted(_LAYOUT)[j % len(_LAYOUT)]
            tensors.append(_LAYOUT[name](tensors[a]))
            values.append(np.array(_LAYOUT[name](values[a])))
            shared.append(shared[a])
        elif kind == "setitem" and tensors[a].ndim and a != 2:
            tensors[a][j % tensors[a].shape[0]] = c
            values[a][j % values[a].shape[0]] = c
        elif kind == "inplace" and a != 2:
            tensors[a] += c
            values[a] = values[a] + c
        elif kind == "realize":
            tensors[a].realize()
        elif kind == "write_numpy":
            source[j % 4] = c
        elif kind == "write_derived" and a > 2 and tensors[a].ndim:
            tensors[a][...] = c
            values[a][...] = c
            shared[a] = False
    for k, (t, want) in enumerate(zip(tensors, values)):
        if k == 2 or not shared[k]:
            np.testing.assert_array_equal(t.numpy(), want, err_msg=f"tensor {k}: {ei.tensor.explain(t)}")
