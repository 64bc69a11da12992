"""Correctly rounded float sums at memory speed, for the lanes whose engine has none.

docs/semantics.md section 14: a float sum is math.fsum's answer, with the reference's rules for NaN,
infinities and overflow (eidos.ir.evaluate.aggregates.float_sum). It lives in hal because the polars
and duckdb lanes both need it and a lane never imports another; the kernels (eidos.hal.fsum_kernels)
load numba on the first sum, so `import eidos` stays light. One pass over the values, in blocks that
stay in cache, split over the cores for long inputs; the partial sums are exact and add exactly.
"""

from __future__ import annotations

import functools
import math
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from eidos.ir.evaluate.aggregates import float_sum

SPLIT = 1 << 20  # values per thread worth starting one for
CORES = os.cpu_count() or 1   # asked once: os.cpu_count reads /sys on every call (9 us here)
SLOTS = 1024     # keys within this range: group_by's keyed way
SPREAD = 1       # keys within this range per row: sums and means by _spread (else sorted into segments)
TABLES = 1 << 26  # bytes of _spread's tables past which one thread does better than several (bench/RESULTS.md)
SLICE = 1 << 16  # rows a thread takes at a time in a pass that stays in cache (_across)
SAMPLE, MANY = 1 << 17, 16   # string keys: more than SAMPLE / MANY distinct in the first SAMPLE rows: _many


def sums(values: np.ndarray, offsets: np.ndarray | None = None) -> np.ndarray:
    """Each segment's correctly rounded sum, values[offsets[g]:offsets[g + 1]] (0.0 when empty); the
    values hold no nulls (float64, or float32: summed exactly, as their float64 values). Without
    offsets, one segment: every value."""
    k = _kernels()
    v = np.ascontiguousarray(values, dtype=np.float64)
    if offsets is None:
        offsets = np.array([0, len(v)], dtype=np.int64)
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    groups = len(offsets) - 1
    out, python = np.empty(groups), np.zeros(groups, dtype=np.bool_)
    parts = min(CORES, max(1, (int(offsets[-1]) - int(offsets[0])) // SPLIT))
    if groups == 1 and parts > 1:
        out[0], python[0] = _one(k, [v[offsets[0]:offsets[-1]]], parts)
    elif parts > 1:
        # contiguous runs of groups with about equal rows each, one per thread
        cuts = np.searchsorted(offsets, np.linspace(offsets[0], offsets[-1], parts + 1)[1:-1])
        bounds = [0, *sorted(set(cuts.tolist()) - {0, groups}), groups]
        list(_pool().map(lambda ab: k.segments(v, offsets[ab[0]:ab[1] + 1], NEG_ZERO, out[ab[0]:ab[1]],
                                               python[ab[0]:ab[1]]), zip(bounds, bounds[1:])))
    else:
        k.segments(v, offsets, NEG_ZERO, out, python)
    for g in np.flatnonzero(python):
        out[g] = float_sum(v[offsets[g]:offsets[g + 1]].tolist())
    return out


def aggregate(fn: str, values: np.ndarray, offsets: np.ndarray) -> pa.Array:
    """Float sum, mean, var or std of each group values[offsets[g]:offsets[g + 1]] (no nulls), as
    the reference computes them: null for no values (var, std: fewer than 2); var and std NaN where
    a value is NaN or infinite, else fsum((x - m)**2) / (n - 1) with m = fsum(x) / n."""
    values = np.asarray(values, dtype=np.float64)[offsets[0]:offsets[-1]]
    offsets = np.asarray(offsets, dtype=np.int64) - offsets[0]
    n = np.diff(offsets)
    with np.errstate(all="ignore"):
        total = sums(values, offsets)
        if fn in ("sum", "mean"):
            return pa.array(total if fn == "sum" else total / np.maximum(n, 1), mask=n == 0)
        d = values - np.repeat(total / np.maximum(n, 1), n)
        v = sums(d * d, offsets) / np.maximum(n - 1, 1)  # (x - m) squared overflows to inf (IEEE)
        bad = np.concatenate(([0], np.cumsum(~np.isfinite(values))))
        out = np.where(bad[offsets[1:]] > bad[offsets[:-1]], np.nan, np.sqrt(v) if fn == "std" else v)
    return pa.array(out, mask=n < 2)


def lists(fn: str, column: pa.Array | pa.ChunkedArray) -> pa.Array:
    """aggregate() of each list of a list column (an engine's gathered groups): a null list is null,
    null values in a list are skipped."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    offsets = column.offsets.to_numpy()
    values = column.values
    if values.null_count:   # drop them: each list's offsets shrink by the nulls before its end
        nulls = np.concatenate(([0], np.cumsum(values.is_null().to_numpy(zero_copy_only=False))))
        offsets = offsets - nulls[offsets]
        values = values.drop_null()
    out = aggregate(fn, values.to_numpy(zero_copy_only=False), offsets)
    return pc.if_else(column.is_valid(), out, pa.scalar(None, pa.float64())) if column.null_count else out


def group_by(keys: list[pa.Array | pa.ChunkedArray], columns: list[tuple[str, pa.Array | pa.ChunkedArray]]
             ) -> tuple[np.ndarray, list[pa.Array]]:
    """Group rows by keys (a null a key value of its own), then aggregate() each of columns, (fn,
    float values with nulls), per group: each group's first row (the caller gathers its keys there),
    and one array per column.
    Integer, temporal and duration keys are read in place from their Arrow buffers (validity bitmaps
    included); any other key gets integer codes first (strings and binaries by their bytes, hashed
    in place over the cores: _strings; decimals by value through pyarrow's dictionary_encode); several keys
    are one integer per row (mixed by their ranges, or by their groups where those are too wide).
    Within a range of SLOTS and only sums and means: each value goes straight into its key's
    digits (keyed), over every core. Otherwise a group is the key itself where the range is up to
    a few times the rows, else a group id from a hash table; sums and means over up to SPREAD
    groups a row go into per-thread tables (_spread), and the rest (var, std, values too far apart)
    are counted into their groups' order (a stable counting sort) and summed as segments."""
    k = _kernels()
    fns = [fn for fn, _ in columns]
    sums = all(fn in ("sum", "mean") for fn in fns)
    parts = _chunks(k, keys, columns) if sums else None
    coded = None
    if parts is not None:   # an engine's batches: each read where it lies
        spans = [(int(lo), int(hi)) for lo, hi in (k.minmax(*key) for key, _ in parts) if lo <= hi]
        lo, hi = min(a for a, _ in spans) if spans else 0, max(b for _, b in spans) if spans else -1
        if hi - lo < SLOTS:
            return _keyed(k, parts, lo, hi - lo + 2, fns)
        coded = _joined([key for key, _ in parts], lo, hi)
    if coded is None:
        keys = [_one_chunk(a) for a in keys]
        coded = _codes(k, keys[0])
        if len(keys) > 1:
            coded = _mixed(k, [coded] + [_codes(k, a) for a in keys[1:]]), _EMPTY, 0
        lo, hi = _minmax(k, *coded)
    else:   # joined: a null is hi + 1 or lo - 1
        lo, hi = (lo, hi + 1) if hi < 2 ** 63 - 1 else (lo - 1, hi)
    raw, kmap, koff = coded
    values = [_buffers(_float64(_one_chunk(c))) for _, c in columns]
    if hi - lo < SLOTS and sums:
        first, out = _keyed(k, [((raw, kmap, koff), values)], lo, hi - lo + 2, fns)
    elif sums and hi - lo < SPREAD * len(raw) and (got := _spread(k, raw, kmap, koff, lo, hi - lo + 2, values, fns)) is not None:
        first, out = got
    elif hi - lo < max(4 * len(raw), 1 << 16):   # the key is its own group id
        out = []
        for fn, buffers in zip(fns, values):
            v, offsets, first = k.scatter_keys(raw, kmap, koff, lo, hi - lo + 1, *buffers)
            present = np.flatnonzero(first >= 0)
            out.append(aggregate(fn, v, offsets).take(pa.array(present)))
        first = first[present]
    else:
        ids, groups, first = _dense(k, raw, kmap, koff, lo, hi)
        if sums and (got := _spread(k, ids, _EMPTY, 0, 0, groups + 1, values, fns)) is not None:
            return got
        out = []
        for fn, buffers in zip(fns, values):   # ids have no nulls: slot `groups` stays empty
            v, offsets, _ = k.scatter_keys(ids, _EMPTY, 0, 0, groups, *buffers)
            out.append(aggregate(fn, v, offsets[:-1]))
    return first, out


def _chunks(k, keys, columns) -> list | None:
    """Each chunk's key and value buffers where every key and column is chunked alike, in more than
    one chunk (an engine's batches, which concatenating would copy): keys of other types coded over
    all chunks at once (one dictionary), several keys mixed chunk by chunk where their ranges
    multiply within 2**62; else None."""
    arrays = list(keys) + [c for _, c in columns]
    if not all(isinstance(a, pa.ChunkedArray) and a.num_chunks > 1 for a in arrays):
        return None
    lengths = [len(c) for c in keys[0].chunks]
    if any([len(c) for c in a.chunks] != lengths for a in arrays[1:]):
        return None
    coded = [_strings(a.chunks) or [_codes(k, c) for c in (a if _direct(a.type) else pc.dictionary_encode(a)).chunks]
             for a in keys]
    parts = coded[0]
    if len(keys) > 1:
        spans = [[k.minmax(*c) for c in key] for key in coded]
        spans = [(min([lo for lo, hi in key if lo <= hi], default=0), max([hi for lo, hi in key if lo <= hi], default=-1))
                 for key in spans]
        widths = [int(hi) - int(lo) + 2 for lo, hi in spans]
        if math.prod(widths) >= 1 << 62:
            return None
        parts = [(_mix_all(k, [key[i] for key in coded], spans, widths), _EMPTY, 0) for i in range(len(lengths))]
    return [(parts[i], [_buffers(_float64(c.chunk(i))) for _, c in columns]) for i in range(len(lengths))]


def _strings(chunks: list[pa.Array]) -> list[tuple[np.ndarray, np.ndarray, int]] | None:
    """Chunks of one string or binary key coded as dense integers (one numbering over them all),
    each as _codes returns it: their bytes hashed in place (eidos.hal.fsum_codes), the rows split
    among the cores, each thread's table merged into the first's. None where the type is not one
    of (large) string, binary or their views."""
    if not chunks:
        return None
    t = chunks[0].type
    view = pa.types.is_string_view(t) or pa.types.is_binary_view(t)
    if not (view or pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t)
            or pa.types.is_large_binary(t)):
        return None
    c = _code_kernels()
    parts = []
    for a in chunks:
        validity, first, data = (a.buffers() + [None])[:3]
        bitmap = np.frombuffer(validity, np.uint8) if a.null_count and validity is not None else _EMPTY
        if view:
            offsets = _NO_OFFSETS
            data = np.frombuffer(first, np.uint8) if first is not None else _EMPTY
            data = data[16 * a.offset:16 * (a.offset + len(a))]
            bitmap, boff = (bitmap, a.offset) if len(bitmap) else (_EMPTY, 0)
            parts.append((offsets, data, bitmap, boff, np.zeros(len(a), np.int32)))
            continue
        dtype = np.int64 if pa.types.is_large_string(t) or pa.types.is_large_binary(t) else np.int32
        offsets = np.frombuffer(first, dtype, count=a.offset + len(a) + 1)[a.offset:] if first is not None else np.zeros(1, dtype)
        data = np.frombuffer(data, np.uint8) if data is not None else _EMPTY
        parts.append((offsets, data, bitmap, a.offset, np.zeros(len(a), np.int32)))
    total = sum(len(p[4]) for p in parts)
    if _many(c, parts[0]):
        return None
    threads = min(CORES, max(1, total // SPLIT))
    cuts = [total * t // threads for t in range(threads + 1)]
    work: list[list] = [[] for _ in range(threads)]   # each thread's (part, first row, last row)
    at = 0
    for i, p in enumerate(parts):
        for t in range(threads):
            a, b = max(cuts[t] - at, 0), min(cuts[t + 1] - at, len(p[4]))
            if a < b:
                work[t].append((i, a, b))
        at += len(p[4])

    def run(t: int) -> list:
        state = _coder_state()
        for i, a, b in work[t]:
            offsets, data, bitmap, boff, ids = parts[i]
            state[:5] = c.codes(offsets, data, bitmap, boff, a, b, ids, *state)
        return state

    states = _each(run, threads)
    if any(s[5][2] for s in states):   # a view past 12 bytes: the chunks as large binaries
        return _strings([a.cast(pa.large_binary()) for a in chunks])
    merged = states[0]
    for t in range(1, threads):   # thread t's groups, a string array of their own, into the first's
        _, _, lengths, starts, heap, count = states[t]
        to = np.empty(count[0], np.int64)
        offsets = np.append(starts[:count[0]], count[1])
        merged[:5] = c.codes(offsets, heap, _EMPTY, 0, 0, count[0], to, *merged)
        states[t] = to
    # the later threads' rows to their merged codes, each range cut in one piece per thread
    remaps = [(i, a + (b - a) * j // threads, a + (b - a) * (j + 1) // threads, states[t])
              for t in range(1, threads) for i, a, b in work[t] for j in range(threads)]
    _each(lambda j: [c.remap(parts[i][4], parts[i][2], parts[i][3], a, b, to) for i, a, b, to in remaps[j::threads]],
          threads if remaps else 0)
    return [(ids, bitmap, boff) for _, _, bitmap, boff, ids in parts]


def _coder_state() -> list:
    """An empty table for fsum_codes.codes (table, words, lengths, starts, heap, count), which
    grows it as it codes and hands the grown arrays back."""
    return [np.full(1024, -1, np.int64), np.empty(64, np.int64), np.empty(64, np.int64), np.empty(64, np.int64),
            np.empty(1024, np.uint8), np.zeros(4, np.int64)]


def _many(c, part) -> bool:
    """Whether a key's first SAMPLE rows hold more than one distinct value in MANY: then its
    groups' tables outgrow the caches, where the coder's scattered reads cost more than pyarrow's
    dictionary_encode (1M distinct strings in 10M rows: 6.0 against 2.0 s CPU)."""
    offsets, data, bitmap, boff, ids = part
    n = min(len(ids), SAMPLE)
    state = _coder_state()
    c.codes(offsets, data, bitmap, boff, 0, n, np.empty(n, np.int32), *state)
    return bool(state[5][2] == 0 and state[5][0] * MANY > SAMPLE)


def _joined(keys: list[tuple[np.ndarray, np.ndarray, int]], lo: int, hi: int) -> tuple | None:
    """_chunks' coded keys (valid ones within lo..hi) as one array with no nulls, a null the value
    next past them (a copy, but no second coding); None where int64 has no such value."""
    null = hi + 1 if hi < 2 ** 63 - 1 else lo - 1 if lo > -2 ** 63 else None
    if null is None:
        return None
    out = np.concatenate([raw for raw, _, _ in keys])
    if not np.can_cast(np.min_scalar_type(null), out.dtype):
        out = out.astype(np.int64)
    at = 0
    for raw, kmap, koff in keys:
        if len(kmap):
            out[at:at + len(raw)][~_bits(kmap, koff, len(raw))] = null
        at += len(raw)
    return out, _EMPTY, 0


def _direct(t: pa.DataType) -> bool:
    """Whether _codes reads a key of type t as its own integers (else as dictionary codes)."""
    return pa.types.is_integer(t) or pa.types.is_boolean(t) or (pa.types.is_temporal(t) and not pa.types.is_interval(t))


_EMPTY = np.empty(0, np.uint8)
_NO_OFFSETS = np.empty(0, np.int64)


def _codes(k, a: pa.Array) -> tuple[np.ndarray, np.ndarray, int]:
    """A key column as integers (int64, or int32 codes), validity bitmap and offset: integers,
    dates, times and durations as they are (UInt64 wraps: equal stays equal), strings and binaries
    as _strings codes them, other types as dictionary codes."""
    t = a.type
    if (coded := _strings([a])) is not None:
        return coded[0]
    if pa.types.is_boolean(t):
        a = a.cast(pa.int8())
    elif not _direct(t):
        a = pc.dictionary_encode(a).indices
    elif not pa.types.is_integer(t):   # dates, times, timestamps, durations: their integers
        a = a.view(pa.int32() if t.bit_width <= 32 else pa.int64())
    raw, kmap, koff = _buffers(a)
    return (raw.view(np.int64) if raw.itemsize == 8 else raw.astype(np.int64)), kmap, koff


def _mixed(k, parts: list[tuple[np.ndarray, np.ndarray, int]]) -> np.ndarray:
    """One int64 per row, equal where every key is (no nulls): each key minus its least (its range
    for a null) in mixed radix, where the ranges multiply within 2**62; otherwise each key, and
    the mix so far whenever the next key would overflow it, is replaced by its group ids (fewer
    than the rows: two of them always multiply within 2**62)."""
    spans = [k.minmax(*p) for p in parts]
    widths = [int(hi) - int(lo) + 2 for lo, hi in spans]
    out = np.zeros(len(parts[0][0]), np.int64)
    if math.prod(widths) < 1 << 62:
        return _mix_all(k, parts, spans, widths)
    total = 1
    for (raw, kmap, koff), (lo, hi) in zip(parts, spans):
        ids, groups, _ = _dense(k, raw, kmap, koff, lo, hi)
        if total * (groups + 1) >= 1 << 62:
            out, total, _ = _dense(k, out, _EMPTY, 0, *k.minmax(out, _EMPTY, 0))
        k.mix(out, ids, _EMPTY, 0, 0, groups + 1)
        total *= groups + 1
    return out


def _mix_all(k, parts, spans, widths) -> np.ndarray:
    """Keys (parts: _codes' triples) in mixed radix, each minus its least (spans) in its width:
    slices of rows shared among the cores, every key of a slice while it is in cache; int32 where
    the widths multiply within it (half the memory to write and read again)."""
    out = np.zeros(len(parts[0][0]), np.int32 if math.prod(widths) < 1 << 31 else np.int64)

    def run(a: int, b: int) -> None:
        for (raw, kmap, koff), (lo, _), w in zip(parts, spans, widths):
            k.mix(out[a:b], raw[a:b], kmap, koff + a, lo, w)

    _across(len(out), run)
    return out


def _across(n: int, fn) -> None:
    """fn(a, b) for slices a..b of rows 0..n (SLICE rows each), shared among the cores."""
    cuts = list(range(0, n, SLICE)) + [n]
    threads = min(CORES, len(cuts) - 1)
    if threads <= 1:
        return fn(0, n)
    _each(lambda t: [fn(a, b) for a, b in zip(cuts[t:-1:threads], cuts[t + 1::threads])], threads)


def _minmax(k, raw, kmap, koff) -> tuple[int, int]:
    """k.minmax over the cores (slices of rows), as Python ints."""
    n = len(raw)
    threads = min(CORES, max(1, n // SPLIT))
    spans = [(int(a), int(b)) for a, b in _each(lambda t: k.minmax(raw[n * t // threads:n * (t + 1) // threads], kmap,
                                                                    koff + n * t // threads), threads) if a <= b]
    return (min(a for a, _ in spans), max(b for _, b in spans)) if spans else (0, -1)


def _dense(k, raw, kmap, koff, lo, hi) -> tuple[np.ndarray, int, np.ndarray]:
    """Each row's group id (0 .. groups - 1 in order of first appearance, a null key a group of its
    own), the number of groups and each group's first row."""
    ids = np.empty(len(raw), np.int64)
    span = hi - lo + 1 if hi - lo < max(4 * len(raw), 1 << 16) else 0
    groups, first = k.group_ids(raw, kmap, koff, lo, span, ids)
    return ids, groups, first


def _keyed(k, parts, lo, slots, fns) -> tuple[np.ndarray, list[pa.Array]]:
    """group_by's way for few distinct keys, over parts (one, or an engine's chunks): ((key
    buffers), [value buffers per column]) each. Slot i holds key lo + i, the last slot null; each
    present slot's first row, and the sums or means in that order."""
    seen = None
    if any(len(v[1]) for _, values in parts for v in values):   # a key whose values are all null is a group
        seen = np.zeros(slots, np.bool_)
        for (raw, kmap, koff), _ in parts:
            _across(len(raw), lambda a, b, raw=raw, kmap=kmap, koff=koff: k.present_into(raw[a:b], kmap, koff + a, lo, seen))
    out = []
    for j, fn in enumerate(fns):
        sums, n = _slot_sums(k, [(key, values[j]) for key, values in parts], lo, slots)
        seen = n > 0 if seen is None else seen
        with np.errstate(all="ignore"):
            out.append((sums if fn == "sum" else sums / np.maximum(n, 1), n == 0))
    first, at = np.full(slots, -1, np.int64), 0
    for key, _ in parts:
        need = seen & (first < 0)
        if not need.any():
            break
        found = k.firsts(*key, lo, need)
        first = np.where(found >= 0, found + at, first)
        at += len(key[0])
    present = np.flatnonzero(seen)
    return first[present], [pa.array(s[present], mask=empty[present]) for s, empty in out]


def _spread(k, raw, kmap, koff, lo, slots, columns, fns) -> tuple[np.ndarray, list[pa.Array]] | None:
    """group_by's way for many slots and only sums and means (slot keys[i] - lo, a null key the last):
    the rows split among the cores, each thread adding its rows into a table of its own (spread:
    one pair of levels for the column, its largest value's), the tables then added exactly slot by
    slot, slots split among the cores. None where a column does not fit one pair of levels (finite
    values' exponents over about 100 bits apart, DANGER) or a sum needs Python's way."""
    threads = min(CORES, max(1, len(raw) // SPLIT), max(1, TABLES // (32 * slots)))
    tables, overs = _lines((threads, slots, 4)), np.zeros((threads, slots, 5), np.int64)   # overs: touched rarely
    first, out = None, []
    for fn, column in zip(fns, columns):
        if out:
            overs[:] = 0
        got = _spread_one(k, (raw, kmap, koff), lo, column, tables, overs)
        if got is None:
            return None
        sums, counts, first = got
        with np.errstate(all="ignore"):
            out.append((sums if fn == "sum" else sums / np.maximum(counts, 1), counts == 0))
    present = np.flatnonzero(first >= 0)
    return first[present], [pa.array(s[present], mask=empty[present]) for s, empty in out]


def _spread_one(k, key, lo, column, tables, overs) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """_spread of one column: each slot's sum, number of values and first row (-1: none)."""
    (v, vmap, voff), n, (threads, slots, _) = column, len(key[0]), tables.shape
    cuts = [n * t // threads for t in range(threads + 1)]
    k1 = max((max(_each(lambda t: k.top(v, vmap, voff, cuts[t], cuts[t + 1]), threads)) >> 52) - 1021, -1022)
    if k1 > 1023 or n * 2.0 ** (k1 - 1) >= k.DANGER:
        return None

    def run(t: int) -> bool:
        tables[t] = 0
        return k.spread(*key, lo, v, vmap, voff, cuts[t], cuts[t + 1], k1, tables[t], overs[t])

    sums, counts, first = np.empty(slots), np.empty(slots, np.int64), np.empty(slots, np.int64)
    parts = [slots * t // threads for t in range(threads + 1)]
    done = all(_each(run, threads)) and all(_each(lambda t: k.finish_spread(
        tables, overs, k1, NEG_ZERO, parts[t], parts[t + 1], sums, counts, first), threads))
    return (sums, counts, first) if done else None


def _lines(shape: tuple[int, ...]) -> np.ndarray:
    """An int64 array (C order, uninitialised) that starts on a 64-byte cache line, from np.empty:
    NumPy asks the kernel for huge pages for a large one (np.zeros does not), which spread's
    prefetches need (a prefetch that misses the TLB is dropped)."""
    size = math.prod(shape)
    flat = np.empty(size + 8, np.int64)
    at = (-flat.ctypes.data % 64) // 8
    return flat[at:at + size].reshape(shape)


def _slot_sums(k, pieces, lo, slots) -> tuple[np.ndarray, np.ndarray]:
    """Each slot's sum and number of valid values over pieces ((key buffers), (value buffers)):
    slices of at most SPLIT rows shared among the cores, each thread adding into digits of its
    own; their digits and counts add exactly."""
    work = [(key, values, a, min(a + SPLIT, len(key[0]))) for key, values in pieces for a in range(0, len(key[0]), SPLIT)]
    threads = min(CORES, max(1, sum(len(key[0]) for key, _ in pieces) // SPLIT), max(len(work), 1))
    digits = np.zeros((threads, slots, k.CHUNKS), np.int64)
    st = np.zeros((threads, slots, 6))
    st[:, :, 4] = k.CHUNKS
    counts = np.zeros((threads, slots), np.int64)

    def run(t: int) -> None:
        for (raw, kmap, koff), (v, vmap, voff), a, b in work[t::threads]:
            k.keyed(raw, kmap, koff, lo, v, vmap, voff, a, b, digits[t], st[t], counts[t])

    _each(run, threads)
    st = np.concatenate([st[:, :, :4].sum(axis=0), st[0, :, 4:]], axis=1)
    sums, python = np.empty(slots), np.zeros(slots, np.bool_)
    k.finish_each(digits.sum(axis=0), st, NEG_ZERO, sums, python)
    counts = counts.sum(axis=0)
    for g in np.flatnonzero(python & (counts > 0)):   # past DANGER: the reference's way
        xs = []
        for (raw, kmap, koff), (v, vmap, voff) in pieces:
            known = _bits(kmap, koff, len(raw))
            rows = (known & (raw == lo + g)) if g < slots - 1 else ~known
            xs += v[rows & _bits(vmap, voff, len(raw))].tolist()
        sums[g] = float_sum(xs)
    return sums, counts


def _one_chunk(a: pa.Array | pa.ChunkedArray) -> pa.Array:
    return (a.combine_chunks() if a.num_chunks != 1 else a.chunk(0)) if isinstance(a, pa.ChunkedArray) else a


def _bits(bitmap: np.ndarray, offset: int, n: int) -> np.ndarray:
    """A validity bitmap as n booleans (every row valid where it is empty)."""
    if not len(bitmap):
        return np.ones(n, np.bool_)
    return np.unpackbits(bitmap, bitorder="little")[offset:offset + n].astype(np.bool_)


def _buffers(a: pa.Array) -> tuple[np.ndarray, np.ndarray, int]:
    """A fixed-width array's values and validity bitmap (empty where it has no nulls) as NumPy views
    of its Arrow buffers (no copy), with the bit offset of its first row."""
    validity, data = a.buffers()[:2]
    if data is None:
        return np.empty(0, np.float64), np.empty(0, np.uint8), 0
    dtype = np.dtype(a.type.to_pandas_dtype()) if a.type != pa.float64() else np.dtype(np.float64)
    values = np.frombuffer(data, dtype=dtype, count=a.offset + len(a))[a.offset:]
    bitmap = np.frombuffer(validity, dtype=np.uint8) if a.null_count and validity is not None else np.empty(0, np.uint8)
    return values, bitmap, a.offset


def single(fn: str, column: pa.Array | pa.ChunkedArray | list[np.ndarray]) -> float | None:
    """aggregate() of a whole float column (sum, mean, var or std), nulls skipped; its chunks read
    in place where they hold no nulls. A list: an engine's chunks as NumPy arrays, with no nulls."""
    if isinstance(column, list):
        values = [v for v in column if len(v)]
    else:
        chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
        values = [_buffers(_float64(c.drop_null() if c.null_count else c))[0] for c in chunks]
        values = [v for v in values if len(v)]
    n = sum(map(len, values))
    if fn in ("sum", "mean"):
        return None if not n else total(values) if fn == "sum" else total(values) / n
    return aggregate(fn, np.concatenate(values) if values else np.empty(0), np.array([0, n]))[0].as_py()


def _float64(a: pa.Array) -> pa.Array:
    """a as float64 (a cast goes through pyarrow's compute functions even where a already is)."""
    return a if a.type == pa.float64() else a.cast(pa.float64())


def total(parts: list[np.ndarray]) -> float:
    """The correctly rounded sum of the values of every array in parts (no nulls), read where they
    lie (an engine's chunks): nothing is copied into one array."""
    k = _kernels()
    parts = [np.ascontiguousarray(p, dtype=np.float64) for p in parts if len(p)]
    threads = min(CORES, max(1, sum(map(len, parts)) // SPLIT))
    s, python = _one(k, parts, threads)
    return float_sum(np.concatenate(parts).tolist()) if python else s


def _one(k, parts: list[np.ndarray], threads: int) -> tuple[float, bool]:
    """One segment made of parts, in slices of at most SPLIT / 2 values that the threads take in turn
    as each is free (a thread that starts late, or that the machine's load holds back, takes fewer);
    each thread adds its slices into digits of its own, and their digits and counts add exactly."""
    step = max(SPLIT // 2, 1)
    todo = iter([(p, a, min(a + step, len(p))) for p in parts for a in range(0, len(p), step)])
    digits = np.zeros((threads, k.CHUNKS), dtype=np.int64)
    st = np.zeros((threads, 6))
    st[:, 4] = k.CHUNKS

    def run(i: int) -> None:
        for p, a, b in todo:   # one iterator: each slice goes to one thread (next() holds the GIL)
            k.accumulate(p, a, b, digits[i], st[i])
            st[i, 5] = k.carry(digits[i], int(st[i, 4]), int(st[i, 5]))

    _each(run, threads)
    sums = st.sum(axis=0)
    sums[4], sums[5] = 0, k.CHUNKS - 3
    return k.finish(digits.sum(axis=0), sums, NEG_ZERO, np.empty(k.CHUNKS + 1))


@functools.cache
def _kernels():
    from eidos.hal import fsum_kernels
    return fsum_kernels


@functools.cache
def _code_kernels():
    from eidos.hal import fsum_codes
    return fsum_codes


def _each(fn, n: int) -> list:
    """[fn(0), ..., fn(n - 1)], fn(0) in this thread and the others in the pool: no hand-over
    to wait for where one thread is enough, and one fewer where it is not."""
    rest = [_pool().submit(fn, t) for t in range(1, n)]
    first = [fn(0)] if n else []
    return first + [f.result() for f in rest]


@functools.cache
def _pool() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(CORES, thread_name_prefix="eidos-fsum")


# Whether this Python's math.fsum gives -0.0 for negative zeros (3.11 gives 0.0): zero sums then
# go the reference's way.
NEG_ZERO = math.copysign(1.0, math.fsum([-0.0])) < 0
