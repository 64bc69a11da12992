"""Matrix products with tl.dot: GEMM, BatchedGEMM, MixedPrecisionGEMM, QuantizedGEMM (and, by
reshaping, TensorContract).

One tiled kernel serves every float case: a (batch, M, K) @ (batch, K, N) with an optional
alpha and beta * C epilogue, grouped tile order for L2 reuse, a float32 accumulator (float64 for
F64), tensor cores for F16/BF16 and IEEE float32 products for F32 (TF32 would break the ISA's
error bound: 10 mantissa bits instead of 23). On Hopper, a single F16/BF16 product whose rows are
16-byte aligned (the common large case) takes a second kernel that moves tiles with the tensor
memory accelerator (TMA descriptors: no address arithmetic or masks in the loop, edges filled
with zeros by the hardware), one tile per program or persistent (one program per SM), as the
autotuner finds faster. QuantizedGEMM has its own kernel: int8 tl.dot per K block, summed
exactly in int64, scaled in float64 and rounded half to even as the reference does.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from . import INTERPRET, accumulator, cfg, chosen, configs, dot, hopper, narrow, precision, processors, scalars

# Hopper: 128x256 and 128x128 tiles, 3-4 stages, 4-8 warps (wgmma); smaller tiles for the
# FMA-bound F32 (IEEE) and F64 products and for small matrices.
_HOPPER = [
    cfg(8, 3, BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=8),
    cfg(8, 3, BLOCK_M=256, BLOCK_N=128, BLOCK_K=64, GROUP_M=8),
    cfg(8, 4, BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=8),
    cfg(4, 4, BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8),
    cfg(8, 4, BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8),
    cfg(4, 4, BLOCK_M=128, BLOCK_N=64, BLOCK_K=64, GROUP_M=8),
    cfg(4, 4, BLOCK_M=64, BLOCK_N=128, BLOCK_K=64, GROUP_M=8),
    cfg(4, 4, BLOCK_M=64, BLOCK_N=64, BLOCK_K=32, GROUP_M=8),
    cfg(4, 3, BLOCK_M=64, BLOCK_N=64, BLOCK_K=16, GROUP_M=8),
    cfg(4, 3, BLOCK_M=32, BLOCK_N=32, BLOCK_K=32, GROUP_M=8),
    cfg(2, 3, BLOCK_M=16, BLOCK_N=16, BLOCK_K=16, GROUP_M=8),
]
_WIDE = 128 * 128  # tiles larger than this only for tensor-core (16-bit) products


def _prune(configs, named_args, **kwargs):
    """Fit candidates to the problem: tensor-core tiles for 16-bit inputs, small ones for F32/F64,
    none much larger than the matrix itself (at least one survives)."""
    a = named_args["a_ptr"]
    m, n, k = named_args["M"], named_args["N"], named_args["K"]
    tc = a.dtype in (torch.float16, torch.bfloat16, torch.int8)
    keep = []
    for c in configs:
        bm, bn, bk = c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"], c.kwargs["BLOCK_K"]
        if not tc and (bm * bn > 64 * 64 or c.num_stages > 3):
            continue
        if bm > 2 * max(m, 16) or bn > 2 * max(n, 16) or bk > 2 * max(k, 16):
            continue
        if tc and bm * bn > _WIDE and m * n < 2048 * 2048:
            continue
        keep.append(c)
    return keep or [configs[-1]]


@triton.jit
def tile(pid, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
    """Output tile number pid as (row, column) in grouped order: GROUP_M consecutive tiles take
    one column of tiles, so the B tiles they share are still in L2."""
    grid_m = tl.cdiv(M, BLOCK_M)
    width = GROUP_M * tl.cdiv(N, BLOCK_N)
    first_m = (pid // width) * GROUP_M
    size_m = min(grid_m - first_m, GROUP_M)
    return first_m + (pid % width) % size_m, (pid % width) // size_m


@triton.autotune(
    configs=configs(_HOPPER, [cfg(4, 1, BLOCK_M=16, BLOCK_N=16, BLOCK_K=16, GROUP_M=4)]),
    key=["M", "N", "K", "HAS_BETA", "SCALE"], prune_configs_by={"early_config_prune": _prune},
    restore_value=["d_ptr"])
@triton.jit
def gemm_kernel(a_ptr, b_ptr, c_ptr, d_ptr, M, N, K, ab_ptr,
                sab, sam, sak, sbb, sbk, sbn, scb, scm, scn, sdb, sdm, sdn,
                HAS_BETA: tl.constexpr, SCALE: tl.constexpr, ACC: tl.constexpr, PRECISION: tl.constexpr,
                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    """d[b] = alpha * a[b] @ b[b] + beta * c[b] (alpha only if SCALE, c only if HAS_BETA);
    ab_ptr holds (alpha, beta) in float64."""
    pid_m, pid_n = tile(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    batch = tl.program_id(1).to(tl.int64)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    # rows and columns past the edge wrap onto valid ones (their results are never stored),
    # so the loads need masks only along K
    ram = (rm % M).to(tl.int64)
    rbn = rn % N
    a_ptrs = a_ptr + batch * sab + ram[:, None] * sam + rk[None, :] * sak
    b_ptrs = b_ptr + batch * sbb + rk[:, None] * sbk + rbn[None, :] * sbn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=ACC)
    for kk in range(0, tl.cdiv(K, BLOCK_K)):
        left = K - kk * BLOCK_K
        a = tl.load(a_ptrs, mask=rk[None, :] < left, other=0.0)
        b = tl.load(b_ptrs, mask=rk[:, None] < left, other=0.0)
        acc = dot(a, b, acc, PRECISION, ACC)
        a_ptrs += BLOCK_K * sak
        b_ptrs += BLOCK_K * sbk

    if SCALE:
        acc = acc * tl.load(ab_ptr).to(ACC)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    if HAS_BETA:
        c = tl.load(c_ptr + batch * scb + rm[:, None].to(tl.int64) * scm + rn[None, :] * scn, mask=mask, other=0.0)
        acc = acc + tl.load(ab_ptr + 1).to(ACC) * c.to(ACC)
    tl.store(d_ptr + batch * sdb + rm[:, None].to(tl.int64) * sdm + rn[None, :] * sdn, narrow(acc, d_ptr.dtype.element_ty), mask=mask)


def _as3(t: torch.Tensor) -> torch.Tensor:
    return t if t.dim() == 3 else t.unsqueeze(0)


def matmul(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, *, alpha: float = 1.0,
           beta: float = 0.0, c: torch.Tensor | None = None, kernel: str | None = None) -> torch.Tensor:
    """out = alpha * a @ b + beta * c, for (M, K) @ (K, N) or batched (B, M, K) @ (B, K, N).

    `out` and `c` may be the same tensor (each tile reads its C before storing it); `out` must
    not overlap `a` or `b` (the caller gives a scratch output then). c is not read when beta is 0.
    `kernel` ('tma' or 'pointer') overrides route() for comparisons (bench/gpu_kernels.py).
    """
    a3, b3, d3 = _as3(a), _as3(b), _as3(out)
    nb, m, k = a3.shape
    n = b3.shape[2]
    if nb == 0 or m == 0 or n == 0:
        return out
    if k == 0 and beta == 0:  # an empty sum: zeros (alpha * 0)
        out.zero_()
        return out
    if chosen(route(a, b, out, beta), kernel) == "tma":
        _matmul_tma(a, b, out, alpha)
        return out
    has_beta = beta != 0
    c3 = _as3(c) if has_beta else d3
    acc = accumulator(a.dtype)
    grid = lambda meta: (triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"]), nb)  # noqa: E731
    gemm_kernel[grid](a3, b3, c3, d3, m, n, k, scalars(a.device, float(alpha), float(beta)),
                      *a3.stride(), *b3.stride(), *c3.stride(), *d3.stride(),
                      HAS_BETA=has_beta, SCALE=alpha != 1, ACC=acc, PRECISION=precision(a.dtype))
    return out


def _descriptor_blocks(nargs) -> None:
    """Autotuner pre-hook: each config's tile shapes into the TMA descriptors."""
    bm, bn, bk = nargs["BLOCK_M"], nargs["BLOCK_N"], nargs["BLOCK_K"]
    nargs["a_desc"].block_shape = [bm, bk]
    nargs["b_desc"].block_shape = [bk, bn]
    nargs["d_desc"].block_shape = [bm, bn]


def _tma_cfg(num_warps: int, num_stages: int, **meta) -> triton.Config:
    return triton.Config(meta, num_warps=num_warps, num_stages=num_stages, pre_hook=_descriptor_blocks)


_TMA_HOPPER = [
    _tma_cfg(8, 3, BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=8, PERSISTENT=False),
    _tma_cfg(8, 4, BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=8, PERSISTENT=False),
    _tma_cfg(8, 3, BLOCK_M=256, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, PERSISTENT=False),
    _tma_cfg(4, 4, BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, PERSISTENT=False),
    _tma_cfg(8, 4, BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, PERSISTENT=False),
    _tma_cfg(4, 3, BLOCK_M=128, BLOCK_N=128, BLOCK_K=128, GROUP_M=8, PERSISTENT=False),
    _tma_cfg(4, 4, BLOCK_M=128, BLOCK_N=64, BLOCK_K=64, GROUP_M=8, PERSISTENT=False),
    _tma_cfg(4, 4, BLOCK_M=64, BLOCK_N=64, BLOCK_K=64, GROUP_M=8, PERSISTENT=False),
    # persistent: one program per SM walks the tiles, so a tile's epilogue and the next tile's
    # first loads are no separate launch wave (the autotuner keeps whichever form is faster;
    # 128x256 at 4 stages would pass 227 KiB of shared memory here)
    _tma_cfg(8, 3, BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=8, PERSISTENT=True),
    _tma_cfg(8, 4, BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, PERSISTENT=True),
]
# the interpreter's one config (more would be benchmarked) leaves PERSISTENT to _PERSISTENT below
_TMA_INTERPRET = [_tma_cfg(4, 1, BLOCK_M=16, BLOCK_N=16, BLOCK_K=16, GROUP_M=4)]


def _many(a) -> bool:
    return triton.cdiv(a["M"], a["BLOCK_M"]) * triton.cdiv(a["N"], a["BLOCK_N"]) > a["NUM_SMS"]


# a config's own choice, else (the interpreter) persistent where there are more tiles than programs
_PERSISTENT = {"PERSISTENT": lambda a: a["PERSISTENT"] if "PERSISTENT" in a else _many(a)}


def _prune_tma(configs, named_args, **kwargs):
    """Tiles that fit the matrix; the persistent form only with more tiles than programs."""
    m, n = named_args["M"], named_args["N"]
    keep = []
    for c in configs:
        bm, bn = c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"]
        if bm > 2 * max(m, 64) or bn > 2 * max(n, 64) or (bm * bn > _WIDE and m * n < 2048 * 2048):
            continue
        if c.kwargs.get("PERSISTENT") and not _many({**named_args, **c.kwargs}):
            continue
        keep.append(c)
    return keep or [configs[0]]


@triton.jit
def _tma_tile(a_desc, b_desc, d_desc, pid_m, pid_n, K, ab_ptr, SCALE: tl.constexpr,
              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    off_m = pid_m * BLOCK_M
    off_n = pid_n * BLOCK_N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kk in range(0, tl.cdiv(K, BLOCK_K)):
        a = a_desc.load([off_m, kk * BLOCK_K])
        b = b_desc.load([kk * BLOCK_K, off_n])
        acc = dot(a, b, acc, "tf32", tl.float32)  # 16-bit operands: tensor cores
    if SCALE:
        acc = acc * tl.load(ab_ptr).to(tl.float32)
    d_desc.store([off_m, off_n], narrow(acc, d_desc.dtype))


@triton.autotune(configs=configs(_TMA_HOPPER, _TMA_INTERPRET), key=["M", "N", "K", "SCALE"],
                 prune_configs_by={"early_config_prune": _prune_tma})
@triton.heuristics(_PERSISTENT)
@triton.jit
def gemm_tma_kernel(a_desc, b_desc, d_desc, M, N, K, ab_ptr, NUM_SMS, SCALE: tl.constexpr,
                    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                    PERSISTENT: tl.constexpr):
    """d = alpha * a @ b (alpha only if SCALE) for row-major 16-bit a, b, d, tiles through TMA;
    one tile per program, or (PERSISTENT) NUM_SMS programs walking every tile."""
    if PERSISTENT:
        tiles = tl.cdiv(M, BLOCK_M) * tl.cdiv(N, BLOCK_N)
        for t in range(tl.program_id(0), tiles, NUM_SMS):
            pid_m, pid_n = tile(t, M, N, BLOCK_M, BLOCK_N, GROUP_M)
            _tma_tile(a_desc, b_desc, d_desc, pid_m, pid_n, K, ab_ptr, SCALE, BLOCK_M, BLOCK_N, BLOCK_K)
    else:
        pid_m, pid_n = tile(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
        _tma_tile(a_desc, b_desc, d_desc, pid_m, pid_n, K, ab_ptr, SCALE, BLOCK_M, BLOCK_N, BLOCK_K)


def route(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, beta: float = 0.0) -> str:
    """'tma' where the TMA kernel applies (Hopper or the interpreter; one F16/BF16 product without
    beta; contiguous rows 16-byte aligned), else 'pointer'."""
    if beta != 0 or a.dim() != 2 or a.dtype not in (torch.float16, torch.bfloat16) or out.dtype != a.dtype:
        return "pointer"
    if not (INTERPRET or (a.is_cuda and hopper(a.device))):
        return "pointer"
    for t in (a, b, out):
        if t.stride(-1) != 1 or t.data_ptr() % 16 or (t.stride(0) * t.element_size()) % 16 or t.shape[0] == 0:
            return "pointer"
    return "tma"


def _matmul_tma(a, b, out, alpha: float) -> None:
    from triton.tools.tensor_descriptor import TensorDescriptor

    m, k = a.shape
    n = b.shape[1]
    dummy = [16, 16]  # the pre-hook sets each config's tile shapes
    a_desc = TensorDescriptor(a, list(a.shape), list(a.stride()), dummy)
    b_desc = TensorDescriptor(b, list(b.shape), list(b.stride()), dummy)
    d_desc = TensorDescriptor(out, list(out.shape), list(out.stride()), dummy)
    sms = processors(a.device)

    def grid(meta):
        tiles = triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"])
        return (min(tiles, sms) if meta["PERSISTENT"] else tiles,)

    gemm_tma_kernel[grid](a_desc, b_desc, d_desc, m, n, k, scalars(a.device, float(alpha), 0.0), sms,
                          SCALE=alpha != 1)


EXACT_INT32_K = (2 ** 31 - 1) // (128 * 128)  # int8 products summed in int32 without overflow


def _prune_quantized(configs, named_args, **kwargs):
    """Past EXACT_INT32_K terms the sums are kept in int64: only tiles whose accumulator fits."""
    keep = _prune(configs, named_args, **kwargs)
    if kwargs["WIDE"]:
        keep = [c for c in keep if c.kwargs["BLOCK_M"] * c.kwargs["BLOCK_N"] <= 64 * 64] or [configs[-1]]
    return keep


@triton.autotune(
    configs=configs([cfg(8, 3, BLOCK_M=128, BLOCK_N=128, BLOCK_K=128, GROUP_M=8),
                     cfg(8, 4, BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8),
                     cfg(4, 4, BLOCK_M=64, BLOCK_N=64, BLOCK_K=64, GROUP_M=8),
                     cfg(4, 3, BLOCK_M=32, BLOCK_N=32, BLOCK_K=32, GROUP_M=8)],
                    [cfg(4, 1, BLOCK_M=16, BLOCK_N=16, BLOCK_K=32, GROUP_M=4)]),
    key=["M", "N", "K"], prune_configs_by={"early_config_prune": _prune_quantized})
@triton.jit
def quantized_kernel(a_ptr, b_ptr, s_ptr, d_ptr, M, N, K, WIDE: tl.constexpr,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    """d = clamp(round_half_even(float64(a @ b) * s), -128, 127); a, b, d int8, row-major.
    The sum is exact: int32 on the tensor cores up to EXACT_INT32_K terms, int64 (WIDE) past that."""
    pid_m, pid_n = tile(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + (rm % M)[:, None].to(tl.int64) * K + rk[None, :]
    b_ptrs = b_ptr + rk[:, None].to(tl.int64) * N + (rn % N)[None, :]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.int32)
    if WIDE:
        total = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.int64)
    for kk in range(0, tl.cdiv(K, BLOCK_K)):
        left = K - kk * BLOCK_K
        a = tl.load(a_ptrs, mask=rk[None, :] < left, other=0)
        b = tl.load(b_ptrs, mask=rk[:, None] < left, other=0)
        if WIDE:  # one block's int32 sum is exact (|sum| <= BLOCK_K * 2^14); their total in int64
            total += tl.dot(a, b, out_dtype=tl.int32).to(tl.int64)
        else:
            acc = tl.dot(a, b, acc, out_dtype=tl.int32)
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K * N
    if WIDE:
        x = total.to(tl.float64) * tl.load(s_ptr)
    else:
        x = acc.to(tl.float64) * tl.load(s_ptr)
    x = tl.minimum(tl.maximum(x, -129.0), 128.0)  # saturated first, so x + 0.5 below is exact
    r = tl.floor(x + 0.5)
    r = tl.where((r - x == 0.5) & (r - 2.0 * tl.floor(r * 0.5) != 0.0), r - 1.0, r)  # ties to even
    r = tl.minimum(tl.maximum(r, -128.0), 127.0)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    tl.store(d_ptr + rm[:, None].to(tl.int64) * N + rn[None, :], r.to(tl.int8), mask=mask)


def quantized(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, scale: float) -> torch.Tensor:
    """out (M, N) int8 from int8 a (M, K), b (K, N); scale = a_scale * b_scale / c_scale in float64."""
    m, k = a.shape
    n = b.shape[1]
    if m == 0 or n == 0:
        return out
    s = scalars(a.device, float(scale))
    grid = lambda meta: (triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"]),)  # noqa: E731
    quantized_kernel[grid](a, b, s, out, m, n, k, WIDE=k > EXACT_INT32_K)
    return out
