"""Shared set-up for the tests of ISA programs across devices: two gloo ranks for the whole run (spawned once,
on first use; closed at the end), and the inputs every rank and the driver regenerate from a seed."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from eidos.isa import Type

_ranks: list = []

INT_TYPES = (Type.I8, Type.U8, Type.I16, Type.U16, Type.I32, Type.U32, Type.I64, Type.U64)
FLOAT_TYPES = (Type.F16, Type.BF16, Type.F32, Type.F64)


def gloo_ranks():
    """Two ranks joined by gloo (processes of this machine), made once for the run."""
    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed (pip install 'eidos[gpu]'): no torch.distributed")
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_gloo_available()):
        pytest.skip("this torch has no torch.distributed with gloo")
    if not _ranks:
        from eidos.isa.distributed import Ranks

        _ranks.append(Ranks(2, "gloo"))
    return _ranks[0]


def close() -> None:
    while _ranks:
        _ranks.pop().close()


def values(seed: int, rank: int, n: int, ty: Type) -> np.ndarray:
    """n values of ty for one rank: the full range of integers (so sums and products wrap), and for floats
    normal values with NaN, infinities, -0.0 and 0.0 placed where ranks differ in them."""
    rng = np.random.default_rng([seed, rank, n, list(Type).index(ty)])
    if ty.is_integer:
        info = np.iinfo(ty.np_dtype)
        return rng.integers(info.min, info.max, n, dtype=ty.np_dtype, endpoint=True)
    x = rng.normal(0, 4, n)
    special = [np.nan, np.inf, -np.inf, -0.0, 0.0, 1e30]
    for i in range(min(n, 12)):
        if (i + rank) % 2 == 0 and i % 3 != 2:
            x[i] = special[(i // 2 + rank) % len(special)]
    with np.errstate(over="ignore"):   # 1e30 is an infinity in F16
        return x.astype(np.float32).astype(ty.np_dtype) if ty is Type.BF16 else x.astype(ty.np_dtype)


def same(got: np.ndarray, want: np.ndarray) -> None:
    """Equal element for element, NaN equal to NaN, -0.0 told from 0.0."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    if want.dtype.kind in "iu":
        np.testing.assert_array_equal(got, want)
        return
    g, w = got.astype(np.float64), want.astype(np.float64)
    np.testing.assert_array_equal(g, w)
    np.testing.assert_array_equal(np.signbit(g) & (g == 0), np.signbit(w) & (w == 0))
