"""gpu tensors: the op suite on device-resident tensors against NumPy, residency, DLPack, dispatch, errors.

Runs on a CUDA GPU when torch sees one; otherwise under Triton's interpreter (TRITON_INTERPRET=1, set here
before anything defines a Triton kernel), where torch CPU tensors stand in for device memory. The same
file runs unchanged on both.
"""

import json
import os
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch", reason="gpu tensors need torch (pip install 'eidos[gpu]')")
CUDA = torch.cuda.is_available()
if not CUDA:
    os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported: it reads the switch then
pytest.importorskip("triton", reason="gpu tensors need triton (pip install 'eidos[gpu]')")

import eidos as ei  # noqa: E402
import eidos.tensor as T  # noqa: E402
from eidos.errors import BackendUnavailable, EidosError, FallbackWarning, PlanError, UnsupportedError  # noqa: E402
from eidos.tensor import backend as B  # noqa: E402
from eidos.tensor.storage import DeviceError  # noqa: E402

from . import test_generated as gen  # noqa: E402
from . import test_ops as ops  # noqa: E402
from .test_dispatch import gpu_machine  # noqa: E402

if not B.get_backend("gpu").is_available():
    pytest.skip(f"the gpu tensor backend is unavailable: {B.get_backend('gpu').unavailable_reason()}",
                allow_module_level=True)


def on_gpu(x, dtype=None):
    return T(x, dtype=dtype, device="gpu")


class _GpuTensors:
    """eidos.tensor whose constructor puts the data on the gpu: test_ops's suite on device-resident tensors."""

    def __call__(self, data, dtype=None, device="gpu"):
        return T(data, dtype=dtype, device=device)

    def __getattr__(self, name):
        return getattr(T, name)


@pytest.fixture
def gpu(monkeypatch):
    """test_ops's functions, their tensors made on the gpu, every result checked to be there too; a run-time
    fallback to a host backend fails the test (the gpu backend must run the op itself)."""
    real_check = ops.check

    def check(got, want, dtype=None):
        assert got.device == "gpu", T.explain(got)
        real_check(got, want, dtype)

    monkeypatch.setattr(ops, "T", _GpuTensors())
    monkeypatch.setattr(ops, "check", check)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        yield


# ---- the op suite (tests/tensor/test_ops.py) on gpu tensors --------------------------------------------

@pytest.mark.parametrize("op", sorted(ops.UNARY))
def test_unary_floats(gpu, op):
    ops.test_unary_floats(None, op, "float32")


@pytest.mark.parametrize("dtype", ["int32", "uint8"])
@pytest.mark.parametrize("op", ["abs", "negative", "relu", "floor", "sign"])
def test_unary_ints(gpu, op, dtype):
    ops.test_unary_ints(None, op, dtype)


@pytest.mark.parametrize("dtype", ["int8", "uint16", "int64", "float16", "bfloat16", "float64"])
@pytest.mark.parametrize("op", sorted(ops.BINARY))
def test_binary_broadcasting(gpu, op, dtype):
    ops.test_binary_broadcasting(None, op, dtype)


def test_division_pow_floor_mod(gpu):
    ops.test_divide_and_pow_floats(None, "float32")
    ops.test_int_division_floor_mod_pow(None, "int32")
    ops.test_float_floor_mod(None)


@pytest.mark.parametrize("dtype", ["bool", "int8", "float32"])
def test_comparisons_logic_where_casts(gpu, dtype):
    for op in ("eq", "lt", "ge"):
        ops.test_comparisons(None, op, dtype)
    for cast in (dtype, "uint32", "bfloat16"):
        ops.test_casts(None, cast)
    if dtype != "float32":
        ops.test_logical_and_bitwise(None, dtype)
    else:
        ops.test_where_clip_and_scalars(None)


@pytest.mark.parametrize("dtype,axis,keepdims", [("float32", None, False), ("float32", (0, 2), False),
                                                  ("int32", 1, True), ("bfloat16", -1, False)])
def test_reductions(gpu, dtype, axis, keepdims):
    for op in ops.REDUCE:
        ops.test_reductions(None, op, dtype, axis, keepdims)


def test_arg_nan_empty_any_all(gpu):
    ops.test_argmin_argmax(None, "float32")
    ops.test_nan_inf_reductions(None)
    ops.test_empty_and_zero_dim(None)
    ops.test_any_all(None)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_matmul_softmax_layer_norm(gpu, dtype):
    if dtype == "float16":
        ops.test_matmul_softmax_layer_norm_half(None, dtype)
    else:
        ops.test_matmul_softmax_layer_norm(None, dtype)
    ops.test_int_matmul(None)


def test_movement_stays_on_the_device(gpu):
    ops.test_movement(None)
    x = np.arange(24, dtype=np.uint32).reshape(2, 3, 4)
    t = on_gpu(x)
    moved = t.transpose(2, 0, 1)[::-1, 1:, ::-2]
    np.testing.assert_array_equal(moved.numpy(), x.transpose(2, 0, 1)[::-1, 1:, ::-2])
    assert moved.device == "gpu" and "device layout" in T.explain(moved)
    assert isinstance(moved._data, torch.Tensor)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gen.cases(), st.integers(0, 2**16))
def test_generated_expressions(case, seed):
    """tests/tensor/test_generated.py's expressions, every input on the gpu, against NumPy."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        gen.check_case(case, seed, on_gpu, device="gpu")


def test_host_tensors_run_on_the_gpu_backend_when_asked():
    """set_backend('gpu'): host tensors' programs run there (inputs copied in, the result back); same values."""
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((5, 7)).astype(np.float32), rng.standard_normal((7, 3)).astype(np.float32)
    want_sum = float(T((T(a) * 2 + 1).exp().sum()))
    B.set_backend("gpu")
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        s = (T(a) * 2 + 1).exp().sum()
        m = T(a) @ T(b)
        np.testing.assert_allclose(float(s), want_sum, rtol=1e-5)
        np.testing.assert_allclose(m.numpy(), a @ b, rtol=1e-5, atol=1e-5)
    assert s.device == "cpu" and m.device == "cpu"
    text = T.explain(s)
    assert "backend: gpu (explicit backend), device: gpu" in text
    assert f"copies: {a.nbytes} input bytes host->device, 4 output bytes device->host" in text


# ---- residency --------------------------------------------------------------------------------------------

def test_to_gpu_copies_and_results_stay_there():
    x = np.arange(6, dtype=np.float32)
    g = T(x).to("gpu")
    assert g.device == "gpu" and T(x).device == "cpu"
    x[0] = 100  # the device copy does not alias the host array
    assert g.numpy()[0] == 0
    y = (g * 2).exp().sum()
    assert y.device == "gpu"
    y.realize()
    assert isinstance(y._data, torch.Tensor) and y._data.device.type == ("cuda" if CUDA else "cpu")
    assert "inputs on the gpu: runs where the data is" in T.explain(y)
    assert "copies" not in T.explain(y)
    h = y.to("cpu")
    assert h.device == "cpu" and isinstance(h._data, np.ndarray)
    assert isinstance(y.numpy(), np.ndarray) and isinstance(np.asarray(g), np.ndarray)
    assert g.to("gpu") is g and g.to("cuda:0") is g and T(x).to("cpu").device == "cpu"
    assert repr(T([1.5], device="cuda")) == "Tensor([1.5], dtype=float64, device='gpu')"
    assert float(y) == pytest.approx(np.exp(np.arange(6) * 2.0).sum(), rel=1e-6)
    assert g.tolist() == [0, 1, 2, 3, 4, 5] and g[2].item() == 2 and bool(g[1]) and int(g[3]) == 3
    with pytest.raises(ValueError, match="copy"):
        np.asarray(g, copy=False)
    assert "gpu is " + ("cuda" if CUDA else "cpu (Triton interpreter") in T.explain(g)


def test_setitem_on_the_device():
    g = on_gpu(np.zeros((3, 4), np.int16))
    g[1] = 7
    g[:, ::-3] = on_gpu(np.array([1, 2], np.int16))
    g[g.numpy() == 7] = 5
    want = np.zeros((3, 4), np.int16)
    want[1] = 7
    want[:, ::-3] = [1, 2]
    want[want == 7] = 5
    np.testing.assert_array_equal(g.numpy(), want)
    assert g.device == "gpu"
    with pytest.raises(DeviceError, match="different devices"):
        g[0] = T(np.ones(4, np.int16))


def test_0d_tensors_on_the_device_and_host_0d_tensors_on_the_gpu_backend():
    """A 0-d result (an integer index, a reduction) is a 0-d device tensor; a host one, run on the gpu backend,
    is a 0-d NumPy array (never a NumPy scalar taken for device data) copied in."""
    g = on_gpu([1.0, 2.0, 3.0])
    for x in (g[0], g.sum(), g[1:][1], on_gpu(2.0)[()]):
        r = x * 2 + 1
        assert r.device == "gpu" and r.shape == () and T.layer_norm(x).shape == ()
        assert float(r) == float(x) * 2 + 1 and r.numpy().shape == () and T.layer_norm(x).numpy().shape == ()
    B.set_backend("gpu")
    h = T([1.0, 2.0, 3.0])[0] + 1
    assert float(h) == 2.0 and h.device == "cpu" and "backend: gpu (explicit backend)" in T.explain(h)


def test_device_tensors_are_values():
    """As on the host (tests/tensor/test_values.py): a write after a graph was built does not reach it, nor a
    tensor viewing the same device memory; in-place operators change the tensor alone."""
    g = on_gpu([1.0, 2.0, 3.0])
    y, tail = g * 10, g[1:]
    v = g[0:2].realize()
    assert isinstance(v._data, torch.Tensor) and v._data.untyped_storage().data_ptr() == \
        g._data.untyped_storage().data_ptr()
    g[0] = 5
    g += 1
    v[1] = 50
    assert y.tolist() == [10, 20, 30] and tail.tolist() == [2, 3] and v.tolist() == [1, 50] and g.tolist() == [6, 3, 4]
    g[1:] = g[:-1]
    assert g.tolist() == [6, 6, 3] and g.device == "gpu"
    src = torch.zeros(3, device=T.storage.torch_device()) if CUDA else None
    if src is not None:   # a CUDA producer: ei.tensor copies it, from_dlpack shares it
        t, shared = T(src), ei.from_dlpack(src)
        src[0] = 7
        assert t.tolist() == [0, 0, 0] and shared.tolist() == [7, 0, 0]


def test_layer_norm_defaults_and_isnan_of_ints_stay_on_the_device():
    g = on_gpu(np.arange(8, dtype=np.float32).reshape(2, 4))
    assert T.layer_norm(g).device == "gpu" and T.isnan(on_gpu([1, 2])).device == "gpu"
    assert T.isnan(on_gpu([1, 2])).tolist() == [False, False]


# ---- DLPack ---------------------------------------------------------------------------------------------

def test_dlpack_with_torch_shares_memory():
    if CUDA:
        src = torch.arange(6, dtype=torch.float32, device="cuda")
        g = ei.from_dlpack(src)
    else:  # the interpreter's device memory is host memory: a host producer is shared when asked for the gpu
        src = torch.arange(6, dtype=torch.float32)
        g = ei.from_dlpack(src, device="gpu")
    assert g.device == "gpu"
    src[0] = 42  # write through torch, read through eidos
    assert g.numpy()[0] == 42
    back = torch.from_dlpack(g)
    back[1] = -1  # write through the consumer, read through eidos and the producer
    assert g.numpy()[1] == -1 and src[1].item() == -1
    assert back.data_ptr() == src.data_ptr()
    out = torch.from_dlpack(g * 2)  # a gpu result exported without a copy
    assert out.device == src.device and out.tolist() == [84, -2, 4, 6, 8, 10]
    assert g.__dlpack_device__() == src.__dlpack_device__()
    assert ei.from_dlpack(src, device="gpu", copy=True).numpy()[0] == 42  # a copy on request
    copied = ei.from_dlpack(src, device="gpu", copy=True)
    src[0] = 0
    assert copied.numpy()[0] == 42


def test_dlpack_host_producers_stay_on_the_host():
    src = torch.arange(4, dtype=torch.int32)
    h = ei.from_dlpack(src)
    assert h.device == "cpu"
    src[0] = 9
    assert h.numpy()[0] == 9
    if CUDA:
        with pytest.raises(DeviceError, match="copy=False"):
            ei.from_dlpack(src, device="gpu", copy=False)
        assert ei.from_dlpack(src, device="gpu").device == "gpu"


@pytest.mark.parametrize("dtype", ["bfloat16", "uint32", "bool", "float16"])
def test_dlpack_dtypes(dtype):
    x = T(np.arange(5) % 3, dtype=dtype, device="gpu")
    t = torch.from_dlpack(x)
    assert str(t.dtype) == f"torch.{dtype}"
    back = ei.from_dlpack(t) if CUDA else ei.from_dlpack(t, device="gpu")
    assert back.dtype == x.dtype and back.device == "gpu"
    np.testing.assert_array_equal(back.numpy().astype(np.float64), x.numpy().astype(np.float64))


def test_dlpack_with_cupy():
    cupy = pytest.importorskip("cupy", reason="CuPy is not installed")
    if not CUDA:
        pytest.skip("CuPy needs a CUDA device")
    c = cupy.arange(5, dtype=cupy.float32)
    g = ei.from_dlpack(c)
    c[0] = 7
    assert g.device == "gpu" and g.numpy()[0] == 7
    d = cupy.from_dlpack(g)
    d[1] = -3
    assert g.numpy()[1] == -3 and float(c[1]) == -3


# ---- dispatch ---------------------------------------------------------------------------------------------

def test_automatic_choice_counts_copies_and_keeps_device_data_on_the_device():
    info = gpu_machine()
    limit = B.THRESHOLDS["elementwise"]
    small = B.select_backend(None, B.OperationProperties("elementwise", limit - 1), info)
    assert small.name == "cpu"
    assert "GPU threshold" in dict(small.rejected)["gpu"] and "copies" in dict(small.rejected)["gpu"]
    big = B.select_backend(None, B.OperationProperties("elementwise", limit), info)
    assert big.name == "gpu" and f">= GPU threshold {limit}" in big.rule
    resident = B.select_backend(None, B.OperationProperties("elementwise", 8, device="gpu"), info)
    assert resident.name == "gpu" and "inputs on the gpu" in resident.rule and "cpu" in resident.candidates
    # no GPU on the machine: never the interpreter, however big, unless asked
    none = gpu_machine().__class__(**{**info.__dict__, "gpu_count": 0, "gpu_names": (), "gpu_memory_bytes": ()})
    sel = B.select_backend(None, B.OperationProperties("matmul", 1 << 40), none)
    assert sel.name == "cpu" and "no GPU detected" in dict(sel.rejected)["gpu"]
    assert B.select_backend(None, B.OperationProperties("elementwise", 8, device="gpu"), none).name == "gpu"
    B.set_backend("gpu")
    assert B.select_backend(None, B.OperationProperties("elementwise", 8), none).name == "gpu"


def test_automatic_run_on_a_machine_with_a_gpu(monkeypatch):
    monkeypatch.setattr(B, "detect_devices", gpu_machine)
    B.set_threshold("reduction", 64)
    x = np.arange(32, dtype=np.float32)
    small = T(x[:8]).sum()
    big = (T(x) * 2).sum()
    assert float(small) == 28 and float(big) == 992
    assert "backend: cpu" in T.explain(small) and "GPU threshold 64" in T.explain(small)
    text = T.explain(big)
    assert "backend: gpu (priority order; 128 bytes >= GPU threshold 64 for reduction" in text
    assert "copies: 128 input bytes host->device, 4 output bytes device->host" in text
    assert big.device == "cpu"


def test_device_data_falls_back_with_a_warning_and_copies(monkeypatch):
    def refuse(*a, **k):
        raise UnsupportedError("no GPU form for this (test)")
    monkeypatch.setattr(B.get_backend("gpu"), "execute", refuse)
    g = on_gpu(np.arange(4, dtype=np.float32))
    with pytest.warns(FallbackWarning, match="falling back to 'cpu'"):
        y = (g + 1).numpy()
    np.testing.assert_array_equal(y, [1, 2, 3, 4])
    r = g * 3
    with pytest.warns(FallbackWarning):
        r.realize()
    assert r.device == "gpu" and isinstance(r._data, torch.Tensor)
    text = T.explain(r)
    assert "fallback after UnsupportedError" in text and "16 input bytes device->host" in text


def test_explicit_cpu_backend_copies_device_data():
    B.set_backend("cpu")
    r = (on_gpu(np.ones(3, np.float64)) * 2).sum()
    assert float(r) == 6 and r.device == "gpu"
    assert "backend: cpu (explicit backend), device: cpu; copies: 24 input bytes device->host" in T.explain(r)


def test_load_thresholds(tmp_path):
    path = tmp_path / "thresholds.json"
    path.write_text(json.dumps({"device": "test", "host_inputs": {"matmul": 1234, "softmax": None},
                                "device_inputs": {"matmul": 12}}))
    got = B.load_thresholds(str(path))
    assert B.THRESHOLDS["matmul"] == 1234 and got["device_inputs"]["matmul"] == 12
    assert B.THRESHOLDS["softmax"] == B.NEVER
    B.reset()
    assert B.THRESHOLDS["matmul"] == B.DEFAULT_THRESHOLDS["matmul"]
    assert B.DEVICE_THRESHOLDS["matmul"] == B._DEFAULT_DEVICE_THRESHOLDS["matmul"]
    with pytest.raises(PlanError, match="unknown operation kind 'conv'"):
        B.load_thresholds({"host_inputs": {"conv": 1}})
    with pytest.raises(PlanError, match="byte count"):
        B.load_thresholds({"host_inputs": {"matmul": -1}})
    with pytest.raises(PlanError, match="host_inputs"):
        B.load_thresholds({"thresholds": {}})


def test_crossover_bench_smoke(tmp_path, capsys):
    """bench/gpu_crossover.py --smoke: every kind on both devices, results checked against the cpu backend inside."""
    import importlib.util

    path = os.path.join(os.path.dirname(__file__), "..", "..", "bench", "gpu_crossover.py")
    spec = importlib.util.spec_from_file_location("gpu_crossover", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    out = tmp_path / "t.json"
    result = bench.main(["--smoke", "--json", str(out)])
    written = json.loads(out.read_text())
    assert written["smoke"] is True and set(written["host_inputs"]) == set(B.OPERATIONS)
    assert len(result["table"]) == 10 and "| operation | input bytes |" in capsys.readouterr().out
    with pytest.raises(PlanError, match="smoke"):
        B.load_thresholds(written)
    assert bench.crossover([1, 2, 3, 4], [5, 5, 5, 5], [9, 1, 9, 1]) == 4
    assert bench.crossover([1, 2, 3], [5, 5, 5], [1, 2, 3]) == 1
    assert bench.crossover([1, 2], [1, 1], [2, 2]) is None


# ---- errors ---------------------------------------------------------------------------------------------

def test_mixing_devices_is_an_error_naming_both_and_the_fix():
    g, h = on_gpu(np.ones(3, np.float32)), T(np.ones(3, np.float32))
    for f in (lambda: g + h, lambda: h * g, lambda: T.where(g > 0, h, 1.0), lambda: T.concat([g, h]),
              lambda: g @ T(np.ones((3, 2), np.float32)), lambda: T.layer_norm(g, weight=h)):
        with pytest.raises(DeviceError, match=r"different devices \((gpu|cpu) \(3,\), (cpu|gpu) \(3,") as e:
            f()
        assert ".to('gpu')" in str(e.value) and ".to('cpu')" in str(e.value)
    assert issubclass(DeviceError, EidosError)
    assert (g + 1).device == "gpu"  # Python scalars join any device


def test_bad_devices():
    with pytest.raises(DeviceError, match="unknown device 'tpu'"):
        T([1.0]).to("tpu")
    with pytest.raises(DeviceError, match="one GPU"):
        T([1.0], device="cuda:1")


def test_gpu_unavailable_without_cuda_or_the_interpreter(monkeypatch):
    if CUDA:
        pytest.skip("a CUDA device is present: the gpu backend is available")
    # a machine without a GPU (a CPU-only torch on a machine whose driver reports one would say otherwise)
    info = gpu_machine()
    monkeypatch.setattr(B, "detect_devices", lambda: info.__class__(
        **{**info.__dict__, "gpu_count": 0, "gpu_names": (), "gpu_memory_bytes": ()}))
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    gpu = B.get_backend("gpu")
    assert not gpu.is_available() and "TRITON_INTERPRET=1" in gpu.unavailable_reason()
    with pytest.raises(BackendUnavailable, match="no GPU detected"):
        T([1.0]).to("gpu")


def test_complex_tensors_stay_on_the_host():
    with pytest.raises(T.DTypeError, match="stay on the host"):
        T(np.ones(2, np.complex64)).to("gpu")
    with pytest.raises(T.DTypeError, match=r"computed on the host .*\.to\('cpu'\)"):
        on_gpu(np.ones(2, np.float32)) * 1j


def test_array_api_creation_honours_device():
    import eidos.array_api as xp

    g = on_gpu(np.arange(3, dtype=np.float32))
    assert "gpu" in xp.__array_namespace_info__().devices()
    made = [xp.zeros(3, device=g.device), xp.ones_like(g), xp.full_like(g, 2.0), xp.empty_like(g),
            xp.arange(3, device="gpu"), xp.asarray([1, 2], device="gpu"), xp.asarray(g, copy=True),
            xp.astype(g, xp.float32), xp.eye(2, device="gpu"), xp.from_dlpack(g)]
    assert [t.device for t in made] == ["gpu"] * len(made)
    assert (g + xp.ones_like(g)).tolist() == [1, 2, 3]
    c = xp.asarray(g, copy=True)
    g[0] = 9  # a copy on the device: no aliasing
    assert c.numpy()[0] == 0 and xp.zeros(2).device == "cpu"


def test_numpy_protocols_and_torch_spellings_on_gpu_tensors():
    """np.exp(t) stays a gpu graph; a NumPy fallback comes back to the gpu and says so; in-place operators and
    torch's in-place methods write the device memory (a torch view of it sees them); clone and .to(dtype)."""
    a = np.array([[1.0, -2.0], [3.0, 4.0]], dtype=np.float32)
    t = on_gpu(a)
    r = np.sum(np.exp(t) * 2, axis=0)
    assert r.device == "gpu" and not r.is_realized
    np.testing.assert_allclose(r.numpy(), np.sum(np.exp(a) * 2, axis=0), rtol=1e-5)
    m = np.median(t)
    assert m.device == "gpu" and "values copied from gpu and back" in T.explain(m)
    assert float(m) == np.median(a)
    view = torch.from_dlpack(t)
    c = t.clone()
    t += 1
    t.mul_(2).clamp_(max=8.0)
    want = np.minimum((a + 1) * 2, 8.0)
    np.testing.assert_allclose(view.cpu().numpy(), want)
    np.testing.assert_allclose(c.numpy(), a)
    assert t.to("float16").device == "gpu" and t.to("float16").dtype == np.float16
    with pytest.raises(EidosError):
        t.view("int32")
