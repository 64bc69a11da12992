"""The numba kernels behind eidos.hal.fsum (imported on first use: it imports numba).

A float64 is m * 2**p exactly (m < 2**53, p counted from 2**-1074). A range of values is added into
CHUNKS signed 32-bit digits (int64 words, room for 2**31 additions before a carry) and rounded
once at the end, as math.fsum rounds. Blocks of BLOCK values take the fast way: a largest exponent
(the block's, or the one before it's) fixes two levels, 1.5 * 2**k1 and 1.5 * 2**(k1 - 52); adding a value to a level's constant
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
AHEAD = 64                   # rows spread() prefetches its table ahead (64 and 256 alike, 16 half as fast)
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
def _fast(w, k1):
    """(a1, a2, ok): w's values as integers on the grids of two levels, 2**(k1 - 52) and 2**(k2 - 52);
    ok where both are exact: every 1.5 * 2**k1 + x stayed in its binade (so |x| fit; NaN and inf
    never do) and nothing was left below the second level. Indexed from 0 so that numba emits no
    negative-index wraparound and LLVM vectorizes the loop (AVX2: 4 values an instruction)."""
    k2 = max(k1 - 52, -1022)          # the first level leaves |r| <= 2**(k1 - 53) = 2**(k2 - 1)
    b1, b2 = ((k1 + 1023) << 52) | (1 << 51), ((k2 + 1023) << 52) | (1 << 51)
    s1, s2 = unbits(b1), unbits(b2)
    a1 = a2 = nz = out = 0
    for j in range(len(w)):
        x = w[j]
        t1 = s1 + x
        c1 = bits(t1)
        a1 += c1 - b1
        out |= c1 ^ b1                  # sign and exponent as s1's: t1 in [2**k1, 2**(k1 + 1))
        r = x - (t1 - s1)
        t2 = s2 + r
        a2 += bits(t2) - b2
        nz |= bits(r - (t2 - s2))       # the sign bit is masked below: a remainder of -0.0 is none
    return a1, a2, (out >> 52) == 0 and (nz << 1) == 0


@njit(**OPTS)
def _level(w):
    """k1 for w: the level whose grid holds w's largest value (its exponent, from the bits); 2000
    where w holds NaN or inf, or where the largest value is too large for two levels."""
    m = 0
    for j in range(len(w)):
        m = max(m, bits(w[j]) & EXP)
    k1 = max((m >> 52) - 1021, -1022)  # every |x| < 2**(k1 - 1)
    return k1 if k1 <= 1023 else 2000


@njit(**OPTS)
def _slow(w, digits, st):
    for j in range(len(w)):
        _one(w[j], digits, st)


@njit(**OPTS)
def _one(x, digits, st):
    """x's mantissa added into digits at its exponent (NaN and infinities counted in st)."""
    b = bits(x)
    ex = (b >> 52) & 0x7FF
    if ex == 0x7FF:
        st[0 if b & MANT else (2 if b < 0 else 1)] += 1.0
        return
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
    the lowest and highest digits touched. Each block first tries the previous block's level (one
    pass: most data keeps its scale), then its own, then the slow way."""
    i, since, k1, a1, a2 = lo, 0, 2000, 0, 0
    while i < hi:
        e = min(i + BLOCK, hi)
        w = v[i:e]
        ok = False
        if k1 <= 1023:
            a1, a2, ok = _fast(w, k1)
        if not ok:
            k1 = _level(w)
            if k1 <= 1023:
                a1, a2, ok = _fast(w, k1)
        if ok:
            k2 = max(k1 - 52, -1022)
            _add(digits, a1, k1 + 1022)
            _add(digits, a2, k2 + 1022)
            st[3] += (e - i) * pow2(max(k1 - 1, -1022))
            st[4] = min(st[4], (k2 + 1022) >> 5)
            st[5] = max(st[5], ((k1 + 1022) >> 5) + 2)
        else:
            _slow(w, digits, st)
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


@njit(**OPTS)
def _valid(bitmap, offset, i):
    """Whether row i is valid in an Arrow validity bitmap (an empty one: every row is)."""
    if len(bitmap) == 0:
        return True
    j = i + offset
    return (bitmap[j >> 3] >> (j & 7)) & 1 == 1


@njit(**OPTS)
def _slot(k, size):
    # A multiply moves each bit of k only upwards, so keys that differ only in high bits (multiples of 2**40)
    # would share their low bits and probe one long run: fold the product's high half down, mix again, fold.
    h = k * -7046029254386353131
    h = (h ^ (h >> 32)) * -7046029254386353131
    return (h ^ (h >> 32)) & (size - 1)


@njit(**OPTS)
def group_ids(keys, bitmap, offset, lo, span, ids):
    """ids[i] = the group of row i's key, numbered in order of first appearance (a null key is a
    group of its own); the number of groups and each group's first row. Keys in [lo, lo + span)
    index a table directly (span > 0); otherwise an open-addressing hash table that doubles at half
    full."""
    n = len(keys)
    first = np.empty(n, np.int64)
    groups, null = 0, -1
    direct = span > 0
    size = span if direct else 1024
    table = np.full(size, -1, np.int64)
    held = np.empty(0 if direct else size, np.int64)
    for i in range(n):
        if not _valid(bitmap, offset, i):
            if null < 0:
                null, first[groups] = groups, i
                groups += 1
            ids[i] = null
            continue
        k = keys[i]
        if direct:
            s = k - lo
        else:
            s = _slot(k, size)
            while table[s] >= 0 and held[s] != k:
                s = (s + 1) & (size - 1)
        g = table[s]
        if g < 0:
            g = table[s] = groups
            first[groups] = i
            groups += 1
            if not direct:
                held[s] = k
                if 2 * groups > size:   # double: every key again into a table twice the size
                    size *= 2
                    table, held = np.full(size, -1, np.int64), np.empty(size, np.int64)
                    for r in range(groups):
                        if r != null:
                            t = _slot(keys[first[r]], size)
                            while table[t] >= 0:
                                t = (t + 1) & (size - 1)
                            table[t], held[t] = r, keys[first[r]]
        ids[i] = g
    return groups, first[:groups]


@njit(**OPTS)
def minmax(keys, bitmap, offset):
    """The least and greatest valid key (0, -1 where none is valid), in one pass."""
    lo, hi = keys[0] if len(keys) else 0, keys[0] if len(keys) else -1
    if len(bitmap) == 0:
        for i in range(len(keys)):
            lo, hi = min(lo, keys[i]), max(hi, keys[i])
        return lo, hi
    lo, hi = 0, -1
    for i in range(len(keys)):
        if _valid(bitmap, offset, i):
            if hi < lo:
                lo = hi = keys[i]
            lo, hi = min(lo, keys[i]), max(hi, keys[i])
    return lo, hi


@njit(**OPTS)
def _pieces(w, k1, p1, p2):
    """_fast's two levels value by value: p1[j], p2[j] the integers of w[j] on the grids of 2**(k1 - 52)
    and 2**(k2 - 52); whether every value fit (vectorized: no scatter here)."""
    k2 = max(k1 - 52, -1022)
    b1, b2 = ((k1 + 1023) << 52) | (1 << 51), ((k2 + 1023) << 52) | (1 << 51)
    s1, s2 = unbits(b1), unbits(b2)
    nz = out = 0
    for j in range(len(w)):
        x = w[j]
        t1 = s1 + x
        c1 = bits(t1)
        p1[j] = c1 - b1
        out |= c1 ^ b1
        r = x - (t1 - s1)
        t2 = s2 + r
        p2[j] = bits(t2) - b2
        nz |= bits(r - (t2 - s2))
    return (out >> 52) == 0 and (nz << 1) == 0


@njit(**OPTS)
def _block(v, vmap, voff, i, e, held):
    """Rows i..e's values: a view, or with a validity bitmap, copied into held with nulls as 0.0."""
    if len(vmap) == 0:
        return v[i:e]
    for j in range(e - i):
        held[j] = v[i + j] if _valid(vmap, voff, i + j) else 0.0
    return held[:e - i]


@njit(**OPTS)
def keyed(keys, kmap, koff, lo, v, vmap, voff, a, b, digits, st, counts):
    """Rows a..b added into their key's digits, st and counts (row i into slot keys[i] - lo; a
    null key into the last slot), with no group ids or reordered copy: for few distinct keys.
    Each block of BLOCK rows is split on two levels as accumulate does (the previous block's, else
    its own) into integer pieces, vectorized, and only then are the pieces added into per-slot
    sums (a block that fails a level has added nothing); a block the levels do not hold goes value
    by value the slow way."""
    slots = len(counts)
    acc = np.zeros((slots, 3), np.int64)
    p1, p2 = np.empty(BLOCK, np.int64), np.empty(BLOCK, np.int64)
    held = np.empty(BLOCK)
    plain = len(kmap) == 0 and len(vmap) == 0
    k1, since = 2000, 0
    for i in range(a, b, BLOCK):
        e = min(i + BLOCK, b)
        m = e - i
        w = _block(v, vmap, voff, i, e, held)
        ok = k1 <= 1023 and _pieces(w, k1, p1, p2)
        if not ok:
            k1 = _level(w)
            ok = k1 <= 1023 and _pieces(w, k1, p1, p2)
        if ok:
            acc[:] = 0
            if plain:
                for j in range(m):
                    s = keys[i + j] - lo
                    acc[s, 0] += p1[j]
                    acc[s, 1] += p2[j]
                    acc[s, 2] += 1
            else:
                for j in range(m):
                    if _valid(vmap, voff, i + j):
                        s = keys[i + j] - lo if _valid(kmap, koff, i + j) else slots - 1
                        acc[s, 0] += p1[j]
                        acc[s, 1] += p2[j]
                        acc[s, 2] += 1
            k2 = max(k1 - 52, -1022)
            for s in range(slots):
                t1, t2, n = acc[s, 0], acc[s, 1], acc[s, 2]
                if n:
                    _add(digits[s], t1, k1 + 1022)
                    _add(digits[s], t2, k2 + 1022)
                    st[s, 3] += n * pow2(max(k1 - 1, -1022))
                    st[s, 4] = min(st[s, 4], (k2 + 1022) >> 5)
                    st[s, 5] = max(st[s, 5], ((k1 + 1022) >> 5) + 2)
                    counts[s] += n
        else:
            for j in range(m):
                if _valid(vmap, voff, i + j):
                    s = keys[i + j] - lo if _valid(kmap, koff, i + j) else slots - 1
                    _one(w[j], digits[s], st[s])
                    counts[s] += 1
        since += m
        if since >= CARRY_EVERY:
            for s in range(slots):
                if counts[s]:
                    st[s, 5] = carry(digits[s], int(st[s, 4]), int(st[s, 5]))
            since = 0
    for s in range(slots):
        if counts[s]:
            st[s, 5] = carry(digits[s], int(st[s, 4]), int(st[s, 5]))


@njit(**OPTS)
def present_into(keys, kmap, koff, lo, seen):
    """Sets seen at the slots (keys[i] - lo; a null key the last) some row holds (threads may share
    seen: they only set it)."""
    slots = len(seen)
    for i in range(len(keys)):
        seen[keys[i] - lo if _valid(kmap, koff, i) else slots - 1] = True


@njit(**OPTS)
def finish_each(digits, st, neg_zero, out, python):
    """finish() of each slot's digits and st (summed over threads: every digit may carry)."""
    p = np.empty(CHUNKS + 1)
    for g in range(len(out)):
        st[g, 4], st[g, 5] = 0, CHUNKS - 3
        out[g], python[g] = finish(digits[g], st[g], neg_zero, p)


@njit(**OPTS)
def firsts(keys, kmap, koff, lo, seen):
    """Each seen slot's first row (keys[i] - lo; a null key the last slot; -1 for the others), read
    only as far as the last seen slot's first row."""
    first = np.full(len(seen), -1, np.int64)
    left = seen.sum()
    for i in range(len(keys)):
        if left == 0:
            break
        s = keys[i] - lo if _valid(kmap, koff, i) else len(seen) - 1
        if seen[s] and first[s] < 0:
            first[s] = i
            left -= 1
    return first


@njit(**OPTS)
def mix(out, keys, kmap, koff, lo, width):
    """out = out * width + (key - lo), a null key width - 1: one more key in mixed radix."""
    if len(kmap) == 0:   # no nulls: a loop that vectorizes
        for i in range(len(out)):
            out[i] = out[i] * width + (keys[i] - lo)
        return
    for i in range(len(out)):
        out[i] = out[i] * width + (keys[i] - lo if _valid(kmap, koff, i) else width - 1)


@njit(**OPTS)
def scatter_keys(keys, kmap, koff, lo, span, values, vmap, voff):
    """The valid values in the order of their keys' slots (keys[i] - lo, a null key slot span: group
    ids, or keys in a range up to a few times the rows), by a counting sort (stable); each slot's
    offsets into them, and each slot's first row (-1 where no row has its key)."""
    slots = span + 1
    offsets = np.zeros(slots + 1, np.int64)
    first = np.full(slots, -1, np.int64)
    for i in range(len(keys)):
        s = keys[i] - lo if _valid(kmap, koff, i) else span
        if first[s] < 0:
            first[s] = i
        if _valid(vmap, voff, i):
            offsets[s + 1] += 1
    for s in range(slots):
        offsets[s + 1] += offsets[s]
    at = offsets[:-1].copy()
    out = np.empty(offsets[slots], np.float64)
    for i in range(len(keys)):
        if _valid(vmap, voff, i):
            s = keys[i] - lo if _valid(kmap, koff, i) else span
            out[at[s]] = values[i]
            at[s] += 1
    return out, offsets, first


@intrinsic
def prefetch(typingctx, arr, i):
    """A hint to load the cache line of a C-contiguous array's flat element i for writing (LLVM's
    llvm.prefetch: never faults). A table of a million slots misses the caches on every row; rows
    fetched some ahead overlap those misses (4x at 1M slots here, with the table on huge pages: the
    prefetch is dropped where the page is not in the TLB)."""
    def codegen(context, builder, signature, args):
        a = context.make_array(signature.args[0])(context, builder, args[0])
        p = builder.bitcast(builder.gep(a.data, [args[1]]), ir.IntType(8).as_pointer())
        i32 = ir.IntType(32)
        fn = builder.module.declare_intrinsic("llvm.prefetch", fnty=ir.FunctionType(ir.VoidType(), [p.type, i32, i32, i32]))
        builder.call(fn, [p, i32(1), i32(3), i32(1)])
        return context.get_dummy_value()
    return types.void(arr, types.int64), codegen


@njit(**OPTS)
def spread(keys, kmap, koff, lo, v, vmap, voff, a, b, k1, table, over):
    """Rows a..b into their slot's row of table (keys[i] - lo; a null key the last slot): for many
    slots, where a slot's digits would not stay in cache. Every value is split on the same two
    levels (k1 fixed: every value's |x| < 2**(k1 - 1)), vectorized per block as accumulate does, and
    the pieces added into the slot's row (C-contiguous, 32 bytes): level-1 sum, level-2 sum, values,
    first row + 1 (0: none yet); every 2048 values of a slot its sums' bits past 32 move into over
    (the slot's two carries), so that no sum overflows. A NaN or an infinity counts in over (NaNs,
    infs, -infs after the carries) and as a zero in the pieces. False where a finite value does not
    fit the levels (bits below the second): the caller takes another way."""
    slots = len(table)
    p1, p2 = np.empty(BLOCK, np.int64), np.empty(BLOCK, np.int64)
    held = np.empty(BLOCK)
    for i in range(a, b, BLOCK):
        e = min(i + BLOCK, b)
        w = _block(v, vmap, voff, i, e, held)
        special = not _pieces(w, k1, p1, p2)
        if special:   # the block again with NaN and infinities as zeros: they count apart
            for j in range(e - i):
                held[j] = w[j] if bits(w[j]) & EXP != EXP else 0.0
            if not _pieces(held[:e - i], k1, p1, p2):
                return False
        for r in range(i, e):
            if r + AHEAD < b:
                prefetch(table, 4 * (keys[r + AHEAD] - lo if _valid(kmap, koff, r + AHEAD) else slots - 1))
            s = keys[r] - lo if _valid(kmap, koff, r) else slots - 1
            if table[s, 3] == 0:
                table[s, 3] = r + 1
            if _valid(vmap, voff, r):
                table[s, 0] += p1[r - i]
                table[s, 1] += p2[r - i]
                n = table[s, 2] + 1
                table[s, 2] = n
                if special and bits(v[r]) & EXP == EXP:
                    over[s, 2 if bits(v[r]) & MANT else (4 if v[r] < 0 else 3)] += 1
                if n & (BLOCK - 1) == 0:
                    for c in range(2):
                        q = table[s, c] >> 32
                        table[s, c] -= q << 32
                        over[s, c] += q
    return True


@njit(**OPTS)
def finish_spread(tables, overs, k1, neg_zero, a, b, out, counts, first):
    """Slots a..b's sums from every thread's spread() rows (added exactly into digits, rounded once),
    their numbers of values and first rows (-1: none); False where one needs Python's way (finish)."""
    k2 = max(k1 - 52, -1022)
    q1, q2 = k1 + 1022, k2 + 1022
    lo, hi = q2 >> 5, ((q1 + 32) >> 5) + 2    # the digits _add touches; carries may reach hi + 2
    digits = np.zeros(CHUNKS, np.int64)
    st = np.zeros(6)
    p = np.empty(CHUNKS + 1)
    bound = pow2(max(k1 - 1, -1022))
    for s in range(a, b):
        f = n = 0
        for t in range(len(tables)):
            if f == 0:
                f = tables[t, s, 3]
            n += tables[t, s, 2]
        first[s], counts[s] = f - 1, n
        if n == 0:
            out[s] = 0.0
            continue
        digits[lo:hi + 3] = 0
        for t in range(len(tables)):
            _add(digits, tables[t, s, 0], q1)
            _add(digits, tables[t, s, 1], q2)
            _add(digits, overs[t, s, 0], q1 + 32)
            _add(digits, overs[t, s, 1], q2 + 32)
        for c in range(3):
            st[c] = overs[:, s, 2 + c].sum()
        st[3], st[4], st[5] = n * bound, lo, hi
        out[s], python = finish(digits, st, neg_zero, p)
        if python:
            return False
    return True


@njit(**OPTS)
def top(v, vmap, voff, a, b):
    """The largest exponent field (bits & EXP) among the valid finite values of rows a..b."""
    m = 0
    for i in range(a, b):
        e = bits(v[i]) & EXP
        if e != EXP and (len(vmap) == 0 or _valid(vmap, voff, i)):
            m = max(m, e)
    return m
