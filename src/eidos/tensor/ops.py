"""The tensor operations: each checks its operands (dtype, shape, device), works out the result's dtype and
shape, and records a graph node (array.py); realization.py runs the graph. Element-wise operations and
reductions are ISA programs (fused); layout is NumPy (or torch on the gpu) between programs; complex
operands make a host node (complex.py says why).
"""

from __future__ import annotations

import builtins as _builtins
import math
from weakref import ref as _weakref

import numpy as np

from eidos.errors import AxisError, DeviceError, DTypeError, ShapeError

from . import backend as _backend
from . import complex as C
from . import dtypes as D
from . import storage as _dev
from .array import Const, Tensor, _mixed, _prune_readers, host_result, tensor
from .realization import _SMALL_MAX, _counters, _local, _realize, _small_data, _small_kernel
from .shapes import broadcast_shapes, normalize_axes

__all__ = [
    "astype", "sqrt", "exp", "log", "sin", "cos", "tan", "tanh", "sigmoid", "gelu", "floor", "ceil", "trunc",
    "round", "abs", "negative", "sign", "relu", "square", "isnan", "isinf", "isfinite", "logical_not",
    "logical_and", "logical_or", "logical_xor", "add", "subtract", "multiply", "floor_divide", "remainder",
    "equal", "not_equal", "less", "less_equal", "greater", "greater_equal", "bitwise_and", "bitwise_or",
    "bitwise_xor", "bitwise_left_shift", "bitwise_right_shift", "bitwise_invert", "divide", "maximum",
    "minimum", "pow", "atan2", "where", "clip", "conj", "real", "imag", "reciprocal", "acos", "acosh", "asin",
    "asinh", "atan", "atanh", "cosh", "sinh", "expm1", "log1p", "logaddexp", "hypot", "copysign", "nextafter",
    "sum_dtype", "sum", "prod", "min", "max", "any", "all", "argmin", "argmax", "mean", "var", "std", "matmul",
    "softmax", "layer_norm", "reshape", "transpose", "permute_dims", "squeeze", "expand_dims", "expand",
    "broadcast_to", "concat", "stack"
]


def _as_operand(x, like: Tensor | None = None):
    if isinstance(x, Tensor):
        return x
    if isinstance(x, (bool, int, float, complex, np.generic)) and not isinstance(x, np.ndarray):
        return x
    return tensor(x)


# ---- graph nodes --------------------------------------------------------------------------------

def _node(op, args, shape, dtype, attrs=None) -> Tensor:
    device = "cpu"
    for a in args:
        if a.__class__ is Tensor and a.device != "cpu":
            device = a.device
            break
    if device != "cpu":
        for a in args:
            if a.__class__ is Tensor and a.device != device:
                raise _mixed(op if op not in ("move", "host") else attrs[0], args)
    on_host = dtype in D.COMPLEX and op != "move" and op != "host"
    if not on_host and op in C.TAKES_COMPLEX:
        for a in args:
            if a.dtype in D.COMPLEX:
                on_host = True
                break
    if on_host:
        if device != "cpu":
            raise DTypeError(f"{op}: complex numbers are computed on the host (the ISA has no complex arithmetic) and "
                             f"gpu tensors stay on the device; move the operands with .to('cpu') first")
        return _host_node(op, args, shape, dtype, attrs)
    t = Tensor(_op=op, _args=args, _shape=shape, _dtype=dtype, _attrs=attrs, _device=device)
    ref = _weakref(t)
    for a in args:  # array._read_by written out (the hot path of every lazy operation)
        if a.__class__ is Tensor:
            r = a._readers
            if r is None:
                a._readers = [ref]
            else:
                r.append(ref)
                if len(r) >= 32 and not len(r) & (len(r) - 1):
                    _prune_readers(a)
    if _local.eager:
        _realize(t)
    return t


def _host_node(op, args, shape, dtype, attrs) -> Tensor:
    """A complex operation: one NumPy call on the host when realized (eidos/tensor/complex.py says why)."""
    tensors, fn, name = C.host_call(op, args, dtype, attrs, lambda a: isinstance(a, Tensor))
    return _node("host", tensors, shape, dtype, (name, fn, C.WHY))


def _like(x: Tensor, arr: np.ndarray) -> Tensor:
    """A tensor of host-made values on x's device (constants an operation adds, like layer_norm's weight)."""
    if x.device == "cpu":
        return Tensor(arr)
    return Tensor(_dev.upload(arr), _device="gpu") if x.device == "gpu" else Tensor(arr).to(x.device)


def _need(t: Tensor, what: str, *, floats=False, ints=False, no_bool=False) -> None:
    if floats and t.dtype not in D.FLOATS:
        raise DTypeError(f"{what} needs a floating-point tensor, got {t.dtype}")
    if ints and t.dtype not in D.INTEGERS and t.dtype != D.bool_:
        raise DTypeError(f"{what} needs an integer or boolean tensor, got {t.dtype}")
    if no_bool and t.dtype == D.bool_:
        raise DTypeError(f"{what} does not take bool tensors")


def _unary(op: str, x: Tensor, dtype=None) -> Tensor:
    if dtype is None:
        t = _small(op, x, None)
        if t is not None:
            return t
    return _node(op, (x,), x.shape, dtype or x.dtype)


def _eager_binary(op: str, slow=None, floats_only: bool = False):
    """The operator method for `op` (Tensor.__add__, ...): the small eager path of _small written out in the
    method itself for its commonest case (two tensors): one Python frame, no keyword arguments or isinstance
    chains, the op's kernel memo read by dtype, and the kernel's `fresh` doing the checks of the arrays (realized
    host arrays of one shape and dtype, contiguous, small), the allocation and the loop in one call (C where the
    ahead-of-time tables are built). Anything else goes to the general path, `_binary` (or `slow(self, o)`). Same
    conditions, results and explain() record as _small (docs/tensor.md, "Small eager operations")."""
    new, local, table, counters, limit = Tensor.__new__, _local, _backend.small_table(op), _counters, _SMALL_MAX

    def method(self, o):
        if o.__class__ is Tensor and local.eager:
            dt = self.dtype
            try:
                k = table[dt]
            except KeyError:
                k = _small_kernel(op, dt)
            if k is not None and (not floats_only or dt.kind == "f"):
                out = k[0](k[1], limit, self._data, o._data)
                if out is not None:
                    counters["programs"] += 1
                    t = new(Tensor)   # (one store a statement: 0.1 us less than packing and unpacking a tuple)
                    t.shape = self.shape
                    t.dtype = dt
                    t.device = "cpu"
                    t._data = out
                    t._op = op
                    t._args = ()
                    t._attrs = t._readers = None
                    t._runs = [k[2]]
                    return t
        return _binary(op, self, o) if slow is None else slow(self, o)
    method.__name__ = method.__qualname__ = f"__{op}__"
    return method


Tensor.__add__, Tensor.__sub__, Tensor.__mul__ = _eager_binary("add"), _eager_binary("sub"), _eager_binary("mul")


def _small(op: str, a: Tensor, b) -> Tensor | None:
    """A realized Tensor by the small eager path, or None (not in eager mode, or the path does not apply)."""
    if not getattr(_local, "eager", False):
        return None
    r = _small_data(op, a, b)
    if r is None:
        return None
    t = Tensor.__new__(Tensor)
    t.shape, t.dtype, t.device, t._data, t._op, t._args, t._attrs, t._runs, t._readers = \
        a.shape, a.dtype, "cpu", r[0], op, (), None, [r[1]], None
    return t


def _operands(a, b, what):
    if type(a) is Tensor and type(b) is Tensor and a.shape == b.shape and a.dtype == b.dtype:
        return a, b, a.dtype, a.shape  # the common case, without promotion or broadcasting work
    a, b = _as_operand(a), _as_operand(b)
    if not isinstance(a, Tensor) and not isinstance(b, Tensor):
        a = tensor(a)
    if isinstance(a, Tensor) and isinstance(b, Tensor):
        dt = D.promote(a.dtype, b.dtype)
        shape = broadcast_shapes(a.shape, b.shape, what=what)
    else:
        t, s = (a, b) if isinstance(a, Tensor) else (b, a)
        dt = D.scalar_dtype(s, t.dtype)
        shape = t.shape
    return _cast_to(a, dt), _cast_to(b, dt), dt, shape


def _cast_to(x, dt):
    if isinstance(x, Tensor):
        if dt in D.COMPLEX and x.dtype not in D.COMPLEX:
            return x  # a real operand of a complex operation stays real (see complex.host_call)
        return x if x.dtype == dt else astype(x, dt)
    return Const(_imm_value(x, dt), dt)


def _imm_value(x, dt):
    if dt == D.bool_:
        return bool(x)
    if dt in D.FLOATS:
        return float(x)
    if dt in D.COMPLEX:
        return x if isinstance(x, complex) else float(x)  # a real scalar stays real (see complex.host_call)
    v = int(x)
    info = np.iinfo(dt)
    if not info.min <= v <= info.max:
        raise DTypeError(f"Python int {v} is out of range for {dt} ({info.min}..{info.max})")
    return v


def _binary(op: str, a, b, out_dtype=None) -> Tensor:
    if type(a) is Tensor and type(b) is Tensor and out_dtype is None:
        t = _small(op, a, b)
        if t is not None:
            return t
    a, b, dt, shape = _operands(a, b, op)
    if op in ("floordiv", "mod") and dt == D.bool_:
        raise DTypeError(f"{op} does not take bool tensors")
    if op in ("add", "sub", "mul") and dt == D.bool_:
        if op == "sub":
            raise DTypeError("subtract does not take bool tensors; use ^ or logical_xor")
        op = "logical_or" if op == "add" else "logical_and"
    return _node(op, (a, b), shape, out_dtype or dt)


def _compare(op, a, b) -> Tensor:
    return _binary(op, a, b, D.bool_)


def _bitwise(op, a, b) -> Tensor:
    a2, b2, dt, shape = _operands(a, b, op)
    if dt in D.FLOATS:
        raise DTypeError(f"bitwise {op} needs integer or bool tensors, got {dt}")
    if dt == D.bool_:
        if op in ("lshift", "rshift"):
            raise DTypeError(f"{op} needs integer tensors, got bool")
        return _node("logical_" + op, (a2, b2), shape, D.bool_)
    return _node(op, (a2, b2), shape, dt)


def _documented(f, name: str, summary: str, call: str, result: str):
    """f named `name`, its docstring `summary` and the example `ei.tensor.<name>(<call>)` giving `result`."""
    f.__name__ = f.__qualname__ = name
    f.__doc__ = f"{summary}\n\n    >>> ei.tensor.{name}({call})\n    {result}\n    "
    return f


def _dim(axis, keepdims, dim, keepdim, what: str):
    """axis and keepdims, given the standard's way or torch's (dim=, keepdim=); both at once is an AxisError."""
    if dim is not None:
        if axis is not None:
            raise AxisError(f"{what}: axis={axis!r} and dim={dim!r} name the same thing (dim is torch's spelling); "
                            "give one")
        axis = tuple(dim) if isinstance(dim, list) else dim
    return axis, (keepdims if keepdim is None else keepdim)


class values_indices(tuple):
    """torch's result of max(dim=)/min(dim=): (values, indices), also by name.

    >>> r = ei.tensor.max([[1, 5], [7, 2]], dim=1)
    >>> r.values, r.indices
    (Tensor([5, 7], dtype=int64, device='cpu'), Tensor([1, 0], dtype=int64, device='cpu'))
    """
    __slots__ = ()

    def __new__(cls, values, indices):
        return tuple.__new__(cls, (values, indices))

    values = property(lambda self: self[0], doc="The extreme values.")
    indices = property(lambda self: self[1], doc="Their indices along dim.")


def astype(x: Tensor, dtype, copy: bool = True) -> Tensor:
    """x converted to `dtype` (x itself when it has it; floats to integers truncate toward zero).

    >>> ei.tensor.astype(ei.tensor([1.5, -2.5]), "int8")
    Tensor([ 1, -2], dtype=int8, device='cpu')
    """
    dt = D.as_dtype(dtype)
    x = _as_operand(x)
    if x.dtype == dt:
        return x
    return _node("cast", (x,), x.shape, dt)


def _clone(x: Tensor) -> Tensor:
    """A copy of x in new memory, lazily: x * 1 (exact for every dtype, -0.0 and NaN included), which fuses into
    whatever computes x and runs on x's device."""
    return _binary("mul", x, True if x.dtype == D.bool_ else 1)


def _view_dtype(x: Tensor, dtype) -> Tensor:
    """x's bytes read as `dtype` (torch's view(dtype), NumPy's view): the last dimension scales by the item sizes."""
    dt = D.as_dtype(dtype)
    if x.device != "cpu":
        raise DeviceError(f"view({dt}) reads a {x.device} tensor's bytes on the host; .to('cpu') first")
    old, new = x.dtype.itemsize, dt.itemsize
    if old == new:
        shape = x.shape
    elif not x.ndim or (x.shape[-1] * old) % new:
        raise ShapeError(f"view({dt}): the last dimension of shape {x.shape} ({x.dtype}) is not a whole number of "
                         f"{dt} items")
    else:
        shape = (*x.shape[:-1], x.shape[-1] * old // new)
    return _move("view", [x], shape, dt, lambda a: np.ascontiguousarray(a).view(dt), str(dt))


def _float_of(x: Tensor) -> Tensor:
    return x if x.dtype in D.INEXACT else astype(x, D.float64)


def _math(op, call, result):
    def f(x):
        x = _as_operand(x)
        if not isinstance(x, Tensor):
            x = tensor(x)
        return _unary(op, _float_of(x))
    return _documented(f, op, f"Element-wise {op} (integer inputs are computed in floating point).", call, result)


sqrt = _math("sqrt", "[1, 4, 9]", "Tensor([1., 2., 3.], dtype=float64, device='cpu')")
exp = _math("exp", "[0.0, 1.0]", "Tensor([1.    , 2.7183], dtype=float64, device='cpu')")
log = _math("log", "[1.0, 100.0]", "Tensor([0.    , 4.6052], dtype=float64, device='cpu')")
sin = _math("sin", "[0.0, 1.5707963267948966]", "Tensor([0., 1.], dtype=float64, device='cpu')")
cos = _math("cos", "[0.0, 3.141592653589793]", "Tensor([ 1., -1.], dtype=float64, device='cpu')")
tan = _math("tan", "[0.0, 0.7853981633974483]", "Tensor([0., 1.], dtype=float64, device='cpu')")
tanh = _math("tanh", "[0.0, 1.0]", "Tensor([0.    , 0.7616], dtype=float64, device='cpu')")
sigmoid = _math("sigmoid", "[0.0, 2.0]", "Tensor([0.5   , 0.8808], dtype=float64, device='cpu')")
gelu = _math("gelu", "[0.0, 1.0]", "Tensor([0.    , 0.8413], dtype=float64, device='cpu')")


def _float_or_same(op, call, result):
    def f(x):
        x = tensor(x) if not isinstance(x, Tensor) else x
        _need(x, op, no_bool=True)
        if x.dtype not in D.INEXACT:
            return x
        return _unary(op, x)
    return _documented(f, op, f"Element-wise {op} (integers: unchanged; not for bool tensors).", call, result)


floor = _float_or_same("floor", "[1.5, -1.5]", "Tensor([ 1., -2.], dtype=float64, device='cpu')")
ceil = _float_or_same("ceil", "[1.5, -1.5]", "Tensor([ 2., -1.], dtype=float64, device='cpu')")
trunc = _float_or_same("trunc", "[1.5, -1.5]", "Tensor([ 1., -1.], dtype=float64, device='cpu')")


def round(x, decimals: int = 0) -> Tensor:
    """Element-wise rounding to `decimals` places, halves to even (integers: unchanged).

    >>> ei.tensor.round([0.5, 1.5, 2.26]), ei.tensor.round([2.26], 1)
    (Tensor([0., 2., 2.], dtype=float64, device='cpu'), Tensor([2.3], dtype=float64, device='cpu'))
    """
    x = tensor(x) if not isinstance(x, Tensor) else x
    _need(x, "round", no_bool=True)
    if x.dtype not in D.INEXACT:
        return x
    if decimals == 0:
        return _unary("round", x)
    s = 10.0 ** decimals
    return _unary("round", x * s) / s


def abs(x) -> Tensor:
    """Element-wise absolute value (bool and unsigned: unchanged; complex: the real modulus).

    >>> ei.tensor.abs([-1.5, 2.0]), ei.tensor.abs([3 + 4j])
    (Tensor([1.5, 2. ], dtype=float64, device='cpu'), Tensor([5.], dtype=float64, device='cpu'))
    """
    x = tensor(x) if not isinstance(x, Tensor) else x
    if x.dtype == D.bool_ or x.dtype in D.UNSIGNED:
        return x
    return _unary("abs", x, D.REAL_OF.get(x.dtype))


def _numeric_unary(op: str, name: str, call, result):
    def f(x) -> Tensor:
        x = tensor(x) if not isinstance(x, Tensor) else x
        _need(x, name, no_bool=True)
        return _unary(op, x)
    return _documented(f, name, f"Element-wise {name} (not for bool tensors).", call, result)


negative = _numeric_unary("neg", "negative", "[1, -2]", "Tensor([-1,  2], dtype=int64, device='cpu')")
sign = _numeric_unary("sign", "sign", "[-3.0, 0.0, 2.0]", "Tensor([-1.,  0.,  1.], dtype=float64, device='cpu')")
relu = _numeric_unary("relu", "relu", "[-1.0, 2.0]", "Tensor([0., 2.], dtype=float64, device='cpu')")
square = _numeric_unary("square", "square", "[-3, 2]", "Tensor([9, 4], dtype=int64, device='cpu')")


def _float_test(op: str, non_float: bool, call, result):
    def f(x) -> Tensor:
        x = tensor(x) if not isinstance(x, Tensor) else x
        if x.dtype not in D.INEXACT:
            return _like(x, np.full(x.shape, non_float, np.bool_))
        return _unary(op, x, D.bool_)
    return _documented(f, op, f"Element-wise {op} (integers and bools: all {non_float}).", call, result)


isnan = _float_test("isnan", False, "[1.0, float('nan')]", "Tensor([False,  True], dtype=bool, device='cpu')")
isinf = _float_test("isinf", False, "[1.0, float('-inf')]", "Tensor([False,  True], dtype=bool, device='cpu')")
isfinite = _float_test("isfinite", True, "[1.0, float('inf')]", "Tensor([ True, False], dtype=bool, device='cpu')")


def logical_not(x) -> Tensor:
    """Element-wise not (nonzero is true).

    >>> ei.tensor.logical_not([0, 2])
    Tensor([ True, False], dtype=bool, device='cpu')
    """
    x = tensor(x) if not isinstance(x, Tensor) else x
    return _unary("logical_not", x, D.bool_)


def _node_logical(op, a, b):
    a, b = _as_operand(a), _as_operand(b)
    a = astype(a, D.bool_) if isinstance(a, Tensor) else a
    b = astype(b, D.bool_) if isinstance(b, Tensor) else b
    return _binary(op, a, b, D.bool_)


def _binary_function(name: str, summary: str, make, call: str, result: str):
    return _documented(lambda a, b: make(a, b), name, summary, call, result)


_AB = "[1, 2, 3], [2, 2, 2]"
logical_and = _binary_function("logical_and", "Element-wise and of truth values (nonzero is true).",
                               lambda a, b: _node_logical("logical_and", a, b), "[0, 1, 1], [1, 0, 2]",
                               "Tensor([False, False,  True], dtype=bool, device='cpu')")
logical_or = _binary_function("logical_or", "Element-wise or of truth values (nonzero is true).",
                              lambda a, b: _node_logical("logical_or", a, b), "[0, 1, 0], [0, 0, 2]",
                              "Tensor([False,  True,  True], dtype=bool, device='cpu')")
logical_xor = _binary_function("logical_xor", "Element-wise exclusive or of truth values (nonzero is true).",
                               lambda a, b: _node_logical("logical_xor", a, b), "[0, 1, 1], [0, 0, 2]",
                               "Tensor([False,  True, False], dtype=bool, device='cpu')")
add = _binary_function("add", "a + b, element-wise with broadcasting (bool: or).", lambda a, b: _binary("add", a, b),
                       _AB, "Tensor([3, 4, 5], dtype=int64, device='cpu')")
subtract = _binary_function("subtract", "a - b, element-wise with broadcasting.", lambda a, b: _binary("sub", a, b),
                            _AB, "Tensor([-1,  0,  1], dtype=int64, device='cpu')")
multiply = _binary_function("multiply", "a * b, element-wise with broadcasting (bool: and).",
                            lambda a, b: _binary("mul", a, b), _AB, "Tensor([2, 4, 6], dtype=int64, device='cpu')")
floor_divide = _binary_function("floor_divide", "a // b: the quotient rounded toward -inf, as NumPy.",
                                lambda a, b: _binary("floordiv", a, b), "[-3, 3], 2",
                                "Tensor([-2,  1], dtype=int64, device='cpu')")
remainder = _binary_function("remainder", "a % b with the sign of b, as NumPy.", lambda a, b: _binary("mod", a, b),
                             "[-3, 3], 2", "Tensor([1, 1], dtype=int64, device='cpu')")
equal = _binary_function("equal", "a == b, element-wise.", lambda a, b: _compare("eq", a, b), _AB,
                         "Tensor([False,  True, False], dtype=bool, device='cpu')")
not_equal = _binary_function("not_equal", "a != b, element-wise.", lambda a, b: _compare("ne", a, b), _AB,
                             "Tensor([ True, False,  True], dtype=bool, device='cpu')")
less = _binary_function("less", "a < b, element-wise.", lambda a, b: _compare("lt", a, b), _AB,
                        "Tensor([ True, False, False], dtype=bool, device='cpu')")
less_equal = _binary_function("less_equal", "a <= b, element-wise.", lambda a, b: _compare("le", a, b), _AB,
                              "Tensor([ True,  True, False], dtype=bool, device='cpu')")
greater = _binary_function("greater", "a > b, element-wise.", lambda a, b: _compare("gt", a, b), _AB,
                           "Tensor([False, False,  True], dtype=bool, device='cpu')")
greater_equal = _binary_function("greater_equal", "a >= b, element-wise.", lambda a, b: _compare("ge", a, b), _AB,
                                 "Tensor([False,  True,  True], dtype=bool, device='cpu')")
bitwise_and = _binary_function("bitwise_and", "a & b on integers (bool: logical and).",
                               lambda a, b: _bitwise("and", a, b), "[12, 10], 6",
                               "Tensor([4, 2], dtype=int64, device='cpu')")
bitwise_or = _binary_function("bitwise_or", "a | b on integers (bool: logical or).", lambda a, b: _bitwise("or", a, b),
                              "[12, 10], 6", "Tensor([14, 14], dtype=int64, device='cpu')")
bitwise_xor = _binary_function("bitwise_xor", "a ^ b on integers (bool: logical xor).",
                               lambda a, b: _bitwise("xor", a, b), "[12, 10], 6",
                               "Tensor([10, 12], dtype=int64, device='cpu')")
bitwise_left_shift = _binary_function("bitwise_left_shift", "a << b on integers.",
                                      lambda a, b: _bitwise("lshift", a, b), "[1, 3], 2",
                                      "Tensor([ 4, 12], dtype=int64, device='cpu')")
bitwise_right_shift = _binary_function("bitwise_right_shift", "a >> b on integers (arithmetic for signed).",
                                       lambda a, b: _bitwise("rshift", a, b), "[-8, 12], 2",
                                       "Tensor([-2,  3], dtype=int64, device='cpu')")


def bitwise_invert(x) -> Tensor:
    """~x: the bits of integers flipped; for bools, logical not.

    >>> ei.tensor.bitwise_invert([0, 5]), ei.tensor.bitwise_invert([True, False])
    (Tensor([-1, -6], dtype=int64, device='cpu'), Tensor([False,  True], dtype=bool, device='cpu'))
    """
    x = tensor(x) if not isinstance(x, Tensor) else x
    if x.dtype == D.bool_:
        return _unary("logical_not", x, D.bool_)
    _need(x, "~", ints=True)
    return _unary("invert", x)


def divide(a, b) -> Tensor:
    """True division: integers divide in floating point (float64, as NumPy).

    >>> ei.tensor.divide([1, 3], 2)
    Tensor([0.5, 1.5], dtype=float64, device='cpu')
    """
    a, b = _as_operand(a), _as_operand(b)
    if isinstance(a, Tensor) and a.dtype not in D.INEXACT and not (isinstance(b, Tensor) and b.dtype in D.INEXACT) \
            and not isinstance(b, (float, complex)):
        a = astype(a, D.float64)
    if isinstance(b, Tensor) and b.dtype not in D.INEXACT and not (isinstance(a, Tensor) and a.dtype in D.INEXACT) \
            and not isinstance(a, (float, complex)):
        b = astype(b, D.float64)
    if not isinstance(a, Tensor) and not isinstance(b, Tensor):
        a = tensor(float(a))
    return _binary("div", a, b)


Tensor.__truediv__ = _eager_binary("div", divide, floats_only=True)   # (integers: true division, the general path)


def _minmax(op, a, b):
    a2, b2, dt, shape = _operands(a, b, op)
    if dt == D.bool_:
        return _node("logical_or" if op == "maximum" else "logical_and", (a2, b2), shape, dt)
    return _node(op, (a2, b2), shape, dt)


maximum = _binary_function("maximum", "The larger of a and b, element-wise.", lambda a, b: _minmax("maximum", a, b),
                           "[1, 5], [3, 2]", "Tensor([3, 5], dtype=int64, device='cpu')")
minimum = _binary_function("minimum", "The smaller of a and b, element-wise.", lambda a, b: _minmax("minimum", a, b),
                           "[1, 5], [3, 2]", "Tensor([1, 2], dtype=int64, device='cpu')")


def pow(a, b) -> Tensor:
    """a ** b: the ISA's Pow (floats); integers are raised in float64 and converted back.

    >>> ei.tensor.pow([2, 3], 3), ei.tensor.pow([4.0], 0.5)
    (Tensor([ 8, 27], dtype=int64, device='cpu'), Tensor([2.], dtype=float64, device='cpu'))
    """
    a2, b2, dt, shape = _operands(a, b, "pow")
    if dt == D.bool_:
        raise DTypeError("pow does not take bool tensors")
    if isinstance(b2, Const) and b2.value == 2:
        return _node("square", (a2,), shape, dt) if a2.shape == shape else _node("mul", (a2, a2), shape, dt)
    if dt in D.INEXACT:
        return _node("pow", (a2, b2), shape, dt)
    f = [astype(x, D.float64) if isinstance(x, Tensor) else Const(float(x.value), D.float64) for x in (a2, b2)]
    return astype(_node("pow", tuple(f), shape, D.float64), dt)


def atan2(a, b) -> Tensor:
    """The angle of the point (b, a) in radians, element-wise (integers in float64).

    >>> ei.tensor.atan2([1.0, 0.0], [1.0, -1.0])
    Tensor([0.7854, 3.1416], dtype=float64, device='cpu')
    """
    a2, b2, dt, shape = _operands(a, b, "atan2")
    if dt not in D.FLOATS:
        a2, b2 = _cast_to(a2 if isinstance(a2, Tensor) else a2.value, D.float64), _cast_to(
            b2 if isinstance(b2, Tensor) else b2.value, D.float64)
        dt = D.float64
    return _node("atan2", (a2, b2), shape, dt)


def where(cond, a, b) -> Tensor:
    """a where cond is true, else b (broadcast together).

    >>> ei.tensor.where([True, False], [1, 2], 0)
    Tensor([1, 0], dtype=int64, device='cpu')
    """
    cond = _as_operand(cond)
    cond = tensor(cond) if not isinstance(cond, Tensor) else cond
    cond = astype(cond, D.bool_)
    a2, b2, dt, shape = _operands(a, b, "where")
    shape = broadcast_shapes(cond.shape, shape, what="where")
    return _node("where", (cond, a2, b2), shape, dt)


def clip(x, min=None, max=None) -> Tensor:
    """x clamped to [min, max] element-wise (None: no bound; tensors as bounds broadcast).

    >>> ei.tensor.clip([-2, 0, 5], -1, 3)
    Tensor([-1,  0,  3], dtype=int64, device='cpu')
    """
    x = tensor(x) if not isinstance(x, Tensor) else x
    if x.dtype in D.COMPLEX:
        raise DTypeError(f"clip is not defined for complex tensors ({x.dtype}): complex numbers have no order")
    if min is None and max is None:
        return x
    lo = min if min is not None else (-np.inf if x.dtype in D.FLOATS else np.iinfo(x.dtype).min)
    hi = max if max is not None else (np.inf if x.dtype in D.FLOATS else np.iinfo(x.dtype).max)
    if isinstance(lo, Tensor) or isinstance(hi, Tensor):
        return minimum(maximum(x, lo), hi)
    _, lo2, dt, _ = _operands(x, lo, "clip")
    _, hi2, _, _ = _operands(x, hi, "clip")
    if dt != x.dtype:
        x = astype(x, dt)
    return _node("clip", (x, lo2, hi2), x.shape, dt)


def conj(x) -> Tensor:
    """The complex conjugate, element-wise (real tensors: x itself).

    >>> ei.tensor.conj([1 + 2j])
    Tensor([1.-2.j], dtype=complex128, device='cpu')
    """
    x = tensor(x) if not isinstance(x, Tensor) else x
    return _unary("conj", x) if x.dtype in D.COMPLEX else x


def real(x) -> Tensor:
    """The real part, element-wise, in the components' dtype (real tensors: x itself).

    >>> ei.tensor.real([1 + 2j])
    Tensor([1.], dtype=float64, device='cpu')
    """
    x = tensor(x) if not isinstance(x, Tensor) else x
    return _unary("real", x, D.REAL_OF[x.dtype]) if x.dtype in D.COMPLEX else x


def imag(x) -> Tensor:
    """The imaginary part, element-wise, in the components' dtype (real tensors: zeros).

    >>> ei.tensor.imag([1 + 2j]), ei.tensor.imag([1.0])
    (Tensor([2.], dtype=float64, device='cpu'), Tensor([0.], dtype=float64, device='cpu'))
    """
    x = tensor(x) if not isinstance(x, Tensor) else x
    if x.dtype in D.COMPLEX:
        return _unary("imag", x, D.REAL_OF[x.dtype])
    return _like(x, np.zeros(x.shape, x.dtype))


def reciprocal(x) -> Tensor:
    """1 / x, element-wise, for floating-point (and complex) tensors.

    >>> ei.tensor.reciprocal([2.0, 4.0])
    Tensor([0.5 , 0.25], dtype=float64, device='cpu')
    """
    x = tensor(x) if not isinstance(x, Tensor) else x
    if x.dtype not in D.INEXACT:
        raise DTypeError(f"reciprocal needs a floating-point array, got {x.dtype}")
    return _unary("reciprocal", x)


# ---- element-wise functions the ISA has no instruction for: NumPy on the host ----------------------

def _host_unary(np_fn, name: str, call: str, result: str):
    """`name` on floating-point tensors: NumPy at once on the host (float16 and bfloat16 through float64);
    on complex tensors a lazy host node (complex.py)."""
    def f(x, /):
        x = tensor(x) if not isinstance(x, Tensor) else x
        if x.dtype in D.COMPLEX:
            return _unary(name, x)
        if x.dtype not in D.FLOATS:
            raise DTypeError(f"{name} needs a floating-point array, got {x.dtype}")
        a = x.numpy()
        with np.errstate(all="ignore"):
            r = np_fn(a.astype(np.float64) if a.dtype in (D.bfloat16, D.float16) else a)
        return host_result(np.asarray(r).astype(x.dtype))
    return _documented(f, name, f"Element-wise {name}: NumPy on the host (no ISA instruction; complex: lazily).",
                       call, result)


acos = _host_unary(np.arccos, "acos", "[1.0, 0.0]", "Tensor([0.    , 1.5708], dtype=float64, device='cpu')")
acosh = _host_unary(np.arccosh, "acosh", "[1.0, 2.0]", "Tensor([0.   , 1.317], dtype=float64, device='cpu')")
asin = _host_unary(np.arcsin, "asin", "[0.0, 1.0]", "Tensor([0.    , 1.5708], dtype=float64, device='cpu')")
asinh = _host_unary(np.arcsinh, "asinh", "[0.0, 1.0]", "Tensor([0.    , 0.8814], dtype=float64, device='cpu')")
atan = _host_unary(np.arctan, "atan", "[0.0, 1.0]", "Tensor([0.    , 0.7854], dtype=float64, device='cpu')")
atanh = _host_unary(np.arctanh, "atanh", "[0.0, 0.5]", "Tensor([0.    , 0.5493], dtype=float64, device='cpu')")
cosh = _host_unary(np.cosh, "cosh", "[0.0, 1.0]", "Tensor([1.    , 1.5431], dtype=float64, device='cpu')")
sinh = _host_unary(np.sinh, "sinh", "[0.0, 1.0]", "Tensor([0.    , 1.1752], dtype=float64, device='cpu')")
expm1 = _host_unary(np.expm1, "expm1", "[0.0, 1e-10]", "Tensor([0.e+00, 1.e-10], dtype=float64, device='cpu')")
log1p = _host_unary(np.log1p, "log1p", "[0.0, 1e-10]", "Tensor([0.e+00, 1.e-10], dtype=float64, device='cpu')")


def _host_binary(np_fn, name: str, call: str, result: str):
    """`name` on floating-point operands (promoted and broadcast as every binary operation): NumPy at once."""
    def f(a, b, /):
        a2, b2, dt, shape = _operands(a, b, name)
        if dt not in D.FLOATS:
            raise DTypeError(f"{name} needs floating-point arrays, got {dt}")
        x = a2.numpy() if isinstance(a2, Tensor) else a2.value
        y = b2.numpy() if isinstance(b2, Tensor) else b2.value
        with np.errstate(all="ignore"):
            return host_result(np.asarray(np_fn(x, y)).astype(dt))
    return _documented(f, name, f"Element-wise {name}: NumPy on the host (no ISA instruction for it).", call, result)


logaddexp = _host_binary(np.logaddexp, "logaddexp", "[0.0], [0.0]", "Tensor([0.6931], dtype=float64, device='cpu')")
hypot = _host_binary(np.hypot, "hypot", "[3.0], [4.0]", "Tensor([5.], dtype=float64, device='cpu')")
copysign = _host_binary(np.copysign, "copysign", "[1.0, 2.0], [-1.0, 1.0]",
                        "Tensor([-1.,  2.], dtype=float64, device='cpu')")
nextafter = _host_binary(np.nextafter, "nextafter", "[0.0], [1.0]",
                         "Tensor([5.e-324], dtype=float64, device='cpu')")


# ---- reductions -----------------------------------------------------------------------------------

def _reduce(op, x, axis, keepdims, out_dtype, divisor: float = 0) -> Tensor:
    x = tensor(x) if not isinstance(x, Tensor) else x
    axes = normalize_axes(axis, x.ndim, op)
    if keepdims:
        shape = tuple(1 if i in axes else d for i, d in enumerate(x.shape))
    else:
        shape = tuple(d for i, d in enumerate(x.shape) if i not in axes)
    if op in ("min", "max", "argmin", "argmax") and x.size == 0:
        raise ShapeError(f"{op} of an empty tensor (shape {x.shape}) has no identity")
    if op in ("min", "max", "argmin", "argmax") and math.prod(x.shape[a] for a in axes) == 0:
        raise ShapeError(f"{op} over an empty axis of shape {x.shape}")
    return _node("reduce", (x,), shape, out_dtype, (op, axes, bool(keepdims), divisor))


def sum_dtype(dt, dtype=None):
    """The dtype sum and prod give for a tensor of dtype `dt`: `dtype` when given, else int64 for bool and
    signed integers, uint64 for unsigned ones, `dt` itself for the rest.

    >>> ei.tensor.sum_dtype(np.dtype("int8")), ei.tensor.sum_dtype(np.dtype("float32"))
    (dtype('int64'), dtype('float32'))
    """
    if dtype is not None:
        return D.as_dtype(dtype)
    if dt == D.bool_ or dt in D.SIGNED:
        return D.int64
    if dt in D.UNSIGNED:
        return D.uint64
    return dt


def sum(x, axis=None, keepdims=False, dtype=None, *, dim=None, keepdim=None) -> Tensor:
    """The sum over `axis` (None: all); integers and bools sum in 64 bits (see sum_dtype). torch's
    spellings `dim=` and `keepdim=` are taken too (as by every reduction).

    >>> ei.tensor.sum([[1, 2], [3, 4]], axis=1), ei.tensor.sum([[1, 2], [3, 4]], dim=0, keepdim=True)
    (Tensor([3, 7], dtype=int64, device='cpu'), Tensor([[4, 6]], dtype=int64, device='cpu'))
    """
    axis, keepdims = _dim(axis, keepdims, dim, keepdim, "sum")
    x = tensor(x) if not isinstance(x, Tensor) else x
    dt = sum_dtype(x.dtype, dtype)
    if dtype is not None and dt != x.dtype:
        x = astype(x, dt)
    return _reduce("sum", x, axis, keepdims, dt)


def prod(x, axis=None, keepdims=False, dtype=None, *, dim=None, keepdim=None) -> Tensor:
    """The product over `axis` (None: all); integers and bools multiply in 64 bits.

    >>> ei.tensor.prod([[1, 2], [3, 4]], axis=0)
    Tensor([3, 8], dtype=int64, device='cpu')
    """
    axis, keepdims = _dim(axis, keepdims, dim, keepdim, "prod")
    x = tensor(x) if not isinstance(x, Tensor) else x
    dt = sum_dtype(x.dtype, dtype)
    if dtype is not None and dt != x.dtype:
        x = astype(x, dt)
    return _reduce("prod", x, axis, keepdims, dt)


def min(x, axis=None, keepdims=False, *, dim=None, keepdim=None) -> Tensor:
    """The minimum over `axis` (None: all); ShapeError for an empty one. With torch's `dim=`, torch's result:
    (values, indices) (see values_indices).

    >>> ei.tensor.min([[1, 5], [3, 2]], axis=0)
    Tensor([1, 2], dtype=int64, device='cpu')
    """
    if dim is not None:
        return _with_indices("min", x, axis, keepdims, dim, keepdim)
    x = tensor(x) if not isinstance(x, Tensor) else x
    if x.dtype == D.bool_:
        return all(x, axis, keepdims)
    return _reduce("min", x, axis, keepdims, x.dtype)


def max(x, axis=None, keepdims=False, *, dim=None, keepdim=None) -> Tensor:
    """The maximum over `axis` (None: all); ShapeError for an empty one. With torch's `dim=`, torch's result:
    (values, indices) (see values_indices).

    >>> ei.tensor.max([[1, 5], [3, 2]], axis=1, keepdims=True)
    Tensor([[5],
            [3]], dtype=int64, device='cpu')
    """
    if dim is not None:
        return _with_indices("max", x, axis, keepdims, dim, keepdim)
    x = tensor(x) if not isinstance(x, Tensor) else x
    if x.dtype == D.bool_:
        return any(x, axis, keepdims)
    return _reduce("max", x, axis, keepdims, x.dtype)


def _with_indices(op, x, axis, keepdims, dim, keepdim):
    axis, keepdims = _dim(axis, keepdims, dim, keepdim, op)
    if not isinstance(axis, (int, np.integer)):
        raise AxisError(f"{op}(dim=...) takes one dimension, as torch's, got {axis!r}; use axis= for several")
    f, arg = (max, argmax) if op == "max" else (min, argmin)
    return values_indices(f(x, axis, keepdims), arg(x, axis, keepdims))


def any(x, axis=None, keepdims=False, *, dim=None, keepdim=None) -> Tensor:
    """Whether any element over `axis` (None: all) is nonzero.

    >>> ei.tensor.any([[0, 0], [0, 1]], axis=1)
    Tensor([False,  True], dtype=bool, device='cpu')
    """
    axis, keepdims = _dim(axis, keepdims, dim, keepdim, "any")
    x = tensor(x) if not isinstance(x, Tensor) else x
    return _reduce("max", astype(x, D.bool_).astype(D.uint8), axis, keepdims, D.uint8).astype(D.bool_) \
        if x.size else _reduce("sum", astype(x, D.bool_), axis, keepdims, D.int64).astype(D.bool_)


def all(x, axis=None, keepdims=False, *, dim=None, keepdim=None) -> Tensor:
    """Whether every element over `axis` (None: all) is nonzero (an empty tensor: True).

    >>> ei.tensor.all([[1, 1], [0, 1]], axis=1)
    Tensor([ True, False], dtype=bool, device='cpu')
    """
    axis, keepdims = _dim(axis, keepdims, dim, keepdim, "all")
    x = tensor(x) if not isinstance(x, Tensor) else x
    if x.size == 0:
        return logical_not(_reduce("sum", logical_not(x), axis, keepdims, D.int64))
    return _reduce("min", astype(x, D.bool_).astype(D.uint8), axis, keepdims, D.uint8).astype(D.bool_)


def argmin(x, axis=None, keepdims=False, *, dim=None, keepdim=None) -> Tensor:
    """The index of the first minimum along `axis` (None: in the flattened tensor).

    >>> ei.tensor.argmin([[3, 1], [0, 2]], axis=0)
    Tensor([1, 0], dtype=int64, device='cpu')
    """
    return _arg("argmin", x, *_dim(axis, keepdims, dim, keepdim, "argmin"))


def argmax(x, axis=None, keepdims=False, *, dim=None, keepdim=None) -> Tensor:
    """The index of the first maximum along `axis` (None: in the flattened tensor).

    >>> ei.tensor.argmax([[3, 1], [0, 5]]).item()
    3
    """
    return _arg("argmax", x, *_dim(axis, keepdims, dim, keepdim, "argmax"))


def _arg(op, x, axis, keepdims):
    x = tensor(x) if not isinstance(x, Tensor) else x
    if axis is not None and isinstance(axis, (tuple, list)):
        raise AxisError(f"{op}: axis must be one int or None, got {axis!r}")
    if axis is None:
        r = _reduce(op, reshape(x, (-1,)) if x.ndim != 1 else x, 0, False, D.int64)
        return reshape(r, (1,) * x.ndim) if keepdims else r
    if x.dtype == D.bool_:
        x = astype(x, D.uint8)
    return _reduce(op, x, axis, keepdims, D.int64)


def mean(x, axis=None, keepdims=False, *, dim=None, keepdim=None) -> Tensor:
    """The mean over `axis` (None: all); integers in float64; the sum and the division are one program.

    >>> ei.tensor.mean([[1, 2], [3, 4]], axis=1)
    Tensor([1.5, 3.5], dtype=float64, device='cpu')
    """
    axis, keepdims = _dim(axis, keepdims, dim, keepdim, "mean")
    x = tensor(x) if not isinstance(x, Tensor) else x
    xf = _float_of(x)
    axes = normalize_axes(axis, x.ndim, "mean")
    n = math.prod(x.shape[a] for a in axes)
    if not n:
        return _reduce("sum", xf, axis, keepdims, xf.dtype) * np.nan
    return _reduce("sum", xf, axis, keepdims, xf.dtype, n)  # the sum and the division: one program


def _correction(correction, unbiased, dim):
    """The standard's default is 0; torch's (dim= or unbiased= given) is 1, as torch's var and std."""
    if correction is not None:
        return correction
    if unbiased is not None:
        return int(bool(unbiased))
    return 0 if dim is None else 1


def var(x, axis=None, keepdims=False, correction=None, *, dim=None, keepdim=None, unbiased=None) -> Tensor:
    """The variance over `axis` (None: all), dividing by n - correction (real tensors). correction defaults to
    0 (NumPy, the Array API); with torch's `dim=` it defaults to 1, as torch's (`unbiased=` is taken too).

    >>> ei.tensor.var([1.0, 2.0, 3.0, 4.0]).item(), ei.tensor.var([1.0, 3.0], correction=1).item()
    (1.25, 2.0)
    >>> ei.tensor.var([[1.0, 3.0]], dim=1)
    Tensor([2.], dtype=float64, device='cpu')
    """
    correction = _correction(correction, unbiased, dim)
    axis, keepdims = _dim(axis, keepdims, dim, keepdim, "var")
    x = tensor(x) if not isinstance(x, Tensor) else x
    if x.dtype in D.COMPLEX:
        raise DTypeError(f"var/std take real tensors, got {x.dtype}; use var(abs(x)) or var of real(x) and imag(x)")
    xf = _float_of(x)
    axes = normalize_axes(axis, x.ndim, "var")
    n = math.prod(x.shape[a] for a in axes)
    m = mean(xf, axis, keepdims=True)
    d = n - correction
    if d <= 0:
        return _reduce("sum", square(xf - m), axis, keepdims, xf.dtype) * np.nan
    return _reduce("sum", square(xf - m), axis, keepdims, xf.dtype, d)


def std(x, axis=None, keepdims=False, correction=None, *, dim=None, keepdim=None, unbiased=None) -> Tensor:
    """The standard deviation over `axis`: sqrt(var(...)), with var's defaults (torch's `dim=`: correction 1).

    >>> ei.tensor.std([1.0, 3.0]).item()
    1.0
    """
    return sqrt(var(x, axis, keepdims, correction, dim=dim, keepdim=keepdim, unbiased=unbiased))


# ---- matmul, softmax, layer_norm ----------------------------------------------------------------

def matmul(a, b) -> Tensor:
    """The matrix product a @ b (NumPy's rules for 1-d operands and batch dimensions): the ISA's GEMM, or
    BatchedGEMM for a batch; integers multiply in float64 and convert back.

    >>> ei.tensor.matmul([[1, 2], [3, 4]], [[1], [1]])
    Tensor([[3],
            [7]], dtype=int64, device='cpu')
    """
    a = tensor(a) if not isinstance(a, Tensor) else a
    b = tensor(b) if not isinstance(b, Tensor) else b
    if a.ndim == 0 or b.ndim == 0:
        raise ShapeError(f"matmul needs at least 1-d operands, got shapes {a.shape} and {b.shape}")
    dt = D.promote(a.dtype, b.dtype)
    if dt == D.bool_:
        raise DTypeError("matmul does not take bool tensors")
    a1, b1 = a.shape if a.ndim > 1 else (1, *a.shape), b.shape if b.ndim > 1 else (*b.shape, 1)
    if a1[-1] != b1[-2]:
        raise ShapeError(f"matmul: shapes {a.shape} and {b.shape} do not align ({a1[-1]} != {b1[-2]})")
    batch = broadcast_shapes(a1[:-2], b1[:-2], what="matmul batch dimensions")
    shape = (*batch, a1[-2], b1[-1])
    if a.ndim == 1:
        shape = shape[:-2] + shape[-1:]
    if b.ndim == 1:
        shape = shape[:-1]
    return _node("matmul", (astype(a, dt), astype(b, dt)), shape, dt)


def softmax(x, axis=None, *, dim=None) -> Tensor:
    """exp(x) / sum(exp(x)) along `axis` (default -1; torch's `dim=` too): the ISA's Softmax instruction
    (integers in float64).

    >>> ei.tensor.softmax([[0.0, 0.0], [1.0, 1.0]], axis=1)
    Tensor([[0.5, 0.5],
            [0.5, 0.5]], dtype=float64, device='cpu')
    """
    axis, _ = _dim(axis, False, dim, None, "softmax")
    axis = -1 if axis is None else axis
    x = _float_of(tensor(x) if not isinstance(x, Tensor) else x)
    (ax,) = normalize_axes(axis, x.ndim, "softmax") if x.ndim else (0,)
    return _node("softmax", (x,), x.shape, x.dtype, (ax,))


def layer_norm(x, normalized_shape=None, weight=None, bias=None, eps: float = 1e-5) -> Tensor:
    """Normalize over the trailing `normalized_shape` dimensions (default: the last), then * weight + bias:
    the ISA's LayerNorm instruction.

    >>> ei.tensor.layer_norm([[1.0, 3.0], [2.0, 2.0]])
    Tensor([[-1.,  1.],
            [ 0.,  0.]], dtype=float64, device='cpu')
    """
    x = _float_of(tensor(x) if not isinstance(x, Tensor) else x)
    if normalized_shape is None:
        normalized_shape = x.shape[-1:]
    if isinstance(normalized_shape, int):
        normalized_shape = (normalized_shape,)
    ns = tuple(normalized_shape)
    if x.ndim < len(ns) or x.shape[x.ndim - len(ns):] != ns:
        raise ShapeError(f"layer_norm: normalized_shape {ns} does not match the trailing dimensions of {x.shape}")
    n = math.prod(ns)
    args = [x]
    for p, fill in ((weight, 1.0), (bias, 0.0)):
        if p is None:
            p = _like(x, np.full(n, fill, dtype=x.dtype))
        p = astype(tensor(p) if not isinstance(p, Tensor) else p, x.dtype)
        if p.size != n:
            raise ShapeError(f"layer_norm: weight/bias of shape {p.shape} for normalized_shape {ns}")
        args.append(p)
    return _node("layer_norm", tuple(args), x.shape, x.dtype, (n, float(eps)))


# ---- movement (host layout, between programs) ------------------------------------------------------

def _move(name, args, shape, dtype, fn, desc="", param=None) -> Tensor:
    """A layout node: fn(*arrays) is its NumPy form; eidos.tensor.storage.move(name, param, ...) its device form."""
    return _node("move", tuple(args), shape, dtype, (name, fn, desc, param))


def reshape(x, shape) -> Tensor:
    """The same elements in `shape` (one dimension may be -1); host layout, fused through when it can be.

    >>> ei.tensor.reshape([1, 2, 3, 4, 5, 6], (2, 3))
    Tensor([[1, 2, 3],
            [4, 5, 6]], dtype=int64, device='cpu')
    """
    x = tensor(x) if not isinstance(x, Tensor) else x
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(int(s) for s in shape)
    try:
        new = np.empty(x.shape, dtype=np.bool_).reshape(shape).shape if x.size else np.empty(x.shape).reshape(shape).shape
    except ValueError:
        raise ShapeError(f"cannot reshape a tensor of shape {x.shape} ({x.size} elements) to {shape}") from None
    return _move("reshape", [x], new, x.dtype, lambda a: a.reshape(new), str(new))


def transpose(x, axes=None) -> Tensor:
    """The dimensions permuted by `axes` (None: reversed).

    >>> ei.tensor.transpose([[1, 2], [3, 4]])
    Tensor([[1, 3],
            [2, 4]], dtype=int64, device='cpu')
    """
    x = tensor(x) if not isinstance(x, Tensor) else x
    if axes is None:
        axes = tuple(range(x.ndim))[::-1]
    axes = tuple(int(a) for a in axes)
    outside = [a for a in axes if not -x.ndim <= a < x.ndim]     # (any and all are this module's own)
    if outside or len(axes) != x.ndim or sorted(a % x.ndim for a in axes) != list(range(x.ndim)):
        raise AxisError(f"transpose: axes {axes} are not a permutation of the {x.ndim} dimensions of shape {x.shape}")
    axes = tuple(a % x.ndim for a in axes)
    shape = tuple(x.shape[a] for a in axes)
    return _move("transpose", [x], shape, x.dtype, lambda a: np.transpose(a, axes), str(axes), axes)


def permute_dims(x, axes) -> Tensor:
    """The Array API's name for transpose(x, axes).

    >>> ei.tensor.permute_dims(ei.tensor.zeros((2, 3, 4)), (2, 0, 1)).shape
    (4, 2, 3)
    """
    return transpose(x, axes)


def squeeze(x, axis=None, *, dim=None) -> Tensor:
    """x without the dimensions of size 1 at `axis` (None: all of them).

    >>> ei.tensor.squeeze(ei.tensor.zeros((1, 3, 1)), axis=0).shape
    (3, 1)
    """
    axis, _ = _dim(axis, False, dim, None, "squeeze")
    x = tensor(x) if not isinstance(x, Tensor) else x
    axes = tuple(i for i, d in enumerate(x.shape) if d == 1) if axis is None else normalize_axes(axis, x.ndim, "squeeze")
    for a in axes:
        if x.shape[a] != 1:
            raise ShapeError(f"squeeze: axis {a} of shape {x.shape} has size {x.shape[a]}, not 1")
    shape = tuple(d for i, d in enumerate(x.shape) if i not in axes)
    return _move("squeeze", [x], shape, x.dtype, lambda a: a.reshape(shape), str(axes))


def expand_dims(x, axis=None, *, dim=None) -> Tensor:
    """x with a new dimension of size 1 at `axis`.

    >>> ei.tensor.expand_dims([1, 2], axis=1).shape
    (2, 1)
    """
    axis, _ = _dim(axis, False, dim, None, "expand_dims")
    axis = 0 if axis is None else axis
    x = tensor(x) if not isinstance(x, Tensor) else x
    n = x.ndim + 1
    if not -n <= axis < n:
        raise AxisError(f"expand_dims: axis {axis} out of range for a result of {n} dimensions")
    axis %= n
    shape = x.shape[:axis] + (1,) + x.shape[axis:]
    return _move("expand_dims", [x], shape, x.dtype, lambda a: a.reshape(shape), str(axis))


def expand(x, shape) -> Tensor:
    """Broadcast to `shape` (-1 keeps a dimension); `broadcast_to` is the same function.

    >>> ei.tensor.expand([[1], [2]], (2, 3))
    Tensor([[1, 1, 1],
            [2, 2, 2]], dtype=int64, device='cpu')
    """
    x = tensor(x) if not isinstance(x, Tensor) else x
    shape = tuple(shape)
    pad = len(shape) - x.ndim
    if pad < 0:
        raise ShapeError(f"expand: cannot expand shape {x.shape} to fewer dimensions {shape}")
    shape = tuple(x.shape[i - pad] if s == -1 else s for i, s in enumerate(shape))
    if broadcast_shapes(x.shape, shape, what="expand") != shape:
        raise ShapeError(f"expand: shape {x.shape} does not broadcast to {shape}")
    return _move("expand", [x], shape, x.dtype, lambda a: np.broadcast_to(a, shape), str(shape))


broadcast_to = expand


def concat(tensors, axis=0, *, dim=None) -> Tensor:
    """The tensors joined along `axis` (None: flattened first), in their promoted dtype; `concatenate`
    (NumPy's name) and `cat` (torch's, with `dim=`) are the same function.

    >>> ei.tensor.concat([[1, 2], [3.5]])
    Tensor([1. , 2. , 3.5], dtype=float64, device='cpu')
    >>> ei.tensor.cat([ei.tensor([[1]]), ei.tensor([[2]])], dim=1)
    Tensor([[1, 2]], dtype=int64, device='cpu')
    """
    if dim is not None:
        axis, _ = _dim(None if axis == 0 else axis, False, dim, None, "concat")
    ts = [tensor(t) if not isinstance(t, Tensor) else t for t in tensors]
    if not ts:
        raise ShapeError("concat needs at least one tensor")
    dt = ts[0].dtype
    for t in ts[1:]:
        dt = D.promote(dt, t.dtype)
    if axis is None:
        ts = [reshape(t, (-1,)) for t in ts]
        axis = 0
    nd = ts[0].ndim
    if nd == 0:
        raise ShapeError("concat of 0-d tensors; use stack")
    (ax,) = normalize_axes(axis, nd, "concat")
    for t in ts:
        if t.ndim != nd or _builtins.any(t.shape[i] != ts[0].shape[i] for i in range(nd) if i != ax):
            raise ShapeError(f"concat along axis {ax}: shapes {', '.join(str(t.shape) for t in ts)} differ off that axis")
    shape = tuple(_builtins.sum(t.shape[ax] for t in ts) if i == ax else d for i, d in enumerate(ts[0].shape))
    return _move("concat", [astype(t, dt) for t in ts], shape, dt, lambda *a: np.concatenate(a, axis=ax), str(ax), ax)


def stack(tensors, axis=0, *, dim=None) -> Tensor:
    """Tensors of one shape joined along a new dimension `axis`.

    >>> ei.tensor.stack([[1, 2], [3, 4]], axis=1)
    Tensor([[1, 3],
            [2, 4]], dtype=int64, device='cpu')
    """
    if dim is not None:
        axis, _ = _dim(None if axis == 0 else axis, False, dim, None, "stack")
    ts = [tensor(t) if not isinstance(t, Tensor) else t for t in tensors]
    if not ts:
        raise ShapeError("stack needs at least one tensor")
    if _builtins.any(t.shape != ts[0].shape for t in ts):
        raise ShapeError(f"stack: shapes {', '.join(str(t.shape) for t in ts)} differ")
    n = ts[0].ndim + 1
    if not -n <= axis < n:
        raise AxisError(f"stack: axis {axis} out of range for a result of {n} dimensions")
    return concat([expand_dims(t, axis) for t in ts], axis % n)




# ---- other spellings: NumPy's names the Array API renamed, and torch's --------------------------------
# The same functions under a second name (docs/tensor.md, "NumPy and PyTorch spellings"): ei.tensor.concatenate
# is ei.tensor.concat. Tensor methods carry torch's method spellings (array.py).

concatenate = cat = concat
power = pow
absolute = abs
arccos, arccosh, arcsin, arcsinh, arctan, arctanh, arctan2 = acos, acosh, asin, asinh, atan, atanh, atan2
invert, left_shift, right_shift = bitwise_invert, bitwise_left_shift, bitwise_right_shift
true_divide, mod, conjugate = divide, remainder, conj
amax, amin = max, min
clamp, unsqueeze = clip, expand_dims
ALIASES = {"concatenate": "concat", "cat": "concat", "power": "pow", "absolute": "abs", "arccos": "acos",
           "arccosh": "acosh", "arcsin": "asin", "arcsinh": "asinh", "arctan": "atan", "arctanh": "atanh",
           "arctan2": "atan2", "invert": "bitwise_invert", "left_shift": "bitwise_left_shift",
           "right_shift": "bitwise_right_shift", "true_divide": "divide", "mod": "remainder", "conjugate": "conj",
           "amax": "max", "amin": "min", "clamp": "clip", "unsqueeze": "expand_dims"}
__all__ += [*ALIASES, "values_indices"]
