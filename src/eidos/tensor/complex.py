"""Complex tensors (complex64, complex128): their operations run as NumPy on the host.

Why the host and not ISA programs: the Atlas ISA has no complex type, and the Array API standard's
complex special cases (C99 Annex G: exp, log, sqrt, the hyperbolic functions and their inverses, each
with a dozen rules for infinities, NaNs and signed zeros) are what NumPy's npymath already implements.
Lowering them to register programs over interleaved float pairs would rewrite that library by hand,
and on the CPU it would be slower, not faster: a lane-form program costs about 100 ns an element,
NumPy's complex loops a few ns. So every graph node that takes or makes a complex tensor becomes a
"host" node (lazy like any other; realized by one NumPy call; `ei.tensor.explain` says so). NumPy is
corrected where it departs from the standard (expm1, log1p) or where the standard is stricter (a real
operand of add/sub/mul/div keeps the other operand's components apart, as the standard's tables say).
"""

from __future__ import annotations

import numpy as np

from . import dtypes as D
from .dtypes import DTypeError

WHY = "host NumPy (complex: the ISA has no complex type)"

# ops whose output may be real while an input is complex (the others are caught by a complex output dtype)
TAKES_COMPLEX = frozenset({"abs", "real", "imag", "isnan", "isinf", "isfinite", "eq", "ne", "lt", "le", "gt",
                           "ge", "cast", "logical_not", "reduce", "matmul", "where"})

_ORDER = frozenset({"lt", "le", "gt", "ge", "maximum", "minimum", "clip", "floor", "ceil", "trunc", "floordiv",
                    "mod", "atan2", "relu", "sigmoid", "gelu", "softmax", "layer_norm"})
_NAMES = {"lt": "less", "le": "less_equal", "gt": "greater", "ge": "greater_equal", "floordiv": "floor_divide",
          "mod": "remainder", "neg": "negative", "sub": "subtract", "mul": "multiply", "div": "divide"}


def _expm1(z):
    """exp(z) - 1 without cancellation near 0: re = expm1(a) cos b - 2 sin^2(b/2), im = exp(a) sin b;
    the standard's special cases (a = -inf, b = +-0, b not finite) set afterwards."""
    a, b = z.real, z.imag
    out = np.empty_like(z)
    h = np.sin(b / 2)
    out.real = np.expm1(a) * np.cos(b) - 2 * h * h
    out.imag = np.exp(a) * np.sin(b)
    zero_b = b == 0
    out.imag[zero_b] = b[zero_b]                       # exp(a + 0j) - 1 is real: keep the signed zero
    out.real[zero_b & (a == 0)] = 0.0                  # (+-0 + 0j) -> +0 + 0j (the standard), not -0 - 0
    bad_b = ~np.isfinite(b)
    lo = (a == -np.inf) & bad_b                        # -inf + (inf|nan)j -> -1 + 0j
    out.real[lo], out.imag[lo] = -1.0, 0.0
    hi = (a == np.inf) & bad_b                         # +inf + (inf|nan)j -> inf + nan j
    out.real[hi], out.imag[hi] = np.inf, np.nan
    return out


def _log1p(z):
    """log(1 + z) accurate near 0 (|z| < 1/2: log|1+z| = log1p(2a + a^2 + b^2) / 2); elsewhere log(1 + z),
    whose special cases are the standard's for log1p."""
    w = np.array(z, copy=True)
    w.real += 1                                        # 1 + z keeping the sign of a zero imaginary part
    out = np.asarray(np.log(w))
    a, b = z.real, z.imag
    small = np.abs(z) < 0.5
    if small.any():
        a_s, b_s = a[small], b[small]
        out.real[small] = 0.5 * np.log1p(a_s * (2 + a_s) + b_s * b_s)
        out.imag[small] = np.arctan2(b_s, 1 + a_s)
    return out


def _tanh(z):
    """np.tanh, with the standard's +-1 + 0j for an infinite real part and a finite imaginary one: the zero takes
    b's sign (NumPy's takes the sign of sin(2b), which the standard does not)."""
    out = np.asarray(np.tanh(z))
    big = np.isinf(z.real) & np.isfinite(z.imag)
    out.real[big], out.imag[big] = np.sign(z.real[big]), np.copysign(0.0, z.imag[big])
    return out


def _sign(z):
    """z / |z|, 0 for 0, NaN + NaN j when a component is NaN."""
    out = np.asarray(np.sign(z))
    out[np.isnan(z)] = complex(np.nan, np.nan)
    return out


UNARY = {
    "neg": np.negative, "abs": np.abs, "sqrt": np.sqrt, "exp": np.exp, "log": np.log, "sin": np.sin,
    "cos": np.cos, "tan": np.tan, "tanh": _tanh, "sinh": np.sinh, "cosh": np.cosh, "acos": np.arccos,
    "asin": np.arcsin, "atan": np.arctan, "acosh": np.arccosh, "asinh": np.arcsinh, "atanh": np.arctanh,
    "expm1": _expm1, "log1p": _log1p, "square": lambda z: z * z, "sign": _sign, "round": np.round,
    "isnan": np.isnan, "isinf": np.isinf, "isfinite": np.isfinite, "conj": np.conj, "real": np.real,
    "imag": np.imag, "reciprocal": lambda z: 1 / z, "logical_not": lambda z: z == 0,
}
BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "pow": np.power,
          "eq": np.equal, "ne": np.not_equal}


def _with_real(op, z, r, real_first, dtype):
    """A complex operand with a real one, component by component (the standard's add/multiply/divide
    tables): the real operand has no imaginary part to add to, multiply by or divide into."""
    out = np.empty(np.broadcast_shapes(z.shape, r.shape), dtype)
    a, b = z.real, z.imag
    if op == "add":
        out.real, out.imag = a + r, b
    elif op == "sub":
        out.real, out.imag = (r - a, -b) if real_first else (a - r, b)
    elif op == "mul":
        out.real, out.imag = a * r, b * r
    else:  # div with the real divisor
        out.real, out.imag = a / r, b / r
    return out


def kernel(op: str, in_dtypes, out_dtype, attrs, real_operand=None):
    """The NumPy function computing `op` for complex operands, and its name for explain; DTypeError names
    an operation the standard does not define on complex numbers."""
    shown = _NAMES.get(op, op)
    if op in _ORDER or (op == "reduce" and attrs[0] in ("min", "max", "argmin", "argmax")):
        what = attrs[0] if op == "reduce" else shown
        raise DTypeError(f"{what} is not defined for complex tensors (complex numbers have no order); "
                         "compare abs(x), real(x) or imag(x) instead")
    if op == "cast":
        (src,) = in_dtypes
        if src in D.COMPLEX and out_dtype not in D.COMPLEX and out_dtype != D.bool_:
            raise DTypeError(f"cannot cast {src} to {out_dtype}: the standard does not let a cast drop the "
                             "imaginary part; take real(x), imag(x) or abs(x) first")
        return (lambda a: a.astype(out_dtype)), f"astype {out_dtype}"
    if op in UNARY:
        fn = UNARY[op]
        return (lambda a: np.asarray(fn(a)).astype(out_dtype, copy=False)), shown
    if op in ("add", "sub", "mul", "div") and real_operand is not None:
        real_first = real_operand == 0
        return (lambda x, y: _with_real(op, y, x, True, out_dtype) if real_first else
                _with_real(op, x, y, False, out_dtype)), \
            f"{shown} (complex with real)"
    if op in BINARY:
        fn = BINARY[op]
        return (lambda a, b: np.asarray(fn(a, b)).astype(out_dtype, copy=False)), shown
    if op == "where":
        return (lambda c, a, b: np.where(c, a, b).astype(out_dtype, copy=False)), "where"
    if op == "matmul":
        return (lambda a, b: np.matmul(a, b)), "matmul"
    if op == "reduce":
        rop, axes, keepdims, divisor = attrs
        if rop in ("sum", "prod"):
            fn = np.sum if rop == "sum" else np.prod

            def reduce(a):
                r = np.asarray(fn(a, axis=axes, keepdims=keepdims, dtype=out_dtype))
                return _with_real("div", r, np.asarray(divisor), False, out_dtype) if divisor else r
            return reduce, f"{'mean' if divisor else rop} axes={axes}"
    raise DTypeError(f"{shown if op != 'reduce' else attrs[0]} does not take complex tensors "
                     f"({', '.join(str(d) for d in in_dtypes)})")


def host_call(op, args, out_dtype, attrs, is_tensor):
    """(the tensors among args, a function of their arrays computing op on the host, its name).

    A real operand next to a complex one arrives uncast (tensor.py leaves it real; a Python int or float
    stays one), so add/sub/mul/div can keep the components apart as the standard's tables say."""
    real_operand = None
    if op in ("add", "sub", "mul", "div") and out_dtype in D.COMPLEX:
        reals = [i for i, a in enumerate(args) if a.dtype not in D.COMPLEX or
                 (not is_tensor(a) and not isinstance(a.value, complex))]
        if len(reals) == 1 and not (op == "div" and reals[0] == 0):
            real_operand = reals[0]
    fn, name = kernel(op, [a.dtype for a in args], out_dtype, attrs, real_operand)
    tensors = tuple(a for a in args if is_tensor(a))
    if len(tensors) == len(args):
        return tensors, fn, name
    slots = [None if is_tensor(a) else np.asarray(a.value, a.dtype if isinstance(a.value, complex) else
                                                  D.REAL_OF.get(a.dtype, a.dtype)) for a in args]

    def with_consts(*arrays):
        it = iter(arrays)
        return fn(*[next(it) if s is None else s for s in slots])
    return tensors, with_consts, name
