"""eidos.hal.fsum against the reference's float sum (math.fsum, and its rules for NaN, infinities
and overflow) on generated values: extreme magnitudes, subnormals, cancellation, specials, groups."""

from __future__ import annotations

import math
from unittest.mock import patch

import numpy as np
import pyarrow as pa
import pytest

pytest.importorskip("numba")
from hypothesis import given, settings
from hypothesis import strategies as st

from eidos.hal import fsum
from eidos.ir import dtypes as T
from eidos.ir.evaluate.aggregates import aggregate, float_sum

INF, NAN = math.inf, math.nan
SPECIAL = [0.0, -0.0, 5e-324, -5e-324, 2.2250738585072014e-308, 1e-300, 1.0, -1.0, 2.0 ** 52, 2.0 ** 53 + 2,
           1e16, 1e300, -1e300, 1.7976931348623157e308, -1.7976931348623157e308, INF, -INF, NAN]
values = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.sampled_from(SPECIAL),
                   st.integers(-1074, 1023).map(lambda e: math.ldexp(1.0, e)),
                   st.floats(-1e6, 1e6), st.floats(-1e-300, 1e-300))


def same(a: float, b: float) -> bool:
    return (a != a and b != b) or (a == b and math.copysign(1, a) == math.copysign(1, b))


def want(xs: list) -> float:
    return float_sum(xs) if xs else 0.0


@settings(max_examples=300, deadline=None)
@given(st.lists(values, max_size=40))
def test_sum_is_the_references(xs):
    got = fsum.sums(np.array(xs, dtype=np.float64))[0]
    assert same(got, want(xs)), (xs, got, want(xs))


@settings(max_examples=150, deadline=None)
@given(st.lists(values, max_size=60), st.lists(st.integers(0, 60), max_size=8))
def test_grouped_sums_are_each_groups(xs, cuts):
    offsets = np.array([0, *sorted(min(c, len(xs)) for c in cuts), len(xs)], dtype=np.int64)
    got = fsum.sums(np.array(xs, dtype=np.float64), offsets)
    for g, (a, b) in enumerate(zip(offsets[:-1], offsets[1:])):
        assert same(got[g], want(xs[a:b])), (xs[a:b], got[g])


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 5000), st.sampled_from(["normal", "wide", "cancel", "tiny"]))
def test_long_inputs_cross_blocks(seed, n, kind):
    """Past one block (2048 values), with the fast way's two levels and the slow way mixed."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(n)
    if kind == "wide":
        x = x * np.exp2(rng.integers(-200, 200, n))
    elif kind == "cancel":
        x = np.concatenate([x * 1e200, -x * 1e200, rng.standard_normal(3)])
    elif kind == "tiny":
        x = x * 5e-324 * 1000
    offsets = np.array([0, len(x) // 3, len(x)], dtype=np.int64)
    got = fsum.sums(x, offsets)
    assert got[0] == math.fsum(x[:offsets[1]]) and got[1] == math.fsum(x[offsets[1]:])


def test_split_over_threads_is_exact():
    rng = np.random.default_rng(7)
    x = rng.standard_normal(3 * fsum.SPLIT) * np.exp2(rng.integers(-60, 60, 3 * fsum.SPLIT))
    assert fsum.sums(x)[0] == math.fsum(x)
    offsets = np.array([0, 5, fsum.SPLIT, 2 * fsum.SPLIT + 3, len(x)], dtype=np.int64)
    assert fsum.sums(x, offsets).tolist() == [math.fsum(x[a:b]) for a, b in zip(offsets[:-1], offsets[1:])]


@pytest.mark.parametrize("xs", [
    [2.0 ** 100, 1.0, 2.0 ** -53, 2.0 ** -80, -2.0 ** 100],   # DuckDB's fsum (Kahan-Babuska) gives 1.0
    [1e308, 1e308, -1e308],                                     # math.fsum overflows part way: exact 1e308
    [1e308, 1e308, -INF],                                       # ... and with one infinity: that infinity
    [1.7976931348623157e308, 1e292],                            # rounds past the largest float: inf
    [INF, -INF, 1.0], [NAN, INF], [-0.0, -0.0], [],
])
def test_edges(xs):
    assert same(fsum.sums(np.array(xs, dtype=np.float64))[0], want(xs))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.floats(allow_nan=False, allow_infinity=False),
                          st.sampled_from([1.7976931348623157e308, -1.7976931348623157e308, 1e308, -1e308])),
                max_size=12), st.randoms(use_true_random=False))
def test_reference_sum_is_the_exact_total_rounded_once_in_any_order(xs, rnd):
    """Also where math.fsum overflows part way: the exact total, rounded once; never the order's."""
    from fractions import Fraction

    total = sum(map(Fraction, xs))
    try:
        exact = float(total)
    except OverflowError:
        exact = INF if total > 0 else -INF
    shuffled = xs[:]
    rnd.shuffle(shuffled)
    assert same(float_sum(xs), exact) and same(float_sum(shuffled), exact) or not xs


def test_float32_values_sum_as_their_float64_values():
    x = np.array([1e30, 1.0, -1e30, 3.4e38, -3.4e38, 1e-45], dtype=np.float32)
    assert fsum.sums(x)[0] == math.fsum(x.astype(np.float64).tolist())


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(values, max_size=20), max_size=6))
def test_total_of_parts_is_the_sum_of_them_all(parts):
    flat = [x for p in parts for x in p]
    assert same(fsum.total([np.array(p, dtype=np.float64) for p in parts]), want(flat))


def test_total_of_long_parts_over_threads():
    rng = np.random.default_rng(8)
    parts = [rng.standard_normal(n) * 10.0 ** rng.integers(-20, 20) for n in (3, fsum.SPLIT + 7, 2 * fsum.SPLIT)]
    assert fsum.total(parts) == math.fsum(np.concatenate(parts))


def test_blocks_of_changing_scale():
    """Each block first tries the previous block's levels: larger, smaller, NaN and subnormal blocks
    after one another must each fall back to their own (or the slow way) and stay exact."""
    rng = np.random.default_rng(9)
    block = 2048
    scales = [1.0, 1e200, 1e-200, 1.0, np.nan, 1.0, 5e-324, 1e300, -1e300, 1e-10]
    x = np.concatenate([rng.standard_normal(block) * s for s in scales])
    x[block * 9 + 5] = 2.0 ** -1000       # a value far below its block's levels
    for a in range(0, len(x), block):
        got = fsum.sums(x[a:])[0]
        assert same(got, want(x[a:].tolist())), a


keys = st.one_of(st.integers(-3, 12), st.integers(-2**63, 2**63 - 1), st.none())


@settings(max_examples=120, deadline=None)
@given(st.lists(st.tuples(keys, st.one_of(values, st.none())), max_size=60),
       st.sampled_from(["sum", "mean", "var", "std"]), st.sampled_from([pa.int64(), pa.uint64(), pa.date32()]))
def test_group_by_is_each_groups_reference_aggregate(rows, fn, kind):
    """Keys within SLOTS (keyed), wide ones (hashed) and nulls; values with nulls, specials, extremes."""
    if kind == pa.uint64():
        rows = [(None if k is None else k % 2**64, x) for k, x in rows]
    elif kind == pa.date32():
        rows = [(None if k is None else k % 2**31, x) for k, x in rows]
    ks = pa.array([k for k, _ in rows], pa.int64() if kind != pa.uint64() else pa.uint64())
    ks = ks.cast(pa.int32()).view(kind) if kind == pa.date32() else ks
    first, (got,) = fsum.group_by([ks], [(fn, pa.array([x for _, x in rows], pa.float64()))])
    groups = ks.take(first)
    if kind == pa.date32():   # compared as their integers (dates past year 9999 have no Python form)
        ks, groups = ks.view(pa.int32()), groups.view(pa.int32())
    want_of = {}
    for k, x in zip(ks.to_pylist(), (x for _, x in rows)):
        want_of.setdefault(k, [])
        if x is not None:
            want_of[k].append(x)
    got_of = dict(zip(groups.to_pylist(), got.to_pylist()))
    assert got_of.keys() == want_of.keys()
    for k, xs in want_of.items():
        ref = aggregate(fn, xs, T.Float64, T.Float64)
        assert (got_of[k] is None and ref is None) or same(got_of[k], ref), (k, xs, got_of[k], ref)


def test_group_by_long_inputs_over_threads():
    rng = np.random.default_rng(10)
    n = 2 * fsum.SPLIT + 11
    x = rng.standard_normal(n) * np.exp2(rng.integers(-70, 70, n))
    x[::1000] = 1e-310
    for span in (16, 5000):
        k = rng.integers(0, span, n)
        first, (got,) = fsum.group_by([pa.array(k)], [("sum", pa.array(x))])
        groups = pa.array(k).take(first)
        order = np.argsort(k, kind="stable")
        ks, xs = k[order].tolist(), x[order].tolist()
        cuts = (np.flatnonzero(np.diff(k[order])) + 1).tolist()
        want_of = {ks[a]: math.fsum(xs[a:b]) for a, b in zip([0, *cuts], [*cuts, n])}
        assert dict(zip(groups.to_pylist(), got.to_pylist())) == want_of


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.one_of(st.sampled_from(["a", "b", "", "é"]), st.none()), st.one_of(st.integers(-2, 2), st.integers(-2**63, 2**63 - 1), st.none()),
                          st.one_of(st.booleans(), st.none()), st.one_of(values, st.none())), max_size=50),
       st.sampled_from(["sum", "mean", "var"]))
def test_group_by_several_keys_of_any_type(rows, fn):
    """Strings (dictionary codes), wide integers (group ids before mixing), booleans and nulls in
    each key: every distinct tuple of keys one group, with its reference aggregate."""
    cols = list(zip(*rows)) if rows else [(), (), (), ()]
    keys = [pa.array(list(cols[0]), pa.large_string()), pa.array(list(cols[1]), pa.int64()), pa.array(list(cols[2]), pa.bool_())]
    first, (got,) = fsum.group_by(keys, [(fn, pa.array(list(cols[3]), pa.float64()))])
    got_keys = [a.take(first) for a in keys]
    want_of: dict = {}
    for *k, x in rows:
        want_of.setdefault(tuple(k), [])
        if x is not None:
            want_of[tuple(k)].append(x)
    got_of = dict(zip(zip(*(a.to_pylist() for a in got_keys)), got.to_pylist()))
    assert got_of.keys() == want_of.keys() and len(got) == len(want_of)
    for k, xs in want_of.items():
        ref = aggregate(fn, xs, T.Float64, T.Float64)
        assert (got_of[k] is None and ref is None) or same(got_of[k], ref), (k, xs, got_of[k], ref)


def test_group_by_many_wide_keys():
    """Thirteen wide keys: their group counts multiply past 2**62, so the mix so far is replaced
    by its group ids part way."""
    rng = np.random.default_rng(11)
    base = rng.integers(-2**62, 2**62, (40, 13))
    pick = rng.integers(0, 40, 60)
    keys = [pa.array(base[pick, c]) for c in range(13)]
    x = rng.standard_normal(60)
    first, (got,) = fsum.group_by(keys, [("sum", pa.array(x))])
    got_keys = [a.take(first) for a in keys]
    want = {tuple(base[p].tolist()): math.fsum(x[pick == p]) for p in set(pick.tolist())}
    assert dict(zip(zip(*(a.to_pylist() for a in got_keys)), got.to_pylist())) == want


def test_group_by_reads_chunks_in_place():
    """An engine's batches (chunked alike, one integer key, sums and means): each chunk read where
    it lies, with nulls, a chunk with no rows and a key whose values are all null."""
    rng = np.random.default_rng(12)
    k = [rng.integers(0, 6, 700).tolist(), [], [5, None, 7], rng.integers(0, 6, 3000).tolist()]
    x = [(rng.standard_normal(len(c)) * 1e10).tolist() for c in k]
    x[2] = [None, 1.5, None]
    x[3][::7] = [None] * len(x[3][::7])
    keys, values = pa.chunked_array(k, pa.int64()), pa.chunked_array(x, pa.float64())
    for fn in ("sum", "mean"):
        first, (got,) = fsum.group_by([keys], [(fn, values)])
        groups = keys.take(first).to_pylist()
        want_of: dict = {}
        for kk, xx in zip(keys.to_pylist(), values.to_pylist()):
            want_of.setdefault(kk, [])
            if xx is not None:
                want_of[kk].append(xx)
        assert len(groups) == len(want_of)
        for g, v in zip(groups, got.to_pylist()):
            assert first.tolist()[groups.index(g)] == keys.to_pylist().index(g)
            ref = aggregate(fn, want_of[g], T.Float64, T.Float64)
            assert (v is None and ref is None) or same(v, ref), (g, v, ref)


def test_group_by_reads_chunks_of_strings_and_several_keys():
    """Batches keyed by strings (one dictionary over every chunk) and by a string and an integer
    (mixed chunk by chunk)."""
    w = [["a", "b", None], ["b", "c"], ["c", "a", "a", None]]
    i = [[1, None, 1], [2, 2], [1, 1, None, None]]
    x = [[1.0, 2.0, 3.0], [4.0, None], [1e300, -1e300, 0.5, 2.0 ** -60]]
    keys = [pa.chunked_array(w, pa.string_view()), pa.chunked_array(i, pa.int64())]
    values = pa.chunked_array(x, pa.float64())
    for chosen in ([keys[0]], keys):
        first, (got,) = fsum.group_by(chosen, [("sum", values)])
        rows = list(zip(*(a.to_pylist() for a in chosen)))
        want: dict = {}
        for r, v in zip(rows, values.to_pylist()):
            want.setdefault(r, [])
            if v is not None:
                want[r].append(v)
        assert dict(zip((rows[f] for f in first), got.to_pylist())) == {r: math.fsum(v) if v else None for r, v in want.items()}


strings = st.one_of(st.none(), st.sampled_from(["", "a", "b", "key-01", "12345678", "123456789", "abcdefghijkl",
                                                "abcdefghijklm", "abcdefghijklmnopq", "é"]),
                    st.text(max_size=20))


def _chunked(xs: list, cuts: list, kind: pa.DataType) -> pa.ChunkedArray:
    """xs in slices of one array (chunks that start at an offset), cut where cuts say."""
    bounds = sorted({0, len(xs), *(c % (len(xs) + 1) for c in cuts)})
    whole = pa.array(xs, kind)
    return pa.chunked_array([whole.slice(a, b - a) for a, b in zip(bounds, bounds[1:])] or [whole], kind)


@settings(max_examples=150, deadline=None)
@given(st.lists(strings, max_size=80), st.lists(st.integers(0, 80), max_size=4),
       st.sampled_from([pa.string(), pa.large_string(), pa.string_view(), pa.binary(), pa.large_binary(), pa.binary_view()]),
       st.booleans())
def test_string_codes_are_one_numbering_of_the_bytes(xs, cuts, kind, threads):
    """Strings coded in place (eidos.hal.fsum_codes): equal codes exactly where the bytes are
    equal, numbered 0 .. groups - 1, over chunks, views past 12 bytes (cast) and, split over
    threads (SPLIT of one row), each thread's table merged into the first's."""
    if pa.types.is_binary(kind) or pa.types.is_large_binary(kind) or pa.types.is_binary_view(kind):
        xs = [None if x is None else x.encode() for x in xs]
    column = _chunked(xs, cuts, kind)
    with patch.object(fsum, "SPLIT", 1 if threads else fsum.SPLIT):
        coded = fsum._strings(column.chunks)
    ids = [int(raw[i]) if fsum._bits(kmap, koff, len(raw))[i] else None
           for raw, kmap, koff in coded for i in range(len(raw))]
    assert [i is None for i in ids] == [x is None for x in xs]
    of = {}
    for x, i in zip(xs, ids):
        if x is not None:
            assert of.setdefault(x, i) == i, (x, i, of[x])
    assert sorted(of.values()) == list(range(len(of)))


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(strings, st.one_of(st.integers(-2, 2), st.integers(-2**40, 2**40), st.none()),
                          st.one_of(values, st.none())), max_size=60),
       st.lists(st.integers(0, 60), max_size=3), st.sampled_from(["sum", "mean"]), st.booleans(), st.booleans())
def test_group_by_chunks_of_strings_and_wide_keys(rows, cuts, fn, threads, many):
    """An engine's batches keyed by strings (views, as Polars hands them) and by a string and an
    integer, narrow or wide (past SLOTS: the coded chunks joined, nulls a value of their own),
    split over threads in small slices, strings with many distinct values (a sample of 4 rows
    holding more than 2: dictionary_encode): each group's reference aggregate."""
    cols = list(zip(*rows)) if rows else [(), (), ()]
    keys = [_chunked(list(cols[0]), cuts, pa.string_view()), _chunked(list(cols[1]), cuts, pa.int64())]
    x = _chunked(list(cols[2]), cuts, pa.float64())
    for chosen in ([keys[0]], [keys[1]], keys):
        with patch.object(fsum, "SPLIT", 1 if threads else fsum.SPLIT), patch.object(fsum, "SLICE", 3 if threads else fsum.SLICE), \
                patch.object(fsum, "SAMPLE", 4 if many else fsum.SAMPLE), patch.object(fsum, "MANY", 2 if many else fsum.MANY):
            first, (got,) = fsum.group_by(chosen, [(fn, x)])
        flat = list(zip(*(a.to_pylist() for a in chosen)))
        want_of: dict = {}
        for r, v in zip(flat, cols[2]):
            want_of.setdefault(r, [])
            if v is not None:
                want_of[r].append(v)
        got_of = dict(zip((flat[f] for f in first), got.to_pylist()))
        assert got_of.keys() == want_of.keys() and len(got) == len(want_of)
        for r, xs in want_of.items():
            ref = aggregate(fn, xs, T.Float64, T.Float64)
            assert (got_of[r] is None and ref is None) or same(got_of[r], ref), (r, xs, got_of[r], ref)


@pytest.mark.parametrize("shift", [0, 20, 40, 48])   # 4,096 << 48 still fits an int64
def test_hash_slots_spread_keys_that_differ_only_in_high_bits(shift):
    """group_ids' hash table: 4,096 keys that differ only above bit `shift` must land in many slots of an
    8,192-slot table (as random slots would: about 3,200), not share the low bits a multiply leaves them
    (then every probe walks one run: 170 times slower at 100,000 such keys)."""
    from eidos.hal.fsum_kernels import _slot

    slots = {_slot(np.int64(m << shift), 8192) for m in range(1, 4097)}
    assert len(slots) > 2800, len(slots)


@settings(max_examples=120, deadline=None)
@given(st.lists(st.tuples(st.one_of(st.integers(-40, 40), st.integers(-2**63, 2**63 - 1), st.none()),
                          st.one_of(values, st.floats(-1e6, 1e6), st.none())), max_size=80),
       st.sampled_from(["sum", "mean"]), st.booleans(), st.booleans())
def test_group_by_many_groups_per_thread_tables(rows, fn, threads, cancel):
    """Many groups (_spread: each thread a table of its own, added exactly after): narrow keys read as
    slots, wide ones as group ids, nulls, each value's negation in its group (cancel), NaN and
    infinities (counted apart); values too far apart for one pair of levels take the sorting way."""
    rows = rows + [(k, -x) for k, x in rows if x is not None] if cancel else rows
    ks = pa.array([k for k, _ in rows], pa.int64())
    with patch.object(fsum, "SLOTS", 1), patch.object(fsum, "SPREAD", 4), \
            patch.object(fsum, "SPLIT", 1 if threads else fsum.SPLIT):
        first, (got,) = fsum.group_by([ks], [(fn, pa.array([x for _, x in rows], pa.float64()))])
    want_of: dict = {}
    for k, x in rows:
        want_of.setdefault(k, [])
        if x is not None:
            want_of[k].append(x)
    got_of = dict(zip(ks.take(first).to_pylist(), got.to_pylist()))
    assert got_of.keys() == want_of.keys() and len(got) == len(want_of)
    for k, xs in want_of.items():
        ref = aggregate(fn, xs, T.Float64, T.Float64)
        assert (got_of[k] is None and ref is None) or same(got_of[k], ref), (k, xs, got_of[k], ref)


@pytest.mark.parametrize("span", [3000, 2**62])
def test_spread_tables_carry_and_agree_with_the_sorting_way(span):
    """_spread over threads, with a hot group past 2048 values a thread (its sums carried), nulls in
    keys and values, huge and tiny magnitudes within one pair of levels and cancellation: the same
    groups, first rows and sums as the sorting way, and each group's math.fsum."""
    rng = np.random.default_rng(13)
    n = 3 * fsum.SPLIT
    k = rng.integers(0, 2000, n) * (span // 2000)
    k[::3] = 7 * (span // 2000)
    x = np.round(rng.standard_normal(n) * 2.0 ** 30) * np.exp2(rng.integers(-50, 10, n).astype(float))
    x[1::4] = -x[::4][:len(x[1::4])]
    knull, xnull = rng.random(n) < 0.01, rng.random(n) < 0.01
    keys, values = pa.array(k, mask=knull), pa.array(x, mask=xnull)
    real, returned = fsum._spread, []
    with patch.object(fsum, "_spread", lambda *a: returned.append(real(*a)) or returned[-1]):
        first, (got,) = fsum.group_by([keys], [("sum", values)])
    assert len(returned) == 1 and returned[0] is not None
    with patch.object(fsum, "_spread", lambda *a: None):
        first_sorted, (got_sorted,) = fsum.group_by([keys], [("sum", values)])
    assert np.array_equal(first, first_sorted) and got.equals(got_sorted)
    for f, s in zip(first[:40].tolist(), got.to_pylist()[:40]):
        rows = (knull if knull[f] else (k == k[f]) & ~knull) & ~xnull
        assert s == (math.fsum(x[rows]) if rows.any() else None), f
