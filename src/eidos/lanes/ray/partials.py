"""Aggregates as per-partition partial states and one exact combine, for the cluster lane.

The result equals the reference lane's over the partitions concatenated in order, however the rows
were split (docs/semantics.md section 14). What a state keeps, per group and partition:

- count, ei.count(): the count; counts add.
- sum, mean of integers and decimals: the exact total as balanced base-2**21 digits packed three to
  an int64 word, so no partition's total wraps; the whole total is checked once, as the reference does.
- sum, mean of floats: the exact total of the finite values as a non-overlapping expansion
  (list<float64>, largest first), the sums of the positive and of the negative ones (rounded; they
  bound every prefix sum), and whether there was a NaN, an inf, a -inf.
  Expansions add exactly (each value is cut into 21-bit pieces on fixed exponent boundaries, added as
  integers) and the total is rounded once, as math.fsum rounds. Where the positive (or negative)
  values add up to 1.5 * 2**1023 or more, an expansion's components may pass the float range: such
  a group's exact total is kept instead as an integer count of 2**-1074 (bytes), and the combine adds
  those in Python integers and rounds once, as the reference's float_sum does when math.fsum overflows
  part way.
- min, max: the partition's least/greatest value, the first of equal ones (the reference's min() and
  max() keep the first, which decides the sign of a zero), and for floats whether there was a NaN
  (the largest value).
- the keys: as first seen, so a group of 0.0 and -0.0 keys shows the first, as in the reference.

combine() takes the states in the order of the partitions: the first of equal values and keys, and the
order of the groups (first appearance), are then the reference's.

Not combinable, so plan() returns None: var and std (the reference makes two passes over the whole
group, m = fsum(x)/n then fsum((x - m)**2), each term rounded with that m) and n_unique.
"""

from __future__ import annotations

import decimal
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from eidos.errors import ExecutionError
from eidos.ir import dtypes as T
from eidos.ir import expr as E
from eidos.ir import nodes as N
from eidos.ir.dtypes import DType
from eidos.ir.evaluate.aggregates import rounded
from eidos.ir.evaluate.values import CTX
from eidos.ir.render import node_label
from eidos.ir.schema import Schema
from eidos.ir.sources import ArrowSource
from eidos.ir.typing import infer
from eidos.lanes.ray.local import run_local

COMBINABLE = frozenset({"count", "count_rows", "sum", "mean", "min", "max"})
DANGER = 1.5 * 2.0 ** 1023  # positive (negative) floats adding up to this: exact totals as integers, not floats
TINY = 1074               # a float is a whole number of 2**-1074

BITS = 21                 # digits of exact totals, in base 2**21: float64 adds 2**31 of them exactly
BASE, HALF, MASK = 1 << BITS, 1 << (BITS - 1), (1 << BITS) - 1
SLICE = 1 << 30           # rows summed in one float64 pass (pieces < 2**22: totals stay below 2**53)
INT_WORDS, DEC_WORDS = 2, 3  # words of a partition's total: |int64 total| < 2**95, |decimal| < 2**158
CARRY = 3                 # digits added before adding states: room for any number of partitions


def plan(node: N.Aggregate) -> Partials | None:
    """How `node` runs as per-partition partial states and a final combine; None when some aggregate in
    it has no combinable state (the cluster lane then shuffles rows by the keys, or gathers them)."""
    aggs = [a for _, e in node.aggs for a in e.walk() if isinstance(a, E.Agg)]
    if any(a.fn not in COMBINABLE for a in aggs):
        return None
    return Partials(node)


@dataclass
class _Arg:
    """One distinct argument of the node's aggregations, and what is asked of it."""

    expr: E.Expr
    dtype: DType
    prefix: str
    fns: set[str] = field(default_factory=set)

    @property
    def total(self) -> bool:
        return bool(self.fns & {"sum", "mean"}) and self.dtype.is_numeric

    def extreme(self, fn: str) -> bool:
        return fn in self.fns and self.dtype != T.Null


@dataclass(frozen=True)
class _Leaf:
    agg: E.Agg
    name: str          # its column in the table of finished aggregates
    arg: _Arg | None   # None for ei.count()
    dtype: DType       # its result type


class Partials:
    """`node` as partial states (partial) and the final rows from every partition's states (combine)."""

    def __init__(self, node: N.Aggregate):
        self.node = node
        self.keys: tuple[str, ...] = tuple(n for n, _ in node.keys)
        schema = node.input.schema
        self._key_types = [infer(e, schema) for _, e in node.keys]
        extra = [(n, t) for n, t in zip(self.keys, self._key_types) if n not in schema]
        self._agg_schema = Schema(list(schema.items()) + extra)  # aggregations read computed keys by name
        self._prefix = "@" * (1 + max((len(k) - len(k.lstrip("@")) for k in self.keys), default=0))  # more @ than keys start with
        self._args: dict[E.Expr, _Arg] = {}
        leaves: dict[E.Agg, _Leaf] = {}

        def collect(x: E.Expr) -> E.Expr:
            if not isinstance(x, E.Agg):
                return x
            if x not in leaves:
                arg = None
                if x.arg is not None:
                    arg = self._args.get(x.arg)
                    if arg is None:
                        arg = _Arg(x.arg, infer(x.arg, self._agg_schema), f"{self._prefix}{len(self._args)}")
                        self._args[x.arg] = arg
                    arg.fns.add(x.fn)
                result = infer(x, self._agg_schema, allow_agg=True)
                leaves[x] = _Leaf(x, f"{self._prefix}agg{len(leaves)}", arg, result)
            return E.Column(leaves[x].name)

        # the order of the reference's `found`: the first aggregation to fail is the one it names
        self._outer = [(n, E.transform(e, collect)) for n, e in node.aggs]
        self._leaves = list(leaves.values())
        self._rows = any(leaf.arg is None for leaf in self._leaves)
        self._group_schema = Schema(list(zip(self.keys, self._key_types))
                                    + [(leaf.name, leaf.dtype) for leaf in self._leaves])
        # the states' columns: the keys as they are, then what _arg_states keeps (the schema of no rows' states)
        self.schema = self._states([pa.array([], t.to_arrow()) for t in self._key_types],
                                   [pa.array([], a.dtype.to_arrow()) for a in self._args.values()], 0).schema

    # ------------------------------------------------------------ the state tables

    def partial(self, table: pa.Table) -> pa.Table:
        """One partition's states; `table` is that partition of node.input's result (node.input.schema)."""
        return self._states(*self._inputs(table), table.num_rows)

    def _states(self, keys: list[pa.Array], args: list[pa.Array], rows: int) -> pa.Table:
        g, count, first = _groups(keys, rows)
        if not self.keys:
            count = 1
        out: dict[str, pa.Array] = {n: k.take(first) for n, k in zip(self.keys, keys)}
        if self._rows:
            out[f"{self._prefix}rows"] = pa.array(np.bincount(g, minlength=count), pa.int64())
        for a, column in zip(self._args.values(), args):
            out.update(_arg_states(a, column, g, count))
        return pa.table(out)

    def combine(self, states: list[pa.Table]) -> pa.Table:
        """Final rows (exactly node.schema) of the groups in `states`: every partition's states for those
        groups, in the order of the partitions (a hash partition of them, or all of them for a global
        aggregate)."""
        table = pa.concat_tables([s.select(self.schema.names).cast(self.schema) for s in states]) \
            if states else self.schema.empty_table()
        table = table.combine_chunks()
        keys = [table.column(n).combine_chunks() for n in self.keys]
        g, count, first = _groups(keys, table.num_rows)
        if not self.keys:
            count = 1
        combined: dict[str, pa.Array] = {n: k.take(first) for n, k in zip(self.keys, keys)}
        where = node_label(self.node)
        totals: dict[str, object] = {}
        for leaf in self._leaves:
            try:
                combined[leaf.name] = self._finish(leaf, table, g, count, totals)
            except ExecutionError as err:
                raise type(err)(f"{err}\n  in {where}: {leaf.agg}") from None
        return self._outputs(pa.table(combined, schema=self._group_schema.to_arrow()))

    # ------------------------------------------------------------ evaluation around the states

    def _inputs(self, table: pa.Table) -> tuple[list[pa.Array], list[pa.Array]]:
        """The key columns and the aggregations' argument columns of one partition."""
        schema = self.node.input.schema
        exprs = [E.strip_alias(e) for _, e in self.node.keys] + [a.expr for a in self._args.values()]
        if all(isinstance(e, E.Column) and e.name in schema for e in exprs):
            columns = [table.column(e.name).combine_chunks() for e in exprs]  # plain columns: no engine
        else:
            scan: N.Node = N.Scan(ArrowSource.of(table, schema))
            extra = [(n, e) for n, e in self.node.keys if n not in schema]
            if extra:
                scan = N.Project(scan, tuple((n, E.Column(n)) for n in schema.names) + tuple(extra))
            named = [(f"k{i}", E.Column(n) if n not in schema else e) for i, (n, e) in enumerate(self.node.keys)]
            named += [(f"a{i}", a.expr) for i, a in enumerate(self._args.values())]
            result = run_local(N.Project(scan, tuple(named)))
            columns = [result.column(i).combine_chunks() for i in range(len(named))]
        return columns[:len(self.keys)], columns[len(self.keys):]

    def _outputs(self, groups: pa.Table) -> pa.Table:
        """node.schema's rows from the keys and the finished aggregations (a projection when they are combined)."""
        target = self.node.schema.to_arrow()
        direct = [isinstance(E.strip_alias(e), E.Column) for _, e in self._outer]
        if all(direct):
            columns = [groups.column(n) for n in self.keys]
            columns += [groups.column(E.strip_alias(e).name) for _, e in self._outer]
            return pa.table(columns, schema=target)
        scan = N.Scan(ArrowSource.of(groups, self._group_schema))
        plan = N.Project(scan, tuple((n, E.Column(n)) for n in self.keys) + tuple(self._outer))
        return run_local(plan).cast(target)

    # ------------------------------------------------------------ finishing one aggregation

    def _finish(self, leaf: _Leaf, table: pa.Table, g: np.ndarray, count: int, totals: dict) -> pa.Array:
        fn, a = leaf.agg.fn, leaf.arg
        if a is None:
            return pa.array(_add(g, table.column(f"{self._prefix}rows"), count), pa.int64())
        n = _add(g, table.column(f"{a.prefix}.n"), count)
        rt = leaf.dtype.to_arrow()
        if fn == "count":
            return pa.array(n, pa.int64())
        if a.dtype == T.Null:
            return pa.nulls(count, rt)
        if fn in ("min", "max"):
            return _extreme_result(a, table, g, count, n, largest=fn == "max")
        if a.dtype.is_float:
            if a.prefix not in totals:
                totals[a.prefix] = _float_total(a.prefix, table, g, count, n)
            total = totals[a.prefix]
            value = total if fn == "sum" else total / np.maximum(n, 1)
            return pa.array(value, pa.float64(), mask=n == 0)
        if a.prefix not in totals:
            words = DEC_WORDS if a.dtype.is_decimal else INT_WORDS
            parts = [_unpack(_numpy(table.column(f"{a.prefix}.w{i}"))) for i in range(words)]
            digits = _add_digits(g, np.concatenate(parts, axis=1), count)
            totals[a.prefix] = _balance(np.pad(digits, ((0, 0), (0, CARRY))))
        digits = totals[a.prefix]
        if fn == "mean":
            return _mean(digits, n, a.dtype)
        if a.dtype.is_decimal:
            return _decimal_sum(digits, n, leaf.dtype)
        return _int_sum(digits, n, leaf.dtype)


def _numpy(column: pa.Array | pa.ChunkedArray) -> np.ndarray:
    return column.to_numpy(zero_copy_only=False)


def _add(g: np.ndarray, column: pa.Array | pa.ChunkedArray, count: int) -> np.ndarray:
    """Per-group totals of an int64 state column (counts: far below 2**53)."""
    return np.bincount(g, weights=_numpy(column), minlength=count).astype(np.int64)


# ---------------------------------------------------------------- groups

def _groups(keys: list[pa.Array], rows: int) -> tuple[np.ndarray, int, np.ndarray]:
    """Each row's group (numbered in order of first appearance), the number of groups and each group's
    first row. Nulls are a key of their own, NaN equals NaN and -0.0 equals 0.0, as in the reference."""
    if not keys:
        return np.zeros(rows, np.int64), 1 if rows else 0, np.zeros(0, np.int64)
    codes = np.zeros(rows, np.int64)
    first_key = True
    for column in keys:
        column = _normal_key(column)
        if pa.types.is_null(column.type):
            continue
        encoded = pc.dictionary_encode(column, null_encoding="encode")
        indices = encoded.indices.to_numpy().astype(np.int64)
        if first_key:
            codes, first_key = indices, False  # already numbered in order of first appearance
        else:
            codes = pc.dictionary_encode(pa.array(codes * len(encoded.dictionary) + indices)).indices
            codes = codes.to_numpy().astype(np.int64)
    if not rows:
        return codes, 0, np.zeros(0, np.int64)
    seen = np.maximum.accumulate(codes)
    first = np.flatnonzero(np.concatenate(([True], seen[1:] > seen[:-1])))
    return codes, len(first), first


def _normal_key(column: pa.Array) -> pa.Array:
    """Floats with one zero and one NaN, so that hashing groups them as the reference compares them."""
    if not pa.types.is_floating(column.type):
        return column
    zero, nan = pa.scalar(0.0, column.type), pa.scalar(float("nan"), column.type)
    column = pc.if_else(pc.equal(column, zero), zero, column)
    return pc.if_else(pc.is_nan(column), nan, column)


# ---------------------------------------------------------------- one argument's states

def _arg_states(a: _Arg, column: pa.Array, g: np.ndarray, count: int) -> dict[str, pa.Array]:
    p, t = a.prefix, a.dtype
    valid = column.is_valid().to_numpy(zero_copy_only=False) if column.null_count else np.ones(len(column), bool)
    gv = g[valid]
    out = {f"{p}.n": pa.array(np.bincount(gv, minlength=count), pa.int64())}
    if t == T.Null:
        return out
    values = column.filter(pa.array(valid)) if column.null_count else column
    if t.is_float:
        x = values.to_numpy(zero_copy_only=False).astype(np.float64)
        nan = np.isnan(x)
        if a.total or a.extreme("min") or a.extreme("max"):
            out[f"{p}.nan"] = _any(gv[nan], count)
        if a.total:
            out.update(_float_states(p, x, gv, count))
    elif a.total:
        if t.is_decimal:
            pieces = _decimal_pieces(values)
            words = DEC_WORDS
        else:
            pieces = _int_pieces(values.to_numpy(zero_copy_only=False))
            words = INT_WORDS
        digits = _add_digits(gv, pieces, count)
        digits = _balance(np.pad(digits, ((0, 0), (0, 3 * words - digits.shape[1]))))
        for i in range(words):
            out[f"{p}.w{i}"] = pa.array(_pack(digits[:, 3 * i:3 * i + 3]), pa.int64())
    for fn in ("min", "max"):
        if a.extreme(fn):
            out[f"{p}.{fn}"] = _extreme(values, gv, count, largest=fn == "max")
    return out


def _float_states(p: str, x: np.ndarray, g: np.ndarray, count: int) -> dict[str, pa.Array]:
    finite = np.isfinite(x)
    inf = ~finite & ~np.isnan(x)
    flags = {f"{p}.inf": _any(g[inf & (x > 0)], count), f"{p}.-inf": _any(g[inf & (x < 0)], count)}
    if not finite.all():
        g, x = g[finite], x[finite]
    up = np.bincount(g, weights=np.maximum(x, 0.0), minlength=count)
    down = np.bincount(g, weights=-np.minimum(x, 0.0), minlength=count)
    big = np.maximum(up, down) >= DANGER
    comps, lengths = _compress(*_expand(g, x, count, drop=big))
    offsets = np.zeros(count + 1, np.int32)
    np.cumsum(lengths, out=offsets[1:])
    return {f"{p}.exp": pa.ListArray.from_arrays(pa.array(offsets), pa.array(comps, pa.float64())),
            f"{p}.big": _big_totals(g, x, big),
            f"{p}.pos": pa.array(up, pa.float64()), f"{p}.neg": pa.array(down, pa.float64()), **flags}


def _big_totals(g: np.ndarray, x: np.ndarray, big: np.ndarray) -> pa.Array:
    """The exact total of the finite values `x` of each group that `big` marks, as a whole number of
    2**-1074 (signed little-endian bytes), from the same 21-bit pieces as _expand's; null elsewhere."""
    which = np.flatnonzero(big)
    if not len(which):
        return pa.nulls(len(big), pa.binary())
    out: list[bytes | None] = [None] * len(big)
    keep = big[g] & (x != 0)   # a big group has such values: its finite ones add up to DANGER or more
    rank = np.cumsum(big) - 1
    u = x[keep].view(np.uint64)
    k0 = _bins(u)
    low, span = int(k0.min()), int(k0.max() - k0.min()) + 4
    acc = _accumulate(u, rank[g[keep]] * span - low, k0, len(which) * span).reshape(len(which), span)
    for i, group in enumerate(which):
        total = _exact(acc, i) << (BITS * low)
        out[group] = total.to_bytes(total.bit_length() // 8 + 1, "little", signed=True)
    return pa.array(out, pa.binary())


def _any(g: np.ndarray, count: int) -> pa.Array:
    """Whether each group has a row among `g` (a flag added across partitions by _seen)."""
    return pa.array(np.bincount(g, minlength=count) > 0, pa.bool_())


def _seen(g: np.ndarray, column: pa.Array | pa.ChunkedArray, count: int) -> np.ndarray:
    return np.bincount(g, weights=_numpy(column).astype(np.float64), minlength=count) > 0


def _float_total(p: str, table: pa.Table, g: np.ndarray, count: int, n: np.ndarray) -> np.ndarray:
    """Each group's float sum as the reference computes it (eidos.ir.evaluate.aggregates.float_sum: the
    exact total rounded once, as math.fsum; inf with -inf or NaN is NaN)."""
    nan = _seen(g, table.column(f"{p}.nan"), count)
    pinf = _seen(g, table.column(f"{p}.inf"), count)
    ninf = _seen(g, table.column(f"{p}.-inf"), count)
    up = np.bincount(g, weights=_numpy(table.column(f"{p}.pos")), minlength=count)
    down = np.bincount(g, weights=_numpy(table.column(f"{p}.neg")), minlength=count)
    magnitude = np.maximum(up, down)  # every prefix sum lies in [-down, up]
    lists = table.column(f"{p}.exp").combine_chunks()
    lengths = pc.list_value_length(lists).to_numpy(zero_copy_only=False).astype(np.int64)
    comps = lists.flatten().to_numpy(zero_copy_only=False)
    total = _round(*_expand(np.repeat(g, lengths), comps, count, drop=magnitude >= DANGER))
    special = nan | (pinf & ninf)
    big = (n > 0) & ~special & (magnitude >= DANGER)
    if big.any():
        total[big] = _big_sums(table.column(f"{p}.big").combine_chunks(), g, big, lengths, comps)
    total[pinf] = np.inf
    total[ninf] = -np.inf
    total[special] = np.nan
    return total


def _big_sums(stored: pa.Array, g: np.ndarray, big: np.ndarray, lengths: np.ndarray,
              comps: np.ndarray) -> np.ndarray:
    """The groups `big` marks, each its states' exact totals added in Python integers (a state's bytes
    `stored`, else its expansion's components) and rounded once (past the float range: an infinity)."""
    totals = dict.fromkeys(np.flatnonzero(big).tolist(), 0)
    starts = np.concatenate(([0], np.cumsum(lengths)))
    for row in np.flatnonzero(big[g]).tolist():
        kept = stored[row].as_py()
        if kept is not None:
            totals[int(g[row])] += int.from_bytes(kept, "little", signed=True)
        else:
            totals[int(g[row])] += sum(int(Fraction(c) * (1 << TINY)) for c in comps[starts[row]:starts[row + 1]])
    return np.array([rounded(Fraction(total, 1 << TINY)) for total in totals.values()])


# ---------------------------------------------------------------- exact float totals

def _dense(count: int, span: int, values: int) -> bool:
    """Whether digits are laid out as one (groups x bins) block: when that is not much larger than the
    values (else each group spans only its own bins)."""
    return count * span <= 8 * values + (1 << 16)


def _expand(g: np.ndarray, x: np.ndarray, count: int, *, drop: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The exact total of each group's finite values `x` as a non-overlapping expansion: its non-zero
    components, largest first, group after group, and how many each group has (none where `drop`).

    Each value is cut into four 21-bit pieces on the boundaries 2**(21k - 1074) (k its bin); the pieces
    of one boundary add exactly as integers, then carries leave each digit within +-2**20, so the
    digits' values d * 2**(21k - 1074) are floats whose bits do not overlap."""
    keep = x != 0
    if drop.any():
        keep &= ~drop[g]
    g, x = g[keep], x[keep]
    if not len(x):
        return np.zeros(0), np.zeros(count, np.int64)
    u = x.view(np.uint64)
    k0 = _bins(u)
    low, high = int(k0.min()), int(k0.max())
    span = high - low + 4 + 2                       # four pieces, then room for two carries
    if _dense(count, span, len(x)):
        acc = _accumulate(u, g * span - low, k0, count * span)
        digits = _balance(acc.reshape(count, span))[:, ::-1]   # top first
        nz = digits != 0
        bins = np.broadcast_to(high + 5 - np.arange(span), digits.shape)[nz]
        comps = np.ldexp(digits[nz].astype(np.float64), (BITS * bins - 1074).astype(np.int32))
        return comps, nz.sum(axis=1)
    # widely spread exponents in many groups: each group's digits span only its own bins
    lows = np.full(count, np.iinfo(np.int64).max)
    highs = np.full(count, -1)
    np.minimum.at(lows, g, k0)
    np.maximum.at(highs, g, k0)
    present = highs >= 0
    spans = np.where(present, highs - np.where(present, lows, 0) + 4 + 2, 0)
    starts = np.zeros(count + 1, np.int64)
    np.cumsum(spans, out=starts[1:])
    acc = _accumulate(u, starts[:-1][g] - lows[g], k0, int(starts[-1]))
    _carry(acc, starts[:-1], spans)
    owner = np.repeat(np.arange(count), spans)
    down = starts[1:][owner] - 1 - (np.arange(len(acc)) - starts[:-1][owner])  # each group's slots, top first
    digits = acc[down]
    nz = digits != 0
    bins = lows[owner] + (down - starts[:-1][owner])
    comps = np.ldexp(digits[nz].astype(np.float64), (BITS * bins[nz] - 1074).astype(np.int32))
    return comps, np.bincount(owner[nz], minlength=count)


def _bins(u: np.ndarray) -> np.ndarray:
    """The bin of each float (bit pattern u): its lowest piece starts at 2**(21 * bin - 1074)."""
    return (np.maximum(((u >> np.uint64(52)) & np.uint64(0x7FF)).astype(np.int64), 1) - 1) // BITS


def _accumulate(u: np.ndarray, base: np.ndarray, k0: np.ndarray, size: int) -> np.ndarray:
    """acc[base[i] + k0[i] + j] += piece j of value i (bit pattern u[i], k0[i] its bin), j = 0..3."""
    e = ((u >> np.uint64(52)) & np.uint64(0x7FF)).astype(np.int64)
    m = (u & np.uint64((1 << 52) - 1)) | np.where(e > 0, np.uint64(1 << 52), np.uint64(0))
    r = (np.maximum(e, 1) - 1 - BITS * k0).astype(np.uint64)
    b, mask = np.uint64(BITS), np.uint64(MASK)
    sign = np.where(u >> np.uint64(63), -1.0, 1.0)
    pieces = np.concatenate([((m & ((np.uint64(1) << (b - r)) - np.uint64(1))) << r) * sign,
                             ((m >> (b - r)) & mask) * sign,
                             ((m >> (b + b - r)) & mask) * sign,
                             (m >> (b + b + b - r)) * sign])
    first = base + k0
    return _bincount(np.concatenate([first, first + 1, first + 2, first + 3]), pieces, size)


def _bincount(slots: np.ndarray, weights: np.ndarray, size: int) -> np.ndarray:
    """Exact integer totals per slot of integer-valued float weights below 2**22 in magnitude."""
    acc = np.zeros(size, np.int64)
    for i in range(0, len(slots), SLICE):
        acc += np.bincount(slots[i:i + SLICE], weights=weights[i:i + SLICE], minlength=size).astype(np.int64)
    return acc


def _carry(acc: np.ndarray, starts: np.ndarray, span: np.ndarray) -> None:
    """Carries within each group's digits (acc[starts[i]:starts[i] + span[i]], lowest first), leaving
    each digit but the top within [-2**20, 2**20)."""
    order = np.argsort(-span, kind="stable")
    ascending = np.sort(span)
    longest = int(ascending[-1]) if len(span) else 0
    for t in range(longest - 1):
        live = len(span) - np.searchsorted(ascending, t + 2)
        i = starts[order[:live]] + t
        c = (acc[i] + HALF) >> BITS
        acc[i] -= c * BASE
        acc[i + 1] += c


def _tops(comps: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Where each expansion starts, its top component (0.0 when it has none), and the expansions with more."""
    start = np.zeros(len(lengths), np.int64)
    np.cumsum(lengths[:-1], out=start[1:])
    top = np.zeros(len(lengths))
    has = np.flatnonzero(lengths > 0)
    top[has] = comps[start[has]]
    return start, top, np.flatnonzero(lengths > 1)


def _compress(comps: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The same totals in fewer components (one 21-bit digit each in, up to 53 bits each out): added from
    the top while exact; where an addition rounds, the rounded sum is a component and the error goes on.
    The result is still non-overlapping and exact (TwoSum), so the state of one value is that value."""
    start, s, live = _tops(comps, lengths)
    out = np.zeros(len(comps))
    written = np.zeros(len(lengths), np.int64)
    t = 1
    while len(live):
        a, c = s[live], comps[start[live] + t]
        total = a + c
        back = total - a
        err = (a - (total - back)) + (c - back)
        inexact = err != 0
        rounded = live[inexact]
        out[start[rounded] + written[rounded]] = total[inexact]
        written[rounded] += 1
        s[live] = np.where(inexact, err, total)
        t += 1
        live = live[lengths[live] > t]
    last = np.flatnonzero(s != 0)
    out[start[last] + written[last]] = s[last]
    written[last] += 1
    keep = np.arange(len(comps)) - np.repeat(start, lengths) < np.repeat(written, lengths)
    return out[keep], written


def _round(comps: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Each expansion's sum correctly rounded, by the last step of CPython's math.fsum: add from the top
    while exact, then round half-even across the components below."""
    start, hi, live = _tops(comps, lengths)
    lo = np.zeros(len(lengths))
    nxt = np.ones(len(lengths), np.int64)
    t = 1
    while len(live):
        x, y = hi[live], comps[start[live] + t]
        s = x + y
        d = y - (s - x)
        hi[live], lo[live], nxt[live] = s, d, t + 1
        t += 1
        live = live[(d == 0) & (lengths[live] > t)]
    rest = np.flatnonzero(nxt < lengths)
    below, d = comps[start[rest] + nxt[rest]], lo[rest]
    same = ((d < 0) & (below < 0)) | ((d > 0) & (below > 0))
    rest, y = rest[same], 2.0 * d[same]
    x = hi[rest] + y
    up = (x - hi[rest]) == y
    hi[rest[up]] = x[up]
    return hi


# ---------------------------------------------------------------- exact integer and decimal totals

def _int_pieces(v: np.ndarray) -> np.ndarray:
    """Integers as three base-2**21 digits (the top one signed, or below 2**22 for UInt64)."""
    if v.dtype.kind == "u":
        u = v.astype(np.uint64)
        b = np.uint64(BITS)
        return np.stack([u & np.uint64(MASK), (u >> b) & np.uint64(MASK), u >> (b + b)], axis=1).astype(np.int64)
    x = v.astype(np.int64)
    return np.stack([x & MASK, (x >> BITS) & MASK, x >> (2 * BITS)], axis=1)


def _decimal_pieces(values: pa.Array) -> np.ndarray:
    """Decimal128 values' unscaled 128-bit integers as seven base-2**21 digits (the top one signed)."""
    words = np.frombuffer(values.buffers()[1], np.uint64)[2 * values.offset:2 * (values.offset + len(values))]
    lo, hi = words[0::2], words[1::2].view(np.int64)
    mask = np.uint64(MASK)
    out = np.empty((len(values), 7), np.int64)
    out[:, 0] = lo & mask
    out[:, 1] = (lo >> np.uint64(21)) & mask
    out[:, 2] = (lo >> np.uint64(42)) & mask
    out[:, 3] = (lo >> np.uint64(63)).astype(np.int64) | ((hi & ((1 << 20) - 1)) << 1)
    out[:, 4] = (hi >> 20) & MASK
    out[:, 5] = (hi >> 41) & MASK
    out[:, 6] = hi >> 62
    return out


def _add_digits(g: np.ndarray, digits: np.ndarray, count: int) -> np.ndarray:
    """Per-group totals of each digit column, exactly."""
    return np.stack([_bincount(g, digits[:, k].astype(np.float64), count) for k in range(digits.shape[1])],
                    axis=1) if digits.shape[1] else np.zeros((count, 0), np.int64)


def _balance(d: np.ndarray, *, floor: bool = False) -> np.ndarray:
    """Digits carried so that each but the last lies in [-2**20, 2**20), or with `floor` in [0, 2**21)
    (then they are the value's two's complement bits)."""
    d = d.copy()
    for k in range(d.shape[1] - 1):
        c = d[:, k] >> BITS if floor else (d[:, k] + HALF) >> BITS
        d[:, k] -= c * BASE
        d[:, k + 1] += c
    return d


def _pack(d: np.ndarray) -> np.ndarray:
    """Three balanced digits in one int64 (below 2**63 in magnitude)."""
    return d[:, 0] + d[:, 1] * BASE + d[:, 2] * (BASE * BASE)


def _unpack(w: np.ndarray) -> np.ndarray:
    """The three balanced digits of packed words."""
    w = w.astype(np.int64)
    d0 = ((w + HALF) & MASK) - HALF
    w = (w - d0) >> BITS
    d1 = ((w + HALF) & MASK) - HALF
    return np.stack([d0, d1, (w - d1) >> BITS], axis=1)


def _approx(d: np.ndarray) -> np.ndarray:
    """The digits' value, rounded (to sort the groups that surely fit from the ones to check exactly)."""
    out = np.zeros(len(d))
    for k in range(d.shape[1] - 1, -1, -1):
        out += np.ldexp(d[:, k].astype(np.float64), BITS * k)
    return out


def _exact(d: np.ndarray, i: int) -> int:
    return sum(int(v) << (BITS * k) for k, v in enumerate(d[i]))


def _word(f: np.ndarray, bit: int) -> np.ndarray:
    """Bits bit .. bit + 63 (mod 2**64) of the value of floor-carried digits."""
    out = np.zeros(len(f), np.uint64)
    for k in range(f.shape[1]):
        shift = BITS * k - bit
        if shift >= 64 or shift <= -BITS:
            continue
        v = f[:, k].astype(np.uint64)  # a negative top digit wraps to its two's complement
        out += (v << np.uint64(shift)) if shift >= 0 else (v >> np.uint64(-shift))
    return out


def _int_sum(d: np.ndarray, n: np.ndarray, rt: DType) -> pa.Array:
    lo, hi = T.int_range(rt)
    approx = _approx(d)
    sure = (approx > -2.0 ** 62) & (approx < 2.0 ** 62) if lo < 0 else (approx >= 0) & (approx < 2.0 ** 63)
    for i in np.flatnonzero(~sure & (n > 0)):
        r = _exact(d, i)
        if not lo <= r <= hi:
            raise ExecutionError(f"integer overflow: sum = {r} does not fit in {rt} ({lo}..{hi})")
    word = _word(_balance(d, floor=True), 0)
    return pa.array(word if lo == 0 else word.view(np.int64), rt.to_arrow(), mask=n == 0)


def _decimal_sum(d: np.ndarray, n: np.ndarray, rt: DType) -> pa.Array:
    bound = 10 ** T.MAX_DECIMAL_PRECISION
    for i in np.flatnonzero((np.abs(_approx(d)) >= 9.9e37) & (n > 0)):
        r = _exact(d, i)
        if not -bound < r < bound:
            total = CTX.scaleb(decimal.Decimal(r), -rt.scale)
            raise ExecutionError(f"decimal overflow: sum = {total} does not fit in {rt}")
    f = _balance(d, floor=True)
    words = np.stack([_word(f, 0), _word(f, 64)], axis=1)
    values = pa.Array.from_buffers(rt.to_arrow(), len(d), [None, pa.py_buffer(words.tobytes())])
    return pc.if_else(pa.array(n > 0), values, pa.scalar(None, rt.to_arrow()))


def _mean(d: np.ndarray, n: np.ndarray, t: DType) -> pa.Array:
    """The exact total over the count, rounded once (decimals as the reference divides them)."""
    out = np.zeros(len(d))
    if t.is_decimal:
        for i in np.flatnonzero(n > 0):
            total = CTX.scaleb(decimal.Decimal(_exact(d, i)), -t.scale)
            out[i] = float(CTX.divide(total, int(n[i])))
    else:
        approx = _approx(d)
        exact = np.abs(approx) < 2.0 ** 53  # the total is a float: one correctly rounded division
        out[exact] = approx[exact] / np.maximum(n[exact], 1)
        for i in np.flatnonzero(~exact & (n > 0)):
            out[i] = _exact(d, i) / int(n[i])
    return pa.array(out, pa.float64(), mask=n == 0)


# ---------------------------------------------------------------- min and max

def _extreme(values: pa.Array, g: np.ndarray, count: int, *, largest: bool) -> pa.Array:
    """Each group's least (greatest) value, the first of equal ones; NaN left out (counted apart)."""
    fn = "max" if largest else "min"
    if pa.types.is_duration(values.type):   # Arrow has no min/max kernel for durations: their microseconds'
        return _extreme(values.view(pa.int64()), g, count, largest=largest).view(values.type)
    if pa.types.is_floating(values.type):
        values = pc.if_else(pc.is_nan(values), pa.scalar(None, values.type), values)
    table = pa.table({"g": pa.array(g, pa.int64()), "v": values})
    found = table.group_by("g", use_threads=False).aggregate([("v", fn)])
    out = pa.nulls(count, values.type)
    if found.num_rows:
        where = np.full(count, -1, np.int64)
        where[found.column("g").to_numpy()] = np.arange(found.num_rows)
        out = found.column(f"v_{fn}").combine_chunks().take(pa.array(np.where(where >= 0, where, None)))
    if pa.types.is_floating(values.type):
        out = _first_zero(values, g, out)
    return out


def _first_zero(values: pa.Array, g: np.ndarray, out: pa.Array) -> pa.Array:
    """Where a group's extreme is zero, the first zero of the group: 0.0 or -0.0 as it came."""
    x = values.to_numpy(zero_copy_only=False)
    ext = out.to_numpy(zero_copy_only=False)
    rows = np.flatnonzero(x == 0)
    if not len(rows):
        return out
    groups, at = np.unique(g[rows], return_index=True)
    pick = ext[groups] == 0
    fixed = ext.copy()
    fixed[groups[pick]] = x[rows[at[pick]]]
    return pa.array(fixed, out.type, mask=~out.is_valid().to_numpy(zero_copy_only=False))


def _extreme_result(a: _Arg, table: pa.Table, g: np.ndarray, count: int, n: np.ndarray,
                    *, largest: bool) -> pa.Array:
    fn = "max" if largest else "min"
    column = table.column(f"{a.prefix}.{fn}").combine_chunks()
    found = _extreme(column, g, count, largest=largest)
    if not a.dtype.is_float:
        return found
    nan = _seen(g, table.column(f"{a.prefix}.nan"), count)
    numbers = found.is_valid().to_numpy(zero_copy_only=False)
    nan_wins = nan if largest else nan & ~numbers  # NaN is the largest value
    x = found.to_numpy(zero_copy_only=False).astype(found.type.to_pandas_dtype())
    x[nan_wins] = np.nan
    return pa.array(x, found.type, mask=(n == 0))
