"""Numba kernels that code string and binary keys as dense integers for eidos.hal.fsum.group_by
(imported on first use: it imports numba). pyarrow's dictionary_encode runs on one thread and
was most of a string-keyed exact sum; these hash the Arrow buffers in place, each thread its own
rows into a table of its own, and the tables merge through the same kernel (each thread's groups
are a small string array of their own: its heap and their offsets).

A table is its slots (group id or -1; the size a power of two) and, per group, its first 8 bytes
as an int64, its length and its bytes' start in a heap. Two strings are equal where their
lengths and first words are, and (past 8 bytes) their bytes.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

OPTS = {"cache": True, "error_model": "numpy", "nogil": True, "boundscheck": False}
MIX = -7046029254386353131   # Fibonacci hashing's odd constant


@intrinsic
def _load8(typingctx, arr, i):
    """The 8 bytes of a uint8 array from index i as a little-endian int64 (an unaligned load;
    the caller keeps i + 8 within the array)."""
    def codegen(context, builder, signature, args):
        a = context.make_array(signature.args[0])(context, builder, args[0])
        p = builder.bitcast(builder.gep(a.data, [args[1]]), ir.IntType(64).as_pointer())
        return builder.load(p, align=1)
    return types.int64(arr, types.int64), codegen


@njit(**OPTS)
def _word(data, a, n):
    """The first min(n, 8) bytes of data[a:] as an int64, the rest zero."""
    if a + 8 <= len(data):
        w = _load8(data, a)
        return w if n >= 8 else w & ((1 << (8 * n)) - 1)
    w = 0
    for j in range(min(n, 8)):
        w |= np.int64(data[a + j]) << (8 * j)
    return w


@njit(**OPTS)
def _hash(data, a, n, w):
    """A hash of n bytes at data[a:] whose first word is w: its high bits are mixed from every bit
    (they pick the slot: its top bits, shifted down by 64 - log2 of the table's size)."""
    h = (w ^ n) * MIX
    return h if n <= 8 else _rest(data, a, n, h)


@njit(**OPTS)
def _rest(data, a, n, h):
    """_hash past the first word (out of line: the common short string's loop stays simple)."""
    for j in range(8, n, 8):
        h = (h ^ _word(data, a + j, n - j)) * MIX
    return h


@njit(**OPTS)
def _log2(size):
    b = 0
    while (1 << b) < size:
        b += 1
    return b


@njit(**OPTS)
def _same(data, a, heap, b, n):
    """Whether data[a:a + n] and heap[b:b + n] hold the same bytes past their first 8."""
    j = 8
    while j < n:
        if _word(data, a + j, n - j) != _word(heap, b + j, n - j):
            return False
        j += 8
    return True


@njit(**OPTS)
def _grow(x, n):
    out = np.empty(max(2 * len(x), n), x.dtype)
    out[:len(x)] = x
    return out


@njit(**OPTS)
def codes(offsets, data, bitmap, boff, a, b, ids, table, words, lengths, starts, heap, count):
    """ids[i] = the group of row i's bytes for rows a..b, valid rows only (a null row's id is left
    as it is: the caller keeps the bitmap), new groups numbered on from count[0] and their bytes
    appended to the heap at count[1]. Row i's bytes: data[offsets[i]:offsets[i + 1]], or with no
    offsets, data an Arrow view array's views (16 bytes a row) whose strings are all inline (up to
    12 bytes); a longer one sets count[2] and stops. Returns the table's arrays, grown where they
    had to (here, so that the loop over rows reassigns no array)."""
    while True:
        a = _run(offsets, data, bitmap, boff, a, b, ids, table, words, lengths, starts, heap, count)
        if a >= b or count[2]:
            return table, words, lengths, starts, heap
        if count[0] == len(words):
            words, lengths, starts = _grow(words, 0), _grow(lengths, 0), _grow(starts, 0)
        n = count[3]
        if count[1] + n > len(heap):
            heap = _grow(heap, count[1] + n)
        if 2 * (count[0] + 1) > len(table):   # double: every group again into a table twice the size
            size = 2 * len(table)
            table = np.full(size, -1, np.int64)
            shift = 64 - _log2(size)
            for r in range(count[0]):
                t = (_hash(heap, starts[r], lengths[r], words[r]) >> shift) & (size - 1)
                while table[t] >= 0:
                    t = (t + 1) & (size - 1)
                table[t] = r


@njit(**OPTS)
def _run(offsets, data, bitmap, boff, a, b, ids, table, words, lengths, starts, heap, count):
    """codes() until a new group would not fit its arrays: the row to go on from (its length in
    count[3]), b when done."""
    size = len(table)
    shift = 64 - _log2(size)
    view = len(offsets) == 0
    for i in range(a, b):
        if len(bitmap):
            j = i + boff
            if not (bitmap[j >> 3] >> (j & 7)) & 1:
                continue
        if view:
            s0, n = 16 * i + 4, _load8(data, 16 * i) & 0xFFFFFFFF
            if n > 12:
                count[2] = 1
                return i
        else:
            s0, n = offsets[i], offsets[i + 1] - offsets[i]
        w = _word(data, s0, n)
        h = (w ^ n) * MIX   # _hash, written out: a call to it here costs more than the hashing
        if n > 8:
            h = _rest(data, s0, n, h)
        s = (h >> shift) & (size - 1)
        while True:
            g = table[s]
            if g < 0 or (words[g] == w and lengths[g] == n and (n <= 8 or _same(data, s0, heap, starts[g], n))):
                break
            s = (s + 1) & (size - 1)
        if g < 0:
            g = count[0]
            if g == len(words) or count[1] + n > len(heap) or 2 * (g + 1) > size:
                count[3] = n
                return i
            heap[count[1]:count[1] + n] = data[s0:s0 + n]
            table[s], words[g], lengths[g], starts[g] = g, w, n, count[1]
            count[0], count[1] = g + 1, count[1] + n
        ids[i] = g
    return b


@njit(**OPTS)
def remap(ids, bitmap, boff, a, b, to):
    """ids[i] = to[ids[i]] for the valid rows a..b."""
    for i in range(a, b):
        if len(bitmap):
            j = i + boff
            if not (bitmap[j >> 3] >> (j & 7)) & 1:
                continue
        ids[i] = to[ids[i]]
