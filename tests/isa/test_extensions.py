"""The complex and advanced extensions against NumPy formulas written out here."""

from __future__ import annotations

import math

import numpy as np
import pytest

from eidos import isa
from eidos.errors import BackendError, UnsupportedError
from eidos.isa import Address, LaunchConfig, ReduceOperation, Type

RNG = np.random.default_rng(42)
TOL = {Type.F32: dict(rtol=2e-5, atol=2e-5), Type.F64: dict(rtol=1e-12, atol=1e-12),
       Type.F16: dict(rtol=2e-2, atol=2e-2), Type.BF16: dict(rtol=3e-2, atol=3e-2)}


def put(be, arr, ty=Type.F32):
    arr = np.ascontiguousarray(np.asarray(arr).astype(ty.np_dtype))
    h = be.allocate_buffer(max(arr.nbytes, 1))
    be.copy_to_buffer(h, arr)
    return Address.buffer(h)


def get(be, addr, shape, ty=Type.F32):
    out = np.empty(shape, ty.np_dtype)
    be.copy_from_buffer(addr.handle, out)
    return out


def run(be, *ins, lanes=4):
    be.execute_program(isa.ProgramBuilder().add(*ins).build(), LaunchConfig.linear(lanes))


def rand(*shape, ty=Type.F32):
    return RNG.standard_normal(shape).astype(ty.np_dtype).astype(np.float64)


@pytest.mark.parametrize("ty", [Type.F32, Type.F64, Type.F16, Type.BF16], ids=str)
def test_gemm(backend, ty):
    m, n, k = 5, 7, 3
    a, b, c0 = rand(m, k, ty=ty), rand(k, n, ty=ty), rand(m, n, ty=ty)
    A, B, C = put(backend, a, ty), put(backend, b, ty), put(backend, c0, ty)
    run(backend, isa.GEMM(C, A, B, m, n, k, alpha=0.5, beta=2.0, ty=ty))
    np.testing.assert_allclose(get(backend, C, (m, n), ty).astype(np.float64), 0.5 * a @ b + 2.0 * c0, **TOL[ty])


def test_gemm_beta_zero_ignores_nan_in_c(backend):
    a, b = rand(2, 2), rand(2, 2)
    A, B, C = put(backend, a), put(backend, b), put(backend, np.full((2, 2), np.nan))
    run(backend, isa.GEMM(C, A, B, 2, 2, 2))
    np.testing.assert_allclose(get(backend, C, (2, 2)), a @ b, **TOL[Type.F32])


def test_batched_gemm(backend):
    a, b = rand(3, 2, 4), rand(3, 4, 5)
    A, B, C = put(backend, a), put(backend, b), put(backend, np.zeros((3, 2, 5)))
    run(backend, isa.BatchedGEMM(C, A, B, 3, 2, 5, 4))
    np.testing.assert_allclose(get(backend, C, (3, 2, 5)), np.einsum("bmk,bkn->bmn", a, b), **TOL[Type.F32])


@pytest.mark.parametrize("stride,padding", [((1, 1), (0, 0)), ((2, 1), (1, 2))])
def test_conv2d(backend, stride, padding):
    bsz, ci, co, h, w, kh, kw = 2, 3, 4, 6, 5, 3, 2
    x, k = rand(bsz, ci, h, w), rand(co, ci, kh, kw)
    ho, wo = (h + 2 * padding[0] - kh) // stride[0] + 1, (w + 2 * padding[1] - kw) // stride[1] + 1
    X, K, O = put(backend, x), put(backend, k), put(backend, np.zeros((bsz, co, ho, wo)))
    run(backend, isa.Conv2D(O, X, K, bsz, ci, co, h, w, kh, kw, stride, padding))
    xp = np.pad(x, ((0, 0), (0, 0), (padding[0],) * 2, (padding[1],) * 2))
    want = np.zeros((bsz, co, ho, wo))
    for y in range(ho):
        for z in range(wo):
            win = xp[:, :, y * stride[0]:y * stride[0] + kh, z * stride[1]:z * stride[1] + kw]
            want[:, :, y, z] = np.tensordot(win, k, axes=([1, 2, 3], [1, 2, 3]))
    np.testing.assert_allclose(get(backend, O, want.shape), want, **TOL[Type.F32])


@pytest.mark.parametrize("ty", [Type.F32, Type.F64], ids=str)
def test_layer_norm(backend, ty):
    rows, n, eps = 3, 16, 1e-5
    x, g, b = rand(rows, n, ty=ty), rand(n, ty=ty), rand(n, ty=ty)
    X, G, B, O = put(backend, x, ty), put(backend, g, ty), put(backend, b, ty), put(backend, np.zeros((rows, n)), ty)
    run(backend, isa.LayerNorm(O, X, G, B, n, eps, rows=rows, ty=ty))
    want = (x - x.mean(1, keepdims=True)) / np.sqrt(x.var(1, keepdims=True) + eps) * g + b
    np.testing.assert_allclose(get(backend, O, (rows, n), ty), want, **TOL[ty])


def test_batch_norm(backend):
    bsz, c, s = 2, 3, 5
    x, g, b, mu, var = rand(bsz, c, s), rand(c), rand(c), rand(c), np.abs(rand(c)) + 0.1
    args = [put(backend, v) for v in (x, g, b, mu, var)]
    O = put(backend, np.zeros((bsz, c, s)))
    run(backend, isa.BatchNorm(O, args[0], args[1], args[2], args[3], args[4], bsz, c, s, 1e-3))
    want = (x - mu[:, None]) / np.sqrt(var[:, None] + 1e-3) * g[:, None] + b[:, None]
    np.testing.assert_allclose(get(backend, O, (bsz, c, s)), want, **TOL[Type.F32])


def test_group_norm(backend):
    bsz, c, groups, s = 2, 6, 3, 4
    x, g, b = rand(bsz, c, s), rand(c), rand(c)
    X, G, B, O = put(backend, x), put(backend, g), put(backend, b), put(backend, np.zeros((bsz, c, s)))
    run(backend, isa.GroupNorm(O, X, G, B, bsz, c, groups, s, 1e-5))
    xg = x.reshape(bsz, groups, -1)
    want = ((xg - xg.mean(-1, keepdims=True)) / np.sqrt(xg.var(-1, keepdims=True) + 1e-5)).reshape(bsz, c, s)
    np.testing.assert_allclose(get(backend, O, (bsz, c, s)), want * g[:, None] + b[:, None], **TOL[Type.F32])


def test_softmax_in_place(backend):
    x = rand(4, 10) * 10
    X = put(backend, x)
    run(backend, isa.Softmax(X, X, 10, rows=4))
    e = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(get(backend, X, (4, 10)), e / e.sum(1, keepdims=True), **TOL[Type.F32])


@pytest.mark.parametrize("cls", ["Attention", "FlashAttention"])
def test_attention(backend, cls):
    b, h, s, d = 2, 3, 5, 4
    q, k, v = rand(b, h, s, d), rand(b, h, s, d), rand(b, h, s, d)
    Q, K, V, O = put(backend, q), put(backend, k), put(backend, v), put(backend, np.zeros((b, h, s, d)))
    extra = {"block_size": 2} if cls == "FlashAttention" else {}
    run(backend, getattr(isa, cls)(O, Q, K, V, b, h, s, d, **extra))
    sc = q @ np.swapaxes(k, -1, -2) / math.sqrt(d)
    p = np.exp(sc - sc.max(-1, keepdims=True))
    want = (p / p.sum(-1, keepdims=True)) @ v
    np.testing.assert_allclose(get(backend, O, (b, h, s, d)), want, **TOL[Type.F32])


@pytest.mark.parametrize("inverse", [False, True])
@pytest.mark.parametrize("n", [1, 8, 12])
def test_fft(backend, n, inverse):
    z = rand(n) + 1j * rand(n)
    inter = np.stack([z.real, z.imag], axis=1)
    I, O = put(backend, inter, Type.F64), put(backend, np.zeros((n, 2)), Type.F64)
    run(backend, isa.FFT(O, I, n, inverse, Type.F64))
    got = get(backend, O, (n, 2), Type.F64)
    want = np.fft.ifft(z) if inverse else np.fft.fft(z)
    np.testing.assert_allclose(got[:, 0] + 1j * got[:, 1], want, rtol=1e-12, atol=1e-12)


def test_sparse_gemm_csr(backend):
    dense = np.array([[1.0, 0, 2, 0], [0, 0, 0, 0], [0, 3, 0, 4]])
    ptr = np.array([0, 2, 2, 4], np.int32)
    idx = np.array([0, 2, 1, 3], np.int32)
    vals = np.array([1.0, 2, 3, 4])
    b = rand(4, 3)
    C = put(backend, np.zeros((3, 3)))
    run(backend, isa.SparseGEMM(C, put(backend, vals), put(backend, idx, Type.I32), put(backend, ptr, Type.I32),
                                put(backend, b), 3, 3, 4))
    np.testing.assert_allclose(get(backend, C, (3, 3)), dense @ b, **TOL[Type.F32])
    with pytest.raises(BackendError, match="a_indices"):
        run(backend, isa.SparseGEMM(C, put(backend, vals), put(backend, idx + 9, Type.I32),
                                    put(backend, ptr, Type.I32), put(backend, b), 3, 3, 4))


def test_tensor_contract(backend):
    a, b = rand(2, 3, 4), rand(4, 5)
    O = put(backend, np.zeros((2, 3, 5)))
    run(backend, isa.TensorContract(O, put(backend, a), put(backend, b), (2, 3, 4), (4, 5), ((2, 0),)))
    np.testing.assert_allclose(get(backend, O, (2, 3, 5)), np.einsum("ijl,lk->ijk", a, b), **TOL[Type.F32])


def test_quantized_gemm_int8(backend):
    a = RNG.integers(-128, 128, (4, 6)).astype(np.int8)
    b = RNG.integers(-128, 128, (6, 3)).astype(np.int8)
    C = put(backend, np.zeros((4, 3)), Type.I8)
    run(backend, isa.QuantizedGEMM(C, put(backend, a, Type.I8), put(backend, b, Type.I8), 0.02, 0.03, 0.5, 4, 3, 6))
    acc = a.astype(np.int64) @ b.astype(np.int64)
    want = np.clip(np.rint(acc * (0.02 * 0.03 / 0.5)), -128, 127).astype(np.int8)
    np.testing.assert_array_equal(get(backend, C, (4, 3), Type.I8), want)


def test_mixed_precision_gemm(backend):
    a, b = rand(3, 8, ty=Type.F16), rand(8, 2, ty=Type.F16)
    C = put(backend, np.zeros((3, 2)), Type.F32)
    run(backend, isa.MixedPrecisionGEMM(C, put(backend, a, Type.F16), put(backend, b, Type.F16), 3, 2, 8))
    np.testing.assert_allclose(get(backend, C, (3, 2), Type.F32), a @ b, **TOL[Type.F32])


def test_layer_scale(backend):
    x, s = rand(10), rand(10)
    O = put(backend, np.zeros(10))
    run(backend, isa.LayerScale(O, put(backend, x), put(backend, s), 10))
    np.testing.assert_array_equal(get(backend, O, (10,)), (x * s).astype(np.float32))


def test_rope(backend):
    b, s, h, d = 1, 4, 2, 6
    x, f = rand(b, s, h, d), rand(s, d // 2)
    O = put(backend, np.zeros((b, s, h, d)))
    run(backend, isa.RoPE(O, put(backend, x), put(backend, f), b, s, h, d))
    want = np.empty_like(x)
    for j in range(d // 2):
        c, sn = np.cos(f[:, j])[None, :, None], np.sin(f[:, j])[None, :, None]
        want[..., 2 * j] = x[..., 2 * j] * c - x[..., 2 * j + 1] * sn
        want[..., 2 * j + 1] = x[..., 2 * j] * sn + x[..., 2 * j + 1] * c
    np.testing.assert_allclose(get(backend, O, x.shape), want, **TOL[Type.F32])


def test_kv_cache_update(backend):
    max_seq, b, h, d = 4, 2, 2, 3
    cache = np.zeros((max_seq, b, h, d))
    C = put(backend, cache)
    new = rand(b, h, d)
    run(backend, isa.KVCacheUpdate(C, put(backend, new), 2, b, h, d))
    cache[2] = new
    np.testing.assert_array_equal(get(backend, C, cache.shape), cache.astype(np.float32))
    with pytest.raises(BackendError, match="cache"):
        run(backend, isa.KVCacheUpdate(C, put(backend, new), 4, b, h, d))


@pytest.mark.parametrize("op", ["GELU", "SWISH"])
def test_gelu_swish_as_register_ops(backend, op):
    from tests.isa.harness import run_lanes
    x = [-3.0, -0.5, 0.0, 0.25, 2.0, 10.0]
    r = isa.Register
    got = run_lanes(backend, [getattr(isa, op)(r(0), r(1), Type.F64)], [Type.F64], [x], Type.F64)
    want = [v * (1 + math.erf(v / math.sqrt(2))) / 2 if op == "GELU" else v / (1 + math.exp(-v)) for v in x]
    np.testing.assert_allclose(got, want, rtol=1e-15, atol=1e-300)


def test_all_reduce_and_all_gather_are_unsupported_on_one_device(backend):
    X = put(backend, np.zeros(4))
    with pytest.raises(UnsupportedError, match="AllReduce"):
        run(backend, isa.AllReduce(X, 4, ReduceOperation.Sum, (0, 1)))
    with pytest.raises(UnsupportedError, match="AllGather"):
        run(backend, isa.AllGather(X, X, 4, (0, 1)))
    with pytest.raises(UnsupportedError, match="Broadcast.*one device"):
        run(backend, isa.Broadcast(X, 4))
