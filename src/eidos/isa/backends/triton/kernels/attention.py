"""Attention and FlashAttention: softmax(q @ k^T / sqrt(d)) @ v on [batch, heads, seq, head_dim].

One fused, tiled kernel (the FlashAttention-2 forward): a program owns BLOCK_M query rows of one
(batch, head), streams BLOCK_N keys and values at a time through an online softmax (running max
m, running sum l, rescaled accumulator), and never writes the seq x seq scores. exp2 with the
scale folded into log2(e) / sqrt(d). F16/BF16 take tensor cores (p rounded to the input type for
the second product, accumulators float32); F32 multiplies in IEEE float32 and F64 in float64.
The causal form (key j visible to query i only when j <= i) splits each program's keys into
unmasked tiles and the diagonal ones; the ISA's instructions are not causal, bench/ measures both.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from . import accumulator, cfg, configs, dot, narrow, pow2, scalars

_HOPPER = [
    cfg(8, 3, BLOCK_M=128, BLOCK_N=128),
    cfg(8, 4, BLOCK_M=128, BLOCK_N=128),
    cfg(8, 3, BLOCK_M=128, BLOCK_N=64),
    cfg(4, 3, BLOCK_M=128, BLOCK_N=64),
    cfg(4, 4, BLOCK_M=128, BLOCK_N=64),
    cfg(4, 4, BLOCK_M=64, BLOCK_N=64),
    cfg(4, 3, BLOCK_M=64, BLOCK_N=32),
    cfg(4, 3, BLOCK_M=32, BLOCK_N=32),
    cfg(4, 2, BLOCK_M=32, BLOCK_N=16),
    cfg(2, 2, BLOCK_M=16, BLOCK_N=16),
]


def _prune(configs, named_args, **kwargs):
    """Tensor-core tiles for 16-bit inputs; small ones for F32/F64 (FMA products hold every
    partial sum in registers), for wide heads, and for short sequences."""
    q, s, bd = named_args["q_ptr"], named_args["S"], kwargs["BLOCK_D"]
    tc = q.dtype in (torch.float16, torch.bfloat16)
    keep = []
    for c in configs:
        bm, bn = c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"]
        if bm % bn or bm > 2 * max(s, 16) or bn > 2 * max(s, 16):
            continue
        if not tc and (bm * bn > 32 * 32 or bm * bd > 64 * 64):
            continue
        if tc and bd > 128 and bm * bn > 64 * 64:
            continue
        keep.append(c)
    return keep or [configs[-1]]


@triton.jit
def _tiles(acc, l_i, m_i, q, k_base, v_base, start, end, offs_m, offs_n, offs_d, S, scale,
           HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr, EVEN_N: tl.constexpr, EVEN_D: tl.constexpr,
           DIAGONAL: tl.constexpr, ACC: tl.constexpr, PRECISION: tl.constexpr):
    """Keys start..end of one (batch, head) folded into the running (acc, l, m) of BLOCK_M queries."""
    for start_n in range(start, end, BLOCK_N):
        rows = start_n + offs_n
        kv_off = rows[:, None] * HEAD_DIM + offs_d[None, :]
        if EVEN_N and EVEN_D:
            k = tl.load(k_base + kv_off)
            v = tl.load(v_base + kv_off)
        else:
            kv_mask = (rows[:, None] < S) & (offs_d[None, :] < HEAD_DIM)
            k = tl.load(k_base + kv_off, mask=kv_mask, other=0.0)
            v = tl.load(v_base + kv_off, mask=kv_mask, other=0.0)
        qk = dot(q, tl.trans(k), tl.zeros((q.shape[0], BLOCK_N), ACC), PRECISION, ACC) * scale
        if not EVEN_N:
            qk = tl.where(rows[None, :] < S, qk, -float("inf"))
        if DIAGONAL:
            qk = tl.where(offs_m[:, None] >= rows[None, :], qk, -float("inf"))
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.exp2(qk - m_new[:, None])
        alpha = tl.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = dot(p.to(v.dtype), v, acc * alpha[:, None], PRECISION, ACC)
        m_i = m_new
    return acc, l_i, m_i


@triton.autotune(configs=configs(_HOPPER, [cfg(4, 1, BLOCK_M=16, BLOCK_N=16)]),
                 key=["S", "HEAD_DIM", "CAUSAL"], prune_configs_by={"early_config_prune": _prune})
@triton.heuristics({"EVEN_M": lambda a: a["S"] % a["BLOCK_M"] == 0,
                    "EVEN_N": lambda a: a["S"] % a["BLOCK_N"] == 0})
@triton.jit
def attention_kernel(q_ptr, k_ptr, v_ptr, o_ptr, scale_ptr, S,
                     HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, CAUSAL: tl.constexpr,
                     ACC: tl.constexpr, PRECISION: tl.constexpr,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, EVEN_M: tl.constexpr, EVEN_N: tl.constexpr):
    start_m = tl.program_id(0)
    base = tl.program_id(1).to(tl.int64) * S * HEAD_DIM  # (batch, head): contiguous [S, HEAD_DIM]
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    EVEN_D: tl.constexpr = BLOCK_D == HEAD_DIM
    q_off = base + offs_m[:, None] * HEAD_DIM + offs_d[None, :]
    io_mask = (offs_m[:, None] < S) & (offs_d[None, :] < HEAD_DIM)
    if EVEN_M and EVEN_D:
        q = tl.load(q_ptr + q_off)
    else:
        q = tl.load(q_ptr + q_off, mask=io_mask, other=0.0)
    scale = tl.load(scale_ptr).to(ACC)  # log2(e) / sqrt(head_dim)
    m_i = tl.full((BLOCK_M,), -float("inf"), ACC)
    l_i = tl.zeros((BLOCK_M,), ACC)
    acc = tl.zeros((BLOCK_M, BLOCK_D), ACC)
    if CAUSAL:
        # keys wholly left of this block's first query need no mask; the diagonal tiles do
        acc, l_i, m_i = _tiles(acc, l_i, m_i, q, k_ptr + base, v_ptr + base, 0, start_m * BLOCK_M,
                               offs_m, offs_n, offs_d, S, scale, HEAD_DIM, BLOCK_N, True, EVEN_D,
                               False, ACC, PRECISION)
        acc, l_i, m_i = _tiles(acc, l_i, m_i, q, k_ptr + base, v_ptr + base, start_m * BLOCK_M,
                               tl.minimum((start_m + 1) * BLOCK_M, S), offs_m, offs_n, offs_d, S, scale,
                               HEAD_DIM, BLOCK_N, EVEN_N, EVEN_D, True, ACC, PRECISION)
    else:
        acc, l_i, m_i = _tiles(acc, l_i, m_i, q, k_ptr + base, v_ptr + base, 0, S, offs_m, offs_n, offs_d,
                               S, scale, HEAD_DIM, BLOCK_N, EVEN_N, EVEN_D, False, ACC, PRECISION)
    out = narrow(acc / l_i[:, None], o_ptr.dtype.element_ty)
    if EVEN_M and EVEN_D:
        tl.store(o_ptr + q_off, out)
    else:
        tl.store(o_ptr + q_off, out, mask=io_mask)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor, batch: int, heads: int,
              seq: int, head_dim: int, causal: bool = False) -> torch.Tensor:
    """out = softmax(q @ k^T / sqrt(head_dim) [+ causal mask]) @ v; all contiguous [batch, heads, seq, head_dim].

    `out` must not overlap q, k or v (other programs still read them)."""
    if batch * heads * seq * head_dim == 0:
        return out
    scale = scalars(q.device, math.log2(math.e) / math.sqrt(head_dim))
    grid = lambda meta: (triton.cdiv(seq, meta["BLOCK_M"]), batch * heads)  # noqa: E731
    attention_kernel[grid](q, k, v, out, scale, seq, HEAD_DIM=head_dim, BLOCK_D=pow2(head_dim, 16),
                           CAUSAL=causal, ACC=accumulator(q.dtype), PRECISION="ieee")
    return out
