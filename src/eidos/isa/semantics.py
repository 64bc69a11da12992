"""The value semantics of every scalar operation, as plain Python on Python numbers.

This is the definition the reference interpreter runs and the optimizer folds constants
with, so both agree bit for bit. Integers are Python ints wrapped to their type's width;
floats are Python floats holding a value exactly representable in their type, each
operation computed in binary64 (or exactly) and rounded once to the type.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable
from fractions import Fraction

from .address import CLASS_BYTES, CLASS_MEMORY_BYTES, NUM_CLASSES
from .instructions import Condition
from .types import Type

INF = math.inf
NAN = math.nan
_F32 = struct.Struct("<f")
_F16 = struct.Struct("<e")


def _round_struct(s: struct.Struct) -> Callable[[float], float]:
    pack, unpack = s.pack, s.unpack

    def rnd(x: float) -> float:
        try:
            return unpack(pack(x))[0]
        except OverflowError:  # rounds past the largest finite value
            return math.copysign(INF, x)
    return rnd


round_f32 = _round_struct(_F32)
round_f16 = _round_struct(_F16)


def round_bf16(x: float) -> float:
    import ml_dtypes
    import numpy as np

    with np.errstate(over="ignore"):
        return float(np.float64(x).astype(np.float32).astype(ml_dtypes.bfloat16))


def _identity(x: float) -> float:
    return float(x)


def wrapper(ty: Type) -> Callable:
    """The function that brings a Python number to `ty`: round (floats) or wrap (integers)."""
    if ty is Type.F64:
        return _identity
    if ty is Type.F32:
        return round_f32
    if ty is Type.F16:
        return round_f16
    if ty is Type.BF16:
        return round_bf16
    mask = (1 << ty.bits) - 1
    if ty.is_unsigned:
        return lambda v: v & mask
    half = 1 << (ty.bits - 1)
    return lambda v: ((v + half) & mask) - half


def _exact_to(ty: Type, exact: Fraction | int) -> float:
    """Round an exact rational once to a float type (nudging so binary64 -> narrower never double-rounds)."""
    try:
        v = float(exact)
    except OverflowError:
        return INF if exact > 0 else -INF
    if ty is not Type.F64 and Fraction(v) != exact:
        v = math.nextafter(v, INF if exact > v else -INF)
    return wrapper(ty)(v)


# ---- floats: the binary64 operations with IEEE results where Python would raise ----------

def fdiv(a: float, b: float) -> float:
    try:
        return a / b
    except ZeroDivisionError:
        if a != a or a == 0:
            return NAN
        return math.copysign(INF, a) * math.copysign(1.0, b)


def frem(a: float, b: float) -> float:
    try:
        return math.fmod(a, b)
    except ValueError:
        return NAN


def fmin(a: float, b: float) -> float:
    if a != a or b != b:
        return NAN
    if a == b:
        return a if math.copysign(1.0, a) < 0 else b
    return a if a < b else b


def fmax(a: float, b: float) -> float:
    if a != a or b != b:
        return NAN
    if a == b:
        return b if math.copysign(1.0, a) < 0 else a
    return a if a > b else b


def fexp(x: float) -> float:
    try:
        return math.exp(x)
    except OverflowError:
        return INF


def flog(x: float) -> float:
    if x > 0:
        return math.log(x)
    if x == 0:
        return -INF
    return NAN  # negative or NaN


def fsqrt(x: float) -> float:
    if x >= 0 or x == INF:
        return math.sqrt(x)
    return NAN


def _trig(f):
    def g(x: float) -> float:
        try:
            return f(x)
        except ValueError:
            return NAN
    return g


fsin, fcos, ftan = _trig(math.sin), _trig(math.cos), _trig(math.tan)


def fsigmoid(x: float) -> float:
    if x != x:
        return NAN
    if x >= 0:
        return 1.0 / (1.0 + fexp(-x))
    e = fexp(x)
    return e / (1.0 + e)


def frcp(x: float) -> float:
    return fdiv(1.0, x)


def frsqrt(x: float) -> float:
    return fdiv(1.0, fsqrt(x))


def _keep_zero_sign(f):
    def g(x: float) -> float:
        if x != x or x in (INF, -INF):
            return x
        r = float(f(x))
        return math.copysign(0.0, x) if r == 0 else r
    return g


ffloor, fceil, ftrunc, fround = (_keep_zero_sign(math.floor), _keep_zero_sign(math.ceil),
                                 _keep_zero_sign(math.trunc), _keep_zero_sign(round))


def fsign(x: float) -> float:
    if x != x:
        return NAN
    return 1.0 if x > 0 else (-1.0 if x < 0 else 0.0)


def fgelu(x: float) -> float:
    return x * (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0


def fswish(x: float) -> float:
    return x * fsigmoid(x)


def fpow(a: float, b: float) -> float:
    try:
        return math.pow(a, b)
    except OverflowError:
        return INF if a > 0 or float(b).is_integer() and b % 2 == 0 else -INF
    except ValueError:
        if a == 0:  # 0 ** negative
            return math.copysign(INF, a) if float(b).is_integer() and b % 2 == 1 else INF
        return NAN


def fatan2(a: float, b: float) -> float:
    return math.atan2(a, b)


def fused_multiply_add(ty: Type) -> Callable[[float, float, float], float]:
    """(a, b, c) -> a * b + c rounded once to ty."""
    w = wrapper(ty)
    nextafter = math.nextafter
    if ty is not Type.F64:
        def fma_narrow(a: float, b: float, c: float) -> float:
            # The product of two <= 24-bit significands is exact in binary64; TwoSum gives the
            # sum's exact error, and a nudge toward it keeps the final rounding single.
            p = a * b
            s = p + c
            if s - s == 0.0:  # finite (so were the operands)
                bb = s - p
                err = (p - (s - bb)) + (c - bb)
                if err:
                    s = nextafter(s, INF if err > 0 else -INF)
            return w(s)
        return fma_narrow

    def fma64(a: float, b: float, c: float) -> float:
        if not (math.isfinite(a) and math.isfinite(b) and math.isfinite(c)):
            return a * b + c
        exact = Fraction(a) * Fraction(b) + Fraction(c)
        if exact == 0:
            return a * b + c  # IEEE signed-zero rules; the binary64 product is exact enough here
        return _exact_to(ty, exact)
    return fma64


# ---- integers ----------------------------------------------------------------------------

def _idiv(ty: Type):
    w = wrapper(ty)
    ones = w(-1)

    def div(a: int, b: int) -> int:
        if b == 0:
            return ones
        q = abs(a) // abs(b)
        return w(q if (a < 0) == (b < 0) else -q)
    return div


def _irem(ty: Type):
    w = wrapper(ty)

    def rem(a: int, b: int) -> int:
        if b == 0:
            return a
        r = abs(a) % abs(b)
        return w(-r if a < 0 else r)
    return rem


# ---- the tables the interpreter and the optimizer use -------------------------------------

def binary(op: str, ty: Type) -> Callable:
    """op in ADD SUB MUL DIV REM MIN MAX AND OR XOR SHL SHR POW ATAN2 -> f(a, b) on values of ty."""
    w = wrapper(ty)
    if ty.is_float:
        base = {"ADD": lambda a, b: a + b, "SUB": lambda a, b: a - b, "MUL": lambda a, b: a * b,
                "DIV": fdiv, "REM": frem, "MIN": fmin, "MAX": fmax, "POW": fpow, "ATAN2": fatan2}[op]
        if op in ("MIN", "MAX") or ty is Type.F64:
            return base
        if op in ("ADD", "SUB", "MUL"):
            return {"ADD": lambda a, b: w(a + b), "SUB": lambda a, b: w(a - b), "MUL": lambda a, b: w(a * b)}[op]
        return lambda a, b: w(base(a, b))
    bits = ty.bits
    if op == "DIV":
        return _idiv(ty)
    if op == "REM":
        return _irem(ty)
    if op == "MIN":
        return min
    if op == "MAX":
        return max
    if op == "SHL":
        return lambda a, b: w(a << (b % bits))
    if op == "SHR":
        return lambda a, b: a >> (b % bits)
    if op in ("AND", "OR", "XOR"):  # on in-range operands the result is in range too
        return {"AND": lambda a, b: a & b, "OR": lambda a, b: a | b, "XOR": lambda a, b: a ^ b}[op]
    # ADD SUB MUL, wrapped inline: the interpreter's hottest path
    mask = (1 << bits) - 1
    if ty.is_unsigned:
        return {"ADD": lambda a, b: (a + b) & mask, "SUB": lambda a, b: (a - b) & mask,
                "MUL": lambda a, b: (a * b) & mask}[op]
    half = 1 << (bits - 1)
    return {"ADD": lambda a, b: ((a + b + half) & mask) - half, "SUB": lambda a, b: ((a - b + half) & mask) - half,
            "MUL": lambda a, b: ((a * b + half) & mask) - half}[op]


_FLOAT_UNARY = {"ABS": math.fabs, "NEG": lambda x: -x, "EXP": fexp, "LOG": flog, "SQRT": fsqrt, "SIN": fsin,
                "COS": fcos, "TAN": ftan, "TANH": math.tanh, "SIGMOID": fsigmoid, "RCP": frcp, "RSQRT": frsqrt,
                "SIGN": fsign, "FLOOR": ffloor, "CEIL": fceil, "ROUND": fround, "TRUNC": ftrunc,
                "GELU": fgelu, "SWISH": fswish, "RELU": lambda x: x if x > 0 or x != x else 0.0}


def unary(op: str, ty: Type) -> Callable:
    """op in ABS NEG NOT RELU SIGN and the float functions (EXP ... SWISH) -> f(x) on values of ty."""
    w = wrapper(ty)
    if ty.is_float:
        f = _FLOAT_UNARY[op]
        return f if ty is Type.F64 or op in ("ABS", "NEG", "SIGN", "RELU") else (lambda x: w(f(x)))
    if op == "ABS":
        return lambda x: w(abs(x))
    if op == "NEG":
        return lambda x: w(-x)
    if op == "NOT":
        return lambda x: w(~x)
    if op == "RELU":
        return lambda x: x if x > 0 else 0
    if op == "SIGN":
        return lambda x: (x > 0) - (x < 0)
    if op == "ClsGet":  # the class holding a class-memory address
        return lambda x: w((x % CLASS_MEMORY_BYTES) // CLASS_BYTES)
    if op == "MIRROR":  # the mirror involution on the 96 classes
        return lambda x: w((x % NUM_CLASSES) ^ 7)
    if op == "BoundMap":  # fold a class-space coordinate onto the torus
        return lambda x: w(x % CLASS_MEMORY_BYTES)
    raise KeyError(op)


def ternary(op: str, ty: Type) -> Callable:
    """op in FMA FMS MAD CLAMP LERP -> f(a, b, c)."""
    w = wrapper(ty)
    if ty.is_integer:
        if op in ("FMA", "MAD"):
            return lambda a, b, c: w(a * b + c)
        if op == "FMS":
            return lambda a, b, c: w(a * b - c)
        if op == "CLAMP":
            return lambda x, lo, hi: min(max(x, lo), hi)
        raise KeyError(op)
    if op == "FMA":
        return fused_multiply_add(ty)
    if op == "FMS":
        fma = fused_multiply_add(ty)
        return lambda a, b, c: fma(a, b, -c)
    if op == "MAD":
        return lambda a, b, c: w(w(a * b) + c)
    if op == "CLAMP":
        return lambda x, lo, hi: fmin(fmax(x, lo), hi)
    if op == "LERP":
        return lambda a, b, t: w(a + w(w(b - a) * t))
    raise KeyError(op)


def compare(cond: Condition) -> Callable[[object, object], bool]:
    return {Condition.EQ: lambda a, b: a == b, Condition.NE: lambda a, b: a != b,
            Condition.LT: lambda a, b: a < b, Condition.LE: lambda a, b: a <= b,
            Condition.GT: lambda a, b: a > b, Condition.GE: lambda a, b: a >= b}[cond]


def convert(src: Type, dst: Type) -> Callable:
    """CVT: floats to ints truncate toward zero and saturate (NaN -> 0); ints wrap; floats round once."""
    w = wrapper(dst)
    if dst.is_float:
        if src.is_float:
            return w
        return lambda v: _exact_to(dst, v)
    if src.is_integer:
        return w
    lo, hi = dst.min_value, dst.max_value

    def f2i(v: float) -> int:
        if v != v:
            return 0
        if v >= hi:
            return hi
        if v <= lo:
            return lo
        return int(v)
    return f2i


def immediate(value, ty: Type):
    """A MOV_IMM value as the register holds it."""
    return wrapper(ty)(float(value)) if ty.is_float else wrapper(ty)(int(value))
