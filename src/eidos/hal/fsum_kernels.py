"""The numba kernels behind eidos.hal.fsum (imported on first use: it imports numba).

A float64 is m * 2**p exactly (m < 2**53, p counted from 2**-1074). A range of values is added into
CHUNKS signed 32-bit digits (int64 words, room for 2**31 additions before a carry) and rounded
once at the end, as math.fsum rounds. Blocks of BLOCK values take the fast way: their largest
exponent fixes two levels, 1.5 * 2**k1 and 1.5 * 2**(k1 - 52); adding a value to a level's constant
rounds it to that level's grid, the float's bits minus the constant's bits are that piece as an
integer (summed in int64, vectorized), and the exact remainder goes to the next level. A block
whose remainder after two levels is not zero (a range of exponents over about 100 bits), or that
holds a NaN or an infinity, takes the slow way: each value's mantissa added to the digits.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

OPTS = {"cache": True, "error_model": "numpy", "nogil": True, "boundscheck": False}
BLOCK = 2048                 # values per block: two levels' pieces (< 2**51 each) add up in int64
CHUNKS = 68                  # 32-bit digits from 2**-1074 up past 2**1024
CARRY_EVERY = 1 << 20        # values between carries (each adds under 2**33 to a digit)
EXP = 0x7FF0000000000000
MANT = 0x000FFFFFFFFFFFFF
LOW = 0xFFFFFFFF
DANGER = 2.0 ** 1022         # a bound on sum(|x|) at or past it: math.fsum may overflow part way
SCALE = np.array([2.0 ** (32 * c - 1074) if 32 * c - 1074 < 1024 else np.inf for c in range(CHUNKS)])


@intrinsic
def bits(typingctx, x):
    """The IEEE bits of a float64 as an int64 (LLVM bitcast: free, and vectorizes)."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(64))
    return types.int64(types.float64), codegen


@intrinsic
def unbits(typingctx, x):
    """The float64 whose IEEE bits are the int64 x."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.DoubleType())
    return types.float64(types.int64), codegen


@njit(**OPTS)
def pow2(k):
    """2.0**k for -1022 <= k <= 1024 (inf at 1024), from its bits."""
    return unbits((k + 1023) << 52)


@njit(**OPTS)
def _add(digits, a, p):
    """digits += a * 2**(p - 1074), for an int64 a: a's two 32-bit halves shifted into place."""
    c, s = p >> 5, p & 31
    v = (a & LOW) << s
    digits[c] += v & LOW
    digits[c + 1] += v >> 32
    w = (a >> 32) << s
    digits[c + 1] += w & LOW
    digits[c + 2] += w >> 32


@njit(**OPTS)
def _fast(v, i, e, emax, digits, st):
    """Add v[i:e] by two levels; False (nothing added) where a remainder is left."""
    k1 = max(emax - 1021, -1022)      # every |x| < 2**(emax - 1022) = 2**(k1 - 1)
    if k1 > 1023:
        return False
    k2 = max(k1 - 52, -1022)          # the first level leaves |r| <= 2**(k1 - 53) = 2**(k2 - 1)
    b1, b2 = ((k1 + 1023) << 52) | (1 << 51), ((k2 + 1023) << 52) | (1 << 51)
    s1, s2 = unbits(b1), unbits(b2)
    a1 = a2 = nz = 0
    for j in range(i, e):
        x = v[j]
        t1 = s1 + x
        a1 += bits(t1) - b1
        r = x - (t1 - s1)
        t2 = s2 + r
        a2 += bits(t2) - b2
        nz |= bits(r - (t2 - s2)) << 1   # the sign bit dropped: a remainder of -0.0 is none
    if nz != 0:
        return False
    _add(digits, a1, k1 + 1022)
    _add(digits, a2, k2 + 1022)
    st[4] = min(st[4], (k2 + 1022) >> 5)
    st[5] = max(st[5], ((k1 + 1022) >> 5) + 2)
    return True


@njit(**OPTS)
def _slow(v, i, e, digits, st):
    for j in range(i, e):
        b = bits(v[j])
        ex = (b >> 52) & 0x7FF
        if ex == 0x7FF:
            st[0 if b & MANT else (2 if b < 0 else 1)] += 1.0
            continue
        m = (b & MANT) | ((1 << 52) if ex > 0 else 0)
        if m:
            st[3] += pow2(ex - 1022)
            p = max(ex, 1) - 1
            _add(digits, -m if b < 0 else m, p)
            st[4] = min(st[4], p >> 5)
            st[5] = max(st[5], (p >> 5) + 2)


@njit(**OPTS)
def carry(digits, lo, hi):
    """Balanced digits in [-2**31, 2**31) from lo up (digits past hi are 0): the value unchanged,
    every digit room for 2**31 more adds; the new highest digit that may be nonzero."""
    hi = min(hi + 2, CHUNKS - 1)
    for c in range(lo, hi):
        q = (digits[c] + (1 << 31)) >> 32
        digits[c] -= q << 32
        digits[c + 1] += q
    return hi


@njit(**OPTS)
def accumulate(v, lo, hi, digits, st):
    """Add v[lo:hi] into digits; st: NaNs, infs, -infs, a bound on the sum of the finite |x|, and
    the lowest and highest digits touched."""
    i, since = lo, 0
    while i < hi:
        e = min(i + BLOCK, hi)
        m = 0
        for j in range(i, e):
            m = max(m, bits(v[j]) & EXP)
        emax = m >> 52
        if emax < 0x7FF and _fast(v, i, e, emax, digits, st):
            st[3] += (e - i) * pow2(emax - 1022)
        else:
            _slow(v, i, e, digits, st)
        since += e - i
        if since >= CARRY_EVERY:
            st[5] = carry(digits, int(st[4]), int(st[5]))
            since = 0
        i = e


@njit(**OPTS)
def _round(digits, p, lo, hi):
    """The value of digits[lo:hi + 1] correctly rounded: CPython's math.fsum over them, one term
    per digit, from the top (no digit is past 2**1024: the callers stop short of DANGER)."""
    hi = carry(digits, lo, hi)
    n = 0
    for c in range(hi, lo - 1, -1):
        if digits[c] == 0:
            continue
        x = float(digits[c]) * SCALE[c]
        i = 0
        for j in range(n):
            y = p[j]
            if abs(x) < abs(y):
                x, y = y, x
            hi = x + y
            lo = y - (hi - x)
            if lo != 0.0:
                p[i] = lo
                i += 1
            x = hi
        n = i
        if x != 0.0:
            p[n] = x
            n += 1
    hi = lo = 0.0
    if n > 0:
        n -= 1
        hi = p[n]
        while n > 0:
            x = hi
            n -= 1
            y = p[n]
            hi = x + y
            lo = y - (hi - x)
            if lo != 0.0:
                break
        if n > 0 and ((lo < 0.0 and p[n - 1] < 0.0) or (lo > 0.0 and p[n - 1] > 0.0)):
            y = lo * 2.0
            x = hi + y
            if y == x - hi:
                hi = x
    return hi


@njit(**OPTS)
def finish(digits, st, neg_zero, p):
    """(the sum, whether the caller must take Python's way): math.fsum's answer, NaN for a NaN or
    inf with -inf, an infinity for infinities of one sign. Past DANGER, and for a zero where this
    Python's fsum gives -0.0 for negative zeros, the caller sums in Python as the reference does."""
    if st[3] >= DANGER:
        return 0.0, True
    if st[0] > 0 or (st[1] > 0 and st[2] > 0):
        return np.nan, False
    if st[1] > 0 or st[2] > 0:
        return np.inf if st[1] > 0 else -np.inf, False
    s = _round(digits, p, int(st[4]), int(st[5]))
    return s, s == 0.0 and neg_zero


@njit(**OPTS)
def segments(v, offsets, neg_zero, out, python):
    """out[g] = the sum of v[offsets[g]:offsets[g + 1]]; python[g] where finish says so."""
    digits = np.zeros(CHUNKS, np.int64)
    st = np.zeros(6)
    p = np.empty(CHUNKS + 1)
    for g in range(len(offsets) - 1):
        digits[int(st[4]):int(st[5]) + 3] = 0
        st[:4] = 0.0
        st[4], st[5] = CHUNKS, 0
        accumulate(v, offsets[g], offsets[g + 1], digits, st)
        out[g], python[g] = finish(digits, st, neg_zero, p)
