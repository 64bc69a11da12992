"""What generated code calls: raw loads and stores, LLVM's fma, and the scalar semantics in numba.

Imported only when a program is compiled (it imports numba). Each helper mirrors one function
of eidos.isa.semantics bit for bit; the instruction suite checks them against the reference.
Registers live as two locals per ISA register: an int64 (integers, U64 as its bit pattern) and a
float64 (floats, always holding a value exactly representable in the instruction's type).
"""

from __future__ import annotations

import math
import pickle as _pickle
import sys as _sys
from pathlib import Path as _Path

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core.caching import IndexDataCacheFile as _IndexDataCacheFile
from numba.extending import intrinsic

from ...cache import seal as _seal
from ...cache import unseal as _unseal
from ...codegen.state import FAILED

OPTS = {"cache": True, "error_model": "numpy", "nogil": True}


# ---- raw memory: addresses are plain int64 byte addresses (base pointer + offset) ----------

def _load(nbty):
    @intrinsic
    def load(typingctx, addr):
        def codegen(context, builder, signature, args):
            ptr = builder.inttoptr(args[0], context.get_value_type(nbty).as_pointer())
            return builder.load(ptr, align=1)
        return nbty(types.int64), codegen
    return load


def _store(nbty):
    @intrinsic
    def store(typingctx, addr, value):
        def codegen(context, builder, signature, args):
            ptr = builder.inttoptr(args[0], context.get_value_type(nbty).as_pointer())
            builder.store(args[1], ptr, align=1)
            return context.get_dummy_value()
        return types.void(types.int64, nbty), codegen
    return store


ld_i8, ld_u8, ld_i16, ld_u16 = _load(types.int8), _load(types.uint8), _load(types.int16), _load(types.uint16)
ld_i32, ld_u32, ld_i64 = _load(types.int32), _load(types.uint32), _load(types.int64)
ld_f32, ld_f64 = _load(types.float32), _load(types.float64)
st_i8, st_i16, st_i32, st_i64 = _store(types.int8), _store(types.int16), _store(types.int32), _store(types.int64)
st_f32, st_f64 = _store(types.float32), _store(types.float64)


def _fma(nbty, llty):
    """IEEE fused multiply-add in one float type (one rounding): LLVM's llvm.fma."""
    @intrinsic
    def fma(typingctx, a, b, c):
        def codegen(context, builder, signature, args):
            fn = builder.module.declare_intrinsic("llvm.fma", [llty], ir.FunctionType(llty, [llty] * 3))
            return builder.call(fn, args)
        return nbty(nbty, nbty, nbty), codegen
    return fma


fma64, fma32 = _fma(types.float64, ir.DoubleType()), _fma(types.float32, ir.FloatType())


# ---- rounding to the narrow float types -------------------------------------------------------

@njit(**OPTS)
def rf32(x):
    return np.float64(np.float32(x))


@njit(**OPTS)
def f64_to_f16(x):
    """Bits of binary16 nearest x (ties to even), as struct.pack('<e') rounds; overflow -> inf."""
    b = np.int64(np.float64(x).view(np.int64))
    sign = (b >> 48) & 0x8000
    if x != x:
        return np.int64(sign | 0x7E00)
    a = abs(x)
    if a == np.inf:
        return np.int64(sign | 0x7C00)
    if a >= 65520.0:  # rounds past 65504
        return np.int64(sign | 0x7C00)
    if a < 6.103515625e-05:  # subnormal half: multiples of 2**-24
        q = a * 16777216.0
        r = np.rint(q)  # ties to even
        return np.int64(sign | np.int64(r))
    e = np.int64((np.float64(a).view(np.int64) >> 52) & 0x7FF) - 1023
    m = a / (2.0 ** e) - 1.0  # in [0, 1)
    q = np.rint(m * 1024.0)
    if q == 1024.0:
        q = 0.0
        e += 1
    if e > 15:
        return np.int64(sign | 0x7C00)
    return np.int64(sign | ((e + 15) << 10) | np.int64(q))


@njit(**OPTS)
def f16_to_f64(h):
    h = np.int64(h) & 0xFFFF
    s = -1.0 if h & 0x8000 else 1.0
    e = (h >> 10) & 0x1F
    m = h & 0x3FF
    if e == 0:
        return s * m * 5.9604644775390625e-08
    if e == 31:
        return s * np.inf if m == 0 else np.nan
    return s * (1.0 + m / 1024.0) * 2.0 ** (e - 15)


@njit(**OPTS)
def rf16(x):
    return f16_to_f64(f64_to_f16(x))


@njit(**OPTS)
def f64_to_bf16(x):
    """Bits of bfloat16: through float32 first, then nearest-even on the top 16 bits (as ml_dtypes)."""
    f = np.float32(x)
    u = np.int64(f.view(np.uint32))
    if f != f:
        return np.int64(((u >> 16) | 0x40) & 0xFFFF)
    u = u + 0x7FFF + ((u >> 16) & 1)
    return np.int64((u >> 16) & 0xFFFF)


@njit(**OPTS)
def bf16_to_f64(h):
    return np.float64(np.uint32((np.int64(h) & 0xFFFF) << 16).view(np.float32))


@njit(**OPTS)
def rbf16(x):
    return bf16_to_f64(f64_to_bf16(x))


# ---- float operations with the reference's results -----------------------------------------

@njit(**OPTS)
def fmin(a, b):
    if a != a or b != b:
        return np.nan
    if a == b:
        return a if math.copysign(1.0, a) < 0 else b
    return a if a < b else b


@njit(**OPTS)
def fmax(a, b):
    if a != a or b != b:
        return np.nan
    if a == b:
        return b if math.copysign(1.0, a) < 0 else a
    return a if a > b else b


@njit(**OPTS)
def flog(x):
    if x > 0:
        return math.log(x)
    if x == 0:
        return -np.inf
    return np.nan


@njit(**OPTS)
def fsqrt(x):
    if x >= 0 or x == np.inf:
        return math.sqrt(x)
    return np.nan


@njit(**OPTS)
def ftrig(which, x):
    if x != x or x == np.inf or x == -np.inf:
        return np.nan
    if which == 0:
        return math.sin(x)
    if which == 1:
        return math.cos(x)
    return math.tan(x)


@njit(**OPTS)
def fsigmoid(x):
    if x != x:
        return np.nan
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


@njit(**OPTS)
def frem(a, b):
    if a != a or b != b or b == 0 or a == np.inf or a == -np.inf:
        return np.nan
    return np.fmod(a, b)


@njit(**OPTS)
def fkeep(which, x):
    """FLOOR (0), CEIL (1), TRUNC (2), ROUND half-even (3); a zero result keeps x's sign."""
    if x != x or x == np.inf or x == -np.inf:
        return x
    if which == 0:
        r = np.floor(x)
    elif which == 1:
        r = np.ceil(x)
    elif which == 2:
        r = np.trunc(x)
    else:
        r = np.rint(x)
    if r == 0:
        return math.copysign(0.0, x)
    return r


@njit(**OPTS)
def fsign(x):
    if x != x:
        return np.nan
    return 1.0 if x > 0 else (-1.0 if x < 0 else 0.0)


@njit(**OPTS)
def fgelu(x):
    return x * (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0


@njit(**OPTS)
def fpow(a, b):
    return a ** b


@njit(**OPTS)
def fma_narrow(a, b, c):
    """a * b + c for F32/F16/BF16 values: the binary64 result nudged so the final rounding is single."""
    if not (math.isfinite(a) and math.isfinite(b) and math.isfinite(c)):
        return a * b + c
    p = a * b
    s = p + c
    bb = s - p
    err = (p - (s - bb)) + (c - bb)
    if err != 0 and math.isfinite(s):
        s = np.nextafter(s, np.inf if err > 0 else -np.inf)
    return s


# ---- integers (int64 locals; U64 values as their bit pattern) --------------------------------

@njit(**OPTS)
def sdiv(a, b):
    """Signed truncating division; x/0 -> -1, MIN/-1 -> -MIN wrapped (the caller wraps to the width)."""
    if b == 0:
        return np.int64(-1)
    if b == -1:
        return -a
    q = a // b
    if q < 0 and q * b != a:
        q += 1
    return q


@njit(**OPTS)
def srem(a, b):
    if b == 0:
        return a
    if b == -1:
        return np.int64(0)
    return a - b * sdiv(a, b)


@njit(**OPTS)
def udiv64(a, b):
    if b == 0:
        return np.int64(-1)
    return np.int64(np.uint64(a) // np.uint64(b))


@njit(**OPTS)
def urem64(a, b):
    if b == 0:
        return a
    return np.int64(np.uint64(a) % np.uint64(b))


@njit(**OPTS)
def umod64(a, m):
    return np.int64(np.uint64(a) % np.uint64(m))


@njit(**OPTS)
def ult64(a, b):
    return np.uint64(a) < np.uint64(b)


@njit(**OPTS)
def ushr64(a, s):
    return np.int64(np.uint64(a) >> np.uint64(s))


@njit(**OPTS)
def f2i(x, lo, hi):
    """Float -> signed int: truncate, saturate at [lo, hi], NaN -> 0."""
    if x != x:
        return np.int64(0)
    if x >= np.float64(hi):
        return hi
    if x <= np.float64(lo):
        return lo
    return np.int64(x)


@njit(**OPTS)
def f2u64(x):
    if x != x or x <= 0.0:
        return np.int64(0)
    if x >= 18446744073709551615.0:
        return np.int64(-1)
    return np.int64(np.uint64(x))


# ---- address checks, out of line so each generated function stays small (numba compiles faster) ----

@njit(**OPTS)
def gaddr(q, size, ntb, tbs, tbb):
    """The byte address a global pointer names, or -1 when it is negative, dangling or out of bounds."""
    h = q >> 32
    o = q & 0xFFFFFFFF
    if q < 0 or h >= ntb or o > tbs[h] - size:
        return np.int64(-1)
    return tbb[h] + o


@njit(**OPTS)
def saddr(o, size, shb, shsz):
    if o < 0 or o + size > shsz:
        return np.int64(-1)
    return shb + o


@njit(**OPTS)
def naddr(a, offset_bytes, size, base):
    """Class-memory neighbour along a 256-byte page row, or -1 for a bad or misaligned address."""
    if a < 0 or a > 1179648 - size or a % size != 0:
        return np.int64(-1)
    col = a % 256
    return base + a - col + (col + offset_bytes) % 256


@njit(**OPTS)
def fail(err, code, index, thread, value):
    err[0] = code
    err[1] = index
    err[2] = thread
    err[3] = value
    return FAILED


# ---- the array instructions' NaN behaviour is NumPy's (the reference computes them with NumPy) --------

@njit(**OPTS)
def amin(a, b):
    """np.minimum, with -0.0 below 0.0: the first NaN operand propagates as it is."""
    if a != a:
        return a
    if b != b:
        return b
    if a == b:
        return a if math.copysign(1.0, a) < 0 else b
    return a if a < b else b


@njit(**OPTS)
def amax(a, b):
    if a != a:
        return a
    if b != b:
        return b
    if a == b:
        return b if math.copysign(1.0, a) < 0 else a
    return a if a > b else b


@njit(**OPTS)
def asigmoid(x):
    e = math.exp(-abs(x))
    if x >= 0:
        return 1.0 / (1.0 + e)
    return e / (1.0 + e)


NEG_NAN = -math.nan  # the x86 default NaN (sign set), which NumPy's log returns for negative input


@njit(**OPTS)
def alog(x):
    if x < 0:
        return NEG_NAN
    return math.log(x)


@njit(**OPTS)
def atanh_(x):
    if x != x:
        return math.nan  # NumPy's tanh returns the positive quiet NaN
    return math.tanh(x)


@njit(**OPTS)
def apow(a, b):
    if b == 0:
        return 1.0
    if a != a:
        return a
    if b != b:
        return 1.0 if a == 1.0 else b
    return math.pow(a, b)


@njit(**OPTS)
def aatan2(a, b):
    if a != a:
        return a
    if b != b:
        return b
    return math.atan2(a, b)


# ---- a branch-free float32 exp LLVM vectorizes 16 lanes wide (libm's exp is a call per element) ----------

# float32 constants (numba types a global np.float32 as float32, so no operation widens to binary64)
_F = np.float32
_LOG2E = _F(1.4426950408889634)
_LN2_HI, _LN2_LO = _F(0.693145751953125), _F(1.428606765330187045e-06)  # hi: 16 bits, so k * hi is exact
# minimax coefficients of (exp(r) - 1 - r) / r**2 on |r| <= ln2/2 (SLEEF's expf, 1 ULP)
_E5, _E4, _E3 = _F(0.000198527617612853646278381), _F(0.00139304355252534151077271), _F(0.00833336077630519866943359)
_E2, _E1, _HALF, _ONE = _F(0.0416664853692054748535156), _F(0.166666671633720397949219), _F(0.5), _F(1.0)
_EXP_LO, _EXP_HI = _F(-104.0), _F(89.0)  # exp(-104) < half the least subnormal; exp(89) > the largest float32
_INF32, _ZERO32 = _F(np.inf), _F(0.0)


@njit(inline="always", **OPTS)
def vexpf(x):
    """exp of a float32, computed in float32: within 1 ULP of the correctly rounded result over the whole
    float32 range (every input checked; docs/isa.md allows 4), NaN -> NaN, +inf -> inf, -inf -> 0,
    overflow to inf and underflow to subnormals and 0 as rounding gives them. Cody-Waite reduction
    x = k ln2 + r, a degree-7 polynomial for exp(r) in fused multiply-adds, and 2**k applied as two
    exact factors (so subnormal results are rounded once). Selects, not branches: LLVM vectorizes loops
    over it with 16 float32 lanes (AVX-512) where the binary64 formula gets 8."""
    xc = min(max(x, _EXP_LO), _EXP_HI)
    k = np.rint(xc * _LOG2E)
    r = fma32(k, -_LN2_HI, xc)
    r = fma32(k, -_LN2_LO, r)
    u = fma32(_E5, r, _E4)
    u = fma32(u, r, _E3)
    u = fma32(u, r, _E2)
    u = fma32(u, r, _E1)
    u = fma32(u, r, _HALF)
    u = fma32(r * r, u, r) + _ONE
    q = np.int32(k)
    q1 = q >> 1   # k in [-150, 128]: each half in [-75, 64], so each factor is a normal float32
    s1 = np.int32((q1 + 127) << 23).view(np.float32)
    s2 = np.int32((q - q1 + 127) << 23).view(np.float32)
    y = (u * s1) * s2
    y = _INF32 if x > _EXP_HI else y
    y = _ZERO32 if x < _EXP_LO else y
    return x if x != x else y


@njit(inline="always", **OPTS)
def asigmoid32(x):
    """sigmoid of a float32 value (held in a float64) as `asigmoid`, with exp by `vexpf` so loops vectorize:
    exp's 1 ULP moves the float32 result by at most 2.5 ULP after rounding (docs/isa.md allows 4)."""
    e = np.float64(vexpf(np.float32(-abs(x))))
    return 1.0 / (1.0 + e) if x >= 0 else e / (1.0 + e)


# binary64: the same scheme with fdlibm's split of ln2 (its hi part has 32 bits, so k * hi is exact)
_LN2_HI64, _LN2_LO64, _LOG2E64 = 6.93147180369123816490e-01, 1.90821492927058770002e-10, 1.4426950408889634
_EXP_LO64, _EXP_HI64 = -746.0, 710.0  # exp(-746) < half the least subnormal; exp(710) > the largest float64


@njit(inline="always", **OPTS)
def vexp(x):
    """exp of a float64 without libm: Cody-Waite reduction, Taylor to degree 13 in fused multiply-adds (truncation
    under 0.1 ULP on |r| <= ln2/2), 2**k as two exact factors (subnormal results rounded once); NaN, infinities,
    overflow and underflow as `vexpf`. Within 2 ULP of NumPy's exp on the tested inputs (docs/isa.md allows 4),
    and loops over it vectorize (8 float64 lanes) where a libm call per element does not."""
    xc = min(max(x, _EXP_LO64), _EXP_HI64)
    k = np.rint(xc * _LOG2E64)
    r = fma64(k, -_LN2_HI64, xc)
    r = fma64(k, -_LN2_LO64, r)
    p = 1.0 / 6227020800.0
    p = fma64(p, r, 1.0 / 479001600.0)
    p = fma64(p, r, 1.0 / 39916800.0)
    p = fma64(p, r, 1.0 / 3628800.0)
    p = fma64(p, r, 1.0 / 362880.0)
    p = fma64(p, r, 1.0 / 40320.0)
    p = fma64(p, r, 1.0 / 5040.0)
    p = fma64(p, r, 1.0 / 720.0)
    p = fma64(p, r, 1.0 / 120.0)
    p = fma64(p, r, 1.0 / 24.0)
    p = fma64(p, r, 1.0 / 6.0)
    p = fma64(p, r, 0.5)
    p = fma64(p * r, r, r) + 1.0
    q = np.int64(k)
    q1 = q >> 1   # k in [-1077, 1025]: each half in [-539, 513], so each factor is a normal float64
    y = (p * np.int64((q1 + 1023) << 52).view(np.float64)) * np.int64((q - q1 + 1023) << 52).view(np.float64)
    y = np.inf if x > _EXP_HI64 else y
    y = 0.0 if x < _EXP_LO64 else y
    return x if x != x else y


@intrinsic
def radd(typingctx, a, b):
    """a + b in binary64 that LLVM may reassociate: only for accumulating a sum, so the loop vectorizes
    (partial sums per vector lane). The flag is on this one addition, never on the values summed;
    NaN and infinities keep their IEEE meaning (no nnan/ninf)."""
    def codegen(context, builder, signature, args):
        return builder.fadd(args[0], args[1], flags=("reassoc",))
    return types.float64(types.float64, types.float64), codegen


# ---- numba's cache files, sealed ----------------------------------------------------------------------

class _Sealed(_IndexDataCacheFile):
    """numba's index and data files (both pickles), written sealed and read only when their seal holds
    (eidos.isa.cache.seal/unseal): a damaged or foreign file is compiled again, never unpickled."""

    def _load_index(self):
        payload = _unseal(_Path(self._index_path))
        if payload is None:
            return {}
        version, stamp, overloads = _pickle.loads(payload)
        return overloads if (version, stamp) == (self._version, self._source_stamp) else {}

    def _save_index(self, overloads):
        _seal(_Path(self._index_path), _pickle.dumps((self._version, self._source_stamp, overloads), protocol=-1))

    def _load_data(self, name):
        payload = _unseal(_Path(self._data_path(name)))
        if payload is None:
            raise FileNotFoundError(self._data_path(name))   # IndexDataCacheFile.load: no entry, so compile
        return _pickle.loads(payload)

    def _save_data(self, name, data):
        _seal(_Path(self._data_path(name)), self._dump(data))


def seal_numba_cache(module) -> None:
    """The module's cached numba functions read and write their cache files through _Sealed."""
    for value in vars(module).values():
        cache = getattr(value, "_cache", None)
        old = getattr(cache, "_cache_file", None)
        if isinstance(old, _IndexDataCacheFile) and not isinstance(old, _Sealed):
            new = _Sealed.__new__(_Sealed)
            new.__dict__.update(old.__dict__)
            cache._cache_file = new


seal_numba_cache(_sys.modules[__name__])   # these helpers' own cache files (beside this file) too
