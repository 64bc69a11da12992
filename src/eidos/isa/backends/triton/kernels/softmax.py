"""Softmax over rows: exp(x - max) / sum(exp(x - max)), one program per row.

A row of up to FUSED elements is read once into registers (so in-place runs are safe: the whole
row is loaded before any of it is stored); longer rows take two passes, an online max-and-sum
over tiles, then the normalized tiles. Computed in float32 (float64 for F64), rounded on store.
A NaN anywhere in a row makes the row NaN, as in the reference: the max may skip it, but the sum
of the exponentials, which divides every element, does not.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from . import accumulator, cfg, configs, narrow, pow2

FUSED = 16384  # elements per row kept in registers by one program
TILE = 4096  # elements per tile for longer rows


@triton.autotune(configs=configs([cfg(w, 1) for w in (4, 8, 16)] + [cfg(w, 2) for w in (8, 16)], [cfg(4, 1)]),
                 key=["N", "SINGLE"], restore_value=["y_ptr"])  # in place, y is x: tuning runs restore it
@triton.jit
def softmax_kernel(x_ptr, y_ptr, N, ACC: tl.constexpr, BLOCK: tl.constexpr, SINGLE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * N
    y_row = y_ptr + row * N
    cols = tl.arange(0, BLOCK)
    if SINGLE:
        mask = cols < N
        x = tl.load(x_row + cols, mask=mask, other=-float("inf")).to(ACC)
        m = tl.max(x, axis=0)
        e = tl.exp(x - m)
        e = tl.where(mask, e, 0.0)
        tl.store(y_row + cols, narrow(e / tl.sum(e, axis=0), y_ptr.dtype.element_ty), mask=mask)
    else:
        m = tl.full((), -float("inf"), ACC)
        s = tl.zeros((), ACC)
        for start in range(0, N, BLOCK):
            mask = start + cols < N
            x = tl.load(x_row + start + cols, mask=mask, other=-float("inf")).to(ACC)
            m_new = tl.maximum(m, tl.max(x, axis=0))
            e = tl.where(mask, tl.exp(x - m_new), 0.0)
            # rescale the running sum to the new max (a -inf max means nothing summed yet)
            s = s * tl.where(m_new == m, 1.0, tl.exp(m - m_new)) + tl.sum(e, axis=0)
            m = m_new
        for start in range(0, N, BLOCK):
            mask = start + cols < N
            x = tl.load(x_row + start + cols, mask=mask, other=0.0).to(ACC)
            tl.store(y_row + start + cols, narrow(tl.exp(x - m) / s, y_ptr.dtype.element_ty), mask=mask)


def softmax(x: torch.Tensor, out: torch.Tensor, rows: int, n: int) -> torch.Tensor:
    """out[r, :] = softmax(x[r, :]) for r < rows; x and out contiguous, may be the same tensor."""
    if rows == 0 or n == 0:
        return out
    single = n <= FUSED
    block = pow2(n, 16) if single else TILE
    softmax_kernel[(rows,)](x, out, n, ACC=accumulator(x.dtype), BLOCK=block, SINGLE=single)
    return out
