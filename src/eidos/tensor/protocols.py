"""NumPy's protocols on tensors: `np.exp(t)`, `np.sum(t)`, `np.concatenate([t, t])` run as eidos operations.

`Tensor.__array_ufunc__` and `Tensor.__array_function__` look the NumPy function up in two tables (UFUNCS,
FUNCTIONS: NumPy's name -> the eidos operation, lazy and fused like any other); the result dtype is NumPy's
(the ufunc's loop, `ufunc.resolve_dtypes`). What the tables lack, or a keyword eidos does not take (`initial=`,
`where=` of a reduction, `order='F'`, ...), runs as NumPy on the realized values: the result is a realized tensor
whose explain() says `host NumPy np.<name> (...)`, on the operands' device. `out=` writes into the tensor (or
array) given, as NumPy; a ufunc's `where=` needs `out=` (NumPy leaves the other elements unset).
"""

from __future__ import annotations

import numpy as np

from eidos.errors import DeviceError, DTypeError, ShapeError

from . import dtypes as D
from . import ops
from .array import Tensor, host_result, tensor

__all__: list = []

# NumPy's ufunc name -> eidos.tensor (ops) function name, or "xp.<name>" for eidos.array_api's.
UFUNCS = {
    "add": "add", "subtract": "subtract", "multiply": "multiply", "divide": "divide", "true_divide": "divide",
    "floor_divide": "floor_divide", "remainder": "remainder", "power": "pow", "negative": "negative",
    "positive": "xp.positive", "absolute": "abs", "sign": "sign", "sqrt": "sqrt", "square": "square",
    "exp": "exp", "log": "log", "log2": "xp.log2", "log10": "xp.log10", "expm1": "expm1", "log1p": "log1p",
    "sin": "sin", "cos": "cos", "tan": "tan", "arcsin": "asin", "arccos": "acos", "arctan": "atan",
    "sinh": "sinh", "cosh": "cosh", "tanh": "tanh", "arcsinh": "asinh", "arccosh": "acosh", "arctanh": "atanh",
    "arctan2": "atan2", "hypot": "hypot", "copysign": "copysign", "nextafter": "nextafter",
    "logaddexp": "logaddexp", "maximum": "maximum", "minimum": "minimum", "equal": "equal",
    "not_equal": "not_equal", "less": "less", "less_equal": "less_equal", "greater": "greater",
    "greater_equal": "greater_equal", "logical_and": "logical_and", "logical_or": "logical_or",
    "logical_xor": "logical_xor", "logical_not": "logical_not", "bitwise_and": "bitwise_and",
    "bitwise_or": "bitwise_or", "bitwise_xor": "bitwise_xor", "invert": "bitwise_invert",
    "left_shift": "bitwise_left_shift", "right_shift": "bitwise_right_shift", "isnan": "isnan", "isinf": "isinf",
    "isfinite": "isfinite", "floor": "floor", "ceil": "ceil", "trunc": "trunc", "rint": "round",
    "conjugate": "conj", "reciprocal": "reciprocal", "matmul": "matmul", "signbit": "xp.signbit",
}
# ufunc.reduce -> the reduction
REDUCTIONS = {"add": "sum", "multiply": "prod", "maximum": "max", "minimum": "min", "logical_and": "all",
              "logical_or": "any"}
_NO = np._NoValue   # NumPy's "argument not given"


class _Fallback(Exception):
    """Raised inside a table entry: NumPy runs the call instead, for the reason given."""


def _op(name: str):
    if name.startswith("xp."):
        import eidos.array_api as xp

        return getattr(xp, name[3:])
    return getattr(ops, name)


def _is_array(x) -> bool:
    return isinstance(x, (Tensor, np.ndarray))


def _device(values) -> str:
    for v in values:
        if isinstance(v, Tensor) and v.device != "cpu":
            return v.device
        if isinstance(v, (list, tuple)):
            d = _device(v)
            if d != "cpu":
                return d
    return "cpu"


# ---- NumPy on realized values (what the tables lack) ------------------------------------------------

def _to_numpy(x):
    if isinstance(x, Tensor):
        return np.asarray(x)
    if isinstance(x, (list, tuple)):
        return type(x)(_to_numpy(v) for v in x)
    if isinstance(x, dict):
        return {k: _to_numpy(v) for k, v in x.items()}
    return x


def _arrays_in(x, found):
    if isinstance(x, np.ndarray):
        found.append(x)
    elif isinstance(x, (list, tuple)):
        for v in x:
            _arrays_in(v, found)
    elif isinstance(x, dict):
        for v in x.values():
            _arrays_in(v, found)
    return found


def _wrap(out, why: str, device: str, inputs):
    """NumPy's results as realized tensors recording `why` (a view of an input copied: results are values);
    values of a dtype tensors do not have stay NumPy's; scalars that are not NumPy's stay as they are."""
    if isinstance(out, (list, tuple)) and not hasattr(out, "_fields"):
        return type(out)(_wrap(o, why, device, inputs) for o in out)
    if isinstance(out, tuple):   # a named tuple (np.linalg's results, unique_*)
        return type(out)(*(_wrap(o, why, device, inputs) for o in out))
    if not isinstance(out, (np.ndarray, np.generic)):
        return out
    a = np.asarray(out)
    if a.dtype not in D.DTYPES and a.dtype.kind not in "iuc":
        return out
    if isinstance(out, np.ndarray) and any(np.may_share_memory(out, i) for i in inputs):
        a = a.copy()
    t = host_result(a, why)
    return t if device == "cpu" else _back(t, device)


def _back(t: Tensor, device: str) -> Tensor:
    r = t.to(device)
    r._runs[:0] = t._runs
    return r


def _numpy_call(fn, name: str, args, kwargs, reason: str):
    """fn(*args, **kwargs) by NumPy on the values (tensors realized, to host); an out= tensor gets a host copy
    of its values to write (where= keeps the others) and takes the result back."""
    out = kwargs.get("out")
    outs = () if out is None else (out if isinstance(out, tuple) else (out,))
    host_outs = tuple(np.array(o) if isinstance(o, Tensor) else o for o in outs)
    if out is not None:
        kwargs["out"] = host_outs if isinstance(out, tuple) else host_outs[0]
    device = _device(list(args) + list(kwargs.values()))
    nargs, nkw = _to_numpy(args), _to_numpy(kwargs)
    inputs = _arrays_in(nargs, [])
    with np.errstate(all="ignore"):
        r = fn(*nargs, **nkw)
    if out is None:
        why = f"host NumPy np.{name} ({reason})" + ("" if device == "cpu" else
                                                    f"; values copied from {device} and back")
        return _wrap(r, why, device, inputs)
    for o, h in zip(outs, host_outs):
        if isinstance(o, Tensor):
            o[...] = h
            o._runs[-1] = (f"np.{name}(..., out=)", f"host NumPy ({reason}), written into out")
    return _swap(r, host_outs, outs)


def _swap(r, host_outs, outs):
    """NumPy's result with the host copies of out= tensors replaced by the tensors."""
    for h, o in zip(host_outs, outs):
        if r is h:
            return o
    if isinstance(r, tuple):
        return tuple(_swap(x, host_outs, outs) for x in r)
    return r


# ---- out= -------------------------------------------------------------------------------------------

def _write_out(out, result, name: str, casting: str):
    """Write result into out (a tensor, an array, or a tuple of one); out, as NumPy returns it."""
    single = out[0] if isinstance(out, tuple) and len(out) == 1 else out
    if isinstance(single, tuple):
        if not isinstance(result, tuple) or len(result) != len(single):
            raise ShapeError(f"np.{name}: out= has {len(single)} arrays for {name}'s results")
        return tuple(_write_out(o, r, name, casting) if o is not None else r for o, r in zip(single, result))
    r = result if isinstance(result, Tensor) else tensor(result)
    if not np.can_cast(r.dtype, single.dtype, casting):
        raise DTypeError(f"np.{name}: the result is {r.dtype}, which out= of dtype {single.dtype} cannot take by "
                         f"casting={casting!r}; give an out= of dtype {r.dtype} or casting='unsafe'")
    if isinstance(single, Tensor):
        try:
            single[...] = r if r.shape == single.shape else ops.expand(r, single.shape)
        except ShapeError as e:
            raise ShapeError(f"np.{name}: the result of shape {r.shape} does not fit out= of shape {single.shape}") \
                from e
        return single
    if isinstance(single, np.ndarray):
        try:
            np.copyto(single, np.asarray(r), casting="unsafe")
        except ValueError as e:
            raise ShapeError(f"np.{name}: the result of shape {r.shape} does not fit out= of shape {single.shape}") \
                from e
        return single
    raise DTypeError(f"np.{name}: out= must be a tensor or a NumPy array, got {type(single).__name__}")


# ---- __array_ufunc__ --------------------------------------------------------------------------------

def _operand_dtype(x):
    if isinstance(x, (Tensor, np.ndarray, np.generic)):
        return x.dtype
    if isinstance(x, (bool, int, float, complex)):
        return type(x)   # NumPy 2's weak Python scalars
    return np.asarray(x).dtype


def _loop(ufunc, inputs, dtype):
    """The dtypes of NumPy's loop for these operands (inputs..., outputs...); None where NumPy cannot say for a
    bfloat16 operand (eidos's own promotion then stands); a DTypeError where NumPy has no loop for them."""
    dts = tuple(_operand_dtype(x) for x in inputs)
    sig = None if dtype is None else (None,) * ufunc.nin + (dtype,) + (None,) * (ufunc.nout - 1)
    try:
        if sig is None:
            return ufunc.resolve_dtypes(dts + (None,) * ufunc.nout)
        return ufunc.resolve_dtypes(dts + (None,) * ufunc.nout, signature=sig)
    except Exception as e:
        if D.bfloat16 in dts:
            return None
        named = ", ".join(getattr(d, "__name__", str(d)) for d in dts)
        raise DTypeError(f"np.{ufunc.__name__} has no loop for ({named})"
                         + (f" with dtype={dtype}" if dtype is not None else "") + f": {e}") from e


def _in_loop(x, dt):
    """An operand in its loop dtype: tensors cast, NumPy arrays wrapped, NumPy scalars as weak Python scalars
    (the tensors already have the loop's dtype), Python scalars as they are."""
    if isinstance(x, Tensor):
        return x if dt is None or x.dtype == dt or dt not in D.DTYPES else ops.astype(x, dt)
    if isinstance(x, np.generic):
        return x.item() if dt is not None else tensor(x)
    if isinstance(x, (bool, int, float, complex)):
        return x
    t = tensor(x)
    return t if dt is None or t.dtype == dt or dt not in D.DTYPES else ops.astype(t, dt)


_UFUNC_KEYS = {"out", "where", "dtype", "casting", "order", "subok"}


def array_ufunc(ufunc, method: str, inputs, kwargs):
    name = ufunc.__name__
    if method == "at":
        return _ufunc_at(ufunc, inputs, kwargs)
    if method == "reduce" and name in REDUCTIONS:
        return _reduce(ufunc, inputs, dict(kwargs))
    if method != "__call__":
        return _numpy_call(getattr(ufunc, method), f"{name}.{method}", inputs, dict(kwargs),
                           f"eidos has no {name}.{method}")
    target = UFUNCS.get(name)
    extra = set(kwargs) - _UFUNC_KEYS
    if target is None or extra or kwargs.get("subok", True) is not True:
        why = f"eidos has no {name}" if target is None else f"eidos does not take {', '.join(sorted(extra))}"
        return _numpy_call(ufunc, name, inputs, dict(kwargs), why)
    casting = kwargs.get("casting", "same_kind")
    if casting not in ("same_kind", "unsafe"):
        return _numpy_call(ufunc, name, inputs, dict(kwargs), f"casting={casting!r}")
    out, where = kwargs.get("out"), kwargs.get("where", True)
    if where is not True and out is None:
        raise ShapeError(f"np.{name}(..., where=...) without out= leaves the other elements unset (NumPy's "
                         "uninitialized memory); give out= (the values kept where the mask is false)")
    dtype = kwargs.get("dtype")
    loop = _loop(ufunc, inputs, None if dtype is None else np.dtype(dtype))
    operands = [_in_loop(x, loop[i] if loop else None) for i, x in enumerate(inputs)]
    if not any(isinstance(x, Tensor) for x in operands):
        operands[0] = tensor(operands[0])
    try:
        r = _op(target)(*operands)
    except DTypeError as e:   # eidos refuses what NumPy takes (integer reciprocal, ordering complex numbers, ...)
        try:
            return _numpy_call(ufunc, name, inputs, dict(kwargs), f"eidos refused it: {e}")
        except Exception:
            raise e from None
    if loop is not None and loop[-1] in D.DTYPES and r.dtype != loop[-1]:
        r = ops.astype(r, loop[-1])
    if out is None:
        return r
    target_out = out[0] if isinstance(out, tuple) else out
    if where is not True:
        r = ops.where(where if isinstance(where, Tensor) else tensor(where), r, target_out if isinstance(
            target_out, Tensor) else tensor(np.array(target_out)))
    return _write_out(out, r, name, casting)


def _ufunc_at(ufunc, inputs, kwargs):
    """ufunc.at(t, indices, values): unbuffered, in place into t's memory (host tensors)."""
    a, *rest = inputs
    if not isinstance(a, Tensor):
        return ufunc.at(a, *_to_numpy(rest))
    if a.device != "cpu":
        raise DeviceError(f"np.{ufunc.__name__}.at writes a {a.device} tensor in place on the host; .to('cpu') first")
    from .array import _before_write
    from .realization import _realize

    _realize(a)
    _before_write(a)
    if not a._data.flags.writeable:
        a._data = a._data.copy()
    ufunc.at(a._data, *_to_numpy(rest))
    a._runs.append((f"{ufunc.__name__}.at", "host NumPy, in place"))


def _reduce(ufunc, inputs, kw):
    name = ufunc.__name__
    (x,) = inputs
    axis = kw.pop("axis", 0)
    out = kw.pop("out", None)
    dtype = kw.pop("dtype", None)
    keepdims = kw.pop("keepdims", False)
    if kw.get("initial", _NO) is not _NO or kw.get("where", True) is not True or set(kw) - {"initial", "where"}:
        return _numpy_call(ufunc.reduce, f"{name}.reduce", inputs, dict(kw, axis=axis, out=out, dtype=dtype,
                                                                         keepdims=keepdims), "initial=/where=")
    x = x if isinstance(x, Tensor) else tensor(x)
    op = REDUCTIONS[name]
    if dtype is not None:
        x = ops.astype(x, dtype)
    r = _op(op)(x, axis, keepdims)
    return r if out is None else _write_out(out, r, f"{name}.reduce", "unsafe")


# ---- __array_function__ ------------------------------------------------------------------------------

def _given(**kw) -> None:
    """Fall back to NumPy for the keywords given that eidos does not take."""
    bad = [k for k, v in kw.items() if v is not _NO and v is not None]
    if bad:
        raise _Fallback(f"eidos does not take {', '.join(bad)}")


def _t(x):
    return x if isinstance(x, Tensor) else tensor(x)


def _finish(r, out, name):
    return r if out is None else _write_out(out, r, name, "unsafe")


def _sum(a, axis=None, dtype=None, out=None, keepdims=False, initial=_NO, where=_NO):
    _given(initial=initial, where=where)
    return _finish(ops.sum(_t(a), axis, keepdims, dtype), out, "sum")


def _prod(a, axis=None, dtype=None, out=None, keepdims=False, initial=_NO, where=_NO):
    _given(initial=initial, where=where)
    return _finish(ops.prod(_t(a), axis, keepdims, dtype), out, "prod")


def _extreme(op):
    def f(a, axis=None, out=None, keepdims=False, initial=_NO, where=_NO):
        _given(initial=initial, where=where)
        return _finish(getattr(ops, op)(_t(a), axis, keepdims), out, op)
    return f


def _truth(op):
    def f(a, axis=None, out=None, keepdims=False, *, where=_NO):
        _given(where=where)
        return _finish(getattr(ops, op)(_t(a), axis, keepdims), out, op)
    return f


def _arg(op):
    def f(a, axis=None, out=None, *, keepdims=False):
        return _finish(getattr(ops, op)(_t(a), axis, keepdims), out, op)
    return f


def _mean(a, axis=None, dtype=None, out=None, keepdims=False, *, where=_NO):
    _given(where=where)
    x = _t(a)
    if dtype is not None:
        if D.as_dtype(dtype) not in D.INEXACT:
            raise _Fallback(f"dtype={dtype!r}")
        x = ops.astype(x, dtype)
    return _finish(ops.mean(x, axis, keepdims), out, "mean")


def _spread(op):
    def f(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=_NO, mean=_NO, correction=_NO):
        _given(where=where, mean=mean)
        x = _t(a)
        if dtype is not None:
            if D.as_dtype(dtype) not in D.INEXACT:
                raise _Fallback(f"dtype={dtype!r}")
            x = ops.astype(x, dtype)
        c = ddof if correction is _NO else correction
        return _finish(getattr(ops, op)(x, axis, keepdims, c), out, op)
    return f


def _cast_all(arrays, dtype):
    ts = [_t(a) for a in arrays]
    return ts if dtype is None else [ops.astype(t, dtype) for t in ts]


def _concatenate(arrays, axis=0, out=None, *, dtype=None, casting="same_kind"):
    return _finish(ops.concat(_cast_all(arrays, dtype), axis), out, "concatenate")


def _stack(arrays, axis=0, out=None, *, dtype=None, casting="same_kind"):
    return _finish(ops.stack(_cast_all(arrays, dtype), axis), out, "stack")


def _reshape(a, shape=None, order="C", *, newshape=None, copy=None):
    if order != "C":
        raise _Fallback(f"order={order!r}")
    return ops.reshape(_t(a), shape if shape is not None else newshape)


def _ravel(a, order="C"):
    if order not in ("C", "K", "A"):
        raise _Fallback(f"order={order!r}")
    return ops.reshape(_t(a), (-1,))


def _expand_dims(a, axis):
    if not isinstance(axis, (int, np.integer)):
        raise _Fallback("a tuple axis")
    return ops.expand_dims(_t(a), int(axis))


def _where(condition, *xy):
    if len(xy) != 2:
        raise _Fallback("the one-argument form (nonzero)")
    return ops.where(_t(condition), *xy)


def _clip(a, a_min=_NO, a_max=_NO, out=None, *, min=_NO, max=_NO, **kwargs):
    _given(**kwargs)
    lo = a_min if a_min is not _NO else (min if min is not _NO else None)
    hi = a_max if a_max is not _NO else (max if max is not _NO else None)
    return _finish(ops.clip(_t(a), lo, hi), out, "clip")


def _round(a, decimals=0, out=None):
    return _finish(ops.round(_t(a), decimals), out, "round")


def _dot(a, b, out=None):
    a, b = _t(a), _t(b)
    if a.ndim == 0 or b.ndim == 0:
        return _finish(ops.multiply(a, b), out, "dot")
    if a.ndim > 2 or b.ndim > 2:
        raise _Fallback("n-d operands (dot's sum-product is not matmul's batching)")
    return _finish(ops.matmul(a, b), out, "dot")


def _like(kind):
    def f(a, dtype=None, order="K", subok=True, shape=None, *, device=None, **fill):
        import eidos.array_api as xp

        if shape is not None or order not in ("K", "C", "A"):
            raise _Fallback("shape=/order=")
        fn = getattr(xp, kind)
        return fn(_t(a), *fill.values(), dtype=dtype)
    return f


def _full_like(a, fill_value, dtype=None, order="K", subok=True, shape=None, *, device=None):
    return _like("full_like")(a, dtype, order, subok, shape, fill_value=fill_value)


def _astype(x, dtype, /, *, copy=True, device=None):
    return ops.astype(_t(x), dtype)


def _matrix_transpose(x, /):
    return _t(x).mT


FUNCTIONS: dict = {}


def _functions() -> dict:
    """NumPy function -> eidos implementation (made once NumPy is there, at the first call)."""
    if FUNCTIONS:
        return FUNCTIONS
    table = {
        "sum": _sum, "prod": _prod, "max": _extreme("max"), "amax": _extreme("max"), "min": _extreme("min"),
        "amin": _extreme("min"), "any": _truth("any"), "all": _truth("all"), "argmax": _arg("argmax"),
        "argmin": _arg("argmin"), "mean": _mean, "var": _spread("var"), "std": _spread("std"),
        "concatenate": _concatenate, "stack": _stack, "reshape": _reshape, "ravel": _ravel,
        "transpose": lambda a, axes=None: ops.transpose(_t(a), axes),
        "permute_dims": lambda a, axes=None: ops.transpose(_t(a), axes),
        "squeeze": lambda a, axis=None: ops.squeeze(_t(a), axis), "expand_dims": _expand_dims,
        "broadcast_to": lambda array, shape, subok=False: ops.expand(_t(array), shape),
        "where": _where, "clip": _clip, "round": _round, "around": _round, "dot": _dot,
        "real": lambda val: ops.real(_t(val)), "imag": lambda val: ops.imag(_t(val)),
        "zeros_like": _like("zeros_like"), "ones_like": _like("ones_like"), "empty_like": _like("zeros_like"),
        "full_like": _full_like, "astype": _astype, "matrix_transpose": _matrix_transpose,
        "shape": lambda a: _t(a).shape, "ndim": lambda a: _t(a).ndim, "size": lambda a, axis=None: (
            _t(a).size if axis is None else _t(a).shape[axis]),
    }
    for name, impl in table.items():
        fn = getattr(np, name, None)
        if fn is not None:
            FUNCTIONS[fn] = (name, impl)
    return FUNCTIONS


def array_function(func, types, args, kwargs):
    if not all(issubclass(t, (Tensor, np.ndarray)) for t in types):
        return NotImplemented
    entry = _functions().get(func)
    name = entry[0] if entry else getattr(func, "__name__", str(func))
    if entry is None:
        return _numpy_call(func, name, args, dict(kwargs), f"eidos has no {name}")
    try:
        return entry[1](*args, **kwargs)
    except _Fallback as f:
        return _numpy_call(func, name, args, dict(kwargs), str(f))
    except DTypeError as e:   # eidos refuses what NumPy takes (the maximum of complex numbers, ...)
        try:
            return _numpy_call(func, name, args, dict(kwargs), f"eidos refused it: {e}")
        except Exception:
            raise e from None
