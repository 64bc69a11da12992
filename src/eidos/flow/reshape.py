"""Reshaping verbs built from the plan nodes every lane has: unpivot (a Union of projections), pivot (an
Aggregate of filtered aggregations) and describe (one Aggregate, a row per statistic). Nothing here runs,
except pivot without `on_columns`, which reads the distinct values of `on` first (docs/semantics.md 15)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from eidos.errors import PlanError
from eidos.ir import dtypes as T
from eidos.ir import expr as E
from eidos.ir import nodes as N
from eidos.ir.typing import promote

if TYPE_CHECKING:
    from eidos.flow.frame import Flow

NULL = E.Literal(None, T.Null, weak=True)
PIVOT_AGGREGATES = ("min", "max", "sum", "mean", "median", "len", "count")


def unpivot(flow: Flow, on: Any, index: Any, variable_name: str, value_name: str) -> Flow:
    from eidos.flow.frame import Flow

    index_names = flow._columns(index, "unpivot index") if index is not None else ()
    on_names = (flow._columns(on, "unpivot on") if on is not None
                else tuple(n for n in flow.schema.names if n not in index_names))
    if not on_names:
        raise PlanError("unpivot needs at least one column to unpivot (on=...); every column is in index")
    for name in (variable_name, value_name):
        if not isinstance(name, str) or name in index_names:
            raise PlanError(f"unpivot variable_name and value_name must be new column names, got {name!r} "
                            f"(index columns: {', '.join(index_names) or 'none'})")
    dtype = flow.schema[on_names[0]]
    for n in on_names[1:]:
        try:
            dtype = promote(dtype, flow.schema[n], op="unpivot")
        except PlanError:
            types = ", ".join(f"{c}: {flow.schema[c]}" for c in on_names)
            raise PlanError(f"unpivot puts the values of every `on` column in one column, so they must share a "
                            f"supertype (semantics section 4); these do not: {types}. Cast them first "
                            f"(e.g. col(...).cast(ei.String))") from None
    parts = []
    for n in on_names:
        value = E.Column(n) if flow.schema[n] == dtype else E.Cast(E.Column(n), dtype)
        cols = tuple((i, E.Column(i)) for i in index_names)
        parts.append(N.Project(flow.plan, cols + ((variable_name, E.Literal(n, T.String)), (value_name, value))))
    return Flow(parts[0] if len(parts) == 1 else N.Union(tuple(parts)))


def pivot(flow: Flow, on: Any, on_columns: Any, index: Any, values: Any, aggregate_function: Any,
          separator: str) -> Flow:
    from eidos.flow.frame import Flow

    on_names = flow._columns(on, "pivot on")
    if len(on_names) != 1:
        raise PlanError(f"pivot takes one `on` column, got {list(on_names)}")
    (on_name,) = on_names
    if index is None and values is None:
        raise PlanError("pivot needs index=... or values=... (or both): the columns that stay, and those spread")
    index_names = flow._columns(index, "pivot index") if index is not None else None
    value_names = flow._columns(values, "pivot values") if values is not None else None
    if index_names is None:
        index_names = tuple(n for n in flow.schema.names if n != on_name and n not in value_names)
    if value_names is None:
        value_names = tuple(n for n in flow.schema.names if n != on_name and n not in index_names)
    if not value_names:
        raise PlanError("pivot has no values column left to spread: give values=...")
    if aggregate_function not in PIVOT_AGGREGATES:
        raise PlanError(f"pivot aggregate_function must be one of {', '.join(PIVOT_AGGREGATES)}, got "
                        f"{aggregate_function!r} (eidos has no form that raises on a repeated cell, which "
                        f"Polars' None does: name the aggregation)")
    on_type = flow.schema[on_name]
    if on_columns is None:   # as Polars' eager pivot: the distinct values are read now
        found = flow.select(on_name).distinct().sort(on_name).run()
        on_columns = found.column(0).to_pylist()
    elif isinstance(on_columns, (str, bytes)) or not hasattr(on_columns, "__iter__"):
        raise PlanError(f"pivot on_columns takes a list of the values of {on_name!r}, got {on_columns!r}")
    on_columns = list(on_columns)
    aggs = []
    for vc in value_names:
        for v in on_columns:
            label = "null" if v is None else str(v)
            name = label if len(value_names) == 1 else f"{vc}{separator}{label}"
            test = (E.Call("is_null", (E.Column(on_name),)) if v is None
                    else E.Call("eq", (E.Column(on_name), E.Literal(v, on_type))))
            picked = E.Case(((test, E.Literal(1, T.Int64) if aggregate_function == "len" else E.Column(vc)),), NULL)
            fn = "count" if aggregate_function == "len" else aggregate_function
            aggs.append((name, E.Agg(fn, picked)))
    if not aggs:
        raise PlanError(f"pivot has no columns to make: on_columns is empty and {on_name!r} has no values")
    return Flow(N.Aggregate(flow.plan, tuple((n, E.Column(n)) for n in index_names), tuple(aggs)))


def describe(flow: Flow, percentiles: tuple[float, ...]) -> Flow:
    from eidos.flow.expr import Expr
    from eidos.flow.frame import Flow

    stats = ["count", "null_count", "mean", "std", "min"]
    stats += [f"{p:.0%}" if round(p * 100) == p * 100 else f"{p:%}" for p in percentiles] + ["max"]
    aggs: list[tuple[str, E.Expr]] = []
    cells: dict[str, list[E.Expr]] = {}
    for i, (name, t) in enumerate(flow.schema.items()):
        numeric = t.is_numeric or t == T.Boolean
        x = E.Cast(E.Column(name), T.Int8) if t == T.Boolean else E.Column(name)
        out = T.Float64 if numeric else T.String
        made = {"count": E.Agg("count", E.Column(name)), "count_rows": E.Agg("count_rows")}
        if numeric:
            made.update(mean=E.Agg("mean", x), std=E.Agg("std", x) if t != T.Boolean else None,
                        min=E.Agg("min", x), max=E.Agg("max", x))
            for p, label in zip(percentiles, stats[5:-1]):
                made[label] = None if t == T.Boolean else Expr(x).quantile(p, "nearest").node
        else:
            made.update(min=E.Agg("min", x), max=E.Agg("max", x))
        refs = {}
        for stat, e in made.items():
            if e is not None:
                refs[stat] = E.Column(f"_{i}_{stat}")
                aggs.append((f"_{i}_{stat}", e))
        refs["null_count"] = E.Call("sub", (refs.pop("count_rows"), refs["count"]))
        same = ("min", "max") if t == out else ()   # min and max of a String column are text already
        cells[name] = [E.Literal(None, out) if s not in refs else refs[s] if s in same else E.Cast(refs[s], out)
                       for s in stats]
    if "statistic" in flow.schema:
        raise PlanError("describe names its first column 'statistic', and the flow has a column of that name: "
                        "rename it first")
    row = "_row"
    while row in flow.schema:
        row += "_"
    one = N.Aggregate(flow.plan, (), tuple(aggs))
    rows = tuple(N.Project(one, (("statistic", E.Literal(s, T.String)), (row, E.Literal(k, T.Int64)))
                           + tuple((n, cells[n][k]) for n in flow.schema.names))
                 for k, s in enumerate(stats))
    return Flow(N.Union(rows)).sort(row).drop(row)


M31 = 2**31 - 1   # the hash works modulo this prime; every product stays below 2**62, so Int64 never overflows


def position_hash(pos: E.Expr, seed: int) -> E.Expr:
    """A pseudo-random Int64 in [0, M31) of a row position and a seed, from integer arithmetic that every lane
    computes exactly: two rounds of a multiply-and-square mix modulo the prime 2**31 - 1."""
    def lit(v: int) -> E.Expr:
        return E.Literal(v, T.Int64, weak=True)

    def mod(e: E.Expr) -> E.Expr:
        return E.Call("mod", (e, lit(M31)))

    s1, s2 = seed % M31, (seed // M31 + 104729) % M31
    a = mod(E.Call("add", (E.Call("mul", (mod(pos), lit(48271))), lit(s1))))
    b = mod(E.Call("add", (E.Call("mul", (a, a)), lit(s2))))
    c = mod(E.Call("add", (E.Call("mul", (b, lit(16807))), a)))
    return mod(E.Call("add", (E.Call("mul", (c, c)), lit(s1))))


def sample(flow: Flow, n: int | None, fraction: float | None, with_replacement: bool, seed: int) -> Flow:
    import pyarrow as pa

    from eidos.flow.frame import Flow
    from eidos.flow.read import from_arrow

    keep = tuple((c, E.Column(c)) for c in flow.schema.names)
    pos, h, rank, rows = (flow._fresh(s) for s in ("pos", "hash", "rank", "rows"))
    numbered = N.Project(flow.plan, keep + ((pos, E.Window("row_number")),))
    if with_replacement:   # draw j = 1..n picks the row at position 1 + hash(seed, j) mod the number of rows
        draws = from_arrow(pa.table({rank: pa.array(range(1, n + 1), pa.int64())}))
        draws = draws.with_columns(**{h: position_hash(E.Column(rank), seed)})
        count = Flow(numbered).agg(**{rows: E.Agg("count_rows")})
        at = E.Call("add", (E.Call("mod", (E.Column(h), E.Column(rows))), E.Literal(1, T.Int64, weak=True)))
        picks = draws.join(count, how="cross").select(rank, **{pos: at})
        out = picks.join(Flow(numbered), on=pos).sort(rank)
        return out.select(*flow.schema.names)
    hashed = N.Project(numbered, keep + ((pos, E.Column(pos)), (h, position_hash(E.Column(pos), seed))))
    ranked = N.Project(hashed, keep + ((pos, E.Column(pos)), (rank, E.Window(
        "row_number", order_by=(E.Column(h), E.Column(pos)))), (rows, E.Window("count_rows"))))
    if n is not None:
        limit: E.Expr = E.Literal(n, T.Int64)
    else:
        limit = E.Call("floor", (E.Call("mul", (E.Literal(float(fraction), T.Float64), E.Column(rows))),))
    return Flow(N.Project(N.Filter(ranked, E.Call("le", (E.Column(rank), limit))), keep))
