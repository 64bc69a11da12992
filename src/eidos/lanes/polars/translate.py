"""IR -> a Polars LazyFrame: one visitor for plan nodes, one for expressions; nothing runs here.

Every translated expression has exactly the Polars form of its eidos type
(`eidos.ir.typing`), so the pieces compose. Where Polars' own rule differs from
docs/semantics.md the function emits what makes it agree; each place says so
in a comment beginning "eidos:".
"""

from __future__ import annotations

import contextvars
import datetime as _dt
import decimal as _decimal
import itertools
import re
from dataclasses import dataclass, field
from functools import singledispatch

import pyarrow as pa

import polars as pl
from eidos.errors import ExecutionError, UnsupportedError
from eidos.hal import coverage as C
from eidos.hal import fsum
from eidos.hal.arrow import batch_result, read_local
from eidos.hal.cost import in_place
from eidos.hal.coverage import Coverage
from eidos.hal.memo import once
from eidos.ir import dtypes as T
from eidos.ir import expr as E
from eidos.ir import functions as F
from eidos.ir import grammar as G
from eidos.ir import nodes as N
from eidos.ir import sources as S
from eidos.ir import timeformat
from eidos.ir.dtypes import DType
from eidos.ir.evaluate import can_fail, caster, kernel, udf_value, window
from eidos.ir.order import reads_order
from eidos.ir.rewrite import right_output_names
from eidos.ir.schema import Schema
from eidos.ir.typing import adapt, infer, literal_dtype, promote
from eidos.lanes.polars import exact, nulls, share

# --- types ------------------------------------------------------------------

_PL = {
    "Int8": pl.Int8, "Int16": pl.Int16, "Int32": pl.Int32, "Int64": pl.Int64,
    "UInt8": pl.UInt8, "UInt16": pl.UInt16, "UInt32": pl.UInt32, "UInt64": pl.UInt64,
    "Float32": pl.Float32, "Float64": pl.Float64, "Boolean": pl.Boolean, "String": pl.String,
    "Date": pl.Date, "Timestamp": pl.Datetime("us"), "Duration": pl.Duration("us"), "Null": pl.Null, "Binary": pl.Binary,
    "Time": pl.Time,
}


def pl_dtype(t: DType) -> pl.DataType:
    if t.is_decimal:
        return pl.Decimal(t.precision, t.scale)
    if isinstance(t, T.ListType):
        return pl.List(pl_dtype(t.inner))
    if isinstance(t, T.StructType):
        return pl.Struct({n: pl_dtype(f) for n, f in t.fields})
    if t.is_timestamp:
        return pl.Datetime(t.unit, t.tz)
    return _PL[t.name]


def pl_schema(schema: Schema) -> dict[str, pl.DataType]:
    return {n: pl_dtype(t) for n, t in schema.items()}


# --- plan nodes -------------------------------------------------------------

@dataclass
class Ctx:
    """Translation state: a counter for the lane's private column names, and where Python
    callbacks (UDFs, map_batches) leave their exceptions, which Polars re-raises without
    the original chained; execute chains from the one kept here."""

    names: itertools.count = field(default_factory=itertools.count)
    failures: list[BaseException] = field(default_factory=list)
    csv: list[S.CsvSource] = field(default_factory=list)   # read natively: execute names their bad values
    keys: dict[int, int] = field(default_factory=dict)     # while translating: share.keys of the plan's nodes
    done: dict[int, pl.LazyFrame] = field(default_factory=dict)   # and each key's LazyFrame
    facts: dict = field(default_factory=dict)   # source -> its columns that hold no null, when translated

    def temp(self, what: str) -> str:
        return f"__eidos_{what}{next(self.names)}"


_CTX: contextvars.ContextVar[Ctx] = contextvars.ContextVar("eidos_polars_translation")


def _shared(widened: N.Node) -> tuple[N.Node, dict[int, int]]:
    """The widened plan and its nodes' keys, kept together: the keys are by id() of its nodes (only read)."""
    return widened, share.keys(widened)


def to_lazyframe(plan: N.Node, ctx: Ctx | None = None) -> pl.LazyFrame:
    """The whole plan as one LazyFrame whose columns are the plan's, in order."""
    ctx = ctx or Ctx()
    plan, ctx.keys = once(plan, "polars.shared", lambda: _shared(share.widened(plan)))   # plans are immutable
    token = _CTX.set(ctx)
    try:
        return translate(plan, ctx)
    finally:
        ctx.keys, ctx.done = {}, {}
        _CTX.reset(token)


def translate(node: N.Node, ctx: Ctx) -> pl.LazyFrame:
    """`node`'s LazyFrame: equal subtrees get one (share.py says why)."""
    key = ctx.keys[id(node)]
    if key not in ctx.done:
        ctx.done[key] = node_frame(node, ctx)
    return ctx.done[key]


@singledispatch
def node_frame(node: N.Node, ctx: Ctx) -> pl.LazyFrame:
    raise UnsupportedError(f"the polars lane has no translation for node {type(node).__name__}")


@node_frame.register
def _(node: N.Scan, ctx: Ctx) -> pl.LazyFrame:
    if isinstance(node.source, S.CsvSource):
        ctx.csv.append(node.source)
    names = node.columns if node.columns is not None else node.source.schema.names
    schema = node.schema
    everything = node.source.schema.names
    if isinstance(node.source, S.ArrowSource) and node.columns:
        # only the columns read: Polars converts what it is given (strings: a copy into its own layout)
        at = [everything.index(n) for n in dict.fromkeys(names)]
        lf, everything = pl.from_arrow(node.source.table.select(at), rechunk=False).lazy(), [everything[i] for i in at]
    else:
        lf = scan(node.source)
    return lf.select([_conform(column(n, everything), schema[n]) for n in names])


def column(name: str, names) -> pl.Expr:
    """The column `name` of a frame whose columns are `names`. Polars reads '*' and '^...$' in
    pl.col as a wildcard and a pattern, so such names are taken by position instead."""
    if name == "*" or (name.startswith("^") and name.endswith("$")):
        return pl.nth(list(names).index(name))
    return pl.col(name)


def _conform(x: pl.Expr, t: DType) -> pl.Expr:
    # Parquet may hold ms/ns timestamps or dictionary strings; eidos has one form per type.
    return x.cast(pl_dtype(t)) if t != T.Null else x


@singledispatch
def scan(source: S.Source) -> pl.LazyFrame:
    raise UnsupportedError(f"the polars lane cannot read {source.describe()}")


@scan.register
def _(source: S.ParquetSource) -> pl.LazyFrame:
    files = list(source.files)
    if any("://" in f for f in files):
        return _through_arrow(source)   # an object store's: opened with the source's own credentials
    if not source.partitions:
        return pl.scan_parquet(files, glob=False, hive_partitioning=False)
    # eidos's own partition values (docs/api/sources.md), mapped from each row's file, not Polars' hive reading
    path = "__eidos_file"
    lf = pl.scan_parquet(files, glob=False, hive_partitioning=False, include_file_paths=path)
    rows = [source.partition_row(i) for i in range(len(files))]
    return lf.with_columns([
        pl.col(path).replace_strict(files, pl.Series([r[k] for r in rows], dtype=pl_dtype(source.schema[name])),
                                    return_dtype=pl_dtype(source.schema[name])).alias(name)
        for k, name in enumerate(source.partitions)]).drop(path)


@scan.register
def _(source: S.FileSource) -> pl.LazyFrame:
    """NDJSON and IPC files, and CSV files Polars' reader would read otherwise (options, blank lines), are read
    by pyarrow as every lane reads them (eidos.hal.arrow), when the plan runs."""
    schema = pl_schema(source.schema)
    if not isinstance(source, S.CsvSource) or not _native_csv(source):
        return _through_arrow(source)
    # The Flow's schema is given whole (by position: the header line is skipped, not matched, as
    # Polars reads quotes in header names differently), so Polars infers nothing.
    lf = pl.scan_csv(list(source.paths), has_header=False, skip_rows=1 if source.has_header else 0,
                     separator=source.delimiter, schema=schema, glob=False, empty_string_is_null=True)
    # eidos: an empty field is null in every column, quoted ("") or not.
    strings = [n for n, t in source.schema.items() if t == T.String]
    return lf.with_columns([pl.when(pl.col(n) != "").then(pl.col(n)).alias(n) for n in strings]) if strings else lf


def _through_arrow(source: S.FileSource) -> pl.LazyFrame:
    """`source` read by pyarrow (eidos.hal.arrow) when the plan runs."""
    failures = _CTX.get().failures

    def read(_: pl.DataFrame) -> pl.DataFrame:
        try:
            return pl.from_arrow(read_local(source, None), rechunk=False)
        except ExecutionError as error:
            failures.append(error)
            raise

    return pl.LazyFrame({"__eidos_none": [0]}).map_batches(read, schema=pl_schema(source.schema), streamable=False)


def _native_csv(source: S.CsvSource) -> bool:
    """Whether Polars' own CSV reader reads `source` as eidos does: default options, local files, no blank line
    (Arrow's reader skips blank lines, Polars' reads them as rows of nulls)."""
    return (source.null_values == ("",) and source.skip_rows == 0 and source.quote_char == '"' and not source.storage
            and "://" not in source.path and not any(map(_has_blank_lines, source.paths)))


def _has_blank_lines(path: str) -> bool:
    """Whether a CSV file has an empty line (a quoted field holding one counts too: harmless)."""
    import mmap
    import os

    if os.path.getsize(path) == 0:
        return False
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        return m[:1] in (b"\n", b"\r") or m.find(b"\n\n") >= 0 or m.find(b"\n\r\n") >= 0


@scan.register
def _(source: S.ArrowSource) -> pl.LazyFrame:
    return pl.from_arrow(source.table, rechunk=False).lazy()


@node_frame.register
def _(node: N.Filter, ctx: Ctx) -> pl.LazyFrame:
    lf = translate(node.input, ctx)
    # eidos: a null predicate drops the row, as Polars' filter does.
    predicate = expr(node.predicate, Scope(node.input.schema))
    if can_fail(node.predicate, node.input.schema):
        # eidos: computed whole on every row (semantics 9); Polars would split `a & b` and compute the part
        # that can fail only on the rows the other kept. fill_null(False) keeps it one predicate.
        predicate = predicate.fill_null(False)
    return lf.filter(predicate)


@node_frame.register
def _(node: N.Project, ctx: Ctx) -> pl.LazyFrame:
    """What is computed is added by with_columns (a select computing a string column ran TPC-H q22 a third
    slower on the streaming engine, Polars 2.1), then the columns are picked by name. A constant so added is
    one per input row, as eidos says (a select of literals alone would give one row)."""
    lf = translate(node.input, ctx)
    scope = Scope(node.input.schema)
    names = list(node.input.schema.names)
    made = [(name, e) for name, e in node.columns if not (isinstance(e, E.Column) and e.name == name)]
    if made:
        lf = lf.with_columns([expr(e, scope).alias(name) for name, e in made])
        names += [name for name, _ in made if name not in names]
    return lf.select([column(name, names) for name, _ in node.columns])


@node_frame.register
def _(node: N.Aggregate, ctx: Ctx) -> pl.LazyFrame:
    """Two phases: Polars' group_by computes every aggregation once (the leaves); a select over
    the groups then finishes them (exact float sums, overflow checks) and computes what the
    aggregations are combined into (`sum(a) / count()`, keys read outside an aggregation)."""
    lf = translate(node.input, ctx)
    schema = node.input.schema
    rows = Scope(schema)
    aggs = list(dict.fromkeys(a for _, e in node.aggs for a in e.walk() if isinstance(a, E.Agg)))
    keys = {name: ctx.temp("k") for name, _ in node.keys}
    key_types = [(name, infer(e, schema)) for name, e in node.keys]
    if node.keys and in_place(node):   # eidos.hal.fsum.group_by computes it over Polars' buffers
        lf, leaves = keyed_sums(lf, node, aggs, keys, rows, ctx)
    else:
        full = frozenset(a.arg.name for a in aggs if a.fn in ("sum", "n_unique") and isinstance(a.arg, E.Column)
                         and nulls.never_null(node.input, a.arg.name, ctx.facts))
        leaves = {a: leaf(a, rows, ctx, grouped=bool(node.keys), full=full) for a in aggs}
        first = [x.alias(name) for one in leaves.values() for name, x in one.columns]
        if node.keys:
            lf = lf.group_by([group_key(e, rows).alias(keys[name]) for name, e in node.keys]).agg(first)
        else:
            lf = lf.select(first)  # one row, even from none
    groups = Scope(Schema(list(schema.items()) + [(n, t) for n, t in key_types if n not in schema]),
                   keys=keys, leaves=leaves)
    return lf.select([pl.col(keys[name]).alias(name) for name, _ in node.keys]
                     + [expr(e, groups).alias(name) for name, e in node.aggs])


def group_key(e: E.Expr, rows: Scope) -> pl.Expr:
    """A group key as a column of the input's length: Polars groups the rows of an empty frame by a constant
    key into one group (eidos: no rows, no groups)."""
    x = expr(e, rows)
    return x if e.columns() else pl.repeat(x, pl.len())


def keyed_sums(lf, node: N.Aggregate, aggs: list[E.Agg], keys: dict, rows: Scope, ctx: Ctx):
    """The groups and their exact float aggregations in one call of eidos.hal.fsum.group_by over
    the key and argument columns (read in place, no per-group lists): the frame of groups, and
    the leaves that read its columns."""
    names = [ctx.temp("a") for _ in aggs]
    knames = [keys[name] for name, _ in node.keys]
    key_types = {keys[name]: pl_dtype(infer(e, node.input.schema)) for name, e in node.keys}

    def run(df: pl.DataFrame) -> pl.DataFrame:
        first, out = fsum.group_by([_chunks(df[k]) for k in knames], [(a.fn, _chunks(df[n])) for a, n in zip(aggs, names)])
        return df.select(knames)[first].with_columns(pl.Series(n, o, dtype=pl.Float64) for n, o in zip(names, out))

    lf = lf.select([group_key(e, rows).alias(keys[name]) for name, e in node.keys]
                   + [expr(a.arg, rows).alias(n) for a, n in zip(aggs, names)])
    lf = lf.map_batches(run, schema={**key_types, **dict.fromkeys(names, pl.Float64)}, streamable=False)
    return lf, {a: Leaf([], lambda g, n=n: pl.col(n)) for a, n in zip(aggs, names)}


def _chunks(s: pl.Series) -> pa.ChunkedArray:
    """A Series' chunks as Arrow where they lie (Series.to_arrow concatenates the batches Polars
    hands map_batches: a copy of the column)."""
    newest = pl.CompatLevel.newest()
    return pa.chunked_array([c.to_arrow(compat_level=newest) for c in s.get_chunks()],
                            s.head(0).to_arrow(compat_level=newest).type)


@node_frame.register
def _(node: N.Join, ctx: Ctx) -> pl.LazyFrame:
    left, right = translate(node.left, ctx), translate(node.right, ctx)
    ls, rs = node.left.schema, node.right.schema
    # Right columns get private names so nothing clashes; the output is then built column by column.
    rnames = {n: ctx.temp("r") for n in rs.names}
    right = right.rename(rnames)
    if node.how == "cross":
        joined = left.join(right, how="cross")
        return joined.select([column(n, ls.names) for n in ls.names] + _right_outputs(node, rnames))
    lk, rk = [], []
    for a, b in zip(node.left_on, node.right_on):
        common = promote(ls[a], rs[b])
        lk.append(column(a, ls.names).cast(pl_dtype(common)))
        rk.append(pl.col(rnames[b]).cast(pl_dtype(common)))
    # eidos: null keys never match (nulls_equal=False); NaN keys match NaN, as Polars' hashing does.
    joined = left.join(right, left_on=lk, right_on=rk, how=node.how, nulls_equal=False, coalesce=False)
    if node.how in ("semi", "anti"):
        return joined
    cols = []
    keymap = dict(zip(node.left_on, node.right_on))
    out = node.schema
    for n in ls.names:
        if n in keymap:
            t = pl_dtype(out[n])
            x = column(n, ls.names).cast(t)
            if node.how in ("right", "full"):
                # eidos: key columns appear once under the left name, coalesced for right/full joins.
                x = pl.coalesce(x, pl.col(rnames[keymap[n]]).cast(t))
            cols.append(x.alias(n))
        else:
            cols.append(column(n, ls.names))
    return joined.select(cols + _right_outputs(node, rnames))


def _right_outputs(node: N.Join, rnames: dict[str, str]) -> list[pl.Expr]:
    return [pl.col(rnames[n]).alias(name) for name, n in right_output_names(node).items()]


@node_frame.register
def _(node: N.Sort, ctx: Ctx) -> pl.LazyFrame:
    lf = translate(node.input, ctx)
    scope = Scope(node.input.schema)
    # eidos: stable (maintain_order), NaN above every number (Polars' float order), nulls per key.
    return lf.sort([expr(k.expr, scope) for k in node.keys],
                   descending=[k.descending for k in node.keys],
                   nulls_last=[k.nulls_last for k in node.keys], maintain_order=True)


@node_frame.register
def _(node: N.Limit, ctx: Ctx) -> pl.LazyFrame:
    # Polars takes a length up to its index type (UInt32 unless built for 64-bit rows), which also bounds
    # how many rows a frame holds: a longer limit reads to the end.
    most = 2**32 - 1 if pl.get_index_type() == pl.UInt32 else N.MAX_COUNT
    return translate(node.input, ctx).slice(node.offset, node.n if node.n <= most else None)


@node_frame.register
def _(node: N.Distinct, ctx: Ctx) -> pl.LazyFrame:
    # eidos: the first of equal rows stays, in input order; NaN equals NaN and -0.0 equals 0.0.
    return translate(node.input, ctx).unique(keep="first", maintain_order=True)


@node_frame.register
def _(node: N.Unique, ctx: Ctx) -> pl.LazyFrame:
    # eidos: nulls equal, NaN equals NaN, as in Distinct; the kept rows stay in input order.
    return translate(node.input, ctx).unique(subset=list(node.subset), keep=node.keep, maintain_order=True)


@node_frame.register
def _(node: N.Explode, ctx: Ctx) -> pl.LazyFrame:
    names = node.input.schema.names
    return translate(node.input, ctx).explode([column(n, names) for n in node.columns],
                                              empty_as_null=node.empty_as_null, keep_nulls=node.keep_nulls)


@node_frame.register
def _(node: N.AsofJoin, ctx: Ctx) -> pl.LazyFrame:
    """Polars' join_asof on prepared sides: rows with a null `on` or `by` left out, `on` and `by` cast to
    the types they compare in, the right side sorted and cut to one row per (`by`, `on`) (the first by
    content, as eidos picks), both sorted by `on`. The backward and forward candidates come from one
    join_asof each; eidos.ir.asof's expressions choose the nearest and test the tolerance; the left rows
    get the chosen right row back by its index, in their own order."""
    from eidos.ir import asof

    ls, rs = node.left.schema, node.right.schema
    t = pl_dtype(asof.on_type(node))
    idx, j, on = ctx.temp("i"), ctx.temp("j"), ctx.temp("on")
    bys = [ctx.temp("by") for _ in node.left_by]
    by_t = [pl_dtype(promote(ls[a], rs[b], op="join")) for a, b in zip(node.left_by, node.right_by)]
    rnames = {n: ctx.temp("r") for n in rs.names}
    left = translate(node.left, ctx).with_row_index(idx)
    right = translate(node.right, ctx).rename(rnames)
    keyed_l = left.select(idx, column(node.left_on, ls.names).cast(t).alias(on),
                          *[column(n, ls.names).cast(bt).alias(b) for n, b, bt in zip(node.left_by, bys, by_t)])
    keyed_r = right.with_columns(pl.col(rnames[node.right_on]).cast(t).alias(on),
                                 *[pl.col(rnames[n]).cast(bt).alias(b) for n, b, bt in zip(node.right_by, bys, by_t)])
    keyed_l, keyed_r = (x.drop_nulls([on, *bys]) for x in (keyed_l, keyed_r))
    # Right rows sharing (by, on) share their `on` too, so only rows whose `on` ties a neighbour's once sorted
    # by it are sorted by content to keep the first (a full sort by every column was most of the join's time).
    tie = ctx.temp("tie")
    tied = ((pl.col(on) == pl.col(on).shift(1)) | (pl.col(on) == pl.col(on).shift(-1))).fill_null(False)
    keyed_r = keyed_r.sort(on).with_columns(tied.alias(tie)).cache()   # read twice: sorted once
    tied = pl.col(tie)
    firsts = (keyed_r.filter(tied).sort([*bys, on, *rnames.values()], nulls_last=True, maintain_order=True)
              .unique(subset=[*bys, on], keep="first", maintain_order=True).sort(on))
    keyed_r = keyed_r.filter(~tied).merge_sorted(firsts, key=on).drop(tie).with_row_index(j)
    keyed_l = keyed_l.sort(on)
    found = [keyed_l.select(idx, pl.col(on).alias("l"))]   # join_asof keeps the left's rows in order: side by side
    for name, strategy in (("b", "backward"), ("f", "forward")):
        if node.strategy in (strategy, "nearest"):
            side = keyed_r.select(pl.col(j).alias(f"j{name}"), on, *bys)
            hit = keyed_l.join_asof(side, on=on, by=bys or None, strategy=strategy, check_sortedness=False,
                                    coalesce=False, suffix="_r")
            found.append(hit.select(f"j{name}", pl.col(f"{on}_r").alias(name)))
    found = pl.concat(found, how="horizontal").with_columns(
        *[x for name, strategy in (("b", "backward"), ("f", "forward")) if node.strategy not in (strategy, "nearest")
          for x in (pl.lit(None, dtype=pl.UInt32).alias(f"j{name}"), pl.lit(None, dtype=t).alias(name))])
    scope = Scope(asof.schema(node))
    forward = (expr(asof.forward_wins(node), scope).fill_null(False) if node.strategy == "nearest"
               else pl.lit(node.strategy == "forward"))
    found = found.with_columns(m=pl.when(pl.col("jb").is_null() | (pl.col("jf").is_not_null() & forward))
                               .then(pl.col("f")).otherwise(pl.col("b")),
                               **{j: pl.when(pl.col("jb").is_null() | (pl.col("jf").is_not_null() & forward))
                                  .then(pl.col("jf")).otherwise(pl.col("jb"))})
    test = asof.within(node)
    if test is not None:
        found = found.with_columns(pl.when(expr(test, scope)).then(pl.col(j)).alias(j))
    picked = keyed_r.select(j, *[rnames[n] for n in node.right_outputs()])
    out = (left.join(found.select(idx, j), on=idx, how="left", maintain_order="left")
           .join(picked, on=j, how="left", nulls_equal=False, maintain_order="left"))
    taken = set(ls.names)
    cols = []
    for n in node.right_outputs():
        name = n + node.suffix if n in taken else n
        taken.add(name)
        cols.append(pl.col(rnames[n]).alias(name))
    return out.select([column(n, ls.names) for n in ls.names] + cols)


@node_frame.register
def _(node: N.Union, ctx: Ctx) -> pl.LazyFrame:
    return pl.concat([translate(n, ctx) for n in node.inputs], how="vertical", rechunk=False)


@node_frame.register
def _(node: N.MapBatches, ctx: Ctx) -> pl.LazyFrame:
    lf = translate(node.input, ctx)
    fn, in_schema, out_schema = node.fn, node.input.schema.to_arrow(), node.output_schema.to_arrow()
    failures = ctx.failures

    def apply(df: pl.DataFrame) -> pl.DataFrame:
        try:
            return batches(df)
        except ExecutionError as error:
            failures.append(error)
            raise
        except Exception as err:
            error = ExecutionError(f"map_batches function {_fn_name(fn)} raised {type(err).__name__}: {err}")
            error.__cause__ = err
            failures.append(error)
            raise error from err

    def batches(df: pl.DataFrame) -> pl.DataFrame:
        # no rows still make one (empty) batch, so the function is called and its schema checked
        parts = df.to_arrow().cast(in_schema).to_batches() or [_empty_batch(in_schema)]
        outs = [_checked_batch(fn, got, node.output_schema) for got in map(fn, parts)]
        return pl.from_arrow(pa.Table.from_batches(outs, out_schema), rechunk=False)

    # The function sees whole batches in order, so Polars may not stream or reorder around it.
    return lf.map_batches(apply, schema=pl_schema(node.output_schema), streamable=False)


def _empty_batch(schema: pa.Schema) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([pa.array([], type=f.type) for f in schema], schema=schema)


def _checked_batch(fn, got, expected: Schema) -> pa.RecordBatch:
    """A map_batches result as one RecordBatch with exactly the declared schema (hal's check)."""
    if isinstance(got, pa.Table):
        got = got.combine_chunks()
        got = got.to_batches()[0] if got.num_rows else pa.RecordBatch.from_pylist([], got.schema)
    return batch_result(got, expected, _fn_name(fn))


def _fn_name(fn) -> str:
    return getattr(fn, "__qualname__", None) or repr(fn)


# --- expressions ------------------------------------------------------------

@dataclass(frozen=True)
class Scope:
    """What an expression reads: the input schema; after grouping, where the keys and each
    aggregation's first-phase columns are."""

    schema: Schema
    keys: dict[str, str] | None = None  # key name -> its column of the grouped frame; None outside an Aggregate
    leaves: dict | None = None          # Agg -> Leaf: where phase one left each aggregation
    # Inside a when/then branch: the rows that take it. eidos computes a branch only for those
    # rows, so whatever can raise (an overflow check, a cast, a UDF) sees null elsewhere.
    guard: pl.Expr | None = None

    def dtype(self, e: E.Expr) -> DType:
        return infer(e, self.schema, allow_agg=self.keys is not None)

    def narrow(self, rows: pl.Expr) -> Scope:
        return Scope(self.schema, self.keys, self.leaves, rows if self.guard is None else self.guard & rows)

    def mask(self, x: pl.Expr) -> pl.Expr:
        """`x` where this scope's rows are computed, null elsewhere."""
        return x if self.guard is None else pl.when(self.guard).then(x)

    def strict(self, x: pl.Expr, t) -> pl.Expr:
        """`x` cast to Polars type `t`, raising for a value that does not fit (on computed rows only)."""
        return self.mask(x).cast(t, strict=True)


@singledispatch
def expr(e: E.Expr, scope: Scope) -> pl.Expr:
    raise UnsupportedError(f"the polars lane has no translation for expression {type(e).__name__}")


@expr.register
def _(e: E.Column, scope: Scope) -> pl.Expr:
    if scope.keys is not None and e.name in scope.keys:
        return pl.col(scope.keys[e.name])
    return column(e.name, scope.schema.names)


@expr.register
def _(e: E.Literal, scope: Scope) -> pl.Expr:
    return lit(e.value, e.dtype)


def lit(value, t: DType) -> pl.Expr:
    """A constant of eidos type `t` (weak literals arrive here already adapted)."""
    if value is None or t == T.Null:
        return pl.lit(None, dtype=pl_dtype(t))
    if t.is_float:
        value = float(value)
    elif t.is_decimal:
        value = _decimal.Decimal(str(value)) if not isinstance(value, _decimal.Decimal) else value
    elif t.is_timestamp and not isinstance(value, _dt.datetime):
        value = _dt.datetime.combine(value, _dt.time())
    return pl.lit(value, dtype=pl_dtype(t))


@expr.register
def _(e: E.Alias, scope: Scope) -> pl.Expr:
    return expr(e.expr, scope)


def operand(e: E.Expr, t: DType, scope: Scope) -> pl.Expr:
    """`e` translated and brought to type `t`; literals are built in `t` directly."""
    if isinstance(e, E.Literal):
        return lit(e.value, t)
    x = expr(e, scope)
    return x if scope.dtype(e) == t else scope.strict(x, pl_dtype(t))


def operand_types(a: E.Expr, b: E.Expr, scope: Scope, fn: str | None = None) -> tuple[DType, DType]:
    """The operand types after weak literals adapt to the other side (typing's rule; the
    Aggregate-aware form of typing.operand_dtypes)."""
    ta, tb = scope.dtype(a), scope.dtype(b)
    return adapt(a, ta, tb, fn), adapt(b, tb, ta, fn)


@expr.register
def _(e: E.Cast, scope: Scope) -> pl.Expr:
    src = scope.dtype(e.expr)
    x = expr(e.expr, scope)
    dst = e.dtype
    if src == dst:
        return x
    if src == T.Null:
        return pl.lit(None, dtype=pl_dtype(dst))
    if dst == T.Boolean and src.is_numeric:
        # eidos: a number is true when it is not zero (NaN is true).
        return x != lit(0, src)
    if (src.kind, dst.kind) in _PYTHON_CASTS:
        return _in_python(caster(src, dst), [x], [src], dst, scope, f"cast {src} -> {dst}")
    if src == T.String:
        return _parse(x, dst, scope)
    if dst == T.String and src == T.Float64:
        return _float_text(x.cast(pl.String))
    if dst == T.String and src == T.Float32:
        # the shortest digits that give back the float32 (Polars' text), written as Python's repr
        # writes that decimal read as a Float64 (so 0.1f is '0.1'): checked on 230k float32s
        return _float_text(x.cast(pl.String).cast(pl.Float64).cast(pl.String))
    if dst == T.String and src == T.Timestamp:
        # eidos: 'YYYY-MM-DD HH:MM:SS', plus '.ffffff' only when the microseconds are not 0.
        whole = x.dt.strftime("%Y-%m-%d %H:%M:%S")
        return pl.when(x.dt.microsecond() == 0).then(whole).otherwise(x.dt.strftime("%Y-%m-%d %H:%M:%S%.6f"))
    if src == T.Boolean and dst.is_numeric:
        x = x.cast(pl.Int8)  # Polars casts no Boolean to Decimal; 1 / 0 first
    if src.is_decimal and dst.is_decimal and dst.scale < src.scale:
        x = _round_decimal(x, src, dst.scale)   # eidos: half away from zero; Polars' cast would truncate
    # decimal -> int truncates towards zero (Polars too); strict raises out of range.
    # eidos: float -> int truncates and raises out of range (Polars' strict cast does both).
    return scope.strict(x, pl_dtype(dst))


# Casts done row by row with ir.evaluate's own rules: float -> decimal goes through the float's
# shortest text (Polars rounds its binary value: 1.005 -> 1.00, eidos 1.01), and text -> decimal
# or timestamp has spellings of eidos' own.
_PYTHON_CASTS = {("Float32", "Decimal"), ("Float64", "Decimal"), ("String", "Decimal"), ("String", "Timestamp")}


def _float_text(text: pl.Expr) -> pl.Expr:
    """Polars' Float64 text made Python's repr: the digits are already the shortest round-trip
    ones; Polars writes 1e-5 <= |x| < 1e-4 in fixed point, exponents without a leading zero,
    and NaN capitalised."""
    text = text.str.replace(r"^NaN$", "nan").str.replace(r"e([+-])(\d)$", "e${1}0${2}")
    text = text.str.replace(r"^(-?)0\.0000([1-9])$", "${1}${2}e-05")
    return text.str.replace(r"^(-?)0\.0000([1-9])(\d+)$", "${1}${2}.${3}e-05")


def _parse(s: pl.Expr, dst: DType, scope: Scope) -> pl.Expr:
    """String -> dst as docs/semantics.md section 13 says: text eidos rejects is made text Polars
    rejects too ('!' in front), so the strict cast raises for exactly the rows eidos does."""
    t = s.str.strip_chars(G.SPACE)  # all of Python's str.strip() set; Polars' default strips fewer
    if dst.is_integer:
        # via Int128, since Polars will not read "-0" as an unsigned 0
        return scope.strict(scope.strict(_marked(t, G.INTEGER), pl.Int128), pl_dtype(dst))
    if dst.is_float:
        text = _marked(t, G.text_pattern(dst))
        for value, words in G.float_word_groups():
            spelled = "|".join(G.caseless(w).replace("+", "[+]") for w in words)
            text = text.str.replace(f"^(?:{spelled})$", repr(value))
        # parsed as Float64 first, then rounded: the reference's to_f32(float(text))
        return _to_result(scope.strict(text, pl.Float64), dst)
    if dst == T.Boolean:
        bits = (_marked(t, G.text_pattern(dst)).str.replace(f"^{G.caseless('true')}$", "1")
                .str.replace(f"^{G.caseless('false')}$", "0"))
        return scope.strict(bits, pl.Int8) == 1
    if dst == T.Date:
        return scope.mask(_marked(t, G.DATE)).str.to_date("%Y-%m-%d", strict=True)
    if dst == T.String:
        return s
    raise UnsupportedError(f"the polars lane cannot cast String to {dst}")


def _marked(t: pl.Expr, pattern: str) -> pl.Expr:
    """t where it is `pattern` whole, else '!' + t, which no parser reads (a strict cast then raises for
    exactly those rows). Two replaces, each reading its input once: a when/then would repeat t's
    expression three times, so casts through text nested k deep would grow as 3**k (4 levels: 74 s)."""
    return t.str.replace("^", "!").str.replace(f"(?s)^!({pattern})$", "${1}")


def _in_python(fn, args: list[pl.Expr], types: list[DType], res: DType, scope: Scope, what: str) -> pl.Expr:
    """`fn` (an ir.evaluate function of Python values) applied row by row, on the rows this
    scope computes: for the few operations whose exact rules Polars has no form for."""
    failures = _CTX.get().failures
    arrow = [t.to_arrow() for t in types]
    out = res.to_arrow()
    fields = [f"a{i}" for i in range(len(args))]
    guard = scope.guard if scope.guard is not None else pl.lit(True)

    def apply(s: pl.Series) -> pl.Series:
        cols = [s.struct.field(f).to_arrow().cast(t).to_pylist() for f, t in zip(fields, arrow)]
        take = s.struct.field("take").to_list()
        try:
            values = [fn(*row) if ok else None for ok, row in zip(take, zip(*cols))]
        except ExecutionError as error:
            error = ExecutionError(f"{error} (in {what})")
            failures.append(error)
            raise error from None
        return pl.Series(s.name, pa.array(values, type=out))

    packed = pl.struct([a.alias(f) for a, f in zip(args, fields)] + [guard.fill_null(False).alias("take")])
    return packed.map_batches(apply, return_dtype=pl_dtype(res), is_elementwise=True)


@expr.register
def _(e: E.Case, scope: Scope) -> pl.Expr:
    res = scope.dtype(e)
    chain, taken = None, None
    for cond, value in e.branches:
        reach = scope if taken is None else scope.narrow(~taken)
        c = _boolean(cond, reach)
        hit = c.fill_null(False)  # eidos: a null condition counts as false, as in Polars' when/then
        v = operand(value, res, reach.narrow(hit))
        chain = pl.when(c).then(v) if chain is None else chain.when(c).then(v)
        taken = hit if taken is None else taken | hit
    return chain.otherwise(operand(e.otherwise, res, scope.narrow(~taken)))


def _boolean(e: E.Expr, scope: Scope) -> pl.Expr:
    return operand(e, T.Boolean, scope)


@expr.register
def _(e: E.Udf, scope: Scope) -> pl.Expr:
    fn, name = e.fn, _fn_name(e.fn)
    check = udf_value(e.return_dtype)
    out = e.return_dtype.to_arrow()
    args = [expr(a, scope) for a in e.args]
    arrow_types = [scope.dtype(a).to_arrow() for a in e.args]
    fields = [f"a{i}" for i in range(len(args))]
    guard = scope.guard if scope.guard is not None else pl.lit(True)
    failures = _CTX.get().failures

    def call(*values):
        try:
            result = fn(*values)
        except Exception as err:
            error = ExecutionError(f"udf {name} raised {type(err).__name__}: {err} (arguments {values!r})")
            error.__cause__ = err
            failures.append(error)
            raise error from err
        try:
            return check(result)
        except ExecutionError as err:
            error = ExecutionError(f"udf {name} {err} (declared return_dtype {e.return_dtype}; arguments {values!r})")
            failures.append(error)
            raise error from None

    def apply(s: pl.Series) -> pl.Series:
        # Arrow gives each value as the Python object the reference lane passes (Decimal, date, ...).
        cols = [s.struct.field(f).to_arrow().cast(t).to_pylist() for f, t in zip(fields, arrow_types)]
        take = s.struct.field("take").to_list()
        rows = zip(*cols) if cols else [()] * len(take)
        values = [call(*row) if ok else None for ok, row in zip(take, rows)]
        return pl.Series(s.name, pa.array(values, type=out))

    # a column to run along (a UDF of no arguments is still called once per row)
    along = [_any_column(scope).is_null().alias("along")] if not args else []
    packed = pl.struct([a.alias(f) for a, f in zip(args, fields)] + along + [guard.fill_null(False).alias("take")])
    return packed.map_batches(apply, return_dtype=pl_dtype(e.return_dtype), is_elementwise=True)


def _any_column(scope: Scope) -> pl.Expr:
    """Some column of the frame the scope's expressions run over."""
    if scope.keys:
        return pl.col(next(iter(scope.keys.values())))
    if scope.leaves:
        return pl.col(next(iter(scope.leaves.values())).columns[0][0])
    return column(scope.schema.names[0], scope.schema.names)


@expr.register
def _(e: E.Call, scope: Scope) -> pl.Expr:
    if scope.dtype(e) == T.Null:
        return pl.lit(None)
    try:
        rule = CALLS[e.fn]
    except KeyError:
        raise UnsupportedError(f"the polars lane has no translation for function {e.fn}") from None
    return rule(e, scope)


def _rules(table: dict):
    """A decorator that files a rule in `table` under each name it is given."""
    def names(*fns: str):
        def register(f):
            for n in fns:
                table[n] = f
            return f
        return register
    return names


CALLS: dict = {}
call = _rules(CALLS)


def _wide(t: DType, fn: str) -> pl.DataType:
    """A type in which `fn` of two values of integer type `t` cannot overflow."""
    if t.bits <= 16 or (t.bits == 32 and (t.is_signed_integer or fn != "mul")):
        return pl.Int64
    if t.bits == 32:
        return pl.UInt64
    if t.is_unsigned_integer and fn == "mul":
        return pl.UInt128
    return pl.Int128


def _nonzero(y: pl.Expr) -> pl.Expr:
    """`y` with zeros made null: eidos division by zero is null, for every numeric type."""
    return pl.when(y != 0).then(y)


_ARITH = {"add": lambda x, y: x + y, "sub": lambda x, y: x - y, "mul": lambda x, y: x * y,
          "floordiv": lambda x, y: x // y, "mod": lambda x, y: x % y}


@call("add", "sub", "mul", "truediv", "floordiv", "mod", "pow")
def _(e: E.Call, scope: Scope) -> pl.Expr:
    a, b = e.args
    ta, tb = operand_types(a, b, scope, e.fn)
    res = scope.dtype(e)
    fn = e.fn
    if res == T.String:   # + of two strings joins them; null if either is
        return operand(a, res, scope) + operand(b, res, scope)
    if ta.is_temporal or tb.is_temporal or T.Duration in (ta, tb):
        return _date_arith(e, ta, tb, scope)
    if fn == "pow":
        # eidos: IEEE pow computed in Float64 (a Float32 result is rounded from it).
        x, y = operand(a, T.Float64, scope), operand(b, T.Float64, scope)
        return _to_result(x.pow(y), res)
    if fn == "truediv" or res.is_float:
        x, y = operand(a, res, scope), operand(b, res, scope)
        if fn in ("truediv", "floordiv") and not b.columns():
            y = _as_column(y, x, res)
        if fn == "truediv":
            return x / _nonzero(y)
        if fn == "mod":
            return _to_result(_float_mod(x.cast(pl.Float64), _nonzero(y).cast(pl.Float64)), res)
        if fn == "floordiv":
            # floor(a / b), as Polars computes it; in Float64, since a Float32 quotient rounded
            # first can floor differently
            return _to_result(x.cast(pl.Float64) // _nonzero(y).cast(pl.Float64), res)
        return _ARITH[fn](x, y)
    if res.is_integer:
        x, y = operand(a, res, scope), operand(b, res, scope)
        if fn == "mod" and res.is_unsigned_integer:
            return x % y  # Polars: x % 0 is null
        if fn == "floordiv" and res.is_unsigned_integer:
            return x // y  # Polars floors, and x // 0 is null
        # eidos: integer overflow raises; Polars wraps, so compute where it cannot overflow and
        # cast back strictly (a value out of range fails the cast, which execute reports).
        wide = _wide(res, fn)
        return scope.strict(_ARITH[fn](x.cast(wide), y.cast(wide)), pl_dtype(res))
    # decimals
    if fn in ("add", "sub"):
        work = T.Decimal(38, res.scale)
        x, y = operand(a, work, scope), operand(b, work, scope)
        return scope.strict(_ARITH[fn](scope.mask(x), y), pl_dtype(res))
    if fn == "mul":
        # eidos: a product keeps the full scale sa + sb; Polars keeps max(sa, sb), so widen the
        # left operand's scale first (its product is then exact at scale sa + sb).
        sa, sb = _scale(ta), _scale(tb)
        x = operand(a, T.Decimal(38, sa + sb), scope)
        y = operand(b, T.Decimal(38, sb), scope)
        return scope.strict(scope.mask(x) * y, pl_dtype(res))
    common = _decimal_common(ta, tb)
    x, y = operand(a, common, scope), operand(b, common, scope)
    # Polars raises on decimal division by zero; eidos gives null.
    return scope.strict(_ARITH[fn](scope.mask(x), _nonzero(y)), pl_dtype(res))


def _as_column(y: pl.Expr, like: pl.Expr, res: DType) -> pl.Expr:
    """A constant divisor as a column as long as `like`. Polars divides a column by a scalar as a product
    with the scalar's reciprocal, which is not IEEE division (x / 3.0 is one ulp off for about a third of
    the values); adding a zero computed from `like` gives a column Polars cannot fold back into a scalar.
    (A zero divisor's sign is lost, which does not matter: dividing by zero is null.)"""
    return y + like.is_null().cast(pl_dtype(res)) * 0


def _to_result(x: pl.Expr, res: DType) -> pl.Expr:
    return x if res == T.Float64 else x.cast(pl_dtype(res))


def _float_mod(x: pl.Expr, y: pl.Expr) -> pl.Expr:
    """Python's float %: the sign of the divisor, from the exact fmod. Polars computes
    a - b * floor(a / b), which is not exact (1.0 % 0.1 gives 0.0, not 0.09999999999999995)."""
    r = pl.struct([x.alias("a"), y.alias("b")]).map_batches(exact.fmod, return_dtype=pl.Float64, is_elementwise=True)
    signed_zero = pl.when(y < 0).then(pl.lit(-0.0)).otherwise(pl.lit(0.0))
    adjusted = pl.when((r < 0) != (y < 0)).then(r + y).otherwise(r)
    out = pl.when(r != 0).then(adjusted).otherwise(signed_zero)
    return pl.when(x.is_not_null() & y.is_not_null()).then(out)


def _scale(t: DType) -> int:
    return t.scale if t.is_decimal else 0


def _decimal_common(ta: DType, tb: DType) -> DType:
    scale = max(_scale(ta), _scale(tb))
    return T.Decimal(38, scale)


def _date_arith(e: E.Call, ta: DType, tb: DType, scope: Scope) -> pl.Expr:
    a, b = e.args
    if ta == T.Date and tb == T.Date:
        # eidos: date - date is a whole number of days, Int64.
        return operand(a, T.Date, scope).cast(pl.Int64) - operand(b, T.Date, scope).cast(pl.Int64)
    res = scope.dtype(e)
    if res in (T.Timestamp, T.Duration):  # in microseconds: Timestamp ± Duration, Duration ± Duration
        x, y = (operand(v, T.Timestamp if t.is_temporal else t, scope).cast(pl.Int64).cast(pl.Int128)
                for v, t in ((a, ta), (b, tb)))
        total = x + y if e.fn == "add" else x - y
        if res == T.Timestamp:  # eidos: outside years 1..9999 raises; send it where the Int64 cast fails
            total = _outside_to(total, _FIRST_US, _LAST_US, 2**80)
        return scope.strict(total, pl.Int64).cast(_PL[res.name])
    date, days = (a, b) if ta == T.Date else (b, a)
    d = operand(date, T.Date, scope).cast(pl.Int32).cast(pl.Int128)
    n = expr(days, scope) if not isinstance(days, E.Literal) else pl.lit(days.value)
    n = n.cast(pl.Int128)
    # eidos: date +/- days; a result outside 0001-01-01..9999-12-31 raises. Polars' Date reaches
    # much further, so send what is outside to a value the strict cast to Int32 days rejects.
    total = _outside_to(d + n if e.fn == "add" else d - n, _FIRST_DAY, _LAST_DAY, 2**40)
    return scope.strict(total, pl.Int32).cast(pl.Date)


def _outside_to(x: pl.Expr, lo: int, hi: int, far: int) -> pl.Expr:
    """Int128 `x` with the values outside lo..hi made `far`, computed per batch on the Series: an expression
    would read `x` three times (the test, the value, nulls), and chained date arithmetic would grow as 3**k."""
    def batch(s: pl.Series) -> pl.Series:
        v = pl.col(s.name)
        return s.to_frame().select(pl.when(v.is_between(lo, hi) | v.is_null()).then(v)
                                   .otherwise(pl.lit(far, pl.Int128))).to_series()
    return x.map_batches(batch, return_dtype=pl.Int128, is_elementwise=True)


_EPOCH = _dt.date(1970, 1, 1)
_FIRST_DAY = (_dt.date.min - _EPOCH).days
_LAST_DAY = (_dt.date.max - _EPOCH).days
_FIRST_US, _LAST_US = _FIRST_DAY * 86_400_000_000, (_LAST_DAY + 1) * 86_400_000_000 - 1


@call("eq", "ne", "lt", "le", "gt", "ge")
def _(e: E.Call, scope: Scope) -> pl.Expr:
    a, b = e.args
    x, y = _comparable(a, b, scope)
    return {"eq": x.eq, "ne": x.ne, "lt": x.lt, "le": x.le, "gt": x.gt, "ge": x.ge}[e.fn](y)


def _comparable(a: E.Expr, b: E.Expr, scope: Scope) -> tuple[pl.Expr, pl.Expr]:
    """Both operands in the type they are compared in (evaluate.comparison_domain)."""
    ta, tb = operand_types(a, b, scope)
    if T.Null in (ta, tb):
        t = tb if ta == T.Null else ta
        return operand(a, t, scope), operand(b, t, scope)
    common = promote(ta, tb)
    if common.is_decimal:
        # Decimals compare exactly whatever their scales (Polars does too); integers join at scale 0.
        x = operand(a, ta if ta.is_decimal else T.Decimal(38, 0), scope)
        y = operand(b, tb if tb.is_decimal else T.Decimal(38, 0), scope)
        return x, y
    # eidos: NaN equals NaN and sorts above every number, as in Polars' float comparisons.
    return operand(a, common, scope), operand(b, common, scope)


@call("and", "or")
def _(e: E.Call, scope: Scope) -> pl.Expr:
    x, y = (_boolean(arg, scope) for arg in e.args)
    # eidos: Kleene logic (false & null = false, true | null = true), as Polars does.
    return x & y if e.fn == "and" else x | y


@call("not")
def _(e: E.Call, scope: Scope) -> pl.Expr:
    return ~_boolean(e.args[0], scope)


@call("neg", "abs")
def _(e: E.Call, scope: Scope) -> pl.Expr:
    t = scope.dtype(e)
    x = operand(e.args[0], t, scope)
    if t.is_integer:
        # eidos: -min and abs(min) overflow and raise; Polars wraps.
        w = x.cast(_wide(t, "add"))
        return scope.strict((0 - w) if e.fn == "neg" else w.abs(), pl_dtype(t))  # Polars has no i128 neg
    return -x if e.fn == "neg" else x.abs()


@call("sqrt", "exp", "log", "log10", "sin", "cos", "tanh")
def _(e: E.Call, scope: Scope) -> pl.Expr:
    # eidos: computed in Float64 (a Float32 result rounded from it); sqrt of a negative is NaN,
    # log(0) is -inf, log of a negative NaN: IEEE, as Polars.
    x = operand(e.args[0], T.Float64, scope)
    if e.fn == "log10":  # Polars' log10 is ln(x) / ln(10): 2.9999999999999996 for 1000, not C's log10
        return _to_result(_in_python(kernel("log10", (), (T.Float64,), T.Float64), [x], [T.Float64], T.Float64,
                                     scope, "log10"), scope.dtype(e))
    return _to_result(getattr(x, e.fn)(), scope.dtype(e))


@call("round")
def _(e: E.Call, scope: Scope) -> pl.Expr:
    (decimals,) = e.options
    t, res = scope.dtype(e.args[0]), scope.dtype(e)
    x = operand(e.args[0], t, scope)
    if t.is_integer:
        return x if decimals >= 0 else _round_int(x, -decimals, res, scope)
    if t.is_decimal:
        if decimals < 0:  # Polars rounds decimals to places after the point only
            f = kernel("round", e.options, (t,), res)
            return _in_python(f, [x], [t], res, scope, f"round({decimals})")
        return scope.strict(_round_decimal(x, t, decimals) if decimals < t.scale else x, pl_dtype(res))
    return _to_result(_round_float(x.cast(pl.Float64), decimals), res)


def _round_decimal(x: pl.Expr, t: DType, places: int) -> pl.Expr:
    """Decimal `x` of type `t` rounded half away from zero to `places` < t.scale places. Polars' round
    keeps t's scale and one more digit, at most 38, so near the top of 38 digits (10**28 - 1e-10 as
    Decimal(38, 10)) it overflowed: there the integer part (the cast truncates toward zero) and the
    fraction are rounded apart (twice the time)."""
    if t.precision < 38:
        return x.round(places, mode="half_away_from_zero")
    whole = x.cast(pl.Int128)
    frac = (x - whole.cast(pl_dtype(t))).round(places, mode="half_away_from_zero")
    out = pl.Decimal(38, places)
    return whole.cast(out) + frac.cast(out)


def _round_float(x: pl.Expr, decimals: int) -> pl.Expr:
    """The reference's float rounding, step for step: scale by 10**d, round half away from
    zero, scale back. (Polars' own round rounds the decimal text: 2.675 -> 2.68, not 2.67.)"""
    def half_away(y: pl.Expr) -> pl.Expr:
        r = pl.when(y >= 0).then(y.floor()).otherwise(y.ceil())
        return pl.when((y - r).abs() >= 0.5).then(r + y.sign()).otherwise(r)

    if decimals >= 0:
        p = 10.0 ** decimals
        y = x * p
        return pl.when(y.is_finite()).then(half_away(y) / p).otherwise(x)
    p = 10.0 ** -decimals
    return pl.when(x.is_finite()).then(half_away(x / p) * p).otherwise(x)


def _round_int(x: pl.Expr, digits: int, res: DType, scope: Scope) -> pl.Expr:
    """Round an integer to a multiple of 10**digits, half away from zero; overflow raises."""
    if digits > 20:  # the step is above twice any 64-bit value: everything rounds to 0
        return pl.when(x.is_not_null()).then(lit(0, res))
    step = 10 ** digits
    w = x.cast(pl.Int128)
    q, r = w.abs() // step, w.abs() % step
    up = (q + (2 * r >= step).cast(pl.Int128)) * step
    return scope.strict(pl.when(w < 0).then(0 - up).otherwise(up), pl_dtype(res))


@call("floor", "ceil")
def _(e: E.Call, scope: Scope) -> pl.Expr:
    t, res = scope.dtype(e.args[0]), scope.dtype(e)
    x = operand(e.args[0], t, scope)
    if t.is_integer:
        return x
    if t.is_decimal and t.precision == 38:   # Polars' keeps the scale: it overflows near 38 digits' top
        whole = x.cast(pl.Int128)   # truncated toward zero
        step = (x > whole.cast(pl_dtype(t)) if e.fn == "ceil" else x < whole.cast(pl_dtype(t))).cast(pl.Int128)
        return scope.strict(whole + step if e.fn == "ceil" else whole - step, pl_dtype(res))
    y = x.floor() if e.fn == "floor" else x.ceil()
    return scope.strict(y, pl_dtype(res))


@call("is_null")
def _(e: E.Call, scope: Scope) -> pl.Expr:
    return expr(e.args[0], scope).is_null()  # NaN is a value, not null


@call("is_not_null")
def _(e: E.Call, scope: Scope) -> pl.Expr:
    return expr(e.args[0], scope).is_not_null()


@call("fill_null")
def _(e: E.Call, scope: Scope) -> pl.Expr:
    res = scope.dtype(e)
    a, b = e.args
    return operand(a, res, scope).fill_null(operand(b, res, scope))


@call("is_in")
def _(e: E.Call, scope: Scope) -> pl.Expr:
    (values,) = e.options
    t = scope.dtype(e.args[0])
    x = expr(e.args[0], scope)
    present = [v for v in values if v is not None]
    common = t
    for v in present:  # eidos: compared in the promotion of the column and the values' own types
        common = promote(common, literal_dtype(v))
    if not present:   # no value to match: a miss, null where the list holds a null (as below)
        miss = pl.lit(None if values else False, dtype=pl.Boolean)
        return pl.when(x.is_null()).then(pl.lit(None, dtype=pl.Boolean)).otherwise(miss)
    xs = x if common == t else x.cast(pl_dtype(common))
    # eidos: a null input gives null, as Polars' is_in does (nulls_equal=False); a null in the list makes
    # a miss null, as x = a OR x = null would be (Kleene).
    hit = xs.is_in(pl.lit(pl.Series([_value(v, common) for v in present], dtype=pl_dtype(common))).implode())
    return pl.when(hit).then(True).otherwise(pl.lit(None, dtype=pl.Boolean)) if len(present) < len(values) else hit


def _value(v, t: DType):
    if t.is_float:
        return float(v)
    if t.is_decimal:
        return _decimal.Decimal(str(v))
    if t.is_timestamp and not isinstance(v, _dt.datetime):
        return _dt.datetime.combine(v, _dt.time())
    return v


@call("is_between")
def _(e: E.Call, scope: Scope) -> pl.Expr:
    x, lo, hi = e.args
    a, b = _comparable(x, lo, scope)
    c, d = _comparable(x, hi, scope)
    # eidos: inclusive both ends; Kleene and.
    return (a >= b) & (c <= d)


@call("str_contains", "str_starts_with", "str_ends_with")
def _(e: E.Call, scope: Scope) -> pl.Expr:
    x = expr(e.args[0], scope).str
    (s,) = e.options
    # eidos: literal text, not a pattern.
    if e.fn == "str_contains":
        return x.contains(s, literal=True)
    return x.starts_with(s) if e.fn == "str_starts_with" else x.ends_with(s)


@call("str_contains_regex")
def _(e: E.Call, scope: Scope) -> pl.Expr:
    from eidos.ir.regex import render

    return expr(e.args[0], scope).str.contains(render(e.options[0], "rust"))


@call(*F.REPLACE)
def _(e: E.Call, scope: Scope) -> pl.Expr:
    from eidos.ir.regex import render, replacement, rewrite

    x = expr(e.args[0], scope).str
    pattern, value, *n = e.options
    if e.fn.endswith("_regex"):
        pattern, value = render(pattern, "rust", capture=True), rewrite(replacement(pattern, value), "rust")
    literal = not e.fn.endswith("_regex")
    if e.fn.startswith("str_replace_all"):
        return x.replace_all(pattern, value, literal=literal)
    return x.replace(pattern, value, literal=literal, n=n[0] if n else 1)


@call(*F.SPLIT)
def _(e: E.Call, scope: Scope) -> pl.Expr:
    return expr(e.args[0], scope).str.split(e.options[0], inclusive=e.fn == "str_split_inclusive")


@call(*F.STRIP)
def _(e: E.Call, scope: Scope) -> pl.Expr:
    x = expr(e.args[0], scope).str
    chars = F.WHITESPACE if e.options[0] is None else e.options[0]
    return {"str_strip_chars": x.strip_chars, "str_strip_chars_start": x.strip_chars_start,
            "str_strip_chars_end": x.strip_chars_end}[e.fn](chars)


@call("str_like")
def _(e: E.Call, scope: Scope) -> pl.Expr:
    (pattern,) = e.options
    return expr(e.args[0], scope).str.contains(G.like_as_regex(pattern))


@call("str_to_lower", "str_to_upper")
def _(e: E.Call, scope: Scope) -> pl.Expr:
    x = expr(e.args[0], scope)
    lower = e.fn == "str_to_lower"
    mapped = x.str.to_lowercase() if lower else x.str.to_uppercase()
    # eidos: Python's full case mapping. Rust's (Polars') agrees except on code points its newer
    # Unicode tables know and Python's do not; rows holding one are mapped by Python.
    odd = exact.case_differences(lower)
    if not odd:
        return mapped
    method = str.lower if lower else str.upper

    def mend(s: pl.Series) -> pl.Series:
        text, out, hit = s.struct.field("x"), s.struct.field("m"), s.struct.field("odd")
        rows = hit.fill_null(False).arg_true()
        if len(rows) == 0:
            return out
        return out.scatter(rows, [method(v) for v in text.gather(rows).to_list()])

    hit = x.str.contains("[" + "".join(re.escape(c) for c in odd) + "]")
    packed = pl.struct([x.alias("x"), mapped.alias("m"), hit.alias("odd")])
    return packed.map_batches(mend, return_dtype=pl.String, is_elementwise=True)


@call("str_len")
def _(e: E.Call, scope: Scope) -> pl.Expr:
    # eidos: length in code points, Int64.
    return expr(e.args[0], scope).str.len_chars().cast(pl.Int64)


@call("str_slice")
def _(e: E.Call, scope: Scope) -> pl.Expr:
    offset, length = e.options
    # eidos: offset from 0 in code points, negative counts from the end; None runs to the end.
    return expr(e.args[0], scope).str.slice(offset, length)


@call(*F.DATE_PARTS, *F.TIME_PARTS)
def _(e: E.Call, scope: Scope) -> pl.Expr:
    # eidos: every part is Int32; weekday is ISO (1 = Monday), as Polars'.
    return getattr(expr(e.args[0], scope).dt, e.fn[len("dt_"):])().cast(pl.Int32)


@call(*F.ZONES, "dt_time")
def _(e: E.Call, scope: Scope) -> pl.Expr:
    # eidos's rules are Polars' own: a wall-clock time a zone skips or repeats raises (ambiguous="raise").
    x = expr(e.args[0], scope)
    if e.fn == "dt_time":
        return x.dt.time()
    return getattr(x.dt, e.fn[len("dt_"):])(e.options[0])


@call("struct_field")
def _(e: E.Call, scope: Scope) -> pl.Expr:
    return expr(e.args[0], scope).struct.field(e.options[0])


@call("struct")
def _(e: E.Call, scope: Scope) -> pl.Expr:
    return pl.struct([expr(a, scope).alias(n) for a, n in zip(e.args, e.options[0])])


@call(*F.DURATION_TOTALS)
def _(e: E.Call, scope: Scope) -> pl.Expr:
    # eidos: whole units toward zero, Int64, as Polars' own.
    return getattr(expr(e.args[0], scope).dt, e.fn[len("dt_"):])().cast(pl.Int64)


@call("dt_strftime")
def _(e: E.Call, scope: Scope) -> pl.Expr:
    # eidos's codes are chrono's, but %f: six digits of microseconds (chrono's %f is nanoseconds).
    fmt = timeformat.spelled(timeformat.parse_format(e.options[0]), {"f": "%6f"}, lambda x: x.replace("%", "%%"))
    return expr(e.args[0], scope).dt.strftime(fmt)


@call("str_to_date", "str_to_datetime")
def _(e: E.Call, scope: Scope) -> pl.Expr:
    # eidos: the text must match the format's fixed widths (a regular expression checks it first), then
    # chrono reads it; text that does not, or names no real date, raises (strict) or is null.
    strict, parts = e.options[1], timeformat.parse_format(e.options[0], parsing=True)
    s = expr(e.args[0], scope)
    to = pl.Date if e.fn == "str_to_date" else pl.Datetime("us")
    read = s.str.strptime(to, timeformat.spelled(parts, {"f": "%6f"}, lambda x: x.replace("%", "%%")),
                          strict=False, exact=True)
    ok = s.str.contains("^" + timeformat.pattern(parts) + "$") & read.is_not_null()
    if not strict:
        return pl.when(ok).then(read)
    number = pl.Int32 if e.fn == "str_to_date" else pl.Int64
    value = pl.when(ok | s.is_null()).then(read.cast(number).cast(pl.Int128)).otherwise(pl.lit(2**80, pl.Int128))
    return scope.strict(value, number).cast(to)


@call("dt_truncate")
def _(e: E.Call, scope: Scope) -> pl.Expr:
    # eidos's truncation is Polars' (ir/durations.py): the canonical duration text reads the same there.
    # A date is truncated as its midnight (Polars refuses "1d12h" on dates, which eidos takes).
    x = expr(e.args[0], scope)
    if scope.dtype(e.args[0]) == T.Date:
        return x.cast(pl.Datetime("us")).dt.truncate(e.options[0]).cast(pl.Date)
    return x.dt.truncate(e.options[0])


# --- aggregations -------------------------------------------------------------

@dataclass
class Leaf:
    """One aggregation: the columns group_by computes for it, and how the select over the groups
    finishes them into the eidos value."""

    columns: list[tuple[str, pl.Expr]]
    finish: object  # (Scope) -> pl.Expr


@expr.register
def _(e: E.Agg, scope: Scope) -> pl.Expr:
    if scope.leaves is None or e not in scope.leaves:
        raise UnsupportedError(f"the polars lane found aggregation {e} outside an Aggregate")
    return scope.leaves[e].finish(scope)


def leaf(e: E.Agg, rows: Scope, ctx: Ctx, *, grouped: bool, full: frozenset[str] = frozenset()) -> Leaf:
    """Phase one of aggregation `e` over the rows of each group, and its finish. `full`: the input's
    columns that hold no null (nulls.py): a group's integer or decimal sum of one is never of no values,
    and n_unique of one has no null to leave out."""
    name = ctx.temp("a")
    res = infer(e, rows.schema, allow_agg=True)
    try:
        rule = AGGREGATIONS[e.fn]
    except KeyError:
        raise UnsupportedError(f"the polars lane has no translation for aggregation {e.fn}") from None
    if e.arg is None:
        return rule(e.fn, None, None, res, name, grouped)
    t = rows.dtype(e.arg)
    x = expr(e.arg, rows)
    if isinstance(e.arg, E.Column) and e.arg.name in full:
        if e.fn == "sum" and grouped and not t.is_float:
            total, finish = _total(x, t, res)
            return Leaf([(name, total)], lambda g: finish(g, pl.col(name)))
        if e.fn == "n_unique":   # no null to drop (drop_nulls made Polars gather each group's values)
            return Leaf([(name, x.n_unique())], lambda g: pl.col(name).cast(pl.Int64))
    if not e.arg.columns():
        # eidos: an aggregation of a constant sees it once per row; Polars would see one value
        # (n_unique(lit) over no rows would be 1), so spread it over the rows of an input column.
        anchor = column(rows.schema.names[0], rows.schema.names).is_null().is_not_null()
        x = pl.when(anchor).then(x)
    return rule(e.fn, x, t, res, name, grouped, *e.options)


# Each rule: (fn, the argument's expression and type (None for count_rows), the result type, the
# leaf's column name, whether rows are grouped, then the aggregation's options) -> Leaf.
AGGREGATIONS: dict = {}
aggregation = _rules(AGGREGATIONS)


@aggregation("count_rows")
def _(fn, x, t, res, name, grouped) -> Leaf:
    return Leaf([(name, pl.len())], lambda g: pl.col(name).cast(pl.Int64))


@aggregation("count")
def _(fn, x, t, res, name, grouped) -> Leaf:
    return Leaf([(name, x.count())], lambda g: pl.col(name).cast(pl.Int64))


@aggregation("n_unique")
def _(fn, x, t, res, name, grouped) -> Leaf:
    # eidos: null is not a value here; NaN counts once, -0.0 with 0.0.
    return Leaf([(name, x.drop_nulls().n_unique())], lambda g: pl.col(name).cast(pl.Int64))


@aggregation("min", "max")
def _(fn, x, t, res, name, grouped) -> Leaf:
    if fn == "max":
        # eidos: NaN is above every number, so max of a column with NaN is NaN.
        return Leaf([(name, x.nan_max() if t.is_float else x.max())], lambda g: pl.col(name))
    return Leaf([(name, x.min())], lambda g: pl.col(name))  # Polars' min ranks NaN above numbers


@aggregation("std", "var")
def _exact(fn, x, t, res, name, grouped) -> Leaf:
    # eidos: float sums correctly rounded (math.fsum), std/var exact; Polars adds in its own
    # order (1e308 + 1.0 - 1e308 is 0.0) and its one-pass variance loses 2**62 + 1. Each
    # group's values are gathered, and one Python call per batch of groups finishes them;
    # without keys the column itself goes to that call (no list is built).
    values = (x if t != T.Null else x.cast(pl.Float64)).drop_nulls()
    if not grouped and t.is_float:
        return Leaf([(name, x.map_batches(exact.exact_total(fn), return_dtype=pl.Float64, returns_scalar=True))],
                    lambda g: pl.col(name))
    return Leaf([(name, values if grouped else values.implode())],  # in a group_by: a list already
                lambda g: pl.col(name).map_batches(exact.exact_aggregation(fn, t if t != T.Null else T.Float64),
                                                   return_dtype=pl.Float64))


@aggregation("first", "last")
def _(fn, x, t, res, name, grouped) -> Leaf:
    return Leaf([(name, x.first() if fn == "first" else x.last())], lambda g: pl.col(name))


@aggregation("implode")
def _(fn, x, t, res, name, grouped) -> Leaf:
    return Leaf([(name, x.implode())], lambda g: pl.col(name))


@aggregation("arg_min", "arg_max")
def _(fn, x, t, res, name, grouped) -> Leaf:
    # The first row holding the extreme, NaN the largest value: Polars' own arg_min and arg_max pass over
    # NaN while numbers remain, and its streaming engine gives a position within a batch (Polars 2.1).
    if fn == "arg_min":
        best = x.min()    # Polars' min ranks NaN above numbers
    else:
        best = x.nan_max() if t.is_float else x.max()
    hit = (x == best) | (x.is_nan() & best.is_nan()) if t.is_float else x == best
    return Leaf([(name, pl.int_range(pl.len(), dtype=pl.Int64).filter(hit).first())], lambda g: pl.col(name))


@aggregation("median")
def _(fn, x, t, res, name, grouped) -> Leaf:
    return _quantile(fn, x, t, res, name, grouped, 0.5, "midpoint")


def _midpoint(a: pl.Expr, b: pl.Expr, t: DType) -> pl.Expr:
    """The exact midpoint of a <= b rounded once (Polars' median computes lo + (hi - lo) / 2: inf for
    -1e308 and 1e308); integers summed in 128 bits."""
    if t.is_integer:
        return (a.cast(pl.Int128) + b.cast(pl.Int128)).cast(pl.Float64) / 2
    a, b = a.cast(pl.Float64), b.cast(pl.Float64)
    small = (a.abs() <= 2.0**1022) & (b.abs() <= 2.0**1022)  # a + b cannot overflow; halving a tiny sum is exact
    return pl.when(a == b).then(a).when(small).then((a + b) / 2).otherwise(a / 2 + b / 2)


@aggregation("quantile")
def _quantile(fn, x, t, res, name, grouped, q, method) -> Leaf:
    # eidos: Polars' positions (h = (n - 1) * q in double precision), the values below and above h in
    # eidos order (Polars sorts NaN last too), then their exact midpoint, or exact.between for linear:
    # Polars' interpolation rounds each step, and its Float64 of a 64-bit integer rounds before the midpoint.
    v = (x if t != T.Null else x.cast(pl.Float64)).drop_nulls().sort()
    h = (v.len() - 1).cast(pl.Float64) * q
    below = h.floor()
    lo = below + (h - below >= 0.5).cast(pl.Float64) if method == "nearest" else below
    hi = lo if method in ("nearest", "lower") else h.ceil()
    a, b, w = name + "lo", name + "hi", name + "w"
    cols = [(a, v.slice(lo.cast(pl.Int64), 1).first()), (b, v.slice(hi.cast(pl.Int64), 1).first())]
    if method in ("nearest", "lower", "higher"):
        return Leaf(cols, lambda g: pl.col(b).cast(pl.Float64))
    if method == "midpoint":
        return Leaf(cols, lambda g: _midpoint(pl.col(a), pl.col(b), t))
    cols.append((w, h - below))
    return Leaf(cols, lambda g: pl.struct(lo=pl.col(a), hi=pl.col(b), t=pl.col(w)).map_batches(
        exact.between, return_dtype=pl.Float64))


def _total(x: pl.Expr, t: DType, res: DType):
    """An exact integer or decimal sum and what finishes it, given its column of type t."""
    if res.is_integer:
        # eidos: overflow raises; sum in 128 bits, checked when finished (only where computed).
        return x.cast(pl.Int128).sum(), lambda g, c: g.strict(c, pl_dtype(res))
    # decimals: Polars raises past 38 digits, as eidos does; its sum of a decimal is Decimal(38, its scale)
    # already, so a cast to that first would only copy every value (Q18's two sums over lineitem)
    wide = t.is_decimal and pl_dtype(res) == pl.Decimal(38, t.scale)
    return (x if wide else x.cast(pl_dtype(res))).sum(), lambda g, c: c


@aggregation("sum", "mean")
def _(fn, x, t, res, name, grouped) -> Leaf:
    if t.is_float or t == T.Null:
        return _exact(fn, x, t, res, name, grouped)
    n = name + "n"
    if fn == "sum":   # the sum of no values is null
        total, finish = _total(x, t, res)
        return Leaf([(name, total), (n, x.count())], lambda g: pl.when(pl.col(n) > 0).then(finish(g, pl.col(name))))
    if t.is_integer:
        # the exact 128-bit total, then one division (Polars' mean adds in floats)
        return Leaf([(name, x.cast(pl.Int128).sum()), (n, x.count())],
                    lambda g: pl.when(pl.col(n) > 0).then(pl.col(name).cast(pl.Float64) / pl.col(n)))
    return Leaf([(name, x.mean())], lambda g: pl.col(name))  # decimals: the exact total divided


# --- windows ----------------------------------------------------------------

@expr.register
def _(e: E.Window, scope: Scope) -> pl.Expr:
    """A window function: Polars' own where it computes what docs/semantics.md section 19 says, else the
    reference's function (ir.evaluate.window) over each partition's values, called from map_batches, which
    Polars calls once per partition in window order inside `over`. Either is then Polars' `over`."""
    res = scope.dtype(e)
    rule = WINDOWS.get(e.fn)
    args = [_window_arg(a, scope, res if e.fn == "shift" else None, spread=i == 0) for i, a in enumerate(e.args)]
    types = [res if e.fn == "shift" else scope.dtype(a) for a in e.args]
    native = rule(e, args, types, res) if rule else None
    x = native if native is not None else _window_in_python(e, args, types, res)
    # An order only where the result reads it: Polars 2.1's lazy min/max over(order_by=...) of two rows
    # can give another row's value ([0, -1] ordered by [-1, None] gave min 0). With neither partition nor
    # order the value is one scalar, which Project's with_columns spreads over every row (none over none).
    order_by = [expr(o, scope) for o in e.order_by] if reads_order(e) else []
    if e.partition_by or order_by:
        x = x.over([expr(p, scope) for p in e.partition_by] or None, order_by=order_by or None,
                   descending=e.descending, nulls_last=e.nulls_last)
    return x.cast(pl_dtype(res), strict=True) if native is not None else x


def _window_arg(a: E.Expr, scope: Scope, t: DType | None, spread: bool) -> pl.Expr:
    if t is None:
        x = expr(a, scope)
    else:
        x = lit(a.value, t) if isinstance(a, E.Literal) else expr(a, scope).cast(pl_dtype(t))
    if a.columns() or not spread:
        return x
    # eidos: a constant is a value on every row; Polars would see one value (a count of 1), so spread it
    # over the rows of an input column.
    return pl.when(_any_column(scope).is_null().is_not_null()).then(x)


def _window_in_python(e: E.Window, args: list[pl.Expr], types: list[DType], res: DType) -> pl.Expr:
    failures = _CTX.get().failures
    arrow = [t.to_arrow() for t in types]
    kernel_ = window(e.fn, e.options, types, res)
    fields = [f"a{i}" for i in range(len(args))]

    def apply(s: pl.Series) -> pl.Series:
        cols = [s.struct.field(f).to_arrow().cast(t).to_pylist() for f, t in zip(fields, arrow)]
        try:
            values = kernel_(cols, len(s))
        except ExecutionError as error:
            failures.append(error)
            raise
        return pl.Series(s.name, pa.array(values, type=res.to_arrow()))

    # a column to carry the rows where the function has no argument (row_number, count of rows)
    packed = pl.struct([a.alias(f) for a, f in zip(args, fields)] or [pl.lit(0).alias("rows")])
    return packed.map_batches(apply, return_dtype=pl_dtype(res))


# Each rule: (the Window, its arguments' expressions and types, the result type) -> Polars' expression
# before `over`, or None where only the reference function gives eidos's answer.
WINDOWS: dict = {}
window_rule = _rules(WINDOWS)


@window_rule("row_number")
def _(e, args, types, res):
    return pl.int_range(1, pl.len() + 1, dtype=pl.Int64)


@window_rule("count_rows", "count", "n_unique", "min", "max", "sum", "mean")
def _(e, args, types, res):
    if e.fn == "count_rows":
        return pl.len()
    x, t = args[0], types[0]
    if e.fn == "count":
        return x.count()
    if e.fn == "n_unique":   # eidos: null is not a value; NaN counts once
        return x.drop_nulls().n_unique()
    if e.fn == "max" and t.is_float:
        return x.nan_max()   # eidos: NaN is the largest value
    if e.fn in ("min", "max"):
        return x.min() if e.fn == "min" else x.max()
    if t.is_integer and e.fn == "mean":   # the exact 128-bit total, then one division
        return pl.when(x.count() > 0).then(x.cast(pl.Int128).sum().cast(pl.Float64) / x.count())
    if t.is_integer or (t.is_decimal and e.fn == "sum"):   # exact; a total past the type raises
        return pl.when(x.count() > 0).then(x.cast(pl.Int128 if t.is_integer else pl_dtype(res)).sum())
    return None


@window_rule("rank")
def _(e, args, types, res):
    method, descending = e.options
    return args[0].rank(method, descending=descending)   # eidos: nulls get null, NaN is the largest


@window_rule("shift")
def _(e, args, types, res):
    return args[0].shift(e.options[0], fill_value=args[1] if len(args) > 1 else None)


@window_rule("cum_count", "cum_sum", "cum_min", "cum_max")
def _(e, args, types, res):
    x, t = args[0], types[0]
    if e.fn == "cum_count":
        return x.cum_count()
    if t.is_decimal and e.fn == "cum_sum":
        return x.cast(pl_dtype(res)).cum_sum()   # exact, raising past 38 digits as eidos does
    if t.is_float or t == T.Null:   # eidos: exact float sums; NaN the largest value (Polars' cum_max skips it)
        return None
    return x.cast(pl.Int128).cum_sum() if e.fn == "cum_sum" else getattr(x, e.fn)()


@window_rule("rolling_sum", "rolling_min", "rolling_max")
def _(e, args, types, res):
    x, t = args[0], types[0]
    if not t.is_integer:   # floats: exact sums, NaN the largest (Polars' differ); the reference's function
        return None
    size, least = e.options   # eidos: null where fewer than `least` values are there, or none
    if e.fn == "rolling_sum":   # exact: a total past the type raises in the cast after `over`
        return x.cast(pl.Int128).rolling_sum(size, min_samples=max(1, least))
    return getattr(x, e.fn)(size, min_samples=max(1, least))


@call("bin_size")
def _(e: E.Call, scope: Scope) -> pl.Expr:
    return expr(e.args[0], scope).bin.size().cast(pl.Int64)


@call("list_len")
def _(e: E.Call, scope: Scope) -> pl.Expr:
    return expr(e.args[0], scope).list.len().cast(pl.Int64)


@call("list_get")
def _(e: E.Call, scope: Scope) -> pl.Expr:
    # eidos: null past either end.
    return expr(e.args[0], scope).list.get(e.options[0], null_on_oob=True)


@call("list_contains")
def _(e: E.Call, scope: Scope) -> pl.Expr:
    lt, it = (scope.dtype(a) for a in e.args)
    item = adapt(e.args[1], it, lt.inner)
    common = promote(lt.inner, item)
    xs = expr(e.args[0], scope)
    if common != lt.inner:
        xs = xs.cast(pl.List(pl_dtype(common)))
    x = operand(e.args[1], common, scope)
    # eidos: null where the list or the item is null; null elements match nothing.
    return pl.when(xs.is_not_null() & x.is_not_null()).then(xs.list.contains(x))


def translated() -> Coverage:
    """What this translator has a rule for, read from its registries (tests hold coverage.py to it)."""
    return Coverage(C.dispatched(node_frame, N.Node),
                    frozenset(CALLS) | frozenset(AGGREGATIONS) | frozenset(F.WINDOWS) | C.forms(expr),
                    frozenset(_PL) | {"Decimal", "List", "Struct", "Timestamp(ns)", "Timestamp(tz)",
                                                            "Timestamp(ns, tz)"})
