"""Correctly rounded float sums at memory speed, for the lanes whose engine has none.

docs/semantics.md section 14: a float sum is math.fsum's answer, with the reference's rules for NaN,
infinities and overflow (eidos.ir.evaluate.aggregates.float_sum). It lives in hal because the polars
and duckdb lanes both need it and a lane never imports another; the kernels (eidos.hal.fsum_kernels)
load numba on the first sum, so `import eidos` stays light. One pass over the values, in blocks that
stay in cache, split over the cores for long inputs; the partial sums are exact and add exactly.
"""

from __future__ import annotations

import functools
import math
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from eidos.ir.evaluate.aggregates import float_sum

SPLIT = 1 << 20  # values per thread worth starting one for


def sums(values: np.ndarray, offsets: np.ndarray | None = None) -> np.ndarray:
    """Each segment's correctly rounded sum, values[offsets[g]:offsets[g + 1]] (0.0 when empty); the
    values hold no nulls (float64, or float32: summed exactly, as their float64 values). Without
    offsets, one segment: every value."""
    k = _kernels()
    v = np.ascontiguousarray(values, dtype=np.float64)
    if offsets is None:
        offsets = np.array([0, len(v)], dtype=np.int64)
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    groups = len(offsets) - 1
    out, python = np.empty(groups), np.zeros(groups, dtype=np.bool_)
    parts = min(os.cpu_count() or 1, max(1, (int(offsets[-1]) - int(offsets[0])) // SPLIT))
    if groups == 1 and parts > 1:
        out[0], python[0] = _one(k, v, int(offsets[0]), int(offsets[-1]), parts)
    elif parts > 1:
        # contiguous runs of groups with about equal rows each, one per thread
        cuts = np.searchsorted(offsets, np.linspace(offsets[0], offsets[-1], parts + 1)[1:-1])
        bounds = [0, *sorted(set(cuts.tolist()) - {0, groups}), groups]
        list(_pool().map(lambda ab: k.segments(v, offsets[ab[0]:ab[1] + 1], NEG_ZERO, out[ab[0]:ab[1]],
                                               python[ab[0]:ab[1]]), zip(bounds, bounds[1:])))
    else:
        k.segments(v, offsets, NEG_ZERO, out, python)
    for g in np.flatnonzero(python):
        out[g] = float_sum(v[offsets[g]:offsets[g + 1]].tolist())
    return out


def _one(k, v: np.ndarray, lo: int, hi: int, parts: int) -> tuple[float, bool]:
    """One long segment in parts, one per thread; their digits and counts add exactly."""
    cuts = np.linspace(lo, hi, parts + 1).astype(np.int64)
    digits = np.zeros((parts, k.CHUNKS), dtype=np.int64)
    st = np.zeros((parts, 6))
    st[:, 4] = k.CHUNKS
    list(_pool().map(lambda i: k.accumulate(v, cuts[i], cuts[i + 1], digits[i], st[i]), range(parts)))
    for d in digits:
        k.carry(d, 0, k.CHUNKS)
    total = st.sum(axis=0)
    total[4], total[5] = 0, k.CHUNKS - 3
    return k.finish(digits.sum(axis=0), total, NEG_ZERO, np.empty(k.CHUNKS + 1))


@functools.cache
def _kernels():
    from eidos.hal import fsum_kernels
    return fsum_kernels


@functools.cache
def _pool() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(os.cpu_count() or 1, thread_name_prefix="eidos-fsum")


# Whether this Python's math.fsum gives -0.0 for negative zeros (3.11 gives 0.0): zero sums then
# go the reference's way.
NEG_ZERO = math.copysign(1.0, math.fsum([-0.0])) < 0
