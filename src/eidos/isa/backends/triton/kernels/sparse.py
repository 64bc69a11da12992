"""SparseGEMM: c[m, n] = A @ b with A in CSR (values, column indices, row pointers).

One program per (row, BLOCK_N columns of b): it walks the row's nonzeros and accumulates
value * b[column, block] in float32 (float64 for F64), so each row of b a nonzero names is read
as one contiguous vector. The caller has checked the CSR arrays (the reference's checks).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from . import accumulator, narrow, pow2


@triton.jit
def csr_kernel(ptr_ptr, idx_ptr, val_ptr, b_ptr, c_ptr, N, ACC: tl.constexpr, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = cols < N
    start = tl.load(ptr_ptr + row)
    end = tl.load(ptr_ptr + row + 1)
    acc = tl.zeros((BLOCK_N,), ACC)
    for j in range(start, end):
        col = tl.load(idx_ptr + j).to(tl.int64)
        v = tl.load(val_ptr + j).to(ACC)
        acc += v * tl.load(b_ptr + col * N + cols, mask=mask, other=0.0).to(ACC)
    tl.store(c_ptr + row * N + cols, narrow(acc, c_ptr.dtype.element_ty), mask=mask)


def csr_matmul(ptr: torch.Tensor, idx: torch.Tensor, vals: torch.Tensor, b: torch.Tensor, out: torch.Tensor,
               m: int, n: int) -> torch.Tensor:
    if m == 0 or n == 0:
        return out
    block = min(pow2(n, 16), 256)
    csr_kernel[(m, triton.cdiv(n, block))](ptr, idx, vals, b, out, n, ACC=accumulator(b.dtype), BLOCK_N=block)
    return out
