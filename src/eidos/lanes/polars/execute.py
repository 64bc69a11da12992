"""Run a plan's LazyFrame, hand back Arrow with the plan's schema, map Polars errors to eidos ones."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

import pyarrow as pa

import polars as pl
from eidos.errors import EidosError, ExecutionError
from eidos.hal.arrow import conform
from eidos.hal.files import csv_value_error
from eidos.hal.memo import once
from eidos.ir import nodes as N
from eidos.ir.sources import FileSource
from eidos.lanes.polars import nulls
from eidos.lanes.polars.translate import Ctx, to_lazyframe

# The streaming engine processes batches (it holds no memory limit); "auto" lets Polars choose.
ENGINES = {False: "auto", True: "streaming"}


def execute(plan: N.Node, *, streaming: bool = False) -> pa.Table:
    table = _in_place(plan)
    if table is not None:
        return table
    with prepared(plan) as (lf, ctx), _errors(ctx):
        df = lf.collect(engine=ENGINES[streaming])
    return _arrow(df, plan)


def _in_place(plan: N.Node) -> pa.Table | None:
    """An Aggregate of exact float sums over columns of an in-memory Arrow table, computed by eidos.hal.fsum
    where the columns lie (eidos.hal.exact_aggregate), as the duckdb lane does: handing them to Polars
    first would copy them (strings into Polars' own layout: most of a 16-string-key sum over 100M rows)
    for an aggregation Polars does not do; else None."""
    from eidos.hal.exact_aggregate import finish, in_place, route

    rows = route(plan)   # the projection (kept per plan); its table is read each run
    table = in_place(rows) if rows is not None else None
    return None if table is None else conform(finish(plan, table), plan.schema, "polars")


@contextmanager
def prepared(plan: N.Node) -> Iterator[tuple[pl.LazyFrame, Ctx]]:
    """The plan's LazyFrame and its translation state. Translating costs 0.2-2 ms a TPC-H query, so a plan
    that reads only files keeps its translations (as the SQL lanes keep their SQL): a run takes one from the
    plan's free list, or translates anew, and gives it back after, so runs at once each have their own Ctx
    and keep their callbacks' failures apart; the lists are kept by what the files say of their nulls
    (nulls.py), which a file rewritten between runs may change. A plan over tables in memory translates
    on every run: a kept LazyFrame would keep Polars' copy of their strings alive for as long as the plan."""
    facts = nulls.facts(plan)
    if not once(plan, "polars.files only", lambda: all(isinstance(n.source, FileSource) for n in plan.walk()
                                                       if isinstance(n, N.Scan))):
        ctx = Ctx(facts=nulls.known(plan, facts))
        yield to_lazyframe(plan, ctx), ctx
        return
    free = once(plan, "polars.lazyframes", dict).setdefault(facts, [])   # files may change between runs
    try:
        lf, ctx = free.pop()
    except IndexError:
        ctx = Ctx(facts=nulls.known(plan, facts))
        lf = to_lazyframe(plan, ctx)
    ctx.failures.clear()
    try:
        yield lf, ctx
    finally:
        free.append((lf, ctx))


def execute_stream(plan: N.Node, *, streaming: bool = False, chunk_size: int | None = None
                   ) -> Iterator[pa.RecordBatch]:
    with prepared(plan) as (lf, ctx):
        yield from _batches(plan, lf, ctx, streaming, chunk_size)


def _batches(plan: N.Node, lf: pl.LazyFrame, ctx: Ctx, streaming: bool, chunk_size: int | None
             ) -> Iterator[pa.RecordBatch]:
    with _errors(ctx):
        batches = lf.collect_batches(chunk_size=chunk_size, maintain_order=True, engine=ENGINES[streaming])
    it = iter(batches)
    empty = True
    while True:
        with _errors(ctx):
            try:
                df = next(it)
            except StopIteration:
                break
        for batch in _arrow(df, plan).to_batches():
            empty = False
            yield batch
    if empty:  # a consumer always learns the schema, even of an empty result
        yield from _empty(plan)


def _empty(plan: N.Node) -> Iterator[pa.RecordBatch]:
    schema = plan.schema.to_arrow()
    yield pa.RecordBatch.from_arrays([pa.array([], type=f.type) for f in schema], schema=schema)


def _arrow(df: pl.DataFrame, plan: N.Node) -> pa.Table:
    # to_arrow shares Polars' buffers; conform casts only columns whose Arrow form differs.
    table = df.to_arrow()
    if table.schema.names != list(plan.schema.names):
        table = table.rename_columns(list(plan.schema.names))
    return conform(table, plan.schema, "polars")


class _errors:
    """Polars' exceptions become ExecutionError chained from them; an error a Python callback
    raised (kept in ctx.failures, since Polars re-raises it without its chain) is raised as it was."""

    def __init__(self, ctx: Ctx):
        self.ctx = ctx

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind, error, tb) -> bool:
        if error is None or isinstance(error, (StopIteration, KeyboardInterrupt)):
            return False
        if self.ctx.failures:
            first = self.ctx.failures[0]
            raise first.with_traceback(None) from first.__cause__
        if isinstance(error, EidosError):
            return False
        csv = _csv_value(self.ctx, error)
        if csv is not None:
            raise csv from error
        raise ExecutionError(f"polars failed: {_describe(error)}") from error


_CSV_VALUE = re.compile(r"could not parse `(.*?)` as dtype `[^`]*` at column '(.*?)'", re.DOTALL)


def _csv_value(ctx: Ctx, error: BaseException) -> EidosError | None:
    """The error every lane gives for a CSV value not of its column's type (hal.files.csv_value_error)."""
    m = _CSV_VALUE.search(str(error))
    found = [s for s in ctx.csv if m and m.group(2) in s.schema]
    return csv_value_error(found[0], m.group(2), m.group(1)) if found else None


def _describe(error: BaseException) -> str:
    text = str(error).strip().split("\n\nThis error occurred", 1)[0].strip()
    if "conversion from `i128`" in text or "conversion from `u128`" in text:
        text = f"integer overflow or a value out of range ({text})"
    elif "overflow" in text.lower():
        text = f"overflow ({text})"
    return f"{type(error).__name__}: {text}"
