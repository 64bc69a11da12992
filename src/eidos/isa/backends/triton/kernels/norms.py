"""Normalization: LayerNorm and GroupNorm (one kernel: normalize a contiguous run, then an affine
per element or per channel) and BatchNorm (inference form, element-wise).

Mean first, corrected by the mean of the residuals x - mean (what the first sum rounded away:
the mean is then the correctly rounded one, as the reference's, whatever order the GPU's tree
sums take; one unit in the last place of a mean of 1e6 moves a deviation of 0.03 by 4e-9 of
itself), then the biased variance as the mean of squared deviations (never E[x^2] - E[x]^2,
which cancels), rounded once on store. Rows longer than FUSED take the residuals and their
squares in one pass: var = mean(e^2) - mean(e)^2 with e = x - first mean, whose mean(e) is a few
units in the last place of the mean, so nothing cancels. LayerNorm and GroupNorm compute in
float64 for F32 and F64 rows, float32 for F16/BF16: a row whose mean is large beside its spread
(1e20 + small deviations) loses the deviations to float32 rounding of the mean, while the ISA's
bound is relative to the normalized values; the kernels are memory-bound, so the wider arithmetic
costs no time. BatchNorm (mean and variance given) computes in float32 (float64 for F64).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from . import accumulator, div, narrow, pow2, scalars, sqrt

FUSED = 8192  # elements of a run kept in registers by one program
TILE = 2048


@triton.jit
def norm_kernel(x_ptr, g_ptr, b_ptr, y_ptr, eps_ptr, L, G, CPG, SPATIAL,
                ACC: tl.constexpr, BLOCK: tl.constexpr, SINGLE: tl.constexpr):
    """Run r (L values) normalized, then * gamma[k] + beta[k] with
    k = (r mod G) * CPG + j div SPATIAL: LayerNorm is G=1, CPG=L, SPATIAL=1."""
    r = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + r * L
    y_row = y_ptr + r * L
    aff = (r % G) * CPG
    cols = tl.arange(0, BLOCK)
    eps = tl.load(eps_ptr).to(ACC)
    if SINGLE:
        mask = cols < L
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(ACC)
        m0 = tl.sum(x, axis=0) / L
        mean = m0 + tl.sum(tl.where(mask, x - m0, 0.0), axis=0) / L
        d = tl.where(mask, x - mean, 0.0)
        sd = sqrt(tl.sum(d * d, axis=0) / L + eps)
        k = aff + cols // SPATIAL
        g = tl.load(g_ptr + k, mask=mask, other=0.0).to(ACC)
        b = tl.load(b_ptr + k, mask=mask, other=0.0).to(ACC)
        tl.store(y_row + cols, narrow(div(d, sd) * g + b, y_ptr.dtype.element_ty), mask=mask)
    else:
        total = tl.zeros((BLOCK,), ACC)
        for start in range(0, L, BLOCK):
            total += tl.load(x_row + start + cols, mask=start + cols < L, other=0.0).to(ACC)
        m0 = tl.sum(total, axis=0) / L
        res = tl.zeros((BLOCK,), ACC)
        sq = tl.zeros((BLOCK,), ACC)
        for start in range(0, L, BLOCK):
            mask = start + cols < L
            e = tl.where(mask, tl.load(x_row + start + cols, mask=mask, other=0.0).to(ACC) - m0, 0.0)
            res += e
            sq += e * e
        shift = tl.sum(res, axis=0) / L
        mean = m0 + shift
        sd = sqrt(tl.sum(sq, axis=0) / L - shift * shift + eps)
        for start in range(0, L, BLOCK):
            mask = start + cols < L
            x = tl.load(x_row + start + cols, mask=mask, other=0.0).to(ACC)
            k = aff + (start + cols) // SPATIAL
            g = tl.load(g_ptr + k, mask=mask, other=0.0).to(ACC)
            b = tl.load(b_ptr + k, mask=mask, other=0.0).to(ACC)
            tl.store(y_row + start + cols, narrow(div(x - mean, sd) * g + b, y_ptr.dtype.element_ty), mask=mask)


def _norm(x, gamma, beta, out, runs: int, length: int, groups: int, cpg: int, spatial: int, eps: float):
    if runs == 0 or length == 0:
        return out
    single = length <= FUSED
    block = pow2(length, 16) if single else TILE
    acc = tl.float64 if x.dtype in (torch.float32, torch.float64) else tl.float32
    norm_kernel[(runs,)](x, gamma, beta, out, scalars(x.device, float(eps)), length, groups, cpg, spatial,
                         ACC=acc, BLOCK=block, SINGLE=single,
                         num_warps=4 if block <= 1024 else 8)
    return out


def layer_norm(x, gamma, beta, out, rows: int, n: int, eps: float):
    """Each of `rows` rows of n: (x - mean) / sqrt(var + eps) * gamma + beta."""
    return _norm(x, gamma, beta, out, rows, n, 1, n, 1, eps)


def group_norm(x, gamma, beta, out, batch: int, channels: int, groups: int, spatial: int, eps: float):
    """[batch, channels, spatial]: each group's channels/groups * spatial values normalized together,
    then the per-channel affine."""
    cpg = channels // groups
    return _norm(x, gamma, beta, out, batch * groups, cpg * spatial, groups, cpg, spatial, eps)


BLOCK_EW = 1024


@triton.jit
def batch_norm_kernel(x_ptr, g_ptr, b_ptr, mean_ptr, var_ptr, y_ptr, eps_ptr, total, C, SPATIAL,
                      ACC: tl.constexpr, BLOCK: tl.constexpr):
    i = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = i < total
    c = (i // SPATIAL) % C
    x = tl.load(x_ptr + i, mask=mask, other=0.0).to(ACC)
    mu = tl.load(mean_ptr + c, mask=mask, other=0.0).to(ACC)
    var = tl.load(var_ptr + c, mask=mask, other=1.0).to(ACC)
    g = tl.load(g_ptr + c, mask=mask, other=0.0).to(ACC)
    b = tl.load(b_ptr + c, mask=mask, other=0.0).to(ACC)
    y = div(x - mu, sqrt(var + tl.load(eps_ptr).to(ACC))) * g + b
    tl.store(y_ptr + i, narrow(y, y_ptr.dtype.element_ty), mask=mask)


def batch_norm(x, gamma, beta, mean, var, out, batch: int, channels: int, spatial: int, eps: float):
    """[batch, channels, spatial]: (x - mean[c]) / sqrt(var[c] + eps) * gamma[c] + beta[c]."""
    total = batch * channels * spatial
    if total == 0:
        return out
    batch_norm_kernel[(triton.cdiv(total, BLOCK_EW),)](x, gamma, beta, mean, var, out,
                                                       scalars(x.device, float(eps)), total, channels, spatial,
                                                       ACC=accumulator(x.dtype), BLOCK=BLOCK_EW)
    return out
