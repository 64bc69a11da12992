"""Dispatch: backend selection rules, thresholds, priority, fallback, user backends, explain."""

import warnings

import numpy as np
import pytest

import eidos as ei
import eidos.tensor as T
from eidos.errors import FallbackWarning, PlanError, UnsupportedError
from eidos.hal.devices import DeviceInfo
from eidos.tensor import backend as B


def gpu_machine():
    return DeviceInfo(cpu_cores=16, memory_limit_bytes=1 << 37, has_avx2=True, has_avx512=True, has_neon=False,
                      gpu_count=1, gpu_names=("NVIDIA H100",), gpu_memory_bytes=(80 << 30,),
                      platform_system="Linux", forced_backend=None)


class Recording(B.Backend):
    """A user backend that runs programs on the reference interpreter and records them."""

    def __init__(self, gpu=False, ops=None, fail=False):
        self.ran, self.gpu, self.fail = [], gpu, fail
        self.ops = set(B.OPERATIONS) if ops is None else set(ops)
        self.inner = B.ReferenceBackend()

    def execute(self, program, args, config):
        self.ran.append(program)
        if self.fail:
            raise UnsupportedError("recording backend refuses")
        self.inner.execute(program, args, config)

    def is_available(self):
        return True

    def get_capabilities(self):
        return {"operations": self.ops, "device": "gpu" if self.gpu else "cpu", "requires_gpu": self.gpu}


@pytest.fixture
def user():
    made = []

    def make(name, **kw):
        b = Recording(**kw)
        B.register_backend(name, b, priority=0)
        made.append(name)
        return b
    yield make
    for n in made:
        B.unregister_backend(n)


def test_detect_devices_is_the_hal_function():
    assert B.detect_devices is ei.detect_devices


def cpu_machine():
    return DeviceInfo(**{**gpu_machine().__dict__, "gpu_count": 0, "gpu_names": (), "gpu_memory_bytes": ()})


def test_default_selection_skips_gpu_with_reason():
    sel = B.select_backend(None, B.OperationProperties("elementwise", 1 << 30), cpu_machine())
    assert sel.name == "cpu"
    reasons = dict(sel.rejected)
    assert "gpu" in reasons and "no GPU detected" in reasons["gpu"]
    gpu = B.backends()["gpu"]
    assert gpu["available"] == (gpu["reason"] is None)


def test_thresholds_decide_small_work_stays_on_cpu(user):
    fake = user("fakegpu", gpu=True)
    info = gpu_machine()
    small = B.OperationProperties("elementwise", 1000)
    big = B.OperationProperties("elementwise", B.THRESHOLDS["elementwise"])
    assert B.select_backend(None, small, info).name == "cpu"
    assert "GPU threshold" in dict(B.select_backend(None, small, info).rejected)["fakegpu"]
    assert B.select_backend(None, big, info).name == "fakegpu"
    B.set_threshold("elementwise", 10)
    assert B.select_backend(None, small, info).name == "fakegpu"
    B.set_threshold("elementwise", None)
    assert B.select_backend(None, small, info).name == "cpu"
    matmul = B.THRESHOLDS["matmul"]
    assert B.select_backend(None, B.OperationProperties("matmul", matmul), info).name == "fakegpu"
    assert B.select_backend(None, B.OperationProperties("matmul", matmul - 1), info).name == "cpu"
    assert B.THRESHOLDS_PROVENANCE.startswith("Measured by bench/gpu_crossover.py on")
    # no GPU on the machine: a device backend is skipped whatever the size
    assert B.select_backend(None, big, cpu_machine()).name == "cpu"
    del fake


def test_requires_gpu_and_unknown_names():
    with pytest.raises(UnsupportedError, match="no tensor backend"):
        B.select_backend(None, B.OperationProperties("elementwise", 10, requires_gpu=True), cpu_machine())
    with pytest.raises(PlanError, match="no tensor backend 'tpu'"):
        B.set_backend("tpu")
    with pytest.raises(PlanError, match="unknown operation kind"):
        B.set_threshold("conv", 1)


def test_the_documented_example_names_the_operation():
    """OperationProperties takes an operation's name (elementwise_add, matmul, reduce_sum, ...) as well as its kind;
    the thresholds and capabilities of the kind apply."""
    op = B.OperationProperties(op_type="elementwise_add", input_size_bytes=1024, requires_gpu=False)
    sel = B.select_backend(backend_name="cpu", op_props=op)
    assert (sel.name, sel.rule) == ("cpu", "explicit backend")
    info = gpu_machine()
    B.set_threshold("reduction", 4096)
    sel = B.select_backend(None, B.OperationProperties("reduce_sum", 4095), info)
    assert sel.name == "cpu" and dict(sel.rejected)["gpu"].startswith("4095 bytes < GPU threshold 4096 for reduction")
    for name, kind in [("add", "elementwise"), ("elementwise_subtract", "elementwise"), ("cast", "elementwise"),
                       ("elementwise_where", "elementwise"), ("min", "reduction"), ("reduce_argmax", "reduction"),
                       ("minimum", "elementwise"), ("matmul", "matmul"), ("gemm", "matmul"),
                       ("batched_gemm", "matmul"), ("softmax", "softmax"), ("layer_norm", "layer_norm")]:
        assert B.operation_kind(name) == kind
        assert B.select_backend("cpu", B.OperationProperties(name, 10)).name == "cpu"


def test_an_unknown_operation_name_lists_the_names():
    with pytest.raises(PlanError, match=r"unknown tensor operation 'elementwise_addd'.*elementwise_<name>\): abs, add,"
                                        r".*reduce_<name>\): sum, prod.*did you mean 'elementwise_add'\?"):
        B.select_backend("cpu", B.OperationProperties("elementwise_addd", 1024))
    with pytest.raises(PlanError, match="unknown tensor operation 'conv2d'"):
        B.select_backend(None, B.OperationProperties("conv2d", 1024))


def test_every_operation_that_runs_as_a_program_is_a_name_select_backend_takes():
    """Each function of eidos.tensor whose result is an element-wise, reduction, matmul, softmax or layer_norm node is
    accepted under its own name; so is every node name."""
    from eidos.tensor import ops
    from eidos.tensor.realization import EW_OPS

    names = B.operation_names()
    assert EW_OPS <= names.keys() and all(f"elementwise_{op}" in names for op in EW_OPS)
    floats, ints = T([1.0, 2.0]), T([1, 2])
    checked = []
    for name in ops.__all__:
        if name in ops.ALIASES:   # NumPy's and torch's second names: the canonical name is the operation's
            continue
        for args in ((floats,), (floats, "int32"), (floats, floats), (ints, ints), (ints,), (T([True]), floats, floats)):
            try:
                r = getattr(ops, name)(*args)
            except Exception:
                continue
            if isinstance(r, T.Tensor) and r._data is None and (r._op in EW_OPS or r._op in ("reduce", *B.OPERATIONS)):
                assert name in names, name
                checked.append(name)
            break
    assert {"add", "subtract", "bitwise_left_shift", "astype", "where", "sum", "mean", "argmax", "matmul",
            "softmax", "layer_norm"} <= set(checked)


def test_set_backend_and_priority():
    B.set_backend("reference")
    assert B.select_backend(None, B.OperationProperties("reduction", 10)).name == "reference"
    B.set_backend(None)
    ei.set_backend_priority(["reference", "cpu"])
    x = T(np.arange(4, dtype=np.float32)) + 1
    x.numpy()
    assert "backend: reference" in T.explain(x)
    assert B.get_backend_priority() == ["reference", "cpu"]


def test_user_backend_runs_and_records(user):
    rec = user("recorder")
    t = (T(np.arange(5, dtype=np.float32)) * 2).sum()
    assert float(t) == 20.0
    assert len(rec.ran) == 1 and "ParallelReduce" in str(rec.ran[0]) or "LOOP" in str(rec.ran[0])
    assert "backend: recorder" in T.explain(t)


def test_backend_lacking_an_operation_is_skipped(user):
    rec = user("elementwise_only", ops={"elementwise"})
    a = T(np.eye(3, dtype=np.float32))
    (a @ a).numpy()
    (a + 1).numpy()
    assert len(rec.ran) == 1
    sel = B.select_backend(None, B.OperationProperties("matmul", 10))
    assert dict(sel.rejected)["elementwise_only"] == "lacks matmul"


def test_run_time_fallback_is_recorded_and_warned(user):
    rec = user("flaky", fail=True)
    t = T(np.arange(3, dtype=np.float64)) * 3
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        np.testing.assert_array_equal(t.numpy(), [0, 3, 6])
    assert any(issubclass(x.category, FallbackWarning) for x in w)
    text = T.explain(t)
    assert "fallback after UnsupportedError" in text and "flaky" in text
    assert len(rec.ran) == 1


def test_register_rejects_non_backends():
    with pytest.raises(PlanError):
        B.register_backend("bad", object())


def test_explain_lazy_tree_and_module_callable():
    x = ei.tensor([1.0, 2.0])
    y = (x * 2).sum()
    text = ei.tensor.explain(y)
    assert "lazy" in text and "sum" in text and "mul" in text
    assert isinstance(ei.tensor([1, 2, 3]), ei.Tensor)

