"""The Array API linalg extension. matmul, tensordot, vecdot, outer, matrix_transpose, vector_norm,
diagonal and trace build ISA programs (GEMM, fused maps and reductions); decompositions and solvers
(cholesky, det, eigh, eigvalsh, inv, lstsq-free solve, pinv, qr, slogdet, svd, svdvals,
matrix_rank, matrix_power, matrix_norm, cross) run on NumPy on the host. Complex input takes the host
path throughout (eidos/tensor/complex.py); norms of complex arrays are real, vecdot conjugates x1."""

from __future__ import annotations

from collections import namedtuple

import numpy as np

import eidos.tensor as _T

from . import _host, _t, _wrap, matmul, matrix_transpose, tensordot, vecdot  # noqa: F401

EighResult = namedtuple("EighResult", "eigenvalues eigenvectors")
QRResult = namedtuple("QRResult", "Q R")
SlogdetResult = namedtuple("SlogdetResult", "sign logabsdet")
SVDResult = namedtuple("SVDResult", "U S Vh")


def outer(x1, x2, /):
    a, b = _t(x1), _t(x2)
    return _T.reshape(a, (a.shape[0], 1)) * _T.reshape(b, (1, b.shape[0]))


def vector_norm(x, /, *, axis=None, keepdims=False, ord=2):
    x = _t(x)
    a = _T.abs(x)
    if ord == 2:
        return _T.sqrt(_T.sum(a * a, axis, keepdims))
    if ord == 1:
        return _T.sum(a, axis, keepdims)
    if ord == float("inf"):
        return _T.max(a, axis, keepdims)
    if ord == -float("inf"):
        return _T.min(a, axis, keepdims)
    if ord == 0:
        return _T.sum(_T.astype(x != 0, a.dtype), axis, keepdims)
    return _T.sum(a ** ord, axis, keepdims) ** (1.0 / ord)


def diagonal(x, /, *, offset=0):
    return _host(lambda a: np.ascontiguousarray(np.diagonal(a, offset, -2, -1)), _t(x))


def trace(x, /, *, offset=0, dtype=None):
    return _T.sum(diagonal(x, offset=offset), axis=-1, dtype=dtype)


def _np(fn):
    def f(x, /, *args, **kw):
        return _host(fn, _t(x), *[(_t(a).numpy() if hasattr(a, "numpy") else a) for a in args], **kw)
    f.__name__ = fn.__name__
    return f


inv = _np(np.linalg.inv)
det = _np(np.linalg.det)


def pinv(x, /, *, rtol=None):
    """The pseudo-inverse; singular values at most rtol times the largest count as zero (the standard's
    default rtol: max(M, N) * eps)."""
    a = _t(x).numpy()
    tol = max(a.shape[-2:]) * np.finfo(a.dtype).eps if rtol is None else _t(rtol).numpy()
    return _wrap(np.linalg.pinv(a, rcond=tol))   # rcond: NumPy 1.26 has no rtol


matrix_power = _np(np.linalg.matrix_power)
svdvals = _np(lambda a: np.linalg.svd(a, compute_uv=False))
eigvalsh = _np(lambda a, *, UPLO="L": np.linalg.eigvalsh(a, UPLO=UPLO))


def cholesky(x, /, *, upper=False):
    """L with x = L L^H, or (upper) U = L^H with x = U^H U: conjugated for complex x."""
    return _host(lambda a: np.conj(np.swapaxes(np.linalg.cholesky(a), -1, -2)) if upper else np.linalg.cholesky(a),
                 _t(x))


def eigh(x, /):
    w, v = np.linalg.eigh(_t(x).numpy())
    return EighResult(_wrap(w), _wrap(v))


def qr(x, /, *, mode="reduced"):
    q, r = np.linalg.qr(_t(x).numpy(), mode=mode)
    return QRResult(_wrap(q), _wrap(r))


def slogdet(x, /):
    s, l = np.linalg.slogdet(_t(x).numpy())
    return SlogdetResult(_wrap(s), _wrap(l))


def svd(x, /, *, full_matrices=True):
    u, s, vh = np.linalg.svd(_t(x).numpy(), full_matrices=full_matrices)
    return SVDResult(_wrap(u), _wrap(s), _wrap(vh))


def solve(x1, x2, /):
    a, b = _t(x1).numpy(), _t(x2).numpy()
    if b.ndim == 1:
        return _wrap(np.linalg.solve(a, b[:, None])[..., 0])
    return _wrap(np.linalg.solve(a, b))


def matrix_rank(x, /, *, rtol=None):
    a = _t(x).numpy()
    s = np.linalg.svd(a, compute_uv=False)
    tol = s.max(axis=-1, keepdims=True) * (max(a.shape[-2:]) * np.finfo(a.dtype).eps if rtol is None else rtol)
    return _wrap((s > tol).sum(axis=-1).astype(np.int64))


def matrix_norm(x, /, *, keepdims=False, ord="fro"):
    return _host(lambda a: np.linalg.norm(a, ord=ord, axis=(-2, -1), keepdims=keepdims), _t(x))


def cross(x1, x2, /, *, axis=-1):
    return _host(lambda a, b: np.cross(a, b, axis=axis), _t(x1), _t(x2))
