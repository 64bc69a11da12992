"""Shapes and axes: broadcasting and axis arguments checked once, with eidos's errors."""

from __future__ import annotations

import numpy as np

from eidos.errors import AxisError, ShapeError

__all__ = ["broadcast_shapes", "normalize_axes"]


def broadcast_shapes(*shapes, what: str = "operands") -> tuple:
    """The shape that `shapes` broadcast to (NumPy's rules); ShapeError names them when they do not.

    >>> ei.tensor.broadcast_shapes((3, 1), (1, 4))
    (3, 4)
    """
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise ShapeError(f"shapes {' and '.join(str(tuple(s)) for s in shapes)} do not broadcast ({what})") from None


def normalize_axes(axis, ndim: int, what: str) -> tuple:
    """`axis` (None: all, an int or a tuple of ints, negative from the end) as sorted non-negative axes of a
    tensor of `ndim` dimensions; AxisError, naming `what`, for one out of range or repeated.

    >>> ei.tensor.normalize_axes(-1, 3, "sum"), ei.tensor.normalize_axes(None, 2, "sum")
    ((2,), (0, 1))
    """
    if axis is None:
        return tuple(range(ndim))
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    out = []
    for a in axes:
        if isinstance(a, bool) or not isinstance(a, (int, np.integer)):
            raise AxisError(f"{what}: axis must be an int or a tuple of ints, got {a!r}")
        if not -ndim <= a < ndim if ndim else a not in (0, -1):
            raise AxisError(f"{what}: axis {a} is out of range for a tensor of {ndim} dimension(s)")
        a = int(a) % max(ndim, 1)
        if a in out:
            raise AxisError(f"{what}: axis {a} repeated")
        out.append(a)
    return tuple(sorted(out))
