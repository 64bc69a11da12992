"""The Array API fft extension (2024.12): NumPy's pocketfft on the host, in the input's precision.

Why not the ISA: its FFT instruction is one 1-d transform of interleaved pairs, so a batched n-d transform
with padding and a norm would be host work around many instructions; pocketfft does all of it in one call,
in float32 for complex64 (NumPy 2 keeps the precision). The dtype rules are the standard's: fft, ifft,
fftn, ifftn take complex arrays and keep their dtype; rfft, rfftn and ihfft take real arrays and give the
complex dtype of the same precision; irfft, irfftn and hfft give the real dtype of the input's precision.
"""

from __future__ import annotations

import numpy as np

from eidos.errors import DTypeError, FFTArgumentError, ShapeError
from eidos.tensor import dtypes as _D
from eidos.tensor import normalize_axes

from . import _host, _t, _wrap, float64

__all__ = ["fft", "ifft", "fftn", "ifftn", "rfft", "irfft", "rfftn", "irfftn", "hfft", "ihfft", "fftfreq",
           "rfftfreq", "fftshift", "ifftshift"]

WHY = "host NumPy pocketfft (fft extension)"
NORMS = ("backward", "ortho", "forward")


def _input(x, name, kind):
    """The input as a NumPy array in the precision the transform runs in; DTypeError for the wrong kind."""
    x = _t(x)
    if kind == "complex" and x.dtype not in _D.COMPLEX:
        hint = "; use rfft/rfftn/ihfft for real input or astype it to complex" if x.dtype in _D.FLOATS else ""
        raise DTypeError(f"fft.{name} needs a complex floating-point array, got {x.dtype}{hint}")
    if kind == "real" and x.dtype not in _D.FLOATS:
        raise DTypeError(f"fft.{name} needs a real floating-point array, got {x.dtype}")
    a = x.numpy()
    if a.dtype in (_D.float16, _D.bfloat16):
        a = a.astype(np.float32)
    return a


def _n(n, name):
    if n is not None and (isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1):
        raise ShapeError(f"fft.{name}: n must be a positive int or None, got {n!r}")


def _norm(norm, name):
    if norm not in NORMS:
        raise FFTArgumentError(f"fft.{name}: norm must be one of {', '.join(NORMS)}, got {norm!r}")


def _axis(a, axis, name):
    if a.ndim == 0:
        raise ShapeError(f"fft.{name} needs an array of at least one dimension, got a 0-d array")
    (ax,) = normalize_axes(axis, a.ndim, f"fft.{name}")
    return ax


def _run(np_fn, name, a, **kw):
    try:
        return np_fn(a, **kw)
    except ValueError as e:  # pocketfft's own check (an empty axis): name the shape
        raise ShapeError(f"fft.{name} of an array of shape {a.shape} ({', '.join(f'{k}={v}' for k, v in kw.items())})"
                         f": {e}") from e


def _one(np_fn, kind, out_of):
    def f(x, /, *, n=None, axis=-1, norm="backward"):
        name = np_fn.__name__
        a = _input(x, name, kind)
        _n(n, name)
        _norm(norm, name)
        ax = _axis(a, axis, name)
        if name in ("irfft", "hfft") and n is None and a.shape[ax] < 2:
            raise ShapeError(f"fft.{name}: an axis of length {a.shape[ax]} gives no output; pass n")
        return _wrap(_run(np_fn, name, a, n=n, axis=ax, norm=norm).astype(out_of(a.dtype), copy=False), WHY)
    f.__name__ = f.__qualname__ = np_fn.__name__
    f.__doc__ = f"numpy.fft.{np_fn.__name__} with the Array API's dtypes (complex64 stays complex64)."
    return f


def _many(np_fn, kind, out_of):
    def f(x, /, *, s=None, axes=None, norm="backward"):
        name = np_fn.__name__
        a = _input(x, name, kind)
        _norm(norm, name)
        if a.ndim == 0:
            raise ShapeError(f"fft.{name} needs an array of at least one dimension, got a 0-d array")
        if axes is None:
            axes = tuple(range(a.ndim)) if s is None else tuple(range(a.ndim - len(s), a.ndim))
        axes = [normalize_axes(v, a.ndim, f"fft.{name}")[0] for v in axes]
        if len(set(axes)) != len(axes):
            raise ShapeError(f"fft.{name}: axes {tuple(axes)} repeat an axis")
        if s is not None:
            if len(s) != len(axes):
                raise ShapeError(f"fft.{name}: s {tuple(s)} and axes {tuple(axes)} differ in length")
            s = list(s)
            for i, (v, ax) in enumerate(zip(s, axes)):  # -1: the whole axis (the standard)
                if v == -1:
                    last = name == "irfftn" and i == len(s) - 1
                    s[i] = 2 * (a.shape[ax] - 1) if last else a.shape[ax]
                else:
                    _n(v, name)
        if name == "irfftn" and s is None and a.shape[axes[-1]] < 2:
            raise ShapeError(f"fft.irfftn: an axis of length {a.shape[axes[-1]]} gives no output; pass s")
        return _wrap(_run(np_fn, name, a, s=s, axes=axes, norm=norm).astype(out_of(a.dtype), copy=False), WHY)
    f.__name__ = f.__qualname__ = np_fn.__name__
    f.__doc__ = f"numpy.fft.{np_fn.__name__} with the Array API's dtypes and s = -1 for a whole axis."
    return f


def _same(dt):
    return dt


def _to_complex(dt):
    return _D.COMPLEX_OF[np.dtype(dt)]


def _to_real(dt):
    return _D.REAL_OF[np.dtype(dt)]


fft = _one(np.fft.fft, "complex", _same)
ifft = _one(np.fft.ifft, "complex", _same)
rfft = _one(np.fft.rfft, "real", _to_complex)
irfft = _one(np.fft.irfft, "complex", _to_real)
hfft = _one(np.fft.hfft, "complex", _to_real)
ihfft = _one(np.fft.ihfft, "real", _to_complex)
fftn = _many(np.fft.fftn, "complex", _same)
ifftn = _many(np.fft.ifftn, "complex", _same)
rfftn = _many(np.fft.rfftn, "real", _to_complex)
irfftn = _many(np.fft.irfftn, "complex", _to_real)


def _freq_dtype(dtype):
    dt = _D.as_dtype(dtype) if dtype is not None else float64
    if dt not in _D.FLOATS:
        raise DTypeError(f"fftfreq/rfftfreq give a real floating-point array, not {dt}")
    return dt


def fftfreq(n, /, *, d=1.0, dtype=None, device=None):
    _n(n, "fftfreq")
    return _wrap(np.fft.fftfreq(n, d).astype(_freq_dtype(dtype)), WHY)


def rfftfreq(n, /, *, d=1.0, dtype=None, device=None):
    _n(n, "rfftfreq")
    return _wrap(np.fft.rfftfreq(n, d).astype(_freq_dtype(dtype)), WHY)


def fftshift(x, /, *, axes=None):
    return _host(np.fft.fftshift, _t(x), axes=axes)


def ifftshift(x, /, *, axes=None):
    return _host(np.fft.ifftshift, _t(x), axes=axes)
