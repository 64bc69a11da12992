"""Hypothesis strategies for random schemas, data and well-typed Flows.

Every lane reuses these for cross-lane equivalence against the reference lane.
Plans are built through the public Flow API (so the builder validates them),
from one or two in-memory sources, and restricted to what a lane covers:

    gen = data.draw(flows(coverage=lane.coverage))
    gen.flow, gen.ordered, gen.tables

Integer and decimal arithmetic is generated only where it cannot overflow:
each generated expression carries an interval bounding its values (computed
from the actual data), and an operation whose result interval does not fit
its result type is not generated. Floats are mostly small dyadic rationals
(exact sums in any order) plus NaN, +-inf and -0.0.
"""

from __future__ import annotations

import datetime as _dt
import decimal as _decimal
import math
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import pyarrow as pa
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

import eidos as ei
from eidos.errors import PlanError
from eidos.flow.expr import Expr, col, lit, when
from eidos.flow.frame import Flow
from eidos.hal.coverage import Coverage
from eidos.ir import dtypes as T
from eidos.ir import functions as F
from eidos.ir import nodes as N
from eidos.ir.dtypes import DType
from eidos.ir.order import has_row_order
from eidos.ir.schema import Schema
from eidos.ir.typing import infer

# ---------------------------------------------------------------- settings profiles

# "ci" is derandomized: the same examples every run, so a landing is never decided by a lucky draw;
# "deep" is CI's slow tier: the same, with more examples (and `examples(n)` gives a test all n of its own);
# "dev" and "thorough" search afresh each run (and keep what they find in .hypothesis/).
settings.register_profile("ci", max_examples=15, deadline=None, print_blob=True, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                 HealthCheck.filter_too_much])
settings.register_profile("deep", parent=settings.get_profile("ci"), max_examples=50)
settings.register_profile("dev", max_examples=100, deadline=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                 HealthCheck.filter_too_much])
settings.register_profile("thorough", max_examples=1000, deadline=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                 HealthCheck.filter_too_much])

PROFILE_ENV = "EIDOS_HYPOTHESIS_PROFILE"


def profile(name: str | None = None) -> settings:
    """The settings profile `name`, else $EIDOS_HYPOTHESIS_PROFILE, else 'ci'; use as a decorator."""
    return settings.get_profile(name or _profile_name())


def _profile_name() -> str:
    return os.environ.get(PROFILE_ENV, "ci")


def examples(n: int, ci: int | None = None) -> int:
    """A test's own count (of examples, or a size such as nesting levels): all n under every profile but
    'ci' (the default), where `ci` (a fifth of n, at least 5, unless given): the deep tier
    ($EIDOS_HYPOTHESIS_PROFILE=deep) runs them all."""
    if _profile_name() != "ci":
        return n
    return min(n, ci if ci is not None else max(5, n // 5))


# ---------------------------------------------------------------- names

# Names that trip engines: SQL keywords, quotes, spaces, case, unicode, length (PostgreSQL cuts at 63 bytes).
TRICKY_NAMES = (
    "a", "b", "x", "A", "B", "X", "id", "ID", "select", "from", "where", "group", "order", "Order",
    "user", "limit", "table", "null", "true", "count", "sum", 'x"y', "it's", "a b", " lead", "trail ",
    "a.b", "a-b", "1st", "naïve", "größe", "列", "😀", "$x", "a\\b", "_", "__", "%", "l" * 70,
)


def column_names(*, case_sensitive: bool = True) -> st.SearchStrategy[str]:
    """Column names, including keywords, quotes, spaces, unicode and a 70-character name.

    `case_sensitive=False` leaves out nothing but lets callers dedupe by casefold.
    """
    text = st.text(st.one_of(st.sampled_from("abcxyzABCXYZ _\"'$"),
                             st.characters(exclude_categories=("Cs", "Cc"), max_codepoint=0x1F64F)),
                   min_size=1, max_size=6)
    return st.one_of(st.sampled_from(TRICKY_NAMES), text).filter(lambda s: s.strip() != "")


def _name_key(case_sensitive: bool):
    return (lambda s: s) if case_sensitive else str.casefold


# ---------------------------------------------------------------- dtypes and schemas

_DECIMALS = ((5, 2), (10, 0), (18, 4), (38, 10), (1, 0), (3, 3), (12, 6), (38, 0))
_DTYPE_WEIGHTS = {  # how often each kind is drawn: unsigned sparingly
    "Int8": 2, "Int16": 2, "Int32": 3, "Int64": 6, "UInt8": 1, "UInt16": 1, "UInt32": 1, "UInt64": 1,
    "Float32": 2, "Float64": 6, "Boolean": 3, "String": 6, "Date": 3, "Timestamp": 2, "Decimal": 3, "List": 2, "Binary": 1,
    "Time": 1, "Timestamp(tz)": 1, "Timestamp(ns)": 1, "Struct": 1,
}
# Zoned and nanosecond timestamps and structs as generated: they pass through plans (sorted, grouped, joined on, taken
# by min/max); the expressions of time are drawn over Date and Timestamp (microseconds, naive).
_ZONED = tuple(T.Datetime(u, z) for u in ("us", "ms") for z in ("UTC", "Europe/Berlin", "America/New_York"))
_STRUCTS = (T.Struct({"a": T.Int64, "b": T.String}), T.Struct({"d": T.Date, "x": T.Float64}))
_LIST_ELEMENTS = ("Int64", "Float64", "String", "Date")  # element types of generated lists
MAX_LIST = 3  # elements in a generated list


def dtypes(kinds: Iterable[str] | None = None) -> st.SearchStrategy[DType]:
    """Column dtypes of the given kinds (names as in a Coverage table; default every kind)."""
    allowed = [k for k in _DTYPE_WEIGHTS if kinds is None or k in set(kinds)]
    if not allowed:
        raise ValueError("dtypes(): no kind left to draw from")
    pool = [k for k in allowed for _ in range(_DTYPE_WEIGHTS[k])]

    elements = [k for k in _LIST_ELEMENTS if k in allowed] or ["Int64"]
    pool = [k for k in pool if k != "List" or elements]

    def make(kind: str) -> st.SearchStrategy[DType]:
        if kind == "Decimal":
            return st.sampled_from(_DECIMALS).map(lambda ps: T.Decimal(*ps))
        if kind == "List":
            return st.sampled_from(elements).map(lambda k: T.List(T.BY_NAME[k]))
        if kind in ("Timestamp(tz)", "Timestamp(ns)", "Struct"):
            return st.sampled_from({"Timestamp(tz)": _ZONED, "Timestamp(ns)": (T.Datetime("ns"),), "Struct": _STRUCTS}[kind])
        return st.just(T.BY_NAME[kind])

    return st.sampled_from(pool).flatmap(make)


def schemas(*, kinds: Iterable[str] | None = None, min_columns: int = 1, max_columns: int = 5,
            names: st.SearchStrategy[str] | None = None, case_sensitive: bool = True) -> st.SearchStrategy[Schema]:
    """eidos Schemas with unique (by casefold unless `case_sensitive`) random names and dtypes."""
    kinds = None if kinds is None else tuple(kinds)
    key = _name_key(case_sensitive)
    return st.lists(st.tuples(names or column_names(), dtypes(kinds)), min_size=min_columns,
                    max_size=max_columns, unique_by=lambda nt: key(nt[0])).map(Schema)


# ---------------------------------------------------------------- values and tables

SPECIAL_FLOATS = (math.nan, math.inf, -math.inf, -0.0, 0.0)
SMALL_STRINGS = ("", "a", "A", "ab", "b", " a", "é", "e\u0301", "ß", "😀", "Straße", "%", "_", "a_b",
                 "NULL", "İ", "ǅ", "a%b", "\\", "x\"y")
SMALL_DATES = tuple(_dt.date(*ymd) for ymd in ((1970, 1, 1), (2000, 2, 29), (2024, 12, 31), (1999, 12, 31),
                                               (2100, 12, 31)))
TRUNCATIONS = ("1ms", "1s", "15m", "1h", "1d", "1d12h", "1w", "2w", "1mo", "1q", "1y", "3y")
DATE_MIN, DATE_MAX = _dt.date(1970, 1, 1), _dt.date(2100, 12, 31)
TS_MIN, TS_MAX = _dt.datetime(1970, 1, 1), _dt.datetime(2100, 12, 31, 23, 59, 59, 999999)
_STRING_CHARS = st.one_of(
    st.sampled_from("aAbBzZ %_\\.*()[]?+^$|{}éÉßİıǅ€😀👍🏽\u0301\u200b\t\n'\""),
    st.characters(exclude_categories=("Cs", "Cc"), max_codepoint=0x1FFFF))


def _float_values(dtype: DType, wide: bool, nan: bool = True) -> st.SearchStrategy[float]:
    # Dyadic rationals k/4 with |k| <= 2**20: sums are exact in any order, and .25/.5/.75 probe rounding.
    dyadic = st.integers(-(2**20), 2**20).map(lambda k: k / 4)
    small = st.sampled_from((0.0, 1.0, -1.0, 0.5, -0.5, 2.5, 1.25, -2.5, 0.1))
    values = [small, dyadic, st.sampled_from([v for v in SPECIAL_FLOATS if nan or v == v])]
    if wide:
        extremes = (3.0e38, -3.0e38, 1.0e-38, 1.5e10) if dtype == T.Float32 else (1e308, -1e308, 5e-324, 1e-300, 2.0**63)
        values.append(st.sampled_from(extremes))
    return st.one_of(*values)


def values(dtype: DType, *, wide: bool = True, nan: bool = True) -> st.SearchStrategy[Any]:
    """Non-null Python values of `dtype`. `wide=False` draws from a small domain (joins and groups match);
    `nan=False` leaves NaN out of floats (for stores that cannot hold it)."""
    if dtype.is_integer:
        lo, hi = T.int_range(dtype)
        small = st.sampled_from([v for v in (-1, 0, 1, 2, 3) if lo <= v <= hi])
        if not wide:
            return small
        return st.one_of(small, st.sampled_from((lo, hi, lo + 1, hi - 1)), st.integers(lo, hi))
    if dtype.is_float:
        if not wide:
            return st.sampled_from((0.0, 1.0, -1.0, 0.5, -0.0) + ((math.nan,) if nan else ()))
        return _float_values(dtype, wide, nan)
    if dtype.is_decimal:
        p, s = dtype.precision, dtype.scale
        top = 10**p - 1
        small = st.sampled_from([k for k in (0, 1, -1, 10**s, -(10**s), 5 * 10**max(s - 1, 0)) if abs(k) <= top])
        ints = small if not wide else st.one_of(small, st.sampled_from((top, -top)), st.integers(-top, top))
        return ints.map(lambda k: _decimal.Decimal(f"{k}E-{s}"))
    if dtype == T.Boolean:
        return st.booleans()
    if dtype == T.String:
        if not wide:
            return st.sampled_from(SMALL_STRINGS[:8])
        return st.one_of(st.sampled_from(SMALL_STRINGS), st.text(_STRING_CHARS, max_size=8))
    if dtype == T.Date:
        if not wide:
            return st.sampled_from(SMALL_DATES[:3])
        return st.one_of(st.sampled_from(SMALL_DATES), st.dates(DATE_MIN, DATE_MAX))
    if dtype == T.Timestamp:
        small = st.sampled_from([_dt.datetime.combine(d, _dt.time()) for d in SMALL_DATES[:3]]
                                + [_dt.datetime(2000, 2, 29, 23, 59, 59, 999999)])
        if not wide:
            return small
        return st.one_of(small, st.datetimes(TS_MIN, TS_MAX))
    if dtype == T.Binary:
        return st.sampled_from((b"", b"a", b"\x00", b"\xff", b"ab")) if not wide else st.binary(max_size=4)
    if dtype == T.Time:
        small = st.sampled_from((_dt.time(0), _dt.time(12), _dt.time(23, 59, 59, 999999)))
        return small if not wide else st.one_of(small, st.times())
    if dtype.is_timestamp and dtype.unit == "ns":   # counts of nanoseconds (pyarrow takes ints for timestamp[ns])
        small = st.sampled_from((0, -1, 1, 1_600_000_000_123_456_789))
        return small if not wide else st.one_of(small, st.integers(-(2**62), 2**62))
    if dtype.is_timestamp:   # an instant, drawn in UTC (whole milliseconds for ms)
        step = 1000 if dtype.unit == "ms" else 1
        return values(T.Timestamp, wide=wide).map(
            lambda t: t.replace(microsecond=t.microsecond // step * step, tzinfo=_dt.timezone.utc if dtype.tz else None))
    if isinstance(dtype, T.StructType):
        return st.fixed_dictionaries({n: st.one_of(st.none(), values(t, wide=wide, nan=nan)) for n, t in dtype.fields})
    if isinstance(dtype, T.ListType):
        return st.lists(st.one_of(st.none(), values(dtype.inner, wide=wide, nan=nan)), max_size=MAX_LIST)
    raise ValueError(f"no values for dtype {dtype}")


@st.composite
def columns(draw, dtype: DType, n: int, *, nan: bool = True) -> list:
    """A column of `n` values of `dtype`, with nulls where the column is nullable."""
    wide = draw(st.booleans())
    nullable = draw(st.sampled_from((True, True, False)))
    base = values(dtype, wide=wide, nan=nan)
    each = st.one_of(st.none(), base, base, base) if nullable else base
    return draw(st.lists(each, min_size=n, max_size=n))


@st.composite
def tables(draw, schema: Schema | pa.Schema, *, min_rows: int = 0, max_rows: int = 8, nan: bool = True) -> pa.Table:
    """pyarrow Tables of `schema` with 0..max_rows rows: nulls, NaN, +-inf, -0.0, extreme ints, unicode."""
    if isinstance(schema, pa.Schema):
        schema = Schema.from_arrow(schema)
    n = draw(st.integers(min_rows, max_rows))
    arrays = [pa.array(draw(columns(t, n, nan=nan)), type=t.to_arrow()) for t in schema.dtypes]
    return pa.Table.from_arrays(arrays, schema=schema.to_arrow())


# ---------------------------------------------------------------- UDFs and batch functions (registered, so plans
# that name them load back: see eidos.hal.trust)

@ei.register_udf
def udf_is_none(x: Any) -> bool:
    """A per-row UDF for any type: whether the value is null."""
    return x is None


@ei.register_udf
def udf_sign(x: Any) -> int | None:
    """A per-row UDF for numbers: -1, 0 or 1; null for null and NaN."""
    if x is None or x != x:
        return None
    return (x > 0) - (x < 0)


@ei.register_udf
def batches_identity(batch: pa.RecordBatch) -> pa.RecordBatch:
    """A map_batches function that returns its batch unchanged."""
    return batch


@ei.register_udf
def batches_reversed(batch: pa.RecordBatch) -> pa.RecordBatch:
    """A map_batches function that reverses the rows of each batch (row order is not part of the result)."""
    return batch.take(pa.array(range(batch.num_rows - 1, -1, -1), type=pa.int64()))


# ---------------------------------------------------------------- generated flows

@dataclass(frozen=True)
class Generated:
    """A generated Flow, whether its row order is defined (a total sort ends it), and its source tables."""

    flow: Flow
    ordered: bool
    tables: tuple[pa.Table, ...] = field(default=(), repr=False)

    def __repr__(self) -> str:
        data = "\n".join(f"  source {i}: {t.to_pydict()!r}" for i, t in enumerate(self.tables))
        return f"Generated(ordered={self.ordered})\n{self.flow!r}\n{data}"


@dataclass(frozen=True)
class Options:
    """What the generator may use: IR node names, function names (incl. forms case/cast/udf), dtype kinds, joins.

    `zero_division`: whether an integer or decimal divisor may be zero (only if the semantics make it
    well defined, e.g. null); `float_to_string`: whether floats may be cast to String; `nan`: whether
    data and literals hold NaN (False for stores that cannot hold it, such as SQLite). `deep`: expressions
    nest about `expr_depth` levels on one line of descent (a function of a function of ...), each other
    operand at most one level deep, so their size stays linear in the depth; aggregations take such
    arguments and may be nested in functions themselves.
    """

    nodes: frozenset[str]
    functions: frozenset[str]
    dtypes: frozenset[str]
    joins: frozenset[str]
    max_ops: int = 4
    max_rows: int = 8
    max_sources: int = 2
    expr_depth: int = 2
    case_sensitive: bool = True
    zero_division: bool = True
    float_to_string: bool = True
    nan: bool = True
    deep: bool = False


def options(*, coverage: Coverage | None = None, nodes: Iterable[str] | None = None,
            functions: Iterable[str] | None = None, dtypes: Iterable[str] | None = None,
            joins: Iterable[str] | None = None, exclude: Iterable[str] = (), **kw: Any) -> Options:
    """Options from a lane's Coverage and/or explicit sets, minus `exclude` (names of any kind)."""
    cov = coverage or Coverage.everything()
    sets = {
        "nodes": set(cov.nodes if nodes is None else nodes),
        "functions": set(cov.functions if functions is None else functions),
        "dtypes": set(cov.dtypes if dtypes is None else dtypes),
        "joins": set(cov.joins if joins is None else joins),
    }
    if coverage is not None:
        for k, have in (("nodes", cov.nodes), ("functions", cov.functions), ("dtypes", cov.dtypes),
                        ("joins", cov.joins)):
            sets[k] &= set(have)
    ex = set(exclude)
    return Options(**{k: frozenset(v - ex) for k, v in sets.items()}, **kw)


# -- typed expressions with value intervals

@dataclass(frozen=True)
class _TE:
    """A generated expression: its builder, dtype and (for integers and decimals) a bound on its values."""

    e: Expr
    dtype: DType
    lo: Fraction | None = None
    hi: Fraction | None = None

    @property
    def exact(self) -> bool:
        return self.dtype.is_integer or self.dtype.is_decimal

    @property
    def may_be_zero(self) -> bool:
        return self.lo is None or self.lo <= 0 <= self.hi


def _fits(dtype: DType, lo: Fraction | None, hi: Fraction | None) -> bool:
    if lo is None or hi is None:
        return not (dtype.is_integer or dtype.is_decimal)
    if dtype.is_integer:
        a, b = T.int_range(dtype)
        return a <= lo and hi <= b
    if dtype.is_decimal:
        limit = Fraction(10) ** (dtype.precision - dtype.scale)
        return -limit < lo and hi < limit
    return True


def _frac(v: Any) -> Fraction:
    return Fraction(v) if not isinstance(v, _decimal.Decimal) else Fraction(str(v))


def _bounds_of(array: pa.ChunkedArray, dtype: DType) -> tuple[Fraction | None, Fraction | None]:
    if not (dtype.is_integer or dtype.is_decimal):
        return None, None
    vals = [_frac(v) for v in array.to_pylist() if v is not None]
    if not vals:
        return Fraction(0), Fraction(0)
    return min(vals), max(vals)


def _hull(*pairs: tuple[Fraction | None, Fraction | None]) -> tuple[Fraction | None, Fraction | None]:
    los = [p[0] for p in pairs]
    his = [p[1] for p in pairs]
    if any(v is None for v in los + his):
        return None, None
    return min(los), max(his)


@dataclass
class _State:
    """A Flow under construction with what the generator knows about it."""

    flow: Flow
    bounds: dict[str, tuple[Fraction | None, Fraction | None]]
    rows: int            # an upper bound on the row count
    ordered: bool = False

    @property
    def schema(self) -> Schema:
        return self.flow.schema

    def te(self, name: str) -> _TE:
        lo, hi = self.bounds.get(name, (None, None))
        return _TE(col(name), self.schema[name], lo, hi)


class _Builder:
    """Draws expressions and plan steps; every choice goes through Hypothesis's `draw`."""

    def __init__(self, draw, opts: Options):
        self.draw, self.o = draw, opts
        self.fns = opts.functions

    # -- small helpers
    def pick(self, seq):
        seq = list(seq)
        return self.draw(st.sampled_from(seq))

    def chance(self, p: float) -> bool:
        return self.draw(st.integers(0, 999)) < int(p * 1000)

    def stops(self, p: float) -> bool:
        """Whether an expression stops at a leaf here (`p`; rarely when drawing deep expressions)."""
        return self.chance(p / 8 if self.o.deep else p)

    def side(self, depth: int) -> int:
        """The depth of an operand beside the line of descent (deep expressions keep them shallow)."""
        return min(depth - 1, 1) if self.o.deep else depth - 1

    def has(self, *fns: str) -> bool:
        return all(f in self.fns for f in fns)

    def kind_ok(self, dtype: DType) -> bool:
        return dtype.kind in self.o.dtypes

    def fresh(self, taken: Iterable[str]) -> str:
        key = _name_key(self.o.case_sensitive)
        used = {key(n) for n in taken}
        name = self.draw(column_names().filter(lambda s: key(s) not in used))
        return name

    # -- expressions by kind
    def typed(self, e: Expr, s: _State, lo=None, hi=None, agg: bool = False) -> _TE | None:
        try:
            dtype = infer(e.node, s.schema, allow_agg=agg)
        except PlanError:
            return None
        if dtype == T.Null:
            return None
        if dtype.is_integer or dtype.is_decimal:
            if not _fits(dtype, lo, hi):
                return None
        else:
            lo = hi = None
        return _TE(e, dtype, lo, hi)

    def column(self, s: _State, pred) -> _TE | None:
        names = [n for n, t in s.schema.items() if pred(t)]
        if not names:
            return None
        return s.te(self.pick(names))

    def literal(self, dtype: DType) -> _TE:
        """A literal of `dtype` (bare numbers are weak literals that adapt to what they meet)."""
        v = self.draw(values(dtype, wide=self.chance(0.3), nan=self.o.nan))
        if dtype.is_integer:
            weak = -128 <= v <= 127 and self.chance(0.6)
            e = lit(v) if weak else lit(v, dtype)
            t = T.Int64 if weak else dtype
            return _TE(e, t if weak else dtype, Fraction(v), Fraction(v))
        if dtype.is_float:
            return _TE(lit(v) if self.chance(0.5) else lit(v, dtype), dtype)
        if dtype.is_decimal:
            return _TE(lit(v, dtype), dtype, _frac(v), _frac(v))
        return _TE(lit(v, dtype) if self.chance(0.5) else lit(v), dtype)

    def leaf(self, s: _State, pred, fallback: DType | None) -> _TE | None:
        if self.chance(0.8):
            c = self.column(s, pred)
            if c is not None:
                return c
        if fallback is not None:
            return self.literal(fallback)
        return self.column(s, pred)

    def expr(self, s: _State, kind: str, depth: int) -> _TE | None:
        """An expression of `kind` ('bool', 'numeric', 'string', 'temporal', 'any') over `s`."""
        if kind == "any":
            present = sorted({_kind_of(t) for t in s.schema.dtypes})
            if present and self.chance(0.8):
                kind = self.pick(present)
            else:
                kind = self.pick(("bool", "numeric", "numeric", "string", "temporal"))
        makers = {"bool": self.boolean, "numeric": self.numeric, "string": self.string,
                  "temporal": self.temporal}[kind]
        for _ in range(3):
            got = makers(s, depth)
            if got is not None:
                return got
        return None

    def _leaf_for(self, s: _State, kind: str) -> _TE | None:
        preds = {"bool": lambda t: t == T.Boolean, "numeric": lambda t: t.is_numeric,
                 "string": lambda t: t == T.String, "temporal": _drawn_temporal}
        fallback = {"bool": T.Boolean, "numeric": self.pick((T.Int64, T.Float64, T.Int32)),
                    "string": T.String, "temporal": T.Date}
        return self.leaf(s, preds[kind], fallback[kind])

    # numeric
    def numeric(self, s: _State, depth: int) -> _TE | None:
        lists = any(self.has(f) for f in ("list_len", "list_get")) and any(t.kind == "List" for t in s.schema.dtypes)
        if depth <= 0 or self.stops(0.3):
            return (lists and self.chance(0.3) and self._num_list(s, depth)) or self._leaf_for(s, "numeric")
        choices = []
        if any(self.has(f) for f in F.ARITHMETIC):
            choices += ["arith"] * 4
        if any(self.has(f) for f in ("neg", "abs", "round", "floor", "ceil")):
            choices += ["unary"] * 2
        if any(self.has(f) for f in ("sqrt", "exp", "log", "log10", "sin", "cos", "tanh")):
            choices += ["transcendental"]
        if self.has("str_len"):
            choices += ["str_len"]
        if lists:
            choices += ["list"] * 3
        if any(self.has(f) for f in F.TEMPORAL):
            choices += ["date_part"]
        if self.has("sub"):
            choices += ["date_diff"]
        if self.has("cast"):
            choices += ["cast", "text_round_trip"]
        if self.has("fill_null"):
            choices += ["fill_null"]
        if self.has("case"):
            choices += ["case", "clip"]
        if self.has("udf"):
            choices += ["udf"]
        if not choices:
            return self._leaf_for(s, "numeric")
        what = self.pick(choices)
        return getattr(self, "_num_" + what)(s, depth)

    def _num_arith(self, s: _State, depth: int) -> _TE | None:
        ops = [f for f in F.ARITHMETIC if self.has(f)]
        op = self.pick(ops)
        a = self.numeric(s, depth - 1)
        if a is None:
            return None
        b = self.numeric(s, self.side(depth)) if self.chance(0.5) else self._operand_like(a)
        if b is None:
            return None
        if op in ("truediv", "floordiv", "mod"):
            if b.exact and b.may_be_zero and not (self.o.zero_division and self.chance(0.2)):
                b = self._nonzero_like(a, b)
            if (a.exact and b.exact) and (b.lo is None or b.may_be_zero) and op != "truediv":
                if not self.o.zero_division:
                    return None
        if self.chance(0.3):
            a, b = b, a
            if op in ("truediv", "floordiv", "mod") and b.exact and b.may_be_zero and not self.o.zero_division:
                return None
        e = {"add": a.e + b.e, "sub": a.e - b.e, "mul": a.e * b.e, "truediv": a.e / b.e,
             "floordiv": a.e // b.e, "mod": a.e % b.e, "pow": a.e ** b.e}[op]
        lo, hi = _arith_bounds(op, a, b)
        return self.typed(e, s, lo, hi)

    def _operand_like(self, a: _TE) -> _TE:
        if a.dtype.is_decimal and self.chance(0.5):
            return self.literal(a.dtype)
        if a.dtype.is_float:
            return self.literal(a.dtype)
        return self.literal(a.dtype if a.dtype.is_numeric else T.Int64)

    def _nonzero_like(self, a: _TE, b: _TE) -> _TE:
        v = self.pick((1, 2, 3, -1, -2, 7))
        if b.dtype.is_decimal:
            return _TE(lit(_decimal.Decimal(v)), T.Decimal(1, 0), Fraction(v), Fraction(v))
        return _TE(lit(v), T.Int64, Fraction(v), Fraction(v))

    def _num_unary(self, s: _State, depth: int) -> _TE | None:
        a = self.numeric(s, depth - 1)
        if a is None:
            return None
        fn = self.pick([f for f in ("neg", "abs", "round", "floor", "ceil") if self.has(f)])
        if fn == "neg":
            if a.dtype.is_unsigned_integer:
                return None
            lo, hi = (None, None) if a.lo is None else (-a.hi, -a.lo)
            return self.typed(-a.e, s, lo, hi)
        if fn == "abs":
            lo, hi = (None, None) if a.lo is None else (Fraction(0), max(abs(a.lo), abs(a.hi)))
            return self.typed(a.e.abs(), s, lo, hi)
        lo, hi = (None, None) if a.lo is None else (a.lo - 1, a.hi + 1)
        if fn == "round":
            return self.typed(a.e.round(self.pick((0, 0, 1, 2, -1))), s, lo, hi)
        return self.typed(getattr(a.e, fn)(), s, lo, hi)

    def _num_transcendental(self, s: _State, depth: int) -> _TE | None:
        a = self.numeric(s, depth - 1)
        if a is None:
            return None
        fn = self.pick([f for f in ("sqrt", "exp", "log", "log10", "sin", "cos", "tanh") if self.has(f)])
        return self.typed(getattr(a.e, fn)(), s)

    def _num_str_len(self, s: _State, depth: int) -> _TE | None:
        a = self.string(s, depth - 1)
        return None if a is None else self.typed(a.e.str.len(), s, Fraction(0), Fraction(10**6))

    def _num_list(self, s: _State, depth: int) -> _TE | None:
        """The length of a list column, or an element of one that holds numbers (null out of range)."""
        numbers = self.column(s, lambda t: t.kind == "List" and t.inner.is_numeric)
        if self.has("list_get") and numbers is not None and (self.chance(0.5) or not self.has("list_len")):
            lo, hi = T.int_range(numbers.dtype.inner) if numbers.dtype.inner.is_integer else (None, None)
            return self.typed(numbers.e.list.get(self.pick((0, 1, -1, MAX_LIST))), s, lo, hi)
        a = self.column(s, lambda t: t.kind == "List")
        if a is None or not self.has("list_len"):
            return None
        return self.typed(a.e.list.len(), s, Fraction(0), Fraction(MAX_LIST))

    def _num_date_part(self, s: _State, depth: int) -> _TE | None:
        a = self.temporal(s, depth - 1)
        if a is None:
            return None
        parts = F.DATE_PARTS + (F.TIME_PARTS if a.dtype == T.Timestamp else ())
        fns = [f for f in parts if self.has(f)]
        if not fns:
            return None
        fn = self.pick(fns)
        bounds = {"dt_year": (1900, 2200), "dt_month": (1, 12), "dt_day": (1, 31), "dt_weekday": (1, 7),
                  "dt_ordinal_day": (1, 366), "dt_hour": (0, 23), "dt_minute": (0, 59), "dt_second": (0, 59)}[fn]
        return self.typed(getattr(a.e.dt, fn[3:])(), s, Fraction(bounds[0]), Fraction(bounds[1]))

    def _num_date_diff(self, s: _State, depth: int) -> _TE | None:
        a, b = self.column(s, lambda t: t == T.Date), self.column(s, lambda t: t == T.Date)
        if a is None:
            return None
        if b is None or self.chance(0.3):
            b = self.literal(T.Date)
        return self.typed(a.e - b.e, s, Fraction(-(10**6)), Fraction(10**6))

    def _num_cast(self, s: _State, depth: int) -> _TE | None:
        a = self.expr(s, self.pick(("numeric", "numeric", "bool")), depth - 1)
        if a is None:
            return None
        targets = [t for t in (T.Int8, T.Int16, T.Int32, T.Int64, T.UInt8, T.UInt32, T.UInt64,
                               T.Float32, T.Float64, T.Decimal(18, 4), T.Decimal(38, 10), T.Decimal(10, 0))
                   if self.kind_ok(t)]
        if not targets:
            return None
        dst = self.pick(targets)
        if a.dtype.is_float and not dst.is_float:
            return None  # NaN, inf and fractions make float -> exact casts ill-defined
        if a.dtype == T.Boolean:
            lo, hi = Fraction(0), Fraction(1)
        elif a.lo is None:
            lo = hi = None
        elif dst.is_integer and a.dtype.is_decimal:
            lo, hi = a.lo - 1, a.hi + 1
        else:
            lo, hi = a.lo, a.hi
        if dst.is_decimal and lo is not None:
            if not (a.dtype.is_integer or (a.dtype.is_decimal and a.dtype.scale <= dst.scale) or a.dtype == T.Boolean):
                return None  # keep decimal casts exact: no rounding to a smaller scale
        if not _fits(dst, lo, hi) and not dst.is_float:
            return None
        return self.typed(a.e.cast(dst), s, lo, hi)

    def _num_text_round_trip(self, s: _State, depth: int) -> _TE | None:
        """x.cast(String).cast(type of x): every lane must print and parse numbers alike."""
        a = self.numeric(s, depth - 1)
        if a is None or (a.dtype.is_float and not self.o.float_to_string):
            return None
        return self.typed(a.e.cast(T.String).cast(a.dtype), s, a.lo, a.hi)

    def _num_fill_null(self, s: _State, depth: int) -> _TE | None:
        a = self.numeric(s, depth - 1)
        if a is None:
            return None
        b = self.column(s, lambda t: t == a.dtype) if self.chance(0.4) else None
        b = b or self._operand_like(a)
        lo, hi = _hull((a.lo, a.hi), (b.lo, b.hi))
        return self.typed(a.e.fill_null(b.e), s, lo, hi)

    def _num_clip(self, s: _State, depth: int) -> _TE | None:
        """x.clip(lower, upper): a when chain of comparisons, either bound maybe absent."""
        a = self.numeric(s, depth - 1)
        if a is None:
            return None
        lower = self._operand_like(a) if self.chance(0.7) else None
        upper = self._operand_like(a) if self.chance(0.7) else None
        lo, hi = a.lo, a.hi
        for b in (lower, upper):
            if b is not None:
                lo, hi = _hull((lo, hi), (b.lo, b.hi))
        return self.typed(a.e.clip(lower and lower.e, upper and upper.e), s, lo, hi)

    def _num_case(self, s: _State, depth: int) -> _TE | None:
        return self._case(s, depth, "numeric")

    def _num_udf(self, s: _State, depth: int) -> _TE | None:
        a = self.numeric(s, depth - 1)
        if a is None:
            return None
        return self.typed(ei.udf(udf_sign, T.Int8)(a.e), s, Fraction(-1), Fraction(1))

    def _case(self, s: _State, depth: int, kind: str) -> _TE | None:
        n = self.pick((1, 1, 2))
        branches = []
        for i in range(n):
            c = self.boolean(s, self.side(depth))
            v = self.expr(s, kind, depth - 1 if i == 0 else self.side(depth))
            if c is None or v is None:
                return None
            branches.append((c, v))
        other = self.expr(s, kind, self.side(depth)) if self.chance(0.8) else None
        chain = when(branches[0][0].e).then(branches[0][1].e)
        for c, v in branches[1:]:
            chain = chain.when(c.e).then(v.e)
        e = chain.otherwise(other.e) if other is not None else chain
        vals = [v for _, v in branches] + ([other] if other is not None else [])
        lo, hi = _hull(*[(v.lo, v.hi) for v in vals]) if all(v.exact for v in vals) else (None, None)
        return self.typed(e, s, lo, hi)

    # strings
    def string(self, s: _State, depth: int) -> _TE | None:
        if depth <= 0 or self.stops(0.35):
            return self._leaf_for(s, "string")
        choices = [f for f in ("str_to_lower", "str_to_upper", "str_slice", "fill_null", "case", "cast", "add",
                               "str_replace_regex", "str_replace_all_regex", "str_replace_all", "str_strip_chars")
                   if self.has(f)]
        if not choices:
            return self._leaf_for(s, "string")
        fn = self.pick(choices)
        if fn == "case":
            return self._case(s, depth, "string")
        if fn == "cast":
            kinds = ["numeric", "temporal", "bool"]
            a = self.expr(s, self.pick(kinds), depth - 1)
            if a is None or (a.dtype.is_float and not self.o.float_to_string):
                return None
            return self.typed(a.e.cast(T.String), s)
        a = self.string(s, depth - 1)
        if a is None:
            return None
        if fn == "str_to_lower":
            return self.typed(a.e.str.to_lower(), s)
        if fn == "str_to_upper":
            return self.typed(a.e.str.to_upper(), s)
        if fn == "add":
            b = self.string(s, depth - 1)
            return None if b is None else self.typed(a.e + b.e, s)
        if fn in ("str_replace_regex", "str_replace_all_regex"):
            value = self.pick(("", "-", "<$0>", "$$"))
            method = a.e.str.replace if fn == "str_replace_regex" else a.e.str.replace_all
            return self.typed(method(self.draw(regexes(depth=1)), value), s)
        if fn == "str_replace_all":
            return self.typed(a.e.str.replace_all(self.pick(("a", "", " ", "é")), self.pick(("", "-", "$1")),
                                                  literal=True), s)
        if fn == "str_strip_chars":
            return self.typed(a.e.str.strip_chars(self.pick((None, "a", " é"))), s)
        if fn == "str_slice":
            offset = self.pick((0, 0, 1, 2, 5, -1, -3))
            length = self.pick((None, 0, 1, 2, 3))
            return self.typed(a.e.str.slice(offset, length), s)
        return self.typed(a.e.fill_null(self.literal(T.String).e), s)

    # temporal
    def temporal(self, s: _State, depth: int) -> _TE | None:
        if depth <= 0 or self.stops(0.4):
            return self._leaf_for(s, "temporal")
        choices = [f for f in ("add", "sub", "cast", "fill_null", "case", "dt_truncate") if self.has(f)]
        if not choices:
            return self._leaf_for(s, "temporal")
        fn = self.pick(choices)
        if fn == "case":
            return self._case(s, depth, "temporal")
        a = self.temporal(s, depth - 1)
        if a is None:
            return None
        if fn in ("add", "sub"):
            if a.dtype != T.Date:
                return None
            days = self.column(s, lambda t: t.is_integer)
            if days is None or days.lo is None or max(abs(days.lo), abs(days.hi)) > 3650 or self.chance(0.5):
                days = _TE(lit(self.pick((1, -1, 30, 365, -3650, 0))), T.Int64)
            e = a.e + days.e if fn == "add" else a.e - days.e
            if fn == "add" and self.chance(0.3):
                e = days.e + a.e
            return self.typed(e, s)
        if fn == "dt_truncate":
            return self.typed(a.e.dt.truncate(self.pick(TRUNCATIONS)), s)
        if fn == "cast":
            if self.chance(0.3):  # through text and back: ISO forms must agree
                return self.typed(a.e.cast(T.String).cast(a.dtype), s)
            if not self.kind_ok(T.Timestamp if a.dtype == T.Date else T.Date):
                return None
            return self.typed(a.e.cast(T.Timestamp if a.dtype == T.Date else T.Date), s)
        return self.typed(a.e.fill_null(self.literal(a.dtype).e), s)

    # booleans
    def boolean(self, s: _State, depth: int) -> _TE | None:
        if depth <= 0 or self.stops(0.15):
            leaf = self.column(s, lambda t: t == T.Boolean)
            if leaf is not None or depth <= 0:
                return leaf or (self._compare(s, 0) if self._compare_ok() else self.literal(T.Boolean))
        choices = []
        if self._compare_ok():
            choices += ["compare"] * 5
        choices += [f for f in ("and", "or", "not", "is_null", "is_not_null", "is_in", "is_between",
                                "case", "fill_null", "udf") if self.has(f)]
        if any(self.has(f) for f in _STRING_TESTS):
            choices += ["string_test"] * 2
        if self.has("list_contains") and any(t.kind == "List" for t in s.schema.dtypes):
            choices += ["list_contains"]
        if not choices:
            return self.column(s, lambda t: t == T.Boolean)
        what = self.pick(choices)
        if what == "list_contains":
            a = self.column(s, lambda t: t.kind == "List")
            return self.typed(a.e.list.contains(self.literal(a.dtype.inner).e), s)
        if what == "compare":
            return self._compare(s, depth)
        if what in ("and", "or"):
            a, b = self.boolean(s, depth - 1), self.boolean(s, self.side(depth))
            if a is None or b is None:
                return None
            if self.chance(0.15):
                b = _TE(lit(self.pick((True, False, None))), T.Boolean)
            return self.typed(a.e & b.e if what == "and" else a.e | b.e, s)
        if what == "not":
            a = self.boolean(s, depth - 1)
            return None if a is None else self.typed(~a.e, s)
        if what in ("is_null", "is_not_null"):
            a = self.expr(s, "any", depth - 1)
            return None if a is None else self.typed(getattr(a.e, what)(), s)
        if what == "is_in":
            a = self.expr(s, "any", depth - 1)
            if a is None:
                return None
            vals = self.draw(st.lists(values(a.dtype, wide=self.chance(0.3), nan=self.o.nan), max_size=4))
            if a.dtype.is_numeric and self.chance(0.3):  # values of other numeric types compare in the supertype
                other = self.pick([t for t in (T.Int64, T.Float64, T.Decimal(5, 2)) if t != a.dtype])
                vals += self.draw(st.lists(values(other, wide=False, nan=self.o.nan), min_size=1, max_size=2))
            if self.chance(0.2):
                vals.append(None)
            return self.typed(a.e.is_in(vals), s)
        if what == "is_between":
            a = self.expr(s, self.pick(("numeric", "string", "temporal")), depth - 1)
            if a is None:
                return None
            lo_, hi_ = self._comparable_to(s, a), self._comparable_to(s, a)
            if lo_ is None or hi_ is None:
                return None
            return self.typed(a.e.is_between(lo_.e, hi_.e), s)
        if what == "case":
            return self._case(s, depth, "bool")
        if what == "fill_null":
            a = self.boolean(s, depth - 1)
            return None if a is None else self.typed(a.e.fill_null(self.pick((True, False))), s)
        if what == "udf":
            a = self.expr(s, "any", depth - 1)
            return None if a is None else self.typed(ei.udf(udf_is_none, T.Boolean)(a.e), s)
        a = self.string(s, depth - 1)
        if a is None:
            return None
        fn = self.pick([f for f in _STRING_TESTS if self.has(f)])
        if fn == "str_contains_regex":
            return self.typed(a.e.str.contains(self.draw(regexes())), s)
        alphabet = "aAbé%_.*()[\\" if fn != "str_like" else "aAbé%%__.*("
        pattern = self.draw(st.one_of(st.sampled_from(("", "a", "%", "_", "a%", "%a", "a_b", "é", ".", "(")),
                                      st.text(st.sampled_from(alphabet), max_size=4)))
        if fn == "str_like":
            pattern = pattern.replace("\\", "")
        if fn == "str_contains":
            return self.typed(a.e.str.contains(pattern, literal=True), s)
        return self.typed(getattr(a.e.str, fn[4:])(pattern), s)

    def _compare_ok(self) -> bool:
        return any(self.has(f) for f in F.COMPARISON)

    def _comparable_to(self, s: _State, a: _TE) -> _TE | None:
        t = a.dtype
        if t.is_numeric:
            if self.chance(0.5):
                c = self.column(s, lambda u: u.is_numeric)
                if c is not None:
                    return c
            return self.literal(t if self.chance(0.7) else self.pick((T.Int64, T.Float64)))
        if _drawn_temporal(t):
            c = self.column(s, _drawn_temporal) if self.chance(0.4) else None
            return c or self.literal(t if self.chance(0.8) else self.pick((T.Date, T.Timestamp)))
        c = self.column(s, lambda u: u == t) if self.chance(0.4) else None
        return c or self.literal(t)

    def _compare(self, s: _State, depth: int) -> _TE | None:
        a = self.expr(s, self.pick(("numeric", "numeric", "string", "temporal", "bool")), max(depth - 1, 0))
        if a is None:
            return None
        b = self._comparable_to(s, a)
        if b is None:
            return None
        op = self.pick([f for f in F.COMPARISON if self.has(f)])
        if self.chance(0.3):
            a, b = b, a
        e = {"eq": a.e == b.e, "ne": a.e != b.e, "lt": a.e < b.e, "le": a.e <= b.e,
             "gt": a.e > b.e, "ge": a.e >= b.e}[op]
        return self.typed(e, s)

    # -- aggregations
    def aggregation(self, s: _State, keys: set[str]) -> _TE | None:
        fns = [f for f in F.AGGREGATES if self.has(f)
               and (f not in F.ORDERED_AGGREGATES or has_row_order(s.flow.plan))]
        if not fns:
            return None
        fn = self.pick(fns)
        if fn == "count_rows":
            return self.typed(ei.count(), s, Fraction(0), Fraction(s.rows), agg=True)
        depth = self.o.expr_depth if self.o.deep else self.pick((0, 0, 1))
        if fn in ("sum", "mean", "std", "var", "median", "quantile"):
            a = self.numeric(s, depth)
        else:
            a = self.expr(s, "any", depth)
        if a is None:
            return None
        x: Any = a.e
        if fn == "implode" and a.dtype.is_nested:
            return None
        if fn in F.ORDERED_AGGREGATES:   # of every row, nulls included: no filter
            lo, hi = (a.lo, a.hi) if fn in ("first", "last") else (Fraction(0), Fraction(s.rows))
            return self.typed(getattr(x, fn)(), s, lo, hi, agg=True)
        if self.has("case") and self.chance(0.2):  # x.filter(p).fn(): fn of x where p holds
            p = self.expr(s, "bool", 0)
            if p is not None:
                x = a.e.filter(p.e)
        if fn == "sum":
            if a.exact:
                if a.lo is None:
                    return None
                lo, hi = min(Fraction(0), a.lo * s.rows), max(Fraction(0), a.hi * s.rows)
            else:
                lo = hi = None
            return self.typed(x.sum(), s, lo, hi, agg=True)
        if fn in ("count", "n_unique"):
            return self.typed(getattr(x, fn)(), s, Fraction(0), Fraction(s.rows), agg=True)
        if fn in ("min", "max"):
            return self.typed(getattr(x, fn)(), s, a.lo, a.hi, agg=True)
        if fn in ("std", "var") and a.lo is not None and max(abs(a.lo), abs(a.hi)) > 2**26:
            return None  # catastrophic cancellation makes std/var of huge values algorithm-dependent
        if fn == "quantile":
            q = self.pick((0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0, 1 / 3))
            return self.typed(x.quantile(q, self.pick(F.QUANTILE_METHODS)), s, agg=True)
        return self.typed(getattr(x, fn)(), s, agg=True)


def _drawn_temporal(t: DType) -> bool:
    """The types the expressions of time are drawn over (others of time pass through plans)."""
    return t in (T.Date, T.Timestamp)


def _kind_of(t: DType) -> str:
    if t == T.Boolean:
        return "bool"
    if t.is_numeric or t.is_nested:  # a list enters numeric expressions (its length, its elements)
        return "numeric"
    if t == T.String:
        return "string"
    return "temporal"


def _arith_bounds(op: str, a: _TE, b: _TE) -> tuple[Fraction | None, Fraction | None]:
    if a.lo is None or b.lo is None or a.hi is None or b.hi is None:
        return None, None
    if op == "add":
        return a.lo + b.lo, a.hi + b.hi
    if op == "sub":
        return a.lo - b.hi, a.hi - b.lo
    if op == "mul":
        ps = [x * y for x in (a.lo, a.hi) for y in (b.lo, b.hi)]
        return min(ps), max(ps)
    if op == "floordiv":
        if b.may_be_zero:
            m = max(abs(a.lo), abs(a.hi)) * (10**12)
        else:
            m = max(abs(a.lo), abs(a.hi)) / min(abs(b.lo), abs(b.hi))
        m = Fraction(math.ceil(m))
        return -m, m
    if op == "mod":
        m = max(abs(b.lo), abs(b.hi), max(abs(a.lo), abs(a.hi)))
        return -m, m
    return None, None  # truediv and pow give floats


# -- plan steps

_STEPS = ("filter", "select", "with_columns", "aggregate", "join", "sort", "limit", "distinct", "union",
          "rename", "drop", "map_batches", "unique", "window")
_STEP_NODES = {"filter": "Filter", "select": "Project", "with_columns": "Project", "aggregate": "Aggregate",
               "join": "Join", "sort": "Sort", "limit": "Limit", "distinct": "Distinct", "union": "Union",
               "rename": "Project", "drop": "Project", "map_batches": "MapBatches", "unique": "Unique",
               "window": "Project"}
_STEP_WEIGHTS = {"filter": 4, "select": 2, "with_columns": 4, "aggregate": 3, "join": 3, "sort": 1, "limit": 1,
                 "distinct": 1, "union": 1, "rename": 1, "drop": 1, "map_batches": 1, "unique": 1, "window": 2}


class _Plans(_Builder):
    """Draws sources and chains of Flow steps."""

    def __init__(self, draw, opts: Options, sources: list[tuple[Flow, pa.Table]]):
        super().__init__(draw, opts)
        self.sources = sources

    def source_state(self, i: int) -> _State:
        flow, table = self.sources[i]
        bounds = {n: _bounds_of(table.column(n), t) for n, t in flow.schema.items()}
        return _State(flow, bounds, table.num_rows)

    def steps(self) -> list[str]:
        ok = [s for s in _STEPS if _STEP_NODES[s] in self.o.nodes]
        if "Sort" not in self.o.nodes and "limit" in ok:
            ok.remove("limit")
        if "Sort" not in self.o.nodes and "Limit" in self.o.nodes:
            pass
        return [s for s in ok for _ in range(_STEP_WEIGHTS[s])]

    def chain(self, s: _State, n_ops: int, allow_join: bool = True, first: tuple[str, ...] = ()) -> _State:
        menu = self.steps()
        if not allow_join:
            menu = [m for m in menu if m != "join"]
        for i in range(n_ops):
            if not menu:
                break
            step = self.pick([m for m in menu if m in first] or menu) if i == 0 and first else self.pick(menu)
            new = getattr(self, "step_" + step)(s)
            if new is not None and self._dtypes_ok(new):
                s = new
        return s

    def _dtypes_ok(self, s: _State) -> bool:
        return all(self.kind_ok(t) for t in s.schema.dtypes)

    def _new_state(self, s: _State, flow: Flow, bounds=None, rows=None, ordered=False) -> _State:
        b = dict(s.bounds) if bounds is None else bounds
        return _State(flow, {n: b.get(n, (None, None)) for n in flow.schema.names},
                      s.rows if rows is None else rows, ordered)

    # each step returns a new state, or None when it does not apply
    def step_filter(self, s: _State) -> _State | None:
        p = self.boolean(s, self.o.expr_depth)
        if p is None:
            return None
        return self._new_state(s, s.flow.filter(p.e))

    def _new_columns(self, s: _State, k: int, taken: list[str], allow_replace: bool) -> list[tuple[str, _TE]]:
        out = []
        for _ in range(k):
            te = self.expr(s, "any", self.o.expr_depth)
            if te is None or not self.kind_ok(te.dtype):
                continue
            if allow_replace and self.chance(0.3):
                name = self.pick(s.schema.names)
            else:
                name = self.fresh(taken + [n for n, _ in out])
            if name in [n for n, _ in out]:
                continue
            out.append((name, te))
        return out

    def step_select(self, s: _State) -> _State | None:
        names = list(s.schema.names)
        keep = self.draw(st.lists(st.sampled_from(names), unique=True, max_size=len(names)))
        new = self._new_columns(s, self.pick((0, 1, 2)), keep, allow_replace=False)
        if not keep and not new:
            keep = [names[0]]
        exprs = [col(n) for n in keep] + [te.e.alias(n) for n, te in new]
        bounds = {n: s.bounds.get(n, (None, None)) for n in keep}
        bounds.update({n: (te.lo, te.hi) for n, te in new})
        return self._new_state(s, s.flow.select(*exprs), bounds)

    def step_with_columns(self, s: _State) -> _State | None:
        new = self._new_columns(s, self.pick((1, 1, 2)), list(s.schema.names), allow_replace=True)
        if not new:
            return None
        bounds = dict(s.bounds)
        bounds.update({n: (te.lo, te.hi) for n, te in new})
        if self.chance(0.5):
            flow = s.flow.with_columns(*[te.e.alias(n) for n, te in new])
        else:
            flow = s.flow.with_columns(**{n: te.e for n, te in new})
        return self._new_state(s, flow, bounds)

    def step_aggregate(self, s: _State) -> _State | None:
        names = list(s.schema.names)
        plain = _comparable_names(s)
        keys = self.draw(st.lists(st.sampled_from(plain), unique=True, max_size=min(2, len(plain)))) if plain else []
        key_exprs: list = list(keys)
        bounds = {k: s.bounds.get(k, (None, None)) for k in keys}
        if self.chance(0.2):  # a computed key: group_by(expr.alias(name))
            te = self.expr(s, "any", 1)
            if te is not None and self.kind_ok(te.dtype):
                name = self.fresh(names)
                key_exprs.append(te.e.alias(name))
                bounds[name] = (te.lo, te.hi)
        aggs: list[tuple[str, _TE]] = []
        taken = list(keys) + [k.node.name for k in key_exprs if not isinstance(k, str)]
        for _ in range(self.pick((1, 1, 2, 3))):
            a = self.aggregation(s, set(keys))
            if a is None or not self.kind_ok(a.dtype):
                continue
            if self.has("add") and self.chance(0.15) and a.dtype.is_float:
                a = _TE(a.e + 1, a.dtype)
            if self.o.deep and a.dtype.is_float:
                a = self._around_aggregation(s, a)
            name = self.fresh(taken)
            taken.append(name)
            aggs.append((name, a))
        if not aggs:
            return None
        named = {n: a.e for n, a in aggs}
        flow = s.flow.group_by(*key_exprs).agg(**named) if key_exprs else s.flow.agg(**named)
        bounds.update({n: (a.lo, a.hi) for n, a in aggs})
        return self._new_state(s, flow, bounds, rows=s.rows if key_exprs else 1)

    def _around_aggregation(self, s: _State, a: _TE) -> _TE:
        """Functions of an aggregation's result (read on the grouped rows), a few levels deep."""
        fns = [f for f in ("exp", "log", "sin", "tanh", "abs", "neg") if self.has(f)]
        for _ in range(self.draw(st.integers(0, 3)) if fns else 0):
            fn = self.pick(fns)
            a = self.typed(-a.e if fn == "neg" else getattr(a.e, fn)(), s, agg=True) or a
        return a

    def step_join(self, s: _State) -> _State | None:
        hows = [h for h in N.JOIN_KINDS if h in self.o.joins]
        if not hows:
            return None
        if len(self.sources) > 1 and self.chance(0.7):
            other = self.source_state(self.pick(range(1, len(self.sources))))
        else:
            other = self.source_state(0)
        other = self.chain(other, self.pick((0, 0, 1)), allow_join=False)
        how = self.pick(hows)
        if how == "cross" and s.rows * other.rows > 64:
            how = self.pick([h for h in hows if h != "cross"] or ["cross"])
            if how == "cross":
                return None
        pairs = []
        if how != "cross":
            for ln, lt in s.schema.items():
                for rn, rt in other.schema.items():
                    if _joinable(lt, rt):
                        pairs.append((ln, rn))
            if not pairs:
                return None
            chosen = self.draw(st.lists(st.sampled_from(pairs), min_size=1, max_size=2,
                                        unique_by=(lambda p: p[0], lambda p: p[1])))
            left_on, right_on = [p[0] for p in chosen], [p[1] for p in chosen]
        else:
            left_on, right_on = [], []
        suffix = self.pick(("_right", "_right", "_r", " 2"))
        other = self._avoid_clashes(s, other, right_on, suffix)
        if other is None:
            return None
        kw: dict[str, Any] = {"how": how, "suffix": suffix}
        if how != "cross":
            if left_on == right_on and self.chance(0.5):
                kw["on"] = left_on if len(left_on) > 1 or self.chance(0.5) else left_on[0]
            else:
                kw["left_on"], kw["right_on"] = left_on, right_on
        try:
            flow = s.flow.join(other.flow, **kw)
        except PlanError:
            return None
        bounds = dict(s.bounds)
        for ln, rn in zip(left_on, right_on):
            bounds[ln] = _hull(s.bounds.get(ln, (None, None)), other.bounds.get(rn, (None, None)))
        key = _name_key(True)
        taken = set(s.schema.names)
        for rn in other.schema.names:
            if rn in right_on:
                continue
            out = rn + suffix if key(rn) in taken else rn
            bounds[out] = other.bounds.get(rn, (None, None))
        rows = s.rows if how in ("semi", "anti") else s.rows * other.rows + s.rows + other.rows
        return self._new_state(s, flow, bounds, rows=rows)

    def _avoid_clashes(self, s: _State, other: _State, right_on: list[str], suffix: str) -> _State | None:
        """Rename right columns whose joined names would clash (exactly, or by case where that matters)."""
        key = _name_key(self.o.case_sensitive)
        taken = {key(n) for n in s.schema.names}
        renames = {}
        for rn in other.schema.names:
            if rn in right_on:
                continue
            out = rn + suffix if rn in s.schema.names else rn
            if key(out) in taken or (rn not in s.schema.names and key(rn) in taken):
                new = self.fresh(list(s.schema.names) + list(other.schema.names) + list(renames.values()))
                renames[rn] = new
                out = new
            taken.add(key(out))
        if not renames:
            return other
        if "Project" not in self.o.nodes:
            return None
        flow = other.flow.rename(renames)
        bounds = {renames.get(n, n): b for n, b in other.bounds.items()}
        return _State(flow, bounds, other.rows)

    def _sort_all(self, s: _State) -> Flow:
        """A sort on every column (a total order); nested columns, which have no order, are dropped first,
        or, where no other column is left, one is replaced by its length."""
        flow, names = s.flow, _comparable_names(s)
        if len(names) < len(s.schema):
            first = s.schema.names[0]
            whole = col(first).list.len() if s.schema[first].kind == "List" else col(first).is_null()
            flow = flow.select(*names) if names else flow.select(whole.alias(first))
            names = names or [first]
        names = self.draw(st.permutations(names))
        desc = self.draw(st.lists(st.booleans(), min_size=len(names), max_size=len(names)))
        last = self.draw(st.one_of(st.none(), st.lists(st.booleans(), min_size=len(names), max_size=len(names))))
        if not any(desc) and self.chance(0.3):
            return flow.sort(*names, nulls_last=last)
        return flow.sort(*names, descending=desc, nulls_last=last)

    def step_sort(self, s: _State) -> _State | None:
        if self.chance(0.5):
            return self._new_state(s, self._sort_all(s), ordered=True)
        keys = []
        for _ in range(self.pick((1, 2))):
            if self.chance(0.6) and _comparable_names(s):
                keys.append(self.pick(_comparable_names(s)))
            else:
                te = self.expr(s, "any", 1)
                if te is not None:
                    keys.append(te.e)
        if not keys:
            return None
        desc = [self.draw(st.booleans()) for _ in keys]
        return self._new_state(s, s.flow.sort(*keys, descending=desc, nulls_last=self.draw(st.booleans())))

    def step_limit(self, s: _State) -> _State | None:
        """limit only after a total sort on every column, so the rows kept are defined."""
        flow = self._sort_all(s) if not s.ordered else s.flow
        n = self.pick((0, 1, 2, 3, 5, 100, 2**63 - 1))   # the last: n + offset past Int64 (and UInt32)
        offset = self.pick((0, 0, 0, 1, 2))
        flow = flow.limit(n, offset) if offset else flow.limit(n)
        return self._new_state(s, flow, rows=min(s.rows, n), ordered=True)

    def step_distinct(self, s: _State) -> _State | None:
        names = _comparable_names(s)
        if not names:
            return None
        return self._new_state(s, (s.flow if len(names) == len(s.schema) else s.flow.select(*names)).distinct())

    def step_unique(self, s: _State) -> _State | None:
        """distinct(subset, keep): "none" anywhere; "first"/"last" only over totally sorted rows, whose order
        every lane knows ("any" may keep different rows on different lanes, so it is not drawn)."""
        names = _comparable_names(s)
        if not names:
            return None
        subset = self.draw(st.lists(st.sampled_from(names), min_size=1, max_size=2, unique=True))
        keep = self.pick(("none", "first", "last") if s.ordered else ("none",))
        return self._new_state(s, s.flow.distinct(subset, keep=keep), ordered=s.ordered)

    def step_union(self, s: _State) -> _State | None:
        # the other branch has the same schema: the same flow filtered, or a source of the same schema
        same = [i for i, (f, _) in enumerate(self.sources) if f.schema == s.schema and f is not s.flow]
        if same and self.chance(0.5):
            other = self.source_state(self.pick(same))
        else:
            other = self.step_filter(s) or s
        rows = s.rows + other.rows
        bounds = {n: _hull(s.bounds.get(n, (None, None)), other.bounds.get(n, (None, None)))
                  for n in s.schema.names}
        return self._new_state(s, s.flow.union(other.flow), bounds, rows=rows)

    def step_rename(self, s: _State) -> _State | None:
        old = self.pick(s.schema.names)
        new = self.fresh(s.schema.names)
        bounds = {(new if n == old else n): b for n, b in s.bounds.items()}
        return self._new_state(s, s.flow.rename({old: new}), bounds)

    def step_drop(self, s: _State) -> _State | None:
        if len(s.schema) < 2:
            return None
        return self._new_state(s, s.flow.drop(self.pick(s.schema.names)))

    def step_window(self, s: _State) -> _State | None:
        """A window function or an aggregation over partitions of up to two columns. One that reads the row order
        (or an order_by, whose ties go by it) only over rows sorted on every column, so every lane has that order."""
        if not s.ordered and "Sort" in self.o.nodes and self.chance(0.5):
            s = self._new_state(s, self._sort_all(s), ordered=True)
        names, keys = list(s.schema.names), _comparable_names(s)   # partitions and orders compare their keys
        parts = self.draw(st.lists(st.sampled_from(keys), unique=True, max_size=min(2, len(keys)))) if keys else []
        order: dict[str, Any] = {}
        if s.ordered and keys and self.chance(0.5):
            order = {"order_by": self.draw(st.lists(st.sampled_from(keys), unique=True, min_size=1, max_size=2)),
                     "descending": self.draw(st.booleans()), "nulls_last": self.draw(st.booleans())}
        fns = [f for f in F.WINDOWS if self.has(f) and (s.ordered or f == "rank" or f.endswith("_by"))]
        if self.has("over") and (not fns or self.chance(0.4)):
            a = self.aggregation(s, set())
            te = None if a is None else self.typed(a.e.over(parts, **order), s, a.lo, a.hi)
        elif fns:
            te = self._window_function(s, self.pick(fns))
            te = None if te is None else self.typed(te.e.over(parts, **order), s, te.lo, te.hi)
        else:
            return None
        if te is None or not self.kind_ok(te.dtype):
            return None
        name = self.fresh(names)
        bounds = dict(s.bounds, **{name: (te.lo, te.hi)})
        return self._new_state(s, s.flow.with_columns(**{name: te.e}), bounds, ordered=s.ordered)

    def _window_function(self, s: _State, fn: str) -> _TE | None:
        rows = Fraction(s.rows)
        if fn == "row_number":
            return _TE(ei.row_number(), T.Int64, Fraction(0), rows)
        numeric = fn in ("cum_sum", "cum_prod", "rolling_sum", "rolling_mean", "rolling_sum_by", "rolling_mean_by")
        a = self.expr(s, "numeric" if numeric else "any", self.pick((0, 0, 1)))
        if a is None:
            return None
        if fn == "rank":
            methods = F.RANK_METHODS if s.ordered else [m for m in F.RANK_METHODS if m != "ordinal"]
            return self.typed(a.e.rank(self.pick(methods), descending=self.draw(st.booleans())), s, 0, rows)
        if fn == "shift":
            fill = self.literal(a.dtype) if self.chance(0.3) else None
            e = a.e.shift(self.pick((-2, -1, 0, 1, 2)), fill_value=None if fill is None else fill.e)
            lo, hi = _hull((a.lo, a.hi), (a.lo, a.hi) if fill is None else (fill.lo, fill.hi))
            return self.typed(e, s, lo, hi)
        if fn == "cum_count":
            return self.typed(a.e.cum_count(), s, 0, rows)
        big = None if a.lo is None else max(abs(a.lo), abs(a.hi))
        if fn in ("cum_sum", "rolling_sum", "rolling_sum_by"):
            lo, hi = (None, None) if big is None else (-big * rows, big * rows)
        elif fn == "cum_prod":
            lo, hi = (None, None) if big is None else (-big ** s.rows - 1, big ** s.rows + 1)
        else:
            lo, hi = a.lo, a.hi
        if fn.endswith("_by"):   # a window of time over a Date or Timestamp column
            by = self.column(s, _drawn_temporal)
            if by is None:
                return None
            e = getattr(a.e, fn)(by.e, self.pick(("1h", "1d", "2d", "1w", "1mo")), min_samples=self.pick((0, 1, 2)),
                                 closed=self.pick(F.ROLLING_CLOSED))
        elif fn.startswith("rolling_"):
            size = self.pick((1, 2, 3))
            e = getattr(a.e, fn)(size, min_samples=self.pick((None, 0, 1, size)))
        else:
            e = getattr(a.e, fn)()
        return self.typed(e, s, lo, hi)

    def step_map_batches(self, s: _State) -> _State | None:
        fn = self.pick((batches_identity, batches_reversed))
        return self._new_state(s, s.flow.map_batches(fn, schema=s.schema))


def _comparable_names(s: _State) -> list[str]:
    """The columns whose values compare (sort, group, distinct): all but nested ones."""
    return [n for n, t in s.schema.items() if not t.is_nested]


def _joinable(a: DType, b: DType) -> bool:
    if a.is_nested or b.is_nested:
        return False
    if a == b:
        return True
    if a.is_integer and b.is_integer:
        return T.Float64 not in (a, b) and not ({a.name, b.name} & {"UInt64"})
    return a.is_decimal and b.is_decimal


@st.composite
def flows(draw, *, coverage: Coverage | None = None, nodes: Iterable[str] | None = None,
          functions: Iterable[str] | None = None, dtypes: Iterable[str] | None = None,
          joins: Iterable[str] | None = None, exclude: Iterable[str] = (), max_ops: int = 4,
          max_rows: int = 8, max_sources: int = 2, expr_depth: int = 2, case_sensitive: bool = True,
          zero_division: bool = True, float_to_string: bool = True, nan: bool = True, deep: bool = False,
          opts: Options | None = None, first: tuple[str, ...] = ()) -> Generated:
    """Well-typed random Flows over 1..max_sources in-memory sources, drawn only from what is allowed.

    Restrict with a lane's `coverage` (and/or explicit `nodes`, `functions`, `dtypes`, `joins` sets, minus
    `exclude`); filter the result by `lane.supports(gen.flow.plan) == []` as well. `first` names the steps
    (such as "window") the chain starts with.
    """
    o = opts or options(coverage=coverage, nodes=nodes, functions=functions, dtypes=dtypes, joins=joins,
                        exclude=exclude, max_ops=max_ops, max_rows=max_rows, max_sources=max_sources,
                        expr_depth=expr_depth, case_sensitive=case_sensitive, zero_division=zero_division,
                        float_to_string=float_to_string, nan=nan, deep=deep)
    kinds = sorted(k for k in o.dtypes if k in _DTYPE_WEIGHTS)
    n_sources = draw(st.integers(1, max(1, o.max_sources)))
    first = draw(schemas(kinds=kinds, case_sensitive=o.case_sensitive))
    srcs = []
    for i in range(n_sources):
        schema = first if i == 0 or draw(st.booleans()) else draw(schemas(kinds=kinds,
                                                                          case_sensitive=o.case_sensitive))
        table = draw(tables(schema, max_rows=o.max_rows, nan=o.nan))
        srcs.append((ei.from_arrow(table), table))
    p = _Plans(draw, o, srcs)
    if o.deep:  # its first step computes expressions, so every plan has deep ones
        s = p.chain(p.source_state(0), draw(st.integers(1, max(1, o.max_ops))),
                    first=("filter", "with_columns", "aggregate"))
    else:
        s = p.chain(p.source_state(0), draw(st.integers(1 if first else 0, o.max_ops)), first=first)
    ordered = s.ordered
    if not ordered and "Sort" in o.nodes and draw(st.booleans()):
        s = p._new_state(s, p._sort_all(s), ordered=True)
        if "Limit" in o.nodes and draw(st.booleans()):
            s = p.step_limit(s)
        ordered = True
    return Generated(s.flow, ordered, tuple(t for _, t in srcs))


def plans(**kw: Any) -> st.SearchStrategy[N.Node]:
    """The IR plans of `flows(**kw)`."""
    return flows(**kw).map(lambda g: g.flow.plan)


_STRING_TESTS = ("str_contains", "str_contains_regex", "str_starts_with", "str_ends_with", "str_like")
# Characters of generated text and patterns: letters in both cases, a digit, space and newline, punctuation a
# pattern must escape, and one beyond ASCII (é, and ٣, a digit only outside ASCII).
REGEX_ALPHABET = "aAb1 \n.é٣"


@st.composite
def regexes(draw, depth: int = 2) -> str:
    """Patterns of eidos' portable regex dialect (eidos.ir.regex): every construct it reads, nested."""
    def atom(d: int):
        pieces = [st.sampled_from(["a", "b", "A", "1", "é", " ", "\\.", "\\*", "\\(", "\\\\", "٣"]),
                  st.sampled_from([".", "\\d", "\\w", "\\s", "\\D", "\\W", "\\S", "[ab]", "[^a]", "[a-z]",
                                   "[0-9.]", "[\\d\\s]", "[^\\w]", "[\\]\\-]", "[é-ü]"])]
        if d > 0:
            inner = st.lists(st.deferred(lambda: atom(d - 1)), min_size=1, max_size=3).map("".join)
            pieces.append(st.builds(lambda a, b: f"({a}|{b})", inner, inner))
            pieces.append(inner.map(lambda a: f"(?:{a})"))
        base = st.one_of(*pieces)
        return st.builds(lambda a, q: a + q, base, st.sampled_from(["", "", "", "?", "*", "+", "{2}", "{1,3}",
                                                                      "{0,}", "*?", "+?"]))
    body = draw(st.lists(atom(depth), max_size=4).map("".join))
    return draw(st.sampled_from(["", "^"])) + body + draw(st.sampled_from(["", "", "$"]))
