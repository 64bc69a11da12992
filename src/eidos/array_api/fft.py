"""The Array API fft extension, partly: eidos tensors have no complex dtype, so the transforms
(fft, ifft, fftn, ifftn, rfft, irfft, rfftn, irfftn, hfft, ihfft) are not provided; the real
helpers are (NumPy on the host)."""

from __future__ import annotations

import numpy as np

from . import _host, _t, _wrap, float64


def fftfreq(n, /, *, d=1.0, dtype=None, device=None):
    return _wrap(np.fft.fftfreq(n, d).astype(dtype or float64))


def rfftfreq(n, /, *, d=1.0, dtype=None, device=None):
    return _wrap(np.fft.rfftfreq(n, d).astype(dtype or float64))


def fftshift(x, /, *, axes=None):
    return _host(np.fft.fftshift, _t(x), axes=axes)


def ifftshift(x, /, *, axes=None):
    return _host(np.fft.ifftshift, _t(x), axes=axes)
