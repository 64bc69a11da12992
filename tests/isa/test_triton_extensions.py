"""The Triton backend's extension instructions against the reference backend on the same inputs.

Each test allocates the same buffers, in the same order, in a ReferenceBackend and in a Triton
DeviceMemory (so handles agree), runs one instruction on both and compares every output: floats
within docs/isa.md's bound (matrix products) or the shared suite's tolerances by type, the
exact instructions bit for bit, errors word for word. Without a CUDA device the kernels run in
Triton's interpreter (sizes stay tiny); on an H100/H200 the same file runs them compiled.
"""

from __future__ import annotations

import math
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
pytest.importorskip("triton")

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from eidos import isa  # noqa: E402
from eidos.errors import BackendError, UnsupportedError  # noqa: E402
from eidos.isa import Address, LaunchConfig, ReduceOperation, Type  # noqa: E402
from eidos.isa.backends.reference import ReferenceBackend  # noqa: E402
from eidos.isa.backends.triton import extensions  # noqa: E402
from eidos.isa.backends.triton.device_memory import DeviceMemory  # noqa: E402
from eidos.isa.backends.triton.kernels import attention as attention_kernels  # noqa: E402
from eidos.testing.strategies import profile  # noqa: E402

FLOATS = [Type.F32, Type.F64, Type.F16, Type.BF16]
TOL = {Type.F32: dict(rtol=2e-5, atol=2e-5), Type.F64: dict(rtol=1e-12, atol=1e-12),
       Type.F16: dict(rtol=2e-2, atol=2e-2), Type.BF16: dict(rtol=3e-2, atol=3e-2)}
EPS = {Type.F32: 2.0 ** -23, Type.F64: 2.0 ** -52, Type.F16: 2.0 ** -10, Type.BF16: 2.0 ** -7}
# 'ci': 25 derandomized examples (EIDOS_HYPOTHESIS_PROFILE=thorough searches more); compiled on a GPU,
# every new shape can mean new kernel specializations to compile and autotune, so fewer there
FEW = profile() if not torch.cuda.is_available() else settings(profile(), max_examples=10)
floats = st.sampled_from(FLOATS)
seeds = st.integers(0, 2 ** 32 - 1)


class Pair:
    """A reference backend and a Triton device memory holding the same buffers under the same handles."""

    def __init__(self) -> None:
        self.ref = ReferenceBackend()
        self.mem = DeviceMemory()

    def put(self, arr, ty: Type = Type.F32, offset: int = 0) -> Address:
        data = np.ascontiguousarray(np.asarray(arr).astype(ty.np_dtype)).reshape(-1).view(np.uint8)
        size = max(data.size + offset, 1)
        h = self.ref.allocate_buffer(size)
        assert self.mem.allocate_buffer(size) == h
        self.ref.copy_to_buffer(h, data, offset)
        self.mem.copy_in(self.mem.buffer(h), offset, data, "put")
        return Address.buffer(h, offset)

    def get(self, addr: Address, count: int, ty: Type) -> tuple[np.ndarray, np.ndarray]:
        """(reference, triton) values at addr."""
        ref = np.empty(count, ty.np_dtype)
        got = np.empty(count, ty.np_dtype)
        self.ref.copy_from_buffer(addr.handle, ref.view(np.uint8), addr.offset)
        self.mem.copy_out(self.mem.buffer(addr.handle), addr.offset, got.view(np.uint8), "get")
        return ref, got

    def run(self, ins) -> None:
        self.ref.execute_program(isa.ProgramBuilder().add(ins).build(), LaunchConfig.linear(1))
        extensions.run(ins, self.mem)

    def errors(self, ins) -> str:
        """Both raise the same BackendError; its message."""
        with pytest.raises(BackendError) as want:
            self.ref.execute_program(isa.ProgramBuilder().add(ins).build(), LaunchConfig.linear(1))
        with pytest.raises(BackendError) as got:
            extensions.run(ins, self.mem)
        assert str(got.value) == str(want.value)
        return str(got.value)

    def close(self, addr: Address, count: int, ty: Type, **tol) -> None:
        ref, got = self.get(addr, count, ty)
        np.testing.assert_allclose(got.astype(np.float64), ref.astype(np.float64), **(tol or TOL[ty]))

    def exact(self, addr: Address, count: int, ty: Type) -> None:
        ref, got = self.get(addr, count, ty)
        np.testing.assert_array_equal(got.view(np.uint8), ref.view(np.uint8))


def rand(rng, *shape, scale=1.0):
    return rng.standard_normal(shape) * scale


def within_bound(got, ref, ty: Type, terms: int, magnitude) -> None:
    """docs/isa.md: |got - ref| <= 2 n eps S + 4 ULP(ref), S the sum of the terms' magnitudes."""
    eps = EPS[ty]
    got, ref = got.astype(np.float64), ref.astype(np.float64)
    bound = 2 * terms * eps * magnitude + 4 * eps * np.abs(ref) + 1e-300
    bad = np.abs(got - ref) > bound
    assert not bad.any(), f"{int(bad.sum())} elements outside the bound; worst {np.max(np.abs(got - ref) - bound)}"


# ---- matrix products -------------------------------------------------------------------------

@FEW
@given(ty=floats, m=st.integers(1, 40), n=st.integers(1, 40), k=st.integers(0, 40),
       alpha=st.sampled_from([1.0, 0.5, -2.0, 0.1]), beta=st.sampled_from([0.0, 1.0, 2.5]), seed=seeds)
def test_gemm(ty, m, n, k, alpha, beta, seed):
    rng = np.random.default_rng(seed)
    a, b, c = rand(rng, m, k), rand(rng, k, n), rand(rng, m, n)
    p = Pair()
    A, B, C = p.put(a, ty), p.put(b, ty), p.put(c, ty)
    p.run(isa.GEMM(C, A, B, m, n, k, alpha=alpha, beta=beta, ty=ty))
    ref, got = p.get(C, m * n, ty)
    a, b, c = (x.astype(ty.np_dtype).astype(np.float64) for x in (a, b, c))
    within_bound(got, ref, ty, k + 1, abs(alpha) * (np.abs(a) @ np.abs(b)).reshape(-1) + abs(beta) * np.abs(c).reshape(-1))


@pytest.mark.parametrize("ty", [Type.F16, Type.BF16], ids=str)
@pytest.mark.parametrize("shape,route", [((24, 40, 64), "tma"), ((24, 40, 60), "pointer"), ((33, 8, 16), "tma")])
def test_gemm_both_16_bit_kernels(ty, shape, route):
    """Rows 16-byte aligned take the TMA kernel (on Hopper and in the interpreter), others the pointer one."""
    from eidos.isa.backends.triton.kernels import gemm

    m, n, k = shape
    rng = np.random.default_rng(12)
    a, b = rand(rng, m, k), rand(rng, k, n)
    p = Pair()
    A, B, C = p.put(a, ty), p.put(b, ty), p.put(np.zeros((m, n)), ty)
    views = [p.mem.view(x, ty, c) for x, c in ((A, m * k), (B, k * n), (C, m * n))]
    want = route if p.mem.device.type == "cpu" or torch.cuda.get_device_capability()[0] >= 9 else "pointer"
    assert gemm.route(views[0].view(m, k), views[1].view(k, n), views[2].view(m, n)) == want
    p.run(isa.GEMM(C, A, B, m, n, k, alpha=-0.5, ty=ty))
    ref, got = p.get(C, m * n, ty)
    a, b = (x.astype(ty.np_dtype).astype(np.float64) for x in (a, b))
    within_bound(got, ref, ty, k, 0.5 * (np.abs(a) @ np.abs(b)).reshape(-1))


def test_kernel_override_where_it_applies():
    from eidos.isa.backends.triton.kernels import gemm

    dev = DeviceMemory().device
    a, b = torch.ones(16, 24, dtype=torch.float32, device=dev), torch.ones(24, 8, dtype=torch.float32, device=dev)
    out = torch.empty(16, 8, device=dev)
    gemm.matmul(a, b, out, kernel="pointer")
    assert bool((out == 24).all())
    with pytest.raises(UnsupportedError, match="'tma' does not apply"):
        gemm.matmul(a, b, out, kernel="tma")  # F32 products never take the TMA kernel
    q = torch.ones(1, 1, 40, 16, dtype=torch.bfloat16, device=dev)
    with pytest.raises(UnsupportedError, match="'tma' does not apply"):
        attention_kernels.attention(q, q, q, torch.empty_like(q), 1, 1, 40, 16, kernel="tma")


def test_gemm_beta_zero_never_reads_c():
    p = Pair()
    rng = np.random.default_rng(1)
    A, B, C = p.put(rand(rng, 3, 4)), p.put(rand(rng, 4, 5)), p.put(np.full((3, 5), np.nan))
    p.run(isa.GEMM(C, A, B, 3, 5, 4))
    p.close(C, 15, Type.F32)


def test_gemm_output_identical_to_an_input():
    """c identical to a: every input is read before the output is written (a scratch output)."""
    p = Pair()
    rng = np.random.default_rng(2)
    A, B = p.put(rand(rng, 32, 32)), p.put(rand(rng, 32, 32))
    p.run(isa.GEMM(A, A, B, 32, 32, 32, alpha=1.0, beta=1.0))
    p.close(A, 32 * 32, Type.F32)


def test_gemm_misaligned_operands():
    """Byte offsets that are not a multiple of the element size go through aligned copies."""
    p = Pair()
    rng = np.random.default_rng(3)
    A, B, C = p.put(rand(rng, 5, 6), offset=2), p.put(rand(rng, 6, 7), offset=1), p.put(rand(rng, 5, 7), offset=3)
    p.run(isa.GEMM(C, A, B, 5, 7, 6, beta=1.0))
    p.close(C, 35, Type.F32)


@FEW
@given(ty=floats, batch=st.integers(1, 3), m=st.integers(1, 20), n=st.integers(1, 20), k=st.integers(1, 20), seed=seeds)
def test_batched_gemm(ty, batch, m, n, k, seed):
    rng = np.random.default_rng(seed)
    a, b = rand(rng, batch, m, k), rand(rng, batch, k, n)
    p = Pair()
    A, B, C = p.put(a, ty), p.put(b, ty), p.put(np.zeros((batch, m, n)), ty)
    p.run(isa.BatchedGEMM(C, A, B, batch, m, n, k, ty=ty))
    ref, got = p.get(C, batch * m * n, ty)
    a, b = (x.astype(ty.np_dtype).astype(np.float64) for x in (a, b))
    within_bound(got, ref, ty, k, (np.abs(a) @ np.abs(b)).reshape(-1))


@FEW
@given(m=st.integers(1, 24), n=st.integers(1, 24), k=st.integers(1, 40), seed=seeds)
def test_mixed_precision_gemm(m, n, k, seed):
    rng = np.random.default_rng(seed)
    a, b = rand(rng, m, k), rand(rng, k, n)
    p = Pair()
    A, B, C = p.put(a, Type.F16), p.put(b, Type.F16), p.put(np.zeros((m, n)), Type.F32)
    p.run(isa.MixedPrecisionGEMM(C, A, B, m, n, k))
    ref, got = p.get(C, m * n, Type.F32)
    a, b = (x.astype(np.float16).astype(np.float64) for x in (a, b))
    within_bound(got, ref, Type.F32, k, (np.abs(a) @ np.abs(b)).reshape(-1))


@FEW
@given(m=st.integers(1, 20), n=st.integers(1, 20), k=st.integers(1, 70),
       scales=st.tuples(*[st.sampled_from([0.02, 0.03, 0.5, 1.0, 1e-4, 3.0])] * 3), seed=seeds)
def test_quantized_gemm_bit_exact(m, n, k, scales, seed):
    rng = np.random.default_rng(seed)
    p = Pair()
    A = p.put(rng.integers(-128, 128, (m, k)), Type.I8)
    B = p.put(rng.integers(-128, 128, (k, n)), Type.I8)
    C = p.put(np.zeros((m, n)), Type.I8)
    p.run(isa.QuantizedGEMM(C, A, B, *scales, m, n, k))
    p.exact(C, m * n, Type.I8)


def test_quantized_gemm_sums_past_int32():
    """-128 * -128 summed 131,088 times passes 2^31: the kernel's int64 (WIDE) form keeps it exact."""
    from eidos.isa.backends.triton.kernels import gemm

    k = gemm.EXACT_INT32_K + 17
    p = Pair()
    A, B = p.put(np.full((2, k), -128), Type.I8), p.put(np.full((k, 1), -128), Type.I8)
    C = p.put(np.zeros(2), Type.I8)
    p.run(isa.QuantizedGEMM(C, A, B, 1e-4, 1e-4, 1.0, 2, 1, k))  # 2.148e9 * 1e-8 = 21.48 -> 21
    ref, got = p.get(C, 2, Type.I8)
    assert got.tolist() == ref.tolist() == [21, 21]


def test_quantized_gemm_rounds_ties_to_even():
    p = Pair()
    a = np.array([[1, 3, 5, -1, -3, 7]], np.int8).T  # 6 x 1
    b = np.ones((1, 1), np.int8)
    A, B, C = p.put(a, Type.I8), p.put(b, Type.I8), p.put(np.zeros(6), Type.I8)
    p.run(isa.QuantizedGEMM(C, A, B, 0.5, 1.0, 1.0, 6, 1, 1))  # 0.5, 1.5, 2.5, -0.5, -1.5, 3.5
    ref, got = p.get(C, 6, Type.I8)
    assert got.tolist() == ref.tolist() == [0, 2, 2, 0, -2, 4]


@st.composite
def contractions(draw):
    """Shapes of a and b with 1..2 contracted axis pairs at any positions."""
    nc = draw(st.integers(1, 2))
    shared = draw(st.lists(st.integers(1, 4), min_size=nc, max_size=nc))
    free_a = draw(st.lists(st.integers(1, 4), min_size=0, max_size=2))
    free_b = draw(st.lists(st.integers(1, 4), min_size=0, max_size=2))
    pa = draw(st.permutations(list(range(nc + len(free_a)))))
    pb = draw(st.permutations(list(range(nc + len(free_b)))))
    dims_a = shared + free_a
    dims_b = shared + free_b
    shape_a = tuple(dims_a[i] for i in pa)
    shape_b = tuple(dims_b[i] for i in pb)
    pairs = tuple((pa.index(i), pb.index(i)) for i in range(nc))
    return shape_a, shape_b, pairs


@FEW
@given(c=contractions(), ty=st.sampled_from([Type.F32, Type.F64]), seed=seeds)
def test_tensor_contract(c, ty, seed):
    shape_a, shape_b, pairs = c
    rng = np.random.default_rng(seed)
    a, b = rand(rng, *shape_a), rand(rng, *shape_b)
    out_shape = np.tensordot(a, b, axes=([p for p, _ in pairs], [q for _, q in pairs])).shape
    p = Pair()
    A, B, O = p.put(a, ty), p.put(b, ty), p.put(np.zeros(out_shape), ty)
    p.run(isa.TensorContract(O, A, B, shape_a, shape_b, pairs, ty=ty))
    p.close(O, int(np.prod(out_shape)), ty)


def test_tensor_contract_bad_axes_is_a_backend_error():
    p = Pair()
    A, B, O = p.put(np.zeros((2, 3))), p.put(np.zeros((4, 5))), p.put(np.zeros(10))
    with pytest.raises(BackendError, match="contract_dims"):
        extensions.run(isa.TensorContract(O, A, B, (2, 3), (4, 5), ((1, 0),)), p.mem)


@FEW
@given(ty=floats, m=st.integers(0, 12), n=st.integers(1, 40), k=st.integers(1, 12), density=st.floats(0, 1), seed=seeds)
def test_sparse_gemm(ty, m, n, k, density, seed):
    rng = np.random.default_rng(seed)
    dense = rand(rng, m, k) * (rng.random((m, k)) < density)
    rows, cols = np.nonzero(dense)
    ptr = np.searchsorted(rows, np.arange(m + 1)).astype(np.int32)
    p = Pair()
    V, Ix, P = p.put(dense[rows, cols], ty), p.put(cols, Type.I32), p.put(ptr, Type.I32)
    B, C = p.put(rand(rng, k, n), ty), p.put(np.zeros((m, n)), ty)
    p.run(isa.SparseGEMM(C, V, Ix, P, B, m, n, k, ty=ty))
    p.close(C, m * n, ty)


def test_sparse_gemm_bad_csr_errors_as_the_reference():
    p = Pair()
    V, B, C = p.put(np.ones(4)), p.put(np.ones((4, 3))), p.put(np.zeros((3, 3)))
    bad_idx = p.put(np.array([0, 2, 9, 3]), Type.I32)
    ptr = p.put(np.array([0, 2, 2, 4]), Type.I32)
    assert "a_indices" in p.errors(isa.SparseGEMM(C, V, bad_idx, ptr, B, 3, 3, 4))
    bad_ptr = p.put(np.array([0, 3, 2, 4]), Type.I32)
    assert "a_ptr" in p.errors(isa.SparseGEMM(C, V, p.put(np.zeros(4), Type.I32), bad_ptr, B, 3, 3, 4))


# ---- rows --------------------------------------------------------------------------------------

@FEW
@given(ty=floats, rows=st.integers(1, 5), n=st.integers(1, 300), scale=st.sampled_from([1.0, 30.0]),
       in_place=st.booleans(), seed=seeds)
def test_softmax(ty, rows, n, scale, in_place, seed):
    rng = np.random.default_rng(seed)
    p = Pair()
    X = p.put(rand(rng, rows, n, scale=scale), ty)
    O = X if in_place else p.put(np.zeros((rows, n)), ty)
    p.run(isa.Softmax(O, X, n, rows=rows, ty=ty))
    p.close(O, rows * n, ty)


def test_softmax_long_rows_and_nan():
    from eidos.isa.backends.triton.kernels import softmax

    rng = np.random.default_rng(4)
    n = softmax.FUSED + 7  # the two-pass (online) path
    x = rand(rng, 2, n, scale=10.0)
    x[1, 5] = np.nan
    p = Pair()
    X = p.put(x)
    p.run(isa.Softmax(X, X, n, rows=2))
    ref, got = p.get(X, 2 * n, Type.F32)
    assert np.isnan(got[n:]).all() and np.isnan(ref[n:]).all()
    np.testing.assert_allclose(got[:n], ref[:n], **TOL[Type.F32])


@FEW
@given(ty=floats, rows=st.integers(1, 4), n=st.integers(1, 200), eps=st.sampled_from([1e-5, 1e-2]), seed=seeds)
def test_layer_norm(ty, rows, n, eps, seed):
    rng = np.random.default_rng(seed)
    p = Pair()
    X, G, B = p.put(rand(rng, rows, n, scale=3.0) + 2.0, ty), p.put(rand(rng, n), ty), p.put(rand(rng, n), ty)
    O = p.put(np.zeros((rows, n)), ty)
    p.run(isa.LayerNorm(O, X, G, B, n, eps, rows=rows, ty=ty))
    p.close(O, rows * n, ty)


def exactly_normalized(x, eps):
    """Rows normalized around their correctly rounded mean (exact rational sums), in float64."""
    from fractions import Fraction

    mean = np.array([[float(sum(map(Fraction, row.tolist())) / len(row))] for row in x])
    d = x - mean
    return d / np.sqrt((d * d).mean(axis=1, keepdims=True) + eps)


@pytest.mark.parametrize("ty", [Type.F32, Type.F64], ids=str)
@pytest.mark.parametrize("n", [64, "long"])
def test_norms_of_rows_with_a_large_mean(ty, n):
    """Deviations far below the mean (1e6 spreads of 1): the statistics must not round them away.
    One unit in the last place of the mean moves a deviation of 0.03 by 4e-9 of itself, so the
    mean must be the correctly rounded one, whatever order a GPU's tree sums take (the
    interpreter's in-register sums take NumPy's; long rows sum tile-wise in another order)."""
    from eidos.isa.backends.triton.kernels import norms

    n = norms.FUSED + 3 if n == "long" else n
    rows = 3 if n == 64 else 1
    rng = np.random.default_rng(13)
    x = 1e6 + rand(rng, rows, n)
    p = Pair()
    X, G, B, O = p.put(x, ty), p.put(np.ones(n), ty), p.put(np.zeros(n), ty), p.put(np.zeros((rows, n)), ty)
    p.run(isa.LayerNorm(O, X, G, B, n, 1e-5, rows=rows, ty=ty))
    p.close(O, rows * n, ty)
    outputs = [(O, x)]
    if n == 64:  # GroupNorm: 3 batches of 2 groups of 2 channels by 16
        G2, B2, O2 = p.put(np.ones(4), ty), p.put(np.zeros(4), ty), p.put(np.zeros((3, 4, 16)), ty)
        p.run(isa.GroupNorm(O2, X, G2, B2, 3, 4, 2, 16, 1e-5, ty=ty))
        p.close(O2, 3 * 64, ty)
        outputs.append((O2, x.reshape(6, 32)))
    for out, runs in outputs if ty == Type.F64 else ():  # the reference itself, against exact sums
        ref, _ = p.get(out, runs.size, ty)
        np.testing.assert_allclose(ref.reshape(runs.shape), exactly_normalized(runs, 1e-5), **TOL[ty])


def test_softmax_rows_with_infinities_and_nan():
    rows = np.array([[1, 2, np.inf, 0], [-np.inf] * 4, [1, -np.inf, 2, -np.inf], [1e30, -1e30, 0, 5],
                     [np.nan, 1, 2, 3]])
    p = Pair()
    X, O = p.put(rows), p.put(np.zeros((5, 4)))
    p.run(isa.Softmax(O, X, 4, rows=5))
    ref, got = p.get(O, 20, Type.F32)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    np.testing.assert_allclose(got, ref, **TOL[Type.F32])


def test_layer_norm_long_rows_in_place():
    from eidos.isa.backends.triton.kernels import norms

    rng = np.random.default_rng(5)
    n = norms.FUSED + 3
    p = Pair()
    X, G, B = p.put(rand(rng, 2, n)), p.put(rand(rng, n)), p.put(rand(rng, n))
    p.run(isa.LayerNorm(X, X, G, B, n, 1e-5, rows=2))
    p.close(X, 2 * n, Type.F32, rtol=1e-4, atol=1e-4)


@FEW
@given(ty=floats, batch=st.integers(1, 3), groups=st.integers(1, 3), cpg=st.integers(1, 3),
       spatial=st.integers(1, 20), seed=seeds)
def test_group_norm(ty, batch, groups, cpg, spatial, seed):
    rng = np.random.default_rng(seed)
    c = groups * cpg
    p = Pair()
    X, G, B = p.put(rand(rng, batch, c, spatial), ty), p.put(rand(rng, c), ty), p.put(rand(rng, c), ty)
    O = p.put(np.zeros((batch, c, spatial)), ty)
    p.run(isa.GroupNorm(O, X, G, B, batch, c, groups, spatial, 1e-5, ty=ty))
    p.close(O, batch * c * spatial, ty)


@FEW
@given(ty=floats, batch=st.integers(1, 3), c=st.integers(1, 5), spatial=st.integers(1, 30), seed=seeds)
def test_batch_norm(ty, batch, c, spatial, seed):
    rng = np.random.default_rng(seed)
    p = Pair()
    X = p.put(rand(rng, batch, c, spatial), ty)
    G, B, M = (p.put(rand(rng, c), ty) for _ in range(3))
    V = p.put(np.abs(rand(rng, c)) + 0.1, ty)
    O = p.put(np.zeros((batch, c, spatial)), ty)
    p.run(isa.BatchNorm(O, X, G, B, M, V, batch, c, spatial, 1e-3, ty=ty))
    p.close(O, batch * c * spatial, ty)


# ---- attention ---------------------------------------------------------------------------------

@FEW
@given(ty=floats, b=st.integers(1, 2), h=st.integers(1, 3), s=st.integers(1, 40), d=st.integers(1, 20),
       flash=st.booleans(), seed=seeds)
def test_attention(ty, b, h, s, d, flash, seed):
    rng = np.random.default_rng(seed)
    shape = (b, h, s, d)
    p = Pair()
    Q, K, V = (p.put(rand(rng, *shape), ty) for _ in range(3))
    O = p.put(np.zeros(shape), ty)
    cls = isa.FlashAttention if flash else isa.Attention
    extra = {"block_size": 16} if flash else {}
    p.run(cls(O, Q, K, V, b, h, s, d, ty=ty, **extra))
    p.close(O, b * h * s * d, ty)


def test_attention_output_identical_to_query():
    rng = np.random.default_rng(6)
    shape = (1, 2, 33, 8)
    p = Pair()
    Q, K, V = (p.put(rand(rng, *shape)) for _ in range(3))
    p.run(isa.Attention(Q, Q, K, V, *shape))
    p.close(Q, int(np.prod(shape)), Type.F32)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("seq", [37, 128])
def test_attention_kernel_causal_against_float64(dtype, causal, seq):
    """The causal form (no ISA instruction asks for it; bench/gpu_kernels.py measures it), through
    both the pointer and (16-bit, seq a tile multiple, on Hopper or in the interpreter) TMA forms."""
    dev = DeviceMemory().device
    dt = getattr(torch, dtype)
    g = torch.Generator().manual_seed(7)
    q, k, v = (torch.randn(2, 2, seq, 16, generator=g).to(dt).to(dev) for _ in range(3))
    out = torch.empty_like(q)
    tma = dtype != "float32" and seq == 128 and (dev.type == "cpu" or torch.cuda.get_device_capability()[0] >= 9)
    assert attention_kernels.route(q, seq, 16) == ("tma" if tma else "pointer")
    attention_kernels.attention(q, k, v, out, 2, 2, seq, 16, causal=causal)
    want = torch.nn.functional.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=causal)
    tol = 2e-5 if dtype == "float32" else 3e-2
    torch.testing.assert_close(out.double(), want, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("seq,d", [(128, 64), (384, 128), (640, 64), (1024, 128)])
def test_attention_gluon_kernel_against_float64(dtype, causal, seq, d):
    """The Gluon kernel (flash_hopper.py, what route() picks on Hopper for heads of 64 and 128), both
    schedules: within the bound of the test above, equal to each other to the bit (the same tiles and
    arithmetic, issued in another order). Gluon has no interpreter: a Hopper GPU only."""
    if not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] < 9:
        pytest.skip("the Gluon attention kernel needs a Hopper GPU (Gluon has no interpreter)")
    from eidos.isa.backends.triton.kernels import flash_hopper

    dt = getattr(torch, dtype)
    g = torch.Generator().manual_seed(seq + d)
    q, k, v = (torch.randn(2, 3, seq, d, generator=g).to(dt).cuda() for _ in range(3))
    assert attention_kernels.route(q, seq, d) == "gluon"
    want = torch.nn.functional.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=causal)
    outs = []
    for early in (False, True):
        out = torch.full_like(q, float("nan"))
        flash_hopper.attention(q, k, v, out, 2, 3, seq, d, causal, config=(128, 128, 3, early))
        torch.testing.assert_close(out.double(), want, rtol=3e-2, atol=3e-2)
        outs.append(out)
    routed = torch.full_like(q, float("nan"))
    attention_kernels.attention(q, k, v, routed, 2, 3, seq, d, causal=causal)
    assert torch.equal(outs[0], outs[1]) and torch.equal(routed, outs[0])


# ---- element-wise and data movement ------------------------------------------------------------

@FEW
@given(ty=floats, b=st.integers(1, 2), s=st.integers(1, 9), h=st.integers(1, 3), half=st.integers(1, 8),
       big_angles=st.booleans(), seed=seeds)
def test_rope(ty, b, s, h, half, big_angles, seed):
    rng = np.random.default_rng(seed)
    d = 2 * half
    p = Pair()
    X = p.put(rand(rng, b, s, h, d), ty)
    F = p.put(rand(rng, s, half, scale=1000.0 if big_angles else 1.0), ty)
    O = p.put(np.zeros((b, s, h, d)), ty)
    p.run(isa.RoPE(O, X, F, b, s, h, d, ty=ty))
    p.close(O, b * s * h * d, ty)


@FEW
@given(ty=floats, n=st.integers(0, 3000), seed=seeds)
def test_layer_scale_bit_exact(ty, n, seed):
    rng = np.random.default_rng(seed)
    p = Pair()
    X, S = p.put(rand(rng, n, scale=100.0), ty), p.put(rand(rng, n), ty)
    p.run(isa.LayerScale(X, X, S, n, ty=ty))
    p.exact(X, n, ty)


@pytest.mark.parametrize("ty", [Type.F32, Type.BF16, Type.I64, Type.U8])
def test_kv_cache_update(ty):
    rng = np.random.default_rng(8)
    max_seq, b, h, d = 4, 2, 2, 3
    p = Pair()
    C = p.put(rng.integers(0, 100, (max_seq, b, h, d)), ty)
    N = p.put(rng.integers(0, 100, (b, h, d)), ty)
    p.run(isa.KVCacheUpdate(C, N, 2, b, h, d, ty=ty))
    p.exact(C, max_seq * b * h * d, ty)
    assert "cache" in p.errors(isa.KVCacheUpdate(C, N, 4, b, h, d, ty=ty))


@pytest.mark.parametrize("ty", FLOATS, ids=str)
@pytest.mark.parametrize("stride,padding", [((1, 1), (0, 0)), ((2, 1), (1, 2)), ((3, 3), (0, 1))])
def test_conv2d(ty, stride, padding):
    rng = np.random.default_rng(9)
    bsz, ci, co, h, w, kh, kw = 2, 3, 4, 7, 6, 3, 2
    ho, wo = (h + 2 * padding[0] - kh) // stride[0] + 1, (w + 2 * padding[1] - kw) // stride[1] + 1
    p = Pair()
    X, K = p.put(rand(rng, bsz, ci, h, w), ty), p.put(rand(rng, co, ci, kh, kw), ty)
    O = p.put(np.zeros((bsz, co, ho, wo)), ty)
    p.run(isa.Conv2D(O, X, K, bsz, ci, co, h, w, kh, kw, stride, padding, ty=ty))
    p.close(O, bsz * co * ho * wo, ty)


@pytest.mark.parametrize("ty", FLOATS, ids=str)
@pytest.mark.parametrize("inverse", [False, True])
@pytest.mark.parametrize("n", [1, 8, 12, 97])
def test_fft(ty, n, inverse):
    rng = np.random.default_rng(10)
    p = Pair()
    X, O = p.put(rand(rng, n, 2), ty), p.put(np.zeros((n, 2)), ty)
    p.run(isa.FFT(O, X, n, inverse, ty))
    ref, got = p.get(O, 2 * n, ty)
    scale = 1.0 if inverse else math.sqrt(n)  # the outputs' size grows with sqrt(n)
    np.testing.assert_allclose(got.astype(np.float64), ref.astype(np.float64), rtol=TOL[ty]["rtol"],
                               atol=TOL[ty]["atol"] * scale * (4 if ty in (Type.F16, Type.BF16) else 1))


# ---- errors, coverage and explain --------------------------------------------------------------

def test_out_of_bounds_errors_as_the_reference():
    p = Pair()
    A, B, C = p.put(np.zeros((3, 4))), p.put(np.zeros((4, 5))), p.put(np.zeros(10))
    assert "needs bytes" in p.errors(isa.GEMM(C, A, B, 3, 5, 4))


def test_partial_overlap_errors_as_the_reference():
    p = Pair()
    X = p.put(np.zeros(64))
    O = Address.buffer(X.handle, 16)
    assert "partially overlaps" in p.errors(isa.Softmax(O, X, 8, rows=4))


def test_multi_device_collectives_are_unsupported():
    p = Pair()
    X = p.put(np.zeros(4))
    with pytest.raises(UnsupportedError, match="AllReduce"):
        extensions.run(isa.AllReduce(X, 4, ReduceOperation.Sum, (0, 1)), p.mem)
    with pytest.raises(UnsupportedError, match="AllGather"):
        extensions.run(isa.AllGather(X, X, 4, (0, 1)), p.mem)
    with pytest.raises(UnsupportedError, match="ReduceScatter"):
        extensions.run(isa.ReduceScatter(X, X, 2, ReduceOperation.Sum), p.mem)
    assert isa.AllReduce not in extensions.EXTENSIONS


def test_register_address_takes_the_lanes_pointer():
    p = Pair()
    rng = np.random.default_rng(11)
    x = rand(rng, 3, 5)
    X, O = p.put(x), p.put(np.zeros(15))
    ins = isa.Softmax(Address.register(isa.Register(4)), X, 5, rows=3)
    extensions.run(ins, p.mem, pointers={4: isa.pointer(O.handle, 0)})
    e = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(p.get(O, 15, Type.F32)[1], (e / e.sum(1, keepdims=True)).reshape(-1), **TOL[Type.F32])
    with pytest.raises(BackendError, match="r4"):
        extensions.run(ins, p.mem)


def test_class_memory_and_pool_operands():
    """Operands in class memory and in pools, as the reference addresses them."""
    rng = np.random.default_rng(14)
    x = rand(rng, 3, 8).astype(np.float32)
    p = Pair()
    p.ref.copy_to_class(5, 16, x.view(np.uint8).reshape(-1))
    p.mem.copy_in(p.mem.class_memory, 5 * 12288 + 16, x.view(np.uint8).reshape(-1), "class")
    h = p.ref.allocate_pool(96)
    assert p.mem.allocate_pool(96) == h
    ins = isa.Softmax(Address.pool(h, 0), Address.cls(5, 16), 8, rows=3)
    p.run(ins)
    ref = np.empty(24, np.float32)
    got = np.empty(24, np.float32)
    p.ref.copy_from_pool(h, 0, ref)
    p.mem.copy_out(p.mem.pool(h), 0, got.view(np.uint8), "get")
    np.testing.assert_allclose(got, ref, **TOL[Type.F32])


def test_every_array_extension_has_a_route():
    array_ext = [c for c in isa.instructions.ARRAY_INSTRUCTIONS if c.group == "extension"]
    assert len(array_ext) == 21
    for cls in array_ext:
        assert cls in extensions.ROUTES or cls in isa.instructions.COMMUNICATING, cls.__name__


def test_source_shows_the_kernel():
    z = Address.buffer(1)
    text = extensions.source(isa.GEMM(z, z, z, 2, 2, 2))
    assert "tl.dot" in text or "dot(" in text
    assert "def gemm_kernel" in text
    assert "cuDNN" in extensions.source(isa.Conv2D(z, z, z, 1, 1, 1, 3, 3, 1, 1))
    assert "device group" in extensions.source(isa.AllGather(z, z, 4))
