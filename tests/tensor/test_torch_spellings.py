"""torch's spellings on tensors (dim=/keepdim=, view, clone, .float(), .to(dtype), in-place methods) against
NumPy on the same arrays, NumPy's renamed names, and DLPack with torch for every dtype both have."""

import numpy as np
import pytest

import eidos as ei
from eidos.errors import AxisError, DeviceError, DTypeError, ShapeError

A = np.array([[0.5, -1.25, 2.0], [3.0, 0.25, -0.75]])


def _np(t):
    return t.numpy()


@pytest.mark.parametrize("name", ["sum", "prod", "mean", "any", "all", "argmax", "argmin"])
@pytest.mark.parametrize("dim,keepdim", [(0, False), (1, True), (-1, False)])
def test_reductions_take_dim_and_keepdim(name, dim, keepdim):
    t = ei.tensor(A)
    want = getattr(np, name)(A, axis=dim, keepdims=keepdim)
    np.testing.assert_allclose(_np(getattr(t, name)(dim=dim, keepdim=keepdim)), want)
    np.testing.assert_allclose(_np(getattr(ei.tensor, name)(t, dim=dim, keepdim=keepdim)), want)


def test_max_min_with_dim_give_values_and_indices_as_torch():
    t = ei.tensor(A)
    values, indices = t.max(dim=1)
    np.testing.assert_allclose(_np(values), A.max(axis=1))
    np.testing.assert_array_equal(_np(indices), A.argmax(axis=1))
    r = t.min(dim=0, keepdim=True)
    np.testing.assert_allclose(_np(r.values), A.min(axis=0, keepdims=True))
    np.testing.assert_array_equal(_np(r.indices), A.argmin(axis=0, keepdims=True))
    np.testing.assert_allclose(_np(t.max(axis=1)), A.max(axis=1))   # the standard's spelling: values only
    with pytest.raises(AxisError, match="one dimension"):
        t.max(dim=(0, 1))


def test_var_std_with_dim_default_to_torch_correction():
    t = ei.tensor(A)
    np.testing.assert_allclose(_np(t.var(dim=1)), A.var(axis=1, ddof=1))
    np.testing.assert_allclose(_np(t.std(dim=0, unbiased=False)), A.std(axis=0))
    np.testing.assert_allclose(_np(t.var(axis=1)), A.var(axis=1))
    np.testing.assert_allclose(_np(t.std(dim=1, correction=0)), A.std(axis=1))


def test_axis_and_dim_together_is_an_error():
    with pytest.raises(AxisError, match="dim"):
        ei.tensor(A).sum(axis=0, dim=1)


def test_softmax_cat_stack_squeeze_unsqueeze_take_dim():
    t = ei.tensor(A)
    e = np.exp(A - A.max(axis=0))
    np.testing.assert_allclose(_np(t.softmax(dim=0)), e / e.sum(axis=0))
    np.testing.assert_allclose(_np(ei.tensor.cat([t, t], dim=1)), np.concatenate([A, A], axis=1))
    np.testing.assert_allclose(_np(ei.tensor.stack([t, t], dim=2)), np.stack([A, A], axis=2))
    assert t.unsqueeze(dim=1).shape == (2, 1, 3) and t.unsqueeze(0).shape == (1, 2, 3)
    assert ei.tensor(A[:1]).squeeze(dim=0).shape == (3,)


def test_view_clone_and_dtype_methods():
    t = ei.tensor(A)
    np.testing.assert_allclose(_np(t.view(3, 2)), A.reshape(3, 2))
    np.testing.assert_allclose(_np(t.view((-1,))), A.reshape(-1))
    f = ei.tensor(A.astype(np.float32))
    np.testing.assert_array_equal(_np(f.view("int32")), A.astype(np.float32).view(np.int32))
    np.testing.assert_array_equal(_np(f.view(np.uint8)), A.astype(np.float32).view(np.uint8))
    with pytest.raises(ShapeError):
        ei.tensor(np.zeros(3, np.uint8)).view("float32")
    c = t.clone()
    c.mul_(2)
    np.testing.assert_allclose(_np(t), A)
    np.testing.assert_allclose(_np(c), A * 2)
    negzero = ei.tensor([-0.0, np.nan]).clone().numpy()
    assert np.signbit(negzero[0]) and np.isnan(negzero[1])
    for name, dt in [("float", np.float32), ("half", np.float16), ("double", np.float64), ("int", np.int32),
                     ("long", np.int64), ("bool", np.bool_), ("bfloat16", ei.tensor.bfloat16)]:
        r = getattr(t, name)()
        assert r.dtype == dt
        np.testing.assert_array_equal(_np(r).astype(np.float64), A.astype(dt).astype(np.float64))


def test_to_takes_dtypes_devices_and_tensors():
    t = ei.tensor(A)
    assert t.to("float32").dtype == np.float32
    assert t.to(np.int16).dtype == np.int16
    assert t.to("cpu", "float16").dtype == np.float16
    assert t.to(dtype="int8").dtype == np.int8
    assert t.to(ei.tensor([1], dtype="uint8")).dtype == np.uint8
    assert t.to("cpu") is t and t.to("cpu", copy=True) is not t
    with pytest.raises(DeviceError):
        t.to("tpu")


def test_matmul_T_mT():
    t = ei.tensor(A)
    np.testing.assert_allclose(_np(t.matmul(t.T)), A @ A.T)
    b = np.arange(24.0).reshape(2, 3, 4)
    np.testing.assert_allclose(_np(ei.tensor(b).mT), np.swapaxes(b, -1, -2))


BINARY = [("add_", {}, lambda a, b: a + b), ("add_", {"alpha": 3}, lambda a, b: a + 3 * b),
          ("sub_", {}, lambda a, b: a - b), ("sub_", {"alpha": 2}, lambda a, b: a - 2 * b),
          ("mul_", {}, lambda a, b: a * b), ("div_", {}, lambda a, b: a / b), ("pow_", {}, lambda a, b: a ** b)]


@pytest.mark.parametrize("name,kw,fn", BINARY, ids=[f"{n}{sorted(k)}" for n, k, _ in BINARY])
def test_binary_inplace_methods_write_memory(name, kw, fn):
    a = np.abs(A) + 0.5
    t = ei.tensor(a.copy())
    seen = t.numpy()
    r = getattr(t, name)(ei.tensor(a[::-1].copy()), **kw)
    assert r is t
    np.testing.assert_allclose(seen, fn(a, a[::-1]))


UNARY = ["abs_", "neg_", "sqrt_", "exp_", "log_", "sin_", "cos_", "tanh_", "sigmoid_", "relu_", "floor_", "ceil_",
         "round_", "trunc_"]


@pytest.mark.parametrize("name", UNARY)
def test_unary_inplace_methods_match_the_functions(name):
    a = np.abs(A) + 0.5
    t = ei.tensor(a.copy())
    seen = t.numpy()
    assert getattr(t, name)() is t
    np.testing.assert_allclose(seen, getattr(ei.tensor, {"neg_": "negative"}.get(name, name[:-1]))(a).numpy())


def test_fill_zero_copy_clamp():
    t = ei.tensor([1, 2, 3])
    seen = t.numpy()
    t.clamp_(2, 2)
    assert seen.tolist() == [2, 2, 2]
    t.fill_(7.9)     # converted, as torch's and NumPy's fill
    assert seen.tolist() == [7, 7, 7]
    t.copy_(ei.tensor([1.5, 2.5, 3.5]))
    assert seen.tolist() == [1, 2, 3]
    t.zero_()
    assert seen.tolist() == [0, 0, 0]
    assert ei.tensor([[0, 0], [0, 0]]).copy_([5, 6]).tolist() == [[5, 6], [5, 6]]
    assert ei.tensor([-3.0, 3.0]).clip_(-1, 1).tolist() == [-1.0, 1.0]


def test_inplace_methods_keep_dtype_as_torch():
    t = ei.tensor([1, 2])
    with pytest.raises(DTypeError, match="div_"):
        t.div_(2)
    with pytest.raises(DTypeError, match="add_"):
        t.add_(0.5)
    y = t * 1
    t.add_(1)
    assert y.tolist() == [1, 2] and t.tolist() == [2, 3]


def test_numpy_and_torch_names_are_the_same_functions():
    T = ei.tensor
    for alias, name in T.ops.ALIASES.items():
        assert getattr(T, alias) is getattr(T, name), alias
    np.testing.assert_allclose(T.arccos([0.5]).numpy(), np.arccos([0.5]))
    np.testing.assert_allclose(T.power([2.0], 3).numpy(), np.power([2.0], 3))
    np.testing.assert_allclose(T.arctan2([1.0], [2.0]).numpy(), np.arctan2([1.0], [2.0]))
    np.testing.assert_allclose(T.concatenate([[1], [2]]).numpy(), [1, 2])
    np.testing.assert_allclose(T.absolute([-1]).numpy(), [1])


# ---- DLPack with torch ---------------------------------------------------------------------------------

# torch is imported per test (pytest.importorskip): the rest of this file needs none.
DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "uint16", "uint32", "uint64", "float16", "bfloat16",
          "float32", "float64", "complex64", "complex128"]


@pytest.mark.parametrize("name", DTYPES)
def test_dlpack_with_torch_both_ways_every_dtype(name):
    torch = pytest.importorskip("torch")
    tdt = getattr(torch, name)
    x = (torch.arange(6).reshape(2, 3) % 2 if name == "bool" else torch.arange(6).reshape(2, 3)).to(tdt)
    t = ei.from_dlpack(x)
    assert str(t.dtype) == name and t.shape == (2, 3)
    back = torch.from_dlpack(t)
    assert back.dtype == tdt and bool((back == x).all())
    x[0, 0] = 1
    assert t.numpy()[0, 0] == 1 and back[0, 0] == 1   # one memory, three views of it
    w = ei.tensor(x)                                  # ei.tensor copies, as for an array
    before = w.numpy().copy()
    x[0, 1] = 0
    np.testing.assert_array_equal(w.numpy(), before)


def test_dlpack_bfloat16_values_and_lazy_export():
    torch = pytest.importorskip("torch")
    x = torch.tensor([1.5, -2.25, 3e38], dtype=torch.bfloat16)
    t = ei.from_dlpack(x)
    np.testing.assert_array_equal(t.numpy().astype(np.float32), x.float().numpy())
    r = torch.from_dlpack(ei.tensor([1.0, 2.0]).to(torch.bfloat16) * 2)
    assert r.dtype == torch.bfloat16 and r.tolist() == [2.0, 4.0]


def test_torch_dtypes_name_eidos_dtypes():
    torch = pytest.importorskip("torch")
    assert ei.tensor([1, 2], dtype=torch.float16).dtype == np.float16
    assert ei.tensor([1.0]).to(torch.int32).dtype == np.int32


def test_an_unsupported_dlpack_dtype_is_a_dtype_error():
    class Producer:   # a DLPack producer of float8 (code kDLFloat, 8 bits): NumPy has no such dtype
        def __init__(self):
            torch = pytest.importorskip("torch")
            if not hasattr(torch, "float8_e4m3fn"):
                pytest.skip("this torch has no float8")
            self.x = torch.zeros(2, dtype=torch.float8_e4m3fn)

        def __dlpack__(self, **kw):
            return self.x.__dlpack__(**kw)

        def __dlpack_device__(self):
            return self.x.__dlpack_device__()

    p = Producer()
    try:
        p.__dlpack__()
    except Exception:
        pytest.skip("this torch does not export float8 over DLPack")
    with pytest.raises(DTypeError, match="from_dlpack"):
        ei.from_dlpack(p)
