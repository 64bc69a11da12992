"""The cluster lane's partial aggregates (lanes/ray/partials.py) against the reference lane: however the
input is cut into partitions, and however the states are hash-split between combine tasks, the rows are
the reference's, floats bit for bit (-0.0 is not 0.0; NaN equals NaN). No Ray runs here."""

from __future__ import annotations

import math
import struct
import sys
from datetime import date
from decimal import Decimal as D
from unittest import mock

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import eidos as ei
from eidos import col
from eidos.errors import ExecutionError
from eidos.hal.runner import run
from eidos.lanes.ray import partials as P
from eidos.testing.strategies import profile

MAX = sys.float_info.max
NAN, INF = math.nan, math.inf


# ---------------------------------------------------------------- running both ways

def reference(flow: ei.Flow) -> pa.Table:
    return run(flow.plan, engine="reference")


def partitions(table: pa.Table, cuts: list[int]) -> list[pa.Table]:
    """`table` cut at `cuts` (sorted, repeats make empty partitions)."""
    bounds = [0, *sorted(min(c, table.num_rows) for c in cuts), table.num_rows]
    return [table.slice(a, b - a) for a, b in zip(bounds, bounds[1:])]


def _bucket(row: tuple, buckets: int) -> int:
    norm = tuple("nan" if isinstance(v, float) and v != v else (0.0 if v == 0 and isinstance(v, float) else v)
                 for v in row)
    return hash(repr(norm)) % buckets


def combined(flow: ei.Flow, parts: list[pa.Table], buckets: int = 1) -> pa.Table:
    """The node run as the cluster lane runs it: states per partition, hash-split into `buckets` by key
    (each bucket's pieces in partition order), one combine per bucket, the buckets' rows concatenated."""
    p = P.plan(flow.plan)
    assert p is not None
    states = [p.partial(t) for t in parts]
    for s in states:
        assert s.schema == p.schema
    if not p.keys or buckets == 1:
        return p.combine(states)
    pieces: list[list[pa.Table]] = [[] for _ in range(buckets)]
    for s in states:
        keys = list(zip(*[s.column(k).to_pylist() for k in p.keys])) if s.num_rows else []
        which = np.array([_bucket(k, buckets) for k in keys], dtype=np.int64)
        for b in range(buckets):
            pieces[b].append(s.filter(pa.array(which == b)) if s.num_rows else s)
    return pa.concat_tables([p.combine(piece) for piece in pieces])


def _same_value(a: object, b: object) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return (a != a and b != b) or struct.pack("<d", a) == struct.pack("<d", b)
    return type(a) is type(b) and a == b


def assert_same(got: pa.Table, want: pa.Table, *, ordered: bool = True) -> None:
    assert got.schema == want.schema, f"{got.schema} != {want.schema}"
    g, w = got.to_pylist(), want.to_pylist()
    if not ordered:
        g, w = sorted(g, key=repr), sorted(w, key=repr)
    assert len(g) == len(w), f"{len(g)} rows, the reference has {len(w)}:\n{g}\n{w}"
    for rg, rw in zip(g, w):
        assert all(_same_value(rg[k], rw[k]) for k in rw), f"\n got {rg}\nwant {rw}"


def check(flow: ei.Flow, cuts: list[int], buckets: int = 1) -> None:
    """The partial route equals the reference (its error included)."""
    table = flow.plan.input.source.table
    parts = partitions(table, cuts)
    try:
        want = reference(flow)
    except ExecutionError as err:
        with pytest.raises(ExecutionError) as got:
            combined(flow, parts, buckets)
        assert str(got.value).split(":")[0] == str(err).split(":")[0]  # the same kind of overflow
        return
    assert_same(combined(flow, parts, buckets), want, ordered=buckets == 1)


# ---------------------------------------------------------------- generated tables and splits

EDGE = [0.0, -0.0, NAN, INF, -INF, 5e-324, -5e-324, 2.2250738585072014e-308, 1e-300, 1.0, -1.0, 0.1, 3.0,
        1e16, -1e16, 2.0 ** 53, 1e300, -1e300, 1e308, -1e308, MAX, -MAX]
FLOATS = st.one_of(st.sampled_from(EDGE), st.floats(), st.floats(-1e6, 1e6), st.integers(-9, 9).map(float),
                   st.floats(-1e-300, 1e-300))
INTS = st.one_of(st.sampled_from([0, 1, -1, 2 ** 62, -(2 ** 62), 2 ** 63 - 1, -(2 ** 63), 2 ** 40]),
                 st.integers(-(2 ** 63), 2 ** 63 - 1), st.integers(-100, 100))
# Decimal(38, 2): unscaled values below 10**38; a dozen of the large ones overflow a sum
DECIMALS = st.one_of(st.sampled_from([0, 1, -1, 99 * 10 ** 35, -99 * 10 ** 35, 10 ** 38 - 1]),
                     st.integers(-(10 ** 37), 10 ** 37), st.integers(-9999, 9999)).map(lambda v: D(f"{v}E-2"))
WORDS = st.sampled_from(["", "a", "b", "B", "é", "ab", "z" * 5])
DATES = st.dates(date(1, 1, 1), date(9999, 12, 31))


def _maybe(s: st.SearchStrategy) -> st.SearchStrategy:
    return st.one_of(st.none(), s, s, s)


@st.composite
def tables(draw, max_rows: int = 14) -> pa.Table:
    n = draw(st.integers(0, max_rows))

    def column(s: st.SearchStrategy) -> list:
        return draw(st.lists(_maybe(s), min_size=n, max_size=n))

    return pa.table({
        "k": pa.array(column(st.sampled_from(["a", "b", "c"])), pa.large_string()),
        "kf": pa.array(column(st.sampled_from([0.0, -0.0, NAN, 1.5])), pa.float64()),
        "ki": pa.array(column(st.integers(0, 3)), pa.int64()),
        "x": pa.array(column(FLOATS), pa.float64()),
        "y": pa.array(column(st.floats(-4, 4, width=32)), pa.float32()),
        "i": pa.array(column(INTS), pa.int64()),
        "u": pa.array(column(st.integers(0, 2 ** 64 - 1)), pa.uint64()),
        "d": pa.array(column(DECIMALS), pa.decimal128(38, 2)),
        "s": pa.array(column(WORDS), pa.large_string()),
        "b": pa.array(column(st.booleans()), pa.bool_()),
        "t": pa.array(column(DATES), pa.date32()),
        "ts": pa.array(column(st.datetimes()), pa.timestamp("us")),
        "h": pa.array(column(st.integers(-128, 127)), pa.int8()),
        "z": pa.nulls(n, pa.float64()),
    })


AGGS = {
    "x_sum": col("x").sum(), "x_mean": col("x").mean(), "x_min": col("x").min(), "x_max": col("x").max(),
    "x_count": col("x").count(), "rows": ei.count(), "y_sum": col("y").sum(), "y_min": col("y").min(),
    "y_max": col("y").max(), "i_sum": col("i").sum(), "i_mean": col("i").mean(), "i_min": col("i").min(),
    "u_sum": col("u").sum(), "u_mean": col("u").mean(), "u_max": col("u").max(),
    "d_sum": col("d").sum(), "d_mean": col("d").mean(), "d_min": col("d").min(), "d_max": col("d").max(),
    "s_min": col("s").min(), "s_max": col("s").max(), "s_count": col("s").count(),
    "b_min": col("b").min(), "b_max": col("b").max(), "t_min": col("t").min(), "t_max": col("t").max(),
    "ts_min": col("ts").min(), "ts_max": col("ts").max(), "h_sum": col("h").sum(), "h_mean": col("h").mean(),
    "h_min": col("h").min(), "z_sum": col("z").sum(), "z_max": col("z").max(), "z_count": col("z").count(),
    "ratio": col("x").sum() / ei.count(), "xy": (col("x") * col("y")).sum(),
    "i_half": (col("i") // 2).sum(), "plus": col("i").count() + 1,
}
KEYS = {"k": ["k"], "kf": ["kf"], "k_ki": ["k", "ki"], "kf_k": ["kf", "k"], "none": []}
SPLITS = st.lists(st.integers(0, 14), max_size=5)


@settings(parent=profile(), max_examples=max(60, profile().max_examples))
@given(table=tables(), keys=st.sampled_from(sorted(KEYS)), aggs=st.lists(st.sampled_from(sorted(AGGS)),
       min_size=1, max_size=6, unique=True), cuts=SPLITS, buckets=st.integers(1, 3))
def test_generated(table, keys, aggs, cuts, buckets):
    flow = ei.from_arrow(table)
    named = {a: AGGS[a] for a in aggs}
    flow = flow.group_by(*KEYS[keys]).agg(**named) if KEYS[keys] else flow.agg(**named)
    check(flow, cuts, buckets)


@settings(parent=profile(), max_examples=max(60, profile().max_examples))
@given(xs=st.lists(st.one_of(FLOATS, st.floats(-1e300, 1e300)), max_size=30), cuts=SPLITS,
       groups=st.integers(1, 3), dense=st.booleans())
def test_float_sums_bit_exact(xs, cuts, groups, dense):
    """Sums and means of floats: finite, NaN, infinities, subnormals, -0.0, huge beside tiny; in both
    layouts of the digits."""
    with mock.patch.object(P, "_dense", lambda *_: dense):
        _float_sums_bit_exact(xs, cuts, groups)


def _float_sums_bit_exact(xs: list[float], cuts: list[int], groups: int) -> None:
    table = pa.table({"g": pa.array([i % groups for i in range(len(xs))], pa.int64()),
                      "x": pa.array(xs, pa.float64())})
    flow = ei.from_arrow(table).group_by("g").agg(s=col("x").sum(), m=col("x").mean(),
                                                  lo=col("x").min(), hi=col("x").max())
    check(flow, [c * 2 for c in cuts])


@settings(parent=profile(), max_examples=max(60, profile().max_examples))
@given(xs=st.lists(st.floats(allow_nan=False, allow_infinity=False), max_size=40), cuts=SPLITS,
       dense=st.booleans())
def test_expansions_round_as_fsum(xs, cuts, dense):
    """The expansions of any partitions (compressed as states are), added, round exactly as math.fsum
    over all values; in both layouts of the digits."""
    with mock.patch.object(P, "_dense", lambda *_: dense):
        _expansions_round_as_fsum(xs, cuts)


def _expansions_round_as_fsum(xs: list[float], cuts: list[int]) -> None:
    if max(sum(x for x in xs if x > 0), -sum(x for x in xs if x < 0)) >= P.DANGER:
        return  # states keep such totals as integers (test_near_overflow_is_exact)
    want = math.fsum(xs)
    x = np.array(xs, dtype=np.float64)
    keep = np.zeros(1, bool)
    states = [P._compress(*P._expand(np.zeros(len(part), np.int64), part, 1, drop=keep)) for part in
              np.split(x, sorted(min(c, len(xs)) for c in cuts))]
    comps = np.concatenate([c for c, _ in states])
    total = P._round(*P._expand(np.zeros(len(comps), np.int64), comps, 1, drop=keep))
    assert _same_value(float(total[0]), want)


# ---------------------------------------------------------------- regressions, one per edge

def _flow(data: dict, types: dict, keys: list[str], **aggs) -> ei.Flow:
    table = pa.table({n: pa.array(v, types[n]) for n, v in data.items()})
    flow = ei.from_arrow(table)
    return flow.group_by(*keys).agg(**aggs) if keys else flow.agg(**aggs)


ALL_CUTS = [[], [0], [1], [2], [1, 1, 3], [0, 0, 9, 9], [1, 2, 3, 4, 5, 6, 7]]


@pytest.mark.parametrize("cuts", ALL_CUTS)
@pytest.mark.parametrize("buckets", [1, 2])
@pytest.mark.parametrize("case", [
    "huge_and_tiny", "float_edges", "neg_zero", "all_null", "partition_overflow", "int_extremes",
    "uint", "decimal_partition_overflow", "nan_and_inf", "group_in_some_partitions", "null_keys",
    "float_keys", "combined_expressions", "computed_keys", "strings_dates_bools",
])
def test_edges(case, cuts, buckets):
    f64, i64 = pa.float64(), pa.int64()
    if case == "huge_and_tiny":  # a naive sum gives 0.0, fsum 1.0 + 2**-1074
        flow = _flow({"x": [1e300, 1.0, 5e-324, -1e300, 1e300, -1e300, 3.0, -3.0]}, {"x": f64}, [],
                     s=col("x").sum(), m=col("x").mean())
    elif case == "float_edges":
        xs = [1e16, 1.0, 1e-16, 0.1, 0.2, 0.3, -0.6, 2.0 ** -1074, 1e308, -1e308, 2.0 ** 53, 1.0]
        flow = _flow({"k": [i % 3 for i in range(12)], "x": xs}, {"k": i64, "x": f64}, ["k"],
                     s=col("x").sum(), m=col("x").mean(), lo=col("x").min(), hi=col("x").max())
    elif case == "neg_zero":  # a sum of -0.0 is 0.0 (fsum); min/max keep the first zero as it came
        flow = _flow({"k": [1, 2, 1, 2, 3, 3], "x": [-0.0, 0.0, 0.0, -0.0, -0.0, -0.0]}, {"k": i64, "x": f64},
                     ["k"], s=col("x").sum(), lo=col("x").min(), hi=col("x").max(), m=col("x").mean())
    elif case == "all_null":
        flow = _flow({"k": [1, 1, 2], "x": [None, None, None], "i": [None, None, 3], "d": [None] * 3},
                     {"k": i64, "x": f64, "i": i64, "d": pa.decimal128(10, 3)}, ["k"],
                     s=col("x").sum(), m=col("x").mean(), lo=col("x").min(), c=col("x").count(),
                     si=col("i").sum(), mi=col("i").mean(), sd=col("d").sum(), md=col("d").mean(), n=ei.count())
    elif case == "partition_overflow":  # each half overflows Int64, the total fits
        flow = _flow({"i": [2 ** 62, 2 ** 62, 2 ** 62, -(2 ** 62), -(2 ** 62), -(2 ** 62), 5]}, {"i": i64}, [],
                     s=col("i").sum(), m=col("i").mean())
    elif case == "int_extremes":  # the means of totals past 2**53 divide exactly
        flow = _flow({"k": [0, 1, 0, 1, 0, 1], "i": [2 ** 63 - 1, -(2 ** 63), 2 ** 63 - 1, -(2 ** 63), -1, 3]},
                     {"k": i64, "i": i64}, ["k"], s=col("i").mean(), lo=col("i").min(), hi=col("i").max())
    elif case == "uint":
        flow = _flow({"u": [2 ** 64 - 1, 0, 1, 2 ** 63]}, {"u": pa.uint64()}, [], m=col("u").mean(),
                     hi=col("u").max(), c=col("u").count())
    elif case == "decimal_partition_overflow":
        big, small = D("9" * 36 + ".99"), D("-" + "9" * 36 + ".99")  # (a unary minus would round to 28 digits)
        flow = _flow({"d": [big, big, big, small, small, small, D("0.01")]}, {"d": pa.decimal128(38, 2)}, [],
                     s=col("d").sum(), m=col("d").mean(), lo=col("d").min())
    elif case == "nan_and_inf":
        flow = _flow({"k": [0, 1, 2, 3, 0, 1, 2, 3], "x": [NAN, INF, INF, -INF, 1.0, -INF, INF, 2.0]},
                     {"k": i64, "x": f64}, ["k"], s=col("x").sum(), m=col("x").mean(), lo=col("x").min(),
                     hi=col("x").max())
    elif case == "group_in_some_partitions":
        flow = _flow({"k": ["a", "a", "b", "c", "c", "a", "d"], "x": [0.1, 0.2, 0.3, 1e-20, 1.0, -0.3, 7.0]},
                     {"k": pa.large_string(), "x": f64}, ["k"], s=col("x").sum(), n=ei.count())
    elif case == "null_keys":
        flow = _flow({"k": [None, "a", None, "b"], "j": [1, None, 1, None], "x": [1.0, 2.0, 3.0, 4.0]},
                     {"k": pa.large_string(), "j": i64, "x": f64}, ["k", "j"], s=col("x").sum())
    elif case == "float_keys":  # -0.0 groups with 0.0 (the first seen is the key), NaN with NaN
        flow = _flow({"k": [-0.0, 0.0, NAN, NAN, 0.0, None], "x": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]},
                     {"k": f64, "x": f64}, ["k"], s=col("x").sum(), n=ei.count())
    elif case == "combined_expressions":
        flow = _flow({"k": [1, 2, 1, 2], "p": [1.5, 2.0, 0.1, 3.0], "q": [2, 3, 5, 7]}, {"k": i64, "p": f64, "q": i64},
                     ["k"], r=col("p").sum() / ei.count(), pq=(col("p") * col("q")).sum(), kk=col("k") * 10 + ei.count(), kcopy=col("k"),
                     lit=ei.lit(1) + col("q").min(), both=col("q").sum() + col("q").max())
    elif case == "computed_keys":
        table = pa.table({"a": pa.array([1, 2, 3, 4, 5], i64), "x": pa.array([0.5, 1.5, 2.5, 3.5, 4.5])})
        flow = ei.from_arrow(table).group_by((col("a") % 2).alias("m"), (col("a") + 1).alias("a")).agg(
            s=col("x").sum(), top=col("m").max(), a2=col("a").sum())
    else:
        flow = _flow({"k": [1, 1, 2, 1], "s": ["b", "é", None, "B"], "t": [date(2020, 1, 2), None, date(1, 1, 1),
                                                                            date(2020, 1, 1)],
                      "b": [True, False, None, True]},
                     {"k": i64, "s": pa.large_string(), "t": pa.date32(), "b": pa.bool_()}, ["k"],
                     lo=col("s").min(), hi=col("s").max(), t0=col("t").min(), t1=col("t").max(),
                     b0=col("b").min(), b1=col("b").max(), c=col("s").count())
    check(flow, cuts, buckets)


@pytest.mark.parametrize("cuts", ALL_CUTS)
@pytest.mark.parametrize("values, dtype, kind", [
    ([2 ** 62, 2 ** 62, 1, -1], pa.int64(), "integer overflow"),             # 2**63 does not fit
    ([2 ** 63, 2 ** 63, 1], pa.uint64(), "integer overflow"),
    ([-(2 ** 63), -1], pa.int64(), "integer overflow"),
    ([D("9" * 37 + ".9"), D("1")], pa.decimal128(38, 1), "decimal overflow"),
])
def test_totals_that_do_not_fit_raise(values, dtype, kind, cuts):
    flow = _flow({"i": values}, {"i": dtype}, [], s=col("i").sum())
    with pytest.raises(ExecutionError) as ref:
        reference(flow)
    parts = partitions(flow.plan.input.source.table, cuts)
    with pytest.raises(ExecutionError) as got:
        combined(flow, parts)
    assert str(got.value) == str(ref.value)
    assert str(got.value).startswith(kind)


@pytest.mark.parametrize("cuts", ALL_CUTS)
@pytest.mark.parametrize("xs", [[MAX, MAX, -MAX], [1e308, -1e308, MAX, 8.98846567431158e307, 3.0],
                                [MAX, 2.0 ** 969, 2.0 ** 969], [-MAX, -MAX, INF], [MAX, 1.0, -MAX],
                                [MAX, MAX, 5e-324, -MAX, -MAX], [MAX, MAX], [-MAX, 1e300, -MAX, MAX, 5e-324]])
def test_near_overflow_is_exact(xs, cuts):
    """Where math.fsum may overflow part way, the reference rounds the exact total once (an infinity past
    the float range); the states keep such totals exactly, as integers, and give the same."""
    check(_flow({"x": xs}, {"x": pa.float64()}, [], s=col("x").sum(), m=col("x").mean()), cuts)
    keyed = _flow({"k": [i % 2 for i in range(len(xs))], "x": xs}, {"k": pa.int64(), "x": pa.float64()}, ["k"],
                  s=col("x").sum())
    check(keyed, cuts, buckets=2)


@pytest.mark.parametrize("cuts", ALL_CUTS)
@pytest.mark.parametrize("xs", [[MAX, MAX, NAN], [MAX, INF, -INF], [1e308, 1.0, -1e308], [1e308], [-1e308, 5e-324]])
def test_large_floats_without_rows(xs, cuts):
    """NaN, or inf with -inf, decide a sum whatever the order; below 1.5 * 2**1023 on each side no prefix
    sum overflows, so states serve."""
    check(_flow({"x": xs}, {"x": pa.float64()}, [], s=col("x").sum(), m=col("x").mean()), cuts)


def test_empty_partitions_and_no_states():
    table = pa.table({"k": pa.array([], pa.int64()), "x": pa.array([], pa.float64())})
    grouped = ei.from_arrow(table).group_by("k").agg(s=col("x").sum())
    whole = ei.from_arrow(table).agg(s=col("x").sum(), n=ei.count(), c=col("x").count())
    for flow in (grouped, whole):
        want = reference(flow)
        assert_same(combined(flow, [table, table]), want)
        assert_same(P.plan(flow.plan).combine([]), want)


def test_not_combinable():
    flow = ei.from_pydict({"k": [1], "x": [1.0]}).group_by("k")
    for agg in (col("x").var(), col("x").std(), col("x").n_unique(), col("x").sum() + col("x").std()):
        assert P.plan(flow.agg(v=agg).plan) is None
    assert P.plan(flow.agg(v=col("x").sum()).plan) is not None


def test_state_columns_keep_clear_of_key_names():
    table = pa.table({"@": pa.array([1, 1, 2]), "@0.n": pa.array([1.0, 2.0, 3.0])})
    flow = ei.from_arrow(table).group_by("@", "@0.n").agg(s=col("@0.n").sum(), c=ei.count())
    check(flow, [1, 2], 2)
