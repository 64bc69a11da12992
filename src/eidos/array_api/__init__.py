"""The Python Array API standard (2024.12) over eidos.Tensor: `Tensor.__array_namespace__()` returns this.

What runs where (docs/tensor.md has the table):
- ISA programs (lazy, fused): arithmetic, comparison, logical and bitwise operators, the element-wise
  functions the ISA has (abs, sqrt, exp, log, sin, cos, tan, tanh, atan2, floor, ceil, round, trunc,
  sign, square, clip, where, maximum, minimum, pow, ...), log2/log10 (as log times a constant),
  reductions (sum, prod, min, max, mean, var, std, argmin, argmax, all, any), vecdot, matmul and
  tensordot (GEMM), and linalg's matmul/vecdot/tensordot/outer/vector_norm.
- NumPy on the host (the ISA has no instruction for them): the other transcendentals (acos, asin, atan,
  their hyperbolic forms, cosh, sinh, expm1, log1p, logaddexp, hypot, copysign, signbit), sorting,
  searching (nonzero, searchsorted), sets (unique_*), cumulative_sum/cumulative_prod, diff,
  take_along_axis, and linalg decompositions and solvers. Layout (reshape, flip, roll, take, ...) is
  NumPy on the host as for Tensor.
- complex64 and complex128: every operation on them runs as NumPy on the host, lazily (see
  eidos/tensor/complex.py for why); the fft extension is NumPy's pocketfft on the host.
"""

from __future__ import annotations

import builtins
import math
from collections import namedtuple

import ml_dtypes
import numpy as np

import eidos.tensor as _T
from eidos.errors import DTypeError, ShapeError
from eidos.tensor import Tensor
from eidos.tensor import dtypes as _D

__array_api_version__ = "2024.12"

bool = _D.bool_  # noqa: A001
int8, int16, int32, int64 = _D.int8, _D.int16, _D.int32, _D.int64
uint8, uint16, uint32, uint64 = _D.uint8, _D.uint16, _D.uint32, _D.uint64
float32, float64 = _D.float32, _D.float64
complex64, complex128 = _D.complex64, _D.complex128
float16, bfloat16 = _D.float16, _D.bfloat16   # extensions beyond the standard

e, pi, inf, nan = math.e, math.pi, math.inf, math.nan
newaxis = None

_NUMERIC = (int8, int16, int32, int64, uint8, uint16, uint32, uint64, float32, float64, complex64, complex128)


# ---- helpers -----------------------------------------------------------------------------------

def _t(x) -> Tensor:
    return x if isinstance(x, Tensor) else _T(x)


def _host(fn, *xs, **kw) -> Tensor:
    """Run a NumPy function on realized inputs (operations the ISA does not express)."""
    arrays = [x.numpy() if isinstance(x, Tensor) else x for x in xs]
    with np.errstate(all="ignore"):
        out = fn(*arrays, **kw)
    return _wrap(out, inputs=arrays)


def _wrap(out, why="host NumPy (no ISA instruction for it)", inputs=()):
    """The result as tensors; a view of an input (np.flip, np.moveaxis, ...) is copied: results are values."""
    if isinstance(out, tuple):
        return tuple(_wrap(o, why, inputs) for o in out)
    if isinstance(out, np.ndarray) and builtins.any(isinstance(a, np.ndarray) and np.may_share_memory(out, a)
                                                    for a in inputs):
        out = out.copy()
    return _T.host_result(out, why)


def _float_only(fn, name):
    def f(x, /):
        x = _t(x)
        if x.dtype not in _D.INEXACT:
            raise DTypeError(f"{name} needs a floating-point array, got {x.dtype}")
        return fn(x)
    f.__name__ = name
    return f


# ---- data type functions -------------------------------------------------------------------------

def _real_only(x, name):
    if x.dtype in _D.COMPLEX:
        raise DTypeError(f"{name} takes real arrays, got {x.dtype}")
    return x


def astype(x, dtype, /, *, copy=True, device=None):
    x = _t(x)
    out = _T.astype(x, dtype)
    if out is x and copy:
        out = _T.from_dlpack(x, copy=True)
    return _on(out, device)


def can_cast(from_, to, /) -> builtins.bool:
    f = from_.dtype if isinstance(from_, Tensor) else _D.as_dtype(from_)
    return builtins.bool(np.can_cast(f, _D.as_dtype(to)))


class _finfo(namedtuple("finfo_object", "bits eps max min smallest_normal dtype")):
    pass


def finfo(type, /):
    dt = type.dtype if isinstance(type, Tensor) else _D.as_dtype(type)
    dt = _D.REAL_OF.get(dt, dt)  # a complex dtype: its components' floating-point type (the standard)
    fi = ml_dtypes.finfo(dt) if dt == _D.bfloat16 else np.finfo(dt)
    return _finfo(fi.bits, float(fi.eps), float(fi.max), float(fi.min), float(fi.smallest_normal), dt)


def iinfo(type, /):
    dt = type.dtype if isinstance(type, Tensor) else _D.as_dtype(type)
    return np.iinfo(dt)


def isdtype(dtype, kind) -> builtins.bool:
    if isinstance(kind, tuple):
        return builtins.any(isdtype(dtype, k) for k in kind)
    if not isinstance(kind, str):
        return dtype == kind
    return {"bool": dtype == bool, "signed integer": dtype in _D.SIGNED, "unsigned integer": dtype in _D.UNSIGNED,
            "integral": dtype in _D.INTEGERS, "real floating": dtype in _D.FLOATS,
            "complex floating": dtype in _D.COMPLEX,
            "numeric": dtype in _D.INTEGERS or dtype in _D.INEXACT}[kind]


def result_type(*arrays_and_dtypes):
    out = None
    scalars = []
    for a in arrays_and_dtypes:
        if isinstance(a, (builtins.bool, int, float, complex)):
            scalars.append(a)
            continue
        d = a.dtype if isinstance(a, Tensor) else _D.as_dtype(a)
        out = d if out is None else _D.promote(out, d)
    if out is None:
        raise TypeError("result_type needs at least one array or dtype")
    for s in scalars:
        out = _D.scalar_dtype(s, out)
    return out


# ---- creation -------------------------------------------------------------------------------------

def asarray(obj, /, *, dtype=None, device=None, copy=None):
    if isinstance(obj, Tensor):
        out = obj if dtype is None else _T.astype(obj, dtype)
        if copy:
            out = _T.from_dlpack(out, copy=True)
        return _on(out, device)
    if dtype is None and isinstance(obj, (builtins.bool, int, float, complex)) or isinstance(obj, (list, tuple)):
        a = np.array(obj, dtype=_D.as_dtype(dtype) if dtype is not None else None)
    else:
        a = np.array(obj, copy=True) if copy else np.asarray(obj)
        if dtype is not None:
            a = a.astype(_D.as_dtype(dtype), copy=False)
    return _T(a, dtype=dtype, device=device, copy=False)  # copy=None: the standard's "reuse memory if possible"


def _on(t, device):
    """t on `device` (None: where it is): creation functions make host data, then move it once."""
    return t if device is None else t.to(device)


def _device_of(x, device):
    return device if device is not None else x.device


def _dt(dtype, default=float64):
    return _D.as_dtype(dtype) if dtype is not None else default


def arange(start, /, stop=None, step=1, *, dtype=None, device=None):
    if stop is None:
        start, stop = 0, start
    default = int64 if builtins.all(isinstance(v, int) for v in (start, stop, step)) else float64
    return _on(Tensor(np.arange(start, stop, step, dtype=_dt(dtype, default))), device)


def empty(shape, *, dtype=None, device=None):
    return _on(Tensor(np.empty(shape, dtype=_dt(dtype))), device)


def empty_like(x, /, *, dtype=None, device=None):
    return _on(Tensor(np.empty(x.shape, dtype=_dt(dtype, x.dtype))), _device_of(x, device))


def zeros(shape, *, dtype=None, device=None):
    return _on(Tensor(np.zeros(shape, dtype=_dt(dtype))), device)


def zeros_like(x, /, *, dtype=None, device=None):
    return _on(Tensor(np.zeros(x.shape, dtype=_dt(dtype, x.dtype))), _device_of(x, device))


def ones(shape, *, dtype=None, device=None):
    return _on(Tensor(np.ones(shape, dtype=_dt(dtype))), device)


def ones_like(x, /, *, dtype=None, device=None):
    return _on(Tensor(np.ones(x.shape, dtype=_dt(dtype, x.dtype))), _device_of(x, device))


def _scalar_default(v):
    """The default dtype of a Python scalar (bool, int64, float64, complex128)."""
    if isinstance(v, builtins.bool):
        return bool
    return int64 if isinstance(v, int) else complex128 if isinstance(v, complex) else float64


def full(shape, fill_value, *, dtype=None, device=None):
    default = _scalar_default(fill_value)
    return _on(Tensor(np.full(shape, fill_value, dtype=_dt(dtype, default))), device)


def full_like(x, /, fill_value, *, dtype=None, device=None):
    return _on(Tensor(np.full(x.shape, fill_value, dtype=_dt(dtype, x.dtype))), _device_of(x, device))


def eye(n_rows, n_cols=None, /, *, k=0, dtype=None, device=None):
    return _on(Tensor(np.eye(n_rows, n_cols, k=k, dtype=_dt(dtype))), device)


def linspace(start, stop, /, num, *, dtype=None, device=None, endpoint=True):
    default = complex128 if isinstance(start, complex) or isinstance(stop, complex) else float64
    return _on(Tensor(np.linspace(start, stop, num, endpoint=endpoint, dtype=_dt(dtype, default))), device)


def meshgrid(*arrays, indexing="xy"):
    return [Tensor(np.ascontiguousarray(a)) for a in np.meshgrid(*[_t(x).numpy() for x in arrays], indexing=indexing)]


def tril(x, /, *, k=0):
    return _host(np.tril, _t(x), k=k)


def triu(x, /, *, k=0):
    return _host(np.triu, _t(x), k=k)


def from_dlpack(x, /, *, device=None, copy=None):
    return _T.from_dlpack(x, device=device, copy=copy)


# ---- element-wise: ISA --------------------------------------------------------------------------

abs = _T.abs  # noqa: A001 (complex: a real result, as the standard asks)
add, subtract, multiply, divide = _T.add, _T.subtract, _T.multiply, _T.divide
floor_divide, remainder, pow = _T.floor_divide, _T.remainder, _T.pow  # noqa: A001
equal, not_equal, less, less_equal, greater, greater_equal = (_T.equal, _T.not_equal, _T.less, _T.less_equal,
                                                              _T.greater, _T.greater_equal)
logical_and, logical_or, logical_xor, logical_not = _T.logical_and, _T.logical_or, _T.logical_xor, _T.logical_not
maximum, minimum, where, clip = _T.maximum, _T.minimum, _T.where, _T.clip
negative, sign, square = _T.negative, _T.sign, _T.square
isnan, isinf, isfinite = _T.isnan, _T.isinf, _T.isfinite
floor, ceil, trunc = _T.floor, _T.ceil, _T.trunc
sqrt = _float_only(_T.sqrt, "sqrt")
exp = _float_only(_T.exp, "exp")
log = _float_only(_T.log, "log")
sin = _float_only(_T.sin, "sin")
cos = _float_only(_T.cos, "cos")
tan = _float_only(_T.tan, "tan")
tanh = _float_only(_T.tanh, "tanh")
atan2 = _T.atan2


def round(x, /):  # noqa: A001
    return _T.round(_t(x))


def positive(x, /):
    return _t(x)


def log2(x, /):
    x = _t(x)
    return _float_only(_T.log, "log2")(x) * (1 / math.log(2))


def log10(x, /):
    x = _t(x)
    return _float_only(_T.log, "log10")(x) * (1 / math.log(10))


bitwise_and, bitwise_or, bitwise_xor = _T.bitwise_and, _T.bitwise_or, _T.bitwise_xor
bitwise_left_shift, bitwise_right_shift, bitwise_invert = (_T.bitwise_left_shift, _T.bitwise_right_shift,
                                                           _T.bitwise_invert)
conj, real = _T.conj, _T.real


def imag(x, /):
    x = _t(x)
    return _T.imag(x) if x.dtype in _D.COMPLEX else zeros_like(x)


# ---- element-wise: NumPy on the host -------------------------------------------------------------

acos, acosh, asin, asinh, atan, atanh = _T.acos, _T.acosh, _T.asin, _T.asinh, _T.atan, _T.atanh
cosh, sinh, expm1, log1p = _T.cosh, _T.sinh, _T.expm1, _T.log1p
logaddexp, hypot, copysign, nextafter = _T.logaddexp, _T.hypot, _T.copysign, _T.nextafter


def signbit(x, /):
    x = _real_only(_t(x), "signbit")
    return _host(np.signbit, x.astype(float64) if x.dtype in (bfloat16,) else x)


# ---- reductions and statistics -----------------------------------------------------------------------

def sum(x, /, *, axis=None, dtype=None, keepdims=False):  # noqa: A001
    return _T.sum(_t(x), axis, keepdims, dtype)


def prod(x, /, *, axis=None, dtype=None, keepdims=False):
    return _T.prod(_t(x), axis, keepdims, dtype)


def max(x, /, *, axis=None, keepdims=False):  # noqa: A001
    return _T.max(_t(x), axis, keepdims)


def min(x, /, *, axis=None, keepdims=False):  # noqa: A001
    return _T.min(_t(x), axis, keepdims)


def mean(x, /, *, axis=None, keepdims=False):
    x = _t(x)
    if x.dtype not in _D.INEXACT:
        raise DTypeError(f"mean needs a floating-point array, got {x.dtype}")
    return _T.mean(x, axis, keepdims)


def var(x, /, *, axis=None, correction=0.0, keepdims=False):
    x = _t(x)
    if x.dtype not in _D.FLOATS:
        raise DTypeError(f"var needs a real floating-point array, got {x.dtype}")
    return _T.var(x, axis, keepdims, correction)


def std(x, /, *, axis=None, correction=0.0, keepdims=False):
    x = _t(x)
    if x.dtype not in _D.FLOATS:
        raise DTypeError(f"std needs a real floating-point array, got {x.dtype}")
    return _T.std(x, axis, keepdims, correction)


def all(x, /, *, axis=None, keepdims=False):  # noqa: A001
    return _T.all(_t(x), axis, keepdims)


def any(x, /, *, axis=None, keepdims=False):  # noqa: A001
    return _T.any(_t(x), axis, keepdims)


def argmax(x, /, *, axis=None, keepdims=False):
    return _T.argmax(_t(x), axis, keepdims)


def argmin(x, /, *, axis=None, keepdims=False):
    return _T.argmin(_t(x), axis, keepdims)


def _cumulative(np_fn, start, x, axis, dtype, include_initial, name):
    x = _t(x)
    if axis is None:
        if x.ndim > 1:
            raise ShapeError(f"{name}: axis is required for arrays of more than one dimension, got shape {x.shape}")
        axis = 0
    dt = _T.sum_dtype(x.dtype, dtype)
    a = np_fn(x.numpy(), axis=axis, dtype=dt)
    if include_initial:
        shape = list(a.shape)
        shape[axis] = 1
        a = np.concatenate([np.full(shape, start, dt), a], axis=axis)
    return _wrap(a)


def cumulative_sum(x, /, *, axis=None, dtype=None, include_initial=False):
    return _cumulative(np.cumsum, 0, x, axis, dtype, include_initial, "cumulative_sum")


def cumulative_prod(x, /, *, axis=None, dtype=None, include_initial=False):
    return _cumulative(np.cumprod, 1, x, axis, dtype, include_initial, "cumulative_prod")


# ---- searching, sorting, sets ----------------------------------------------------------------------------

def nonzero(x, /):
    x = _t(x)
    if x.ndim == 0:
        raise ValueError("nonzero of a 0-d array")
    return tuple(_wrap(i.astype(np.int64)) for i in np.nonzero(x.numpy()))


def searchsorted(x1, x2, /, *, side="left", sorter=None):
    s = _t(sorter).numpy() if sorter is not None else None
    return _wrap(np.searchsorted(_t(x1).numpy(), _t(x2).numpy(), side=side, sorter=s).astype(np.int64))


def sort(x, /, *, axis=-1, descending=False, stable=True):
    a = _t(x).numpy()
    if descending:
        return _wrap(np.flip(np.sort(np.flip(a, axis=axis), axis=axis, kind="stable"), axis=axis))
    return _wrap(np.sort(a, axis=axis, kind="stable"))


def argsort(x, /, *, axis=-1, descending=False, stable=True):
    a = _t(x).numpy()
    if descending:
        n = a.shape[axis]
        idx = np.flip(np.argsort(np.flip(a, axis=axis), axis=axis, kind="stable"), axis=axis)
        return _wrap((n - 1 - idx).astype(np.int64))
    return _wrap(np.argsort(a, axis=axis, kind="stable").astype(np.int64))


UniqueAllResult = namedtuple("UniqueAllResult", "values indices inverse_indices counts")
UniqueCountsResult = namedtuple("UniqueCountsResult", "values counts")
UniqueInverseResult = namedtuple("UniqueInverseResult", "values inverse_indices")


def unique_all(x, /):
    a = _t(x).numpy()
    v, i, inv, c = np.unique(a.reshape(-1), return_index=True, return_inverse=True, return_counts=True,
                             equal_nan=False)
    return UniqueAllResult(_wrap(v), _wrap(i.astype(np.int64)), _wrap(inv.reshape(a.shape).astype(np.int64)),
                           _wrap(c.astype(np.int64)))


def unique_counts(x, /):
    a = _t(x).numpy()
    v, c = np.unique(a.reshape(-1), return_counts=True, equal_nan=False)
    return UniqueCountsResult(_wrap(v), _wrap(c.astype(np.int64)))


def unique_inverse(x, /):
    a = _t(x).numpy()
    v, inv = np.unique(a.reshape(-1), return_inverse=True, equal_nan=False)
    return UniqueInverseResult(_wrap(v), _wrap(inv.reshape(a.shape).astype(np.int64)))


def unique_values(x, /):
    return _wrap(np.unique(_t(x).numpy().reshape(-1), equal_nan=False))


# ---- manipulation -------------------------------------------------------------------------------------------

def broadcast_arrays(*arrays):
    shape = _T.broadcast_shapes(*[_t(a).shape for a in arrays], what="broadcast_arrays")
    return [_T.expand(_t(a), shape) for a in arrays]


def broadcast_to(x, /, shape):
    return _T.expand(_t(x), tuple(shape))


def concat(arrays, /, *, axis=0):
    return _T.concat(list(arrays), axis)


def stack(arrays, /, *, axis=0):
    return _T.stack(list(arrays), axis)


def expand_dims(x, /, axis=0):
    return _T.expand_dims(_t(x), axis)


def squeeze(x, /, axis):
    return _T.squeeze(_t(x), axis)


def reshape(x, /, shape, *, copy=None):
    return _T.reshape(_t(x), tuple(shape))


def permute_dims(x, /, axes):
    return _T.transpose(_t(x), tuple(axes))


def flip(x, /, *, axis=None):
    return _host(np.flip, _t(x), axis=axis)


def roll(x, /, shift, *, axis=None):
    return _host(np.roll, _t(x), shift, axis=axis)


def moveaxis(x, source, destination, /):
    return _host(lambda a: np.ascontiguousarray(np.moveaxis(a, source, destination)), _t(x))


def repeat(x, repeats, /, *, axis=None):
    r = repeats.numpy() if isinstance(repeats, Tensor) else repeats
    return _host(np.repeat, _t(x), r, axis=axis)


def tile(x, repetitions, /):
    return _host(np.tile, _t(x), tuple(repetitions))


def unstack(x, /, *, axis=0):
    x = _t(x)
    return tuple(x[(slice(None),) * (axis % x.ndim) + (i,)] for i in range(x.shape[axis]))


def take(x, indices, /, *, axis=None):
    return _host(np.take, _t(x), _t(indices), axis=axis)


# ---- linear algebra (main namespace) --------------------------------------------------------------------------

def matmul(x1, x2, /):
    return _T.matmul(_t(x1), _t(x2))


def matrix_transpose(x, /):
    return _t(x).mT


def tensordot(x1, x2, /, *, axes=2):
    """GEMM over the contracted axes (the free axes are reshaped around it on the host)."""
    a, b = _t(x1), _t(x2)
    if isinstance(axes, int):
        ax_a = list(range(a.ndim - axes, a.ndim))
        ax_b = list(range(axes))
    else:
        ax_a, ax_b = [list(v) if isinstance(v, (list, tuple)) else [v] for v in axes]
    ax_a = [i % a.ndim for i in ax_a]
    ax_b = [i % b.ndim for i in ax_b]
    free_a = [i for i in range(a.ndim) if i not in ax_a]
    free_b = [i for i in range(b.ndim) if i not in ax_b]
    k = math.prod(a.shape[i] for i in ax_a)
    A = _T.reshape(_T.transpose(a, free_a + ax_a), (math.prod(a.shape[i] for i in free_a), k))
    B = _T.reshape(_T.transpose(b, ax_b + free_b), (k, math.prod(b.shape[i] for i in free_b)))
    out = _T.matmul(A, B)
    return _T.reshape(out, tuple(a.shape[i] for i in free_a) + tuple(b.shape[i] for i in free_b))


def vecdot(x1, x2, /, *, axis=-1):
    """sum(conj(x1) * x2) over `axis` in the operands' promoted dtype (the standard conjugates the first
    operand); the other axes broadcast, the contracted one does not (its lengths must be equal)."""
    a, b = _t(x1), _t(x2)
    n = builtins.max(a.ndim, b.ndim)
    (ax,) = _T.normalize_axes(axis, n, "vecdot")
    la, lb = (t.shape[ax - n + t.ndim] if ax - n + t.ndim >= 0 else None for t in (a, b))
    if la is None or la != lb:
        raise ShapeError(f"vecdot: the vectors along axis {axis} of shapes {a.shape} and {b.shape} differ in "
                         "length (the contracted axis does not broadcast)")
    dt = _D.promote(a.dtype, b.dtype)
    if a.dtype in _D.COMPLEX:
        a = conj(a)
    return _T.sum(a * b, axis=ax - n, dtype=dt)


# ---- 2024.12 additions (beyond 2023.12) ----------------------------------------------------------------------

reciprocal = _T.reciprocal


def count_nonzero(x, /, *, axis=None, keepdims=False):
    return _T.sum(_t(x) != 0, axis, keepdims)


def diff(x, /, *, axis=-1, n=1, prepend=None, append=None):
    kw = {k: _t(v).numpy() for k, v in (("prepend", prepend), ("append", append)) if v is not None}
    return _host(np.diff, _t(x), n=n, axis=axis, **kw)


def isin(x1, x2, /, *, invert=False):
    return _host(np.isin, _t(x1), _t(x2), invert=invert)


def take_along_axis(x, indices, /, *, axis=-1):
    return _host(np.take_along_axis, _t(x), _t(indices), axis=axis)


def broadcast_shapes(*shapes):
    return _T.broadcast_shapes(*shapes, what="broadcast_shapes")


def __array_namespace_info__():
    return _Info()


class _Info:
    def capabilities(self):
        return {"boolean indexing": True, "data-dependent shapes": True, "max dimensions": 64}

    def default_device(self):
        return "cpu"

    def devices(self):
        from eidos.tensor.backend import get_backend

        return ["cpu", "gpu"] if get_backend("gpu").is_available() else ["cpu"]

    def default_dtypes(self, *, device=None):
        return {"real floating": float64, "complex floating": complex128, "integral": int64, "indexing": int64}

    def dtypes(self, *, device=None, kind=None):
        all_ = {"bool": bool, **{str(d): d for d in _NUMERIC}}
        if device == "gpu":  # complex tensors stay on the host: the ISA has no complex arithmetic (docs/tensor.md)
            all_ = {n: d for n, d in all_.items() if not isdtype(d, "complex floating")}
        if kind is None:
            return all_
        return {n: d for n, d in all_.items() if isdtype(d, kind)}


from . import fft, linalg  # noqa: E402
