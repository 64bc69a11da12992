"""Test values per type: edges (zeros, extremes, NaN, infinities) and a few ordinary ones."""

from __future__ import annotations

import math
import random

from eidos.isa import Type

FLOATS = [Type.F16, Type.BF16, Type.F32, Type.F64]
SMALL_INTS = [Type.I8, Type.I16, Type.I32, Type.I64, Type.U8, Type.U16, Type.U32, Type.U64]
WIDE_INTS = [Type.I128, Type.I256, Type.I4096, Type.U128, Type.U1024, Type.U4096]
INTS = SMALL_INTS + WIDE_INTS
ALL = FLOATS + INTS


def values(ty: Type, n: int = 24, seed: int = 0) -> list:
    rng = random.Random(f"{ty.name}-{seed}")
    if ty.is_float:
        big = {Type.F16: 60000.0, Type.BF16: 1e38, Type.F32: 3e38, Type.F64: 1e308}[ty]
        edge = [0.0, -0.0, 1.0, -1.0, 0.5, -2.25, 3.0, big, -big, math.inf, -math.inf, math.nan]
        rest = [rng.uniform(-100, 100) for _ in range(n - len(edge))]
    else:
        lo, hi = ty.min_value, ty.max_value
        edge = [0, 1, hi, lo, hi - 1, 7, 2, 3] + ([-1, -2, lo + 1] if ty.is_signed else [hi // 2, 255])
        rest = [rng.randint(lo, hi) for _ in range(max(0, n - len(edge) - 3))] + [rng.randint(-9, 9) % (hi + 1) if
                                                                                  ty.is_unsigned else rng.randint(-9, 9)
                                                                                  for _ in range(3)]
    vals = edge + rest
    from tests.isa.harness import round_to

    return round_to(vals, ty)[:max(n, len(edge))]


def pairs(ty: Type, n: int = 40, seed: int = 1) -> tuple[list, list]:
    """Two equal-length lists: every edge against every edge would be large, so edges against a shuffle."""
    a = values(ty, n, seed)
    b = values(ty, n, seed + 1)
    rng = random.Random(seed)
    rng.shuffle(b)
    return a + a[:12], b + a[:12][::-1]
