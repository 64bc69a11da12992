"""Element-wise extensions: RoPE and LayerScale.

RoPE computes its angles' cosines and sines and the rotation in float64 (libdevice on the GPU):
the angles are positions times frequencies, often hundreds of radians, where float32 range
reduction loses digits; the kernel is memory-bound, so the wider arithmetic costs little.
LayerScale multiplies in float32 (float64 for F64): a product of two F32, F16 or BF16 values is
exact there, so rounding it once gives the reference's bits.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from . import accumulator, narrow

BLOCK = 1024


@triton.jit
def rope_kernel(x_ptr, f_ptr, y_ptr, pairs, SEQ, HEADS, HALF, BLOCK: tl.constexpr):
    """Pair p = ((b * SEQ + s) * HEADS + h) * HALF + j: (x[2p], x[2p+1]) rotated by freqs[s, j]."""
    p = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = p < pairs
    j = p % HALF
    s = (p // (HALF * HEADS)) % SEQ
    f = tl.load(f_ptr + s * HALF + j, mask=mask, other=0.0).to(tl.float64)
    x0 = tl.load(x_ptr + 2 * p, mask=mask, other=0.0).to(tl.float64)
    x1 = tl.load(x_ptr + 2 * p + 1, mask=mask, other=0.0).to(tl.float64)
    c = tl.cos(f)
    sn = tl.sin(f)
    tl.store(y_ptr + 2 * p, narrow(x0 * c - x1 * sn, y_ptr.dtype.element_ty), mask=mask)
    tl.store(y_ptr + 2 * p + 1, narrow(x0 * sn + x1 * c, y_ptr.dtype.element_ty), mask=mask)


def rope(x: torch.Tensor, freqs: torch.Tensor, out: torch.Tensor, batch: int, seq: int, heads: int,
         head_dim: int) -> torch.Tensor:
    """x, out [batch, seq, heads, head_dim] (head_dim even), freqs [seq, head_dim / 2] angles."""
    pairs = batch * seq * heads * (head_dim // 2)
    if pairs == 0:
        return out
    rope_kernel[(triton.cdiv(pairs, BLOCK),)](x, freqs, out, pairs, seq, heads, head_dim // 2, BLOCK=BLOCK)
    return out


@triton.jit
def scale_kernel(x_ptr, s_ptr, y_ptr, n, ACC: tl.constexpr, BLOCK: tl.constexpr):
    i = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = i < n
    x = tl.load(x_ptr + i, mask=mask).to(ACC)
    s = tl.load(s_ptr + i, mask=mask).to(ACC)
    tl.store(y_ptr + i, narrow(x * s, y_ptr.dtype.element_ty), mask=mask)


def layer_scale(x: torch.Tensor, scale: torch.Tensor, out: torch.Tensor, n: int) -> torch.Tensor:
    if n:
        scale_kernel[(triton.cdiv(n, BLOCK),)](x, scale, out, n, ACC=accumulator(x.dtype), BLOCK=BLOCK)
    return out
