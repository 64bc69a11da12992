"""Attention and FlashAttention: softmax(q @ k^T / sqrt(d)) @ v on [batch, heads, seq, head_dim].

One fused, tiled kernel (the FlashAttention-2 forward): a program owns BLOCK_M query rows of one
(batch, head), streams BLOCK_N keys and values at a time through an online softmax (running max
m, running sum l, rescaled accumulator), and never writes the seq x seq scores. exp2 with the
scale folded into log2(e) / sqrt(d). F16/BF16 take tensor cores (p rounded to the input type for
the second product, accumulators float32); F32 multiplies in IEEE float32 and F64 in float64.
The causal form (key j visible to query i only when j <= i) splits each program's keys into
unmasked tiles and the diagonal ones; the ISA's instructions are not causal, bench/ measures both.

On Hopper (and in the interpreter) 16-bit inputs whose sequence length is a multiple of the tile
and whose head is a power of two take the same kernel with TMA descriptors over [batch * heads *
seq, head_dim] (no masks, no address arithmetic); everything else uses pointer loads with masks.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from . import INTERPRET, accumulator, cfg, chosen, configs, dot, hopper, narrow, pow2, precision, scalars

_HOPPER = [  # 8 warps (two warpgroups) for 128-row tiles, 4 for smaller ones
    cfg(w, st, BLOCK_M=bm, BLOCK_N=bn)
    for bm, bn in ((128, 128), (128, 64), (64, 64), (64, 32), (32, 32), (32, 16), (16, 16))
    for w in (4, 8) for st in (2, 3, 4)
    if not (w == 8 and bm < 128) and not (bm < 64 and st > 2)
]


def _descriptor_blocks(nargs) -> None:
    """Autotuner pre-hook for the TMA form: each config's tile shapes into the descriptors."""
    q = nargs["q_ptr"]
    if hasattr(q, "block_shape"):
        bm, bn, d = nargs["BLOCK_M"], nargs["BLOCK_N"], nargs["HEAD_DIM"]
        q.block_shape = nargs["o_ptr"].block_shape = [bm, d]
        nargs["k_ptr"].block_shape = nargs["v_ptr"].block_shape = [bn, d]


def _with_hook(configs):
    return [triton.Config(c.kwargs, num_warps=c.num_warps, num_stages=c.num_stages, pre_hook=_descriptor_blocks)
            for c in configs]


def _prune(configs, named_args, **kwargs):
    """Tensor-core tiles for 16-bit inputs; small ones for F32/F64 (FMA products hold every
    partial sum in registers), for wide heads and for short sequences; the TMA form only tiles
    that divide the sequence."""
    q, s, bd = named_args["q_ptr"], named_args["S"], kwargs["BLOCK_D"]
    tma = hasattr(q, "block_shape")
    dtype = q.base.dtype if tma else q.dtype
    tc = dtype in (torch.float16, torch.bfloat16)
    keep = []
    for c in configs:
        bm, bn = c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"]
        if bm % bn or bm > 2 * max(s, 16) or bn > 2 * max(s, 16) or (tma and s % bm):
            continue
        if not tc and (bm * bn > 32 * 32 or bm * bd > 64 * 64):
            continue
        if tc and bd > 128 and bm * bn > 64 * 64:
            continue
        if tc and bd >= 128 and bm >= 128 and c.num_warps < 8:  # one warpgroup's registers spill
            continue
        if bd >= 128 and bm * bn >= 128 * 128 and c.num_stages > 3:  # past 227 KiB of shared memory
            continue
        keep.append(c)
    return keep or [configs[-1]]


@triton.jit
def _tiles(acc, l_i, m_i, q, k_src, v_src, row0, start, end, offs_m, offs_n, offs_d, S, scale,
           HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr, EVEN_N: tl.constexpr, EVEN_D: tl.constexpr,
           DIAGONAL: tl.constexpr, TMA: tl.constexpr, ACC: tl.constexpr, PRECISION: tl.constexpr):
    """Keys start..end of one (batch, head), whose rows start at row0, folded into the running
    (acc, l, m) of BLOCK_M queries. k_src and v_src are TMA descriptors or pointers."""
    for start_n in range(start, end, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        rows = start_n + offs_n
        if TMA:
            k = k_src.load([row0 + start_n, 0])
            v = v_src.load([row0 + start_n, 0])
        else:
            kv_off = (row0 + rows)[:, None] * HEAD_DIM + offs_d[None, :]
            if EVEN_N and EVEN_D:
                k = tl.load(k_src + kv_off)
                v = tl.load(v_src + kv_off)
            else:
                kv_mask = (rows[:, None] < S) & (offs_d[None, :] < HEAD_DIM)
                k = tl.load(k_src + kv_off, mask=kv_mask, other=0.0)
                v = tl.load(v_src + kv_off, mask=kv_mask, other=0.0)
        qk = dot(q, tl.trans(k), tl.zeros((q.shape[0], BLOCK_N), ACC), PRECISION, ACC)
        if not EVEN_N:
            qk = tl.where(rows[None, :] < S, qk, -float("inf"))
        if DIAGONAL:
            qk = tl.where(offs_m[:, None] >= rows[None, :], qk, -float("inf"))
        m_new = tl.maximum(m_i, tl.max(qk, 1) * scale)
        p = tl.exp2(qk * scale - m_new[:, None])  # the scale folded into one multiply-add
        alpha = tl.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = dot(p.to(v.dtype), v, acc * alpha[:, None], PRECISION, ACC)
        m_i = m_new
    return acc, l_i, m_i


@triton.jit
def _attention(q_ptr, k_ptr, v_ptr, o_ptr, scale_ptr, S,
               HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, CAUSAL: tl.constexpr, TMA: tl.constexpr,
               ACC: tl.constexpr, PRECISION: tl.constexpr,
               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, EVEN_M: tl.constexpr, EVEN_N: tl.constexpr):
    """One program: BLOCK_M queries of one (batch, head). The arrays are [batch * heads * S,
    HEAD_DIM] row-major, as pointers or (TMA) as descriptors."""
    start_m = tl.program_id(0)
    if TMA:  # this (batch, head)'s first row: TMA coordinates are 32-bit (route() checks they fit)
        row0 = tl.program_id(1) * S
    else:
        row0 = tl.program_id(1).to(tl.int64) * S
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    EVEN_D: tl.constexpr = BLOCK_D == HEAD_DIM
    q_off = (row0 + offs_m)[:, None] * HEAD_DIM + offs_d[None, :]
    io_mask = (offs_m[:, None] < S) & (offs_d[None, :] < HEAD_DIM)
    if TMA:
        q = q_ptr.load([row0 + start_m * BLOCK_M, 0])
    elif EVEN_M and EVEN_D:
        q = tl.load(q_ptr + q_off)
    else:
        q = tl.load(q_ptr + q_off, mask=io_mask, other=0.0)
    scale = tl.load(scale_ptr).to(ACC)  # log2(e) / sqrt(head_dim)
    m_i = tl.full((BLOCK_M,), -float("inf"), ACC)
    l_i = tl.zeros((BLOCK_M,), ACC)
    acc = tl.zeros((BLOCK_M, BLOCK_D), ACC)
    if CAUSAL:
        # keys wholly left of this block's first query need no mask; the diagonal tiles do
        acc, l_i, m_i = _tiles(acc, l_i, m_i, q, k_ptr, v_ptr, row0, 0, start_m * BLOCK_M,
                               offs_m, offs_n, offs_d, S, scale, HEAD_DIM, BLOCK_N, True, EVEN_D,
                               False, TMA, ACC, PRECISION)
        acc, l_i, m_i = _tiles(acc, l_i, m_i, q, k_ptr, v_ptr, row0, start_m * BLOCK_M,
                               tl.minimum((start_m + 1) * BLOCK_M, S), offs_m, offs_n, offs_d, S, scale,
                               HEAD_DIM, BLOCK_N, EVEN_N, EVEN_D, True, TMA, ACC, PRECISION)
    else:
        acc, l_i, m_i = _tiles(acc, l_i, m_i, q, k_ptr, v_ptr, row0, 0, S, offs_m, offs_n, offs_d,
                               S, scale, HEAD_DIM, BLOCK_N, EVEN_N, EVEN_D, False, TMA, ACC, PRECISION)
    if TMA:
        o_ptr.store([row0 + start_m * BLOCK_M, 0], narrow(acc / l_i[:, None], o_ptr.dtype))
    else:
        out = narrow(acc / l_i[:, None], o_ptr.dtype.element_ty)
        if EVEN_M and EVEN_D:
            tl.store(o_ptr + q_off, out)
        else:
            tl.store(o_ptr + q_off, out, mask=io_mask)


_EVEN = {"EVEN_M": lambda a: a["S"] % a["BLOCK_M"] == 0, "EVEN_N": lambda a: a["S"] % a["BLOCK_N"] == 0}
_INTERPRET_CFG = [cfg(4, 1, BLOCK_M=16, BLOCK_N=16)]
attention_kernel = triton.autotune(configs=configs(_HOPPER, _INTERPRET_CFG), key=["S", "HEAD_DIM", "CAUSAL"],
                                   prune_configs_by={"early_config_prune": _prune})(
    triton.heuristics(_EVEN)(_attention))
attention_tma_kernel = triton.autotune(configs=_with_hook(configs(_HOPPER, _INTERPRET_CFG)),
                                       key=["S", "HEAD_DIM", "CAUSAL"],
                                       prune_configs_by={"early_config_prune": _prune})(
    triton.heuristics(_EVEN)(_attention))


def route(q: torch.Tensor, seq: int, head_dim: int) -> str:
    """'gluon' where flash_hopper.py's warp-specialized kernel applies (a Hopper GPU, not the
    interpreter; a head of 64 or 128, whole 128-row blocks), else 'tma' where the descriptor form applies (Hopper or
    the interpreter; F16/BF16; seq a multiple of the smallest tile; head_dim a power of two, 16..256;
    rows within 32-bit coordinates), else 'pointer'."""
    if q.dtype not in (torch.float16, torch.bfloat16) or not (INTERPRET or (q.is_cuda and hopper(q.device))):
        return "pointer"
    if head_dim != pow2(head_dim, 16) or head_dim > 256 or seq % (16 if INTERPRET else 64):
        return "pointer"
    if q.numel() // head_dim >= 2 ** 31:
        return "pointer"
    if not INTERPRET and head_dim in (64, 128) and seq % 128 == 0:
        return "gluon"
    return "tma"


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor, batch: int, heads: int,
              seq: int, head_dim: int, causal: bool = False, kernel: str | None = None) -> torch.Tensor:
    """out = softmax(q @ k^T / sqrt(head_dim) [+ causal mask]) @ v; all contiguous [batch, heads, seq, head_dim].

    `out` must not overlap q, k or v (other programs still read them). `kernel` ('gluon', 'tma' or
    'pointer') overrides route() for comparisons (bench/gpu_kernels.py): 'tma' and 'pointer' also
    where route() chose 'gluon'."""
    if batch * heads * seq * head_dim == 0:
        return out
    scale = scalars(q.device, math.log2(math.e) / math.sqrt(head_dim))
    grid = lambda meta: (triton.cdiv(seq, meta["BLOCK_M"]), batch * heads)  # noqa: E731
    args = (q, k, v, out)
    routed = route(q, seq, head_dim) if all(t.data_ptr() % 16 == 0 for t in args) else "pointer"
    use = kernel if routed == "gluon" and kernel == "tma" else chosen(routed, kernel)
    if use == "gluon":
        from . import flash_hopper

        return flash_hopper.attention(q, k, v, out, batch, heads, seq, head_dim, causal)
    tma = use == "tma"
    if tma:
        from triton.tools.tensor_descriptor import TensorDescriptor

        rows = batch * heads * seq
        args = tuple(TensorDescriptor(t, [rows, head_dim], [head_dim, 1], [16, head_dim]) for t in args)
    (attention_tma_kernel if tma else attention_kernel)[grid](
        *args, scale, seq, HEAD_DIM=head_dim, BLOCK_D=pow2(head_dim, 16), CAUSAL=causal, TMA=tma,
        ACC=accumulator(q.dtype), PRECISION=precision(q.dtype))
    return out
