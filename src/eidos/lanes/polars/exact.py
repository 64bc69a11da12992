"""The pieces Polars has no exact form for, done in NumPy and Python (translate.py calls them
from map_batches): Python's float %, correctly rounded float sums (eidos.hal.fsum) and exact
std/var over groups, and the code points whose case mapping differs between Rust's and Python's
tables."""

from __future__ import annotations

import functools
import math

import numpy as np
import pyarrow as pa

import polars as pl
from eidos.hal import fsum
from eidos.ir.dtypes import DType
from eidos.ir.evaluate import aggregates


def fmod(s: pl.Series) -> pl.Series:
    """C fmod of the struct's fields a and b, exact (nulls read as NaN; the caller masks them)."""
    a, b = s.struct.field("a").to_numpy(), s.struct.field("b").to_numpy()
    with np.errstate(all="ignore"):
        return pl.Series(s.name, np.fmod(a, b), dtype=pl.Float64)


@functools.cache
def case_differences(lower: bool) -> str:
    """The code points whose case mapping differs between Python and Polars here, found once:
    every code point, a newline after each, mapped in blocks on both sides; only blocks that
    differ are compared code point by code point."""
    cps = np.arange(0x110000, dtype=np.uint32)
    cps = cps[((cps < 0xD800) | (cps > 0xDFFF)) & (cps != 0x0A)]
    spaced = np.empty(2 * len(cps), dtype=np.uint32)
    spaced[0::2], spaced[1::2] = cps, 0x0A
    step = 2 * 4096
    blocks = [spaced[i:i + step].tobytes().decode("utf-32-le") for i in range(0, len(spaced), step)]
    column = pl.Series(blocks, dtype=pl.String)
    theirs = (column.str.to_lowercase() if lower else column.str.to_uppercase()).to_list()
    odd = []
    for block, them in zip(blocks, theirs):
        us = block.lower() if lower else block.upper()
        if us != them:
            odd += [c for c, a, b in zip(block.split("\n"), us.split("\n"), them.split("\n")) if a != b]
    return "".join(odd)


def between(s: pl.Series) -> pl.Series:
    """Quantiles' interpolation: lo + (hi - lo) * t of the struct's fields, exact and rounded once."""
    rows = zip(*(s.struct.field(f).to_list() for f in ("lo", "hi", "t")))
    return pl.Series(s.name, [None if lo is None else aggregates.between(lo, hi, t) for lo, hi, t in rows],
                     dtype=pl.Float64)


def exact_aggregation(fn: str, t: DType):
    """A function over a column of per-group value lists: `fn` of each, as docs/semantics.md says."""
    def run(s: pl.Series) -> pl.Series:
        lists = s.to_arrow()
        if isinstance(lists, pa.ChunkedArray):
            lists = lists.combine_chunks()
        offsets = lists.offsets.to_numpy()
        if t.is_float:
            return pl.Series(s.name, fsum.aggregate(fn, lists.values.to_numpy(zero_copy_only=False), offsets))
        values = lists.values.to_pylist()
        out = [_one(fn, t, values[a:b]) for a, b in zip(offsets[:-1], offsets[1:])]
        return pl.Series(s.name, out, dtype=pl.Float64)
    return run


def exact_total(fn: str):
    """`fn` of a whole float column, nulls skipped (an aggregation without keys), one value."""
    def run(s: pl.Series) -> pl.Series:
        s = s.drop_nulls() if s.null_count() else s
        # Polars' chunks read in place (Series.to_arrow copies here), as NumPy views (no Arrow wrapping per chunk)
        chunks = [c.to_numpy() for c in s.get_chunks()] if len(s) else []
        return pl.Series(s.name, [fsum.single(fn, chunks)], dtype=pl.Float64)
    return run


def _one(fn: str, t: DType, xs: list) -> float | None:
    """std/var of integers or decimals: n * sum(x^2) - sum(x)^2 over n (n - 1), exact, one
    correctly rounded division."""
    n = len(xs)
    if n < 2:
        return None
    if t.is_decimal:
        xs = [int(x.scaleb(t.scale)) for x in xs]
    s1, s2 = sum(xs), sum(x * x for x in xs)
    v = (n * s2 - s1 * s1) / (n * (n - 1) * 10 ** (2 * t.scale if t.is_decimal else 0))
    return math.sqrt(v) if fn == "std" else v
