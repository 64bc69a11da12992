"""The row-flow cost model the vector lanes share; each lane gives its own constants.

    seconds = setup
            + bytes scanned / scan rate of the source's format  (columnar formats: only the columns read)
            + rows into a node x expression nodes it evaluates x row_op_s (agg_op_s in aggregations)
            + rows x udf_row_s per per-row Python function
            + rows x libm_row_s x LIBM_WEIGHT per libm function (exp, log, sin, tanh, pow, ...)
            + rows into a join (both sides) x join_row_s; a sort's rows x log2(rows) x sort_row_s
            + groups of a keyed aggregation x group_s
            + whatever the lane's `extra(node, rows_in, rows_out)` adds (e.g. exact aggregations)
            + whatever the lane's `fixed(node)` adds: seconds per node that do not grow with the
              rows (a kernel launch); with setup_s they make the estimate's `fixed_s`

Rows flow up the plan: a scan gives the source's rows (or bytes / bytes_per_row); a filter keeps what the
source's statistics say of its predicate (eidos.hal.selectivity: 1 / distinct values for an equality, the share
of [min, max] for a range), filter_keeps for what they cannot tell; a keyed aggregation gives the distinct count
of its keys where they are columns of a source (eidos.hal.distinct: parquet statistics and a sample), else
groups_per_row of its input (one row without keys; never more groups than rows in). Each node has a base: the
rows of the scan or the groups of the aggregation its rows are a part of, so rows / base is the share filters and
joins below kept. A join on a key keeps that share of the other side: an inner join gives the rows of the side
with the larger base times the share the other keeps (the larger input, when neither is filtered), a semi join
the left's rows times the share the right keeps, an anti join filter_keeps of the left's, a cross join the
product, other joins the larger input. A limit gives min(n, rows), a union the sum. The result of
another part of a split plan (a PartSource) has the rows its subplan gives, at
ROW_WIDTH bytes per value of a non-numeric column.

A lane whose engine orders joins and filters each join's inputs by the keys the other keeps (`join_filters`:
DuckDB's join filter pushdown) pays for the work below a join (filters, projections, aggregations; not the
scans' bytes) only on the share of its rows the join keeps: Q21 at SF1 aggregates 357k lineitem rows there, not
6M. The filter checks every row where its keys are read, at a probe's cost: the lowest join on the way up from
there is paid in full, the joins above it probe only the rows kept (Q2 at SF10: the parts' keys reach partsupp's
scan through the cheapest offer's aggregation and two joins, which see 6k of its 8M rows).
Lanes compared by the planner use the same flow, so their estimates compare like with like.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace

from eidos.hal.lane import Estimate
from eidos.ir import dtypes as T
from eidos.ir import expr as E
from eidos.ir import nodes as N
from eidos.ir import sources as S
from eidos.ir.dtypes import DType
from eidos.ir.typing import infer

_FORMATS = {S.ParquetSource: "parquet", S.CsvSource: "csv", S.ArrowSource: "arrow", S.SqlSource: "sql"}


@dataclass(frozen=True)
class RowFlow:
    """One lane's constants; `scan_bytes_per_s` is keyed by format, with 'other' for the rest."""

    lane: str
    setup_s: float
    scan_bytes_per_s: Mapping[str, float]
    row_op_s: float
    join_row_s: float
    sort_row_s: float
    agg_op_s: float | None = None          # None: the same as row_op_s
    udf_row_s: float = 0.0
    group_s: float = 0.0                   # per group of a keyed aggregation: its hash table entry, its output row
    libm_row_s: float = 0.0                # per row of one exp (LIBM_WEIGHT scales the others); 0: hardware does it
    columnar: frozenset[str] = field(default_factory=lambda: frozenset(_FORMATS.values()))
    bytes_per_row: float = 60              # when a source knows its size but not its rows
    filter_keeps: float = 0.5              # rows a filter keeps, lacking statistics
    groups_per_row: float = 0.1            # groups per input row of a keyed aggregation
    unknown_rows: float = 100_000          # a source that knows neither rows nor bytes
    constants: str = ""                    # where the constants came from, for explain (eidos.hal.constants)
    join_filters: bool = False             # the engine orders joins and filters each join's inputs by the keys
                                           # the other keeps (DuckDB): a join's inputs cost what the join keeps


_SCAN = "scan_{}_bytes_per_s"
_FLAT = ("setup_s", "row_op_s", "agg_op_s", "join_row_s", "sort_row_s", "udf_row_s", "group_s", "libm_row_s")
# A CPU computes these with a libm call per value, 20-75 times an arithmetic node's cost: CPU seconds a value
# beyond an add, one thread, Polars and DuckDB alike (2-vCPU VM, 5M float64): exp 2.9-3.1 ns, log 3.4-3.6,
# sin 8.1-8.2, tanh 11.4, pow 10.6-11.6. Weights relative to exp; a GPU's special-function units make them
# nearly free (the triton lane leaves libm_row_s at 0).
LIBM_WEIGHT = {"exp": 1.0, "log": 1.2, "log10": 1.2, "sin": 2.7, "cos": 2.7, "tanh": 3.8, "pow": 3.8}


def flat(model: RowFlow) -> dict[str, float]:
    """The model's constants by name (scan rates as scan_<format>_bytes_per_s): a lane's Constants values."""
    out = {k: getattr(model, k) for k in _FLAT if getattr(model, k) is not None}
    return {**out, **{_SCAN.format(f): v for f, v in model.scan_bytes_per_s.items()}}


def row_flow_model(model: RowFlow, values: Mapping[str, float], constants: str = "") -> RowFlow:
    """`model` with the constants in `values` (flat()'s names), labelled with where they came from."""
    rates = {f: values.get(_SCAN.format(f), v) for f, v in model.scan_bytes_per_s.items()}
    named = {k: values[k] for k in _FLAT if k in values}
    return replace(model, scan_bytes_per_s=rates, constants=constants, **named)


Extra = Callable[[N.Node, float, float], float]
Fixed = Callable[[N.Node], float]
ROW_WIDTH = 16   # bytes per value of a string or other variable-width column of a pushed part's result


def estimate(plan: N.Node, model: RowFlow, extra: Extra | None = None, fixed: Fixed | None = None) -> Estimate:
    acc = _acc(model.setup_s)
    out = _walk(plan, model, extra, acc, fixed)
    joins = f", {acc['joins']} join{'s' if acc['joins'] != 1 else ''}" if acc["joins"] else ""
    basis = (f"{model.lane}: {acc['rows'] / 1e6:.1f}M input rows, {acc['bytes'] / 1e6:.1f} MB scanned{joins} "
             f"-> {acc['s']:.3g} s (~{out:,.0f} rows out)" + (f"; constants: {model.constants}" if model.constants
                                                                else ""))
    return Estimate(seconds=acc["s"], basis=basis, fixed_s=acc["fixed"], input_bytes=acc["bytes"])


def rows_out(plan: N.Node, model: RowFlow) -> float:
    """The rows `plan` gives, by the row flow."""
    return _walk(plan, model, None, _acc(0.0), None)


def _acc(setup_s: float) -> dict:
    """The row flow's running totals: seconds (of which scans, joins, fixed), rows and bytes scanned, joins,
    and each node's base (_rows_out) by id."""
    return {"s": setup_s, "scan": 0.0, "join": 0.0, "fixed": setup_s, "rows": 0.0, "bytes": 0.0, "joins": 0,
            "base": {}, "sides": {}}


def row_bytes(schema) -> float:
    """Bytes of one row of `schema`: numeric widths, a byte per Boolean, ROW_WIDTH for the rest."""
    return float(sum(t.bits // 8 if t.bits else 1 if t.name == "Boolean" else ROW_WIDTH for t in schema.dtypes))


def scanned_bytes(scan: N.Scan) -> int:
    """Bytes a scan reads, by its source's estimate (0 when it has none), only the columns read."""
    size = scan.source.estimated_bytes or 0
    total = len(scan.source.schema)
    return size * len(scan.columns) // total if scan.columns is not None and total else size


def input_bytes(plan: N.Node) -> int:
    """Bytes `plan` reads from its sources, estimated (scanned_bytes of each scan)."""
    return sum(scanned_bytes(n) for n in plan.walk() if isinstance(n, N.Scan))


def source_size(source: S.Source, model: RowFlow) -> tuple[float, float, str]:
    """Rows, bytes and format of a source, each estimated when the source does not say."""
    fmt = _FORMATS.get(type(source), "other")
    rows, nbytes = source.estimated_rows, source.estimated_bytes
    if rows is None and nbytes is None and isinstance(source, S.PartSource) and isinstance(source.plan, N.Node):
        rows = rows_out(source.plan, model)
        nbytes = rows * row_bytes(source.schema)
    if rows is None and nbytes is not None:
        rows = nbytes / model.bytes_per_row
    if rows is None:
        rows = model.unknown_rows
    if nbytes is None:
        nbytes = rows * model.bytes_per_row
    return float(rows), float(nbytes), fmt


def _walk(node: N.Node, m: RowFlow, extra: Extra | None, acc: dict, fixed: Fixed | None = None) -> float:
    """Rows out of `node`; adds its seconds to acc['s'] and its base (_base) to acc['base']."""
    if isinstance(node, N.Scan):
        rows, nbytes, fmt = source_size(node.source, m)
        if node.columns is not None and fmt in m.columnar and len(node.source.schema):
            nbytes *= len(node.columns) / len(node.source.schema)
        scan = nbytes / m.scan_bytes_per_s.get(fmt, m.scan_bytes_per_s["other"])
        acc["s"] += scan
        acc["scan"] += scan
        acc["rows"] += rows
        acc["bytes"] += nbytes
        acc["base"][id(node)] = rows
        return rows
    pushed = m.join_filters and isinstance(node, N.Join) and node.how in ("inner", "semi")
    ins, work = [], []
    for i in node.inputs:
        before = _work(acc)
        ins.append(_walk(i, m, extra, acc, fixed))
        work.append(_work(acc) - before)
    rows = ins[0] if ins else 0.0
    exprs = node.expressions()
    per_op = m.agg_op_s if isinstance(node, N.Aggregate) and m.agg_op_s is not None else m.row_op_s
    acc["s"] += rows * per_op * sum(sum(1 for _ in e.walk()) for e in exprs)
    if m.udf_row_s:
        acc["s"] += rows * m.udf_row_s * sum(1 for e in exprs for x in e.walk() if isinstance(x, E.Udf))
    if m.libm_row_s:
        acc["s"] += rows * m.libm_row_s * sum(LIBM_WEIGHT.get(x.fn, 0.0) for e in exprs for x in e.walk()
                                              if isinstance(x, E.Call))
    out = _rows_out(node, rows, ins, m, acc)
    if pushed:   # the engine's join filters: each input's work below the join (_work) shrinks to the share
        for i, w in enumerate(work):   # of its keys the other input keeps
            drop = 1.0 - _keep(node.inputs[1 - i], ins[1 - i], acc)
            acc["s"] -= w * drop
            _skipped_probes(node.inputs[i], node.right_on if i else node.left_on, drop, acc)
    if extra is not None:
        acc["s"] += extra(node, rows, out)
    if fixed is not None:
        once = fixed(node)
        acc["s"] += once
        acc["fixed"] += once
    return out


def _skipped_probes(node: N.Node, keys, drop: float, acc: dict) -> None:
    """A join filter drops a row where its keys are read (eidos.hal.distinct.trace: a scan, through joins
    and aggregations), checking it at a probe's cost (the lowest join on the way, kept in full); no join
    above that probes it, so their probes of that side shrink by `drop`."""
    from eidos.hal.distinct import trace

    joins = [(below, side) for below, side in trace(node, list(keys))[0] if side is not None]
    for below, side in joins[:-1]:
        cut = acc["sides"][id(below)][side] * drop
        acc["sides"][id(below)][side] -= cut
        acc["s"] -= cut
        acc["join"] -= cut


def _work(acc: dict) -> float:
    """Seconds so far that a join filter saves where it drops rows: not the scans' bytes, the fixed costs or
    the joins (_skipped_probes says which of their probes it saves)."""
    return acc["s"] - acc["scan"] - acc["fixed"] - acc["join"]


def _base(node: N.Node, acc: dict) -> float:
    return acc["base"][id(node)]


def _rows_out(node: N.Node, rows: float, ins: list[float], m: RowFlow, acc: dict) -> float:
    """Rows out of `node` (rows: its first input's, ins: each input's); records its base in acc['base']:
    the rows of what it is a part of (a scan's rows, an aggregation's groups), so rows / base is the share of
    them that filters and joins below it keep (a join on a key keeps that share of the other side's rows)."""
    base = _base(node.inputs[0], acc) if node.inputs else rows
    out = _node_rows(node, rows, ins, m, acc)
    if isinstance(node, N.Aggregate):
        base = out
    elif isinstance(node, N.Join):
        big = max((0, 1), key=lambda i: _base(node.inputs[i], acc))
        base = _base(node.inputs[0 if node.how in ("semi", "anti", "left") else big], acc)
    elif isinstance(node, N.Union):
        base = sum(_base(i, acc) for i in node.inputs)
    acc["base"][id(node)] = max(base, out, 1.0)
    return out


def _keep(node: N.Node, rows: float, acc: dict) -> float:
    """The share of its base that `node`'s rows are (at most 1)."""
    return min(1.0, rows / max(_base(node, acc), 1.0))


def _node_rows(node: N.Node, rows: float, ins: list[float], m: RowFlow, acc: dict) -> float:
    if isinstance(node, N.Filter):
        from eidos.hal.selectivity import keeps

        return max(rows * keeps(node, m.filter_keeps), min(rows, 1.0))   # statistics may be stale: a row
    if isinstance(node, N.Aggregate):
        if not node.keys:
            return 1.0
        from eidos.hal.distinct import groups

        known = groups(node, _keep(node.input, rows, acc))
        out = max(1.0, min(rows, known if known is not None else rows * m.groups_per_row))
        acc["s"] += out * m.group_s
        return out
    if isinstance(node, N.Join):
        acc["s"] += (ins[0] + ins[1]) * m.join_row_s
        acc["join"] += (ins[0] + ins[1]) * m.join_row_s
        acc["sides"][id(node)] = [ins[0] * m.join_row_s, ins[1] * m.join_row_s]
        acc["joins"] += 1
        if node.how == "cross":
            return ins[0] * ins[1]
        if node.how == "semi":   # the left's rows whose key the right keeps
            return ins[0] * _keep(node.right, ins[1], acc)
        if node.how == "anti":   # what the right keeps of the keys says little of which left keys it lacks
            return ins[0] * m.filter_keeps
        if node.how == "inner":  # a key of the side with the smaller base: the other's rows, times its share kept
            small = min((0, 1), key=lambda i: _base(node.inputs[i], acc))
            return max(1.0, ins[1 - small] * _keep(node.inputs[small], ins[small], acc))
        return max(ins)
    if isinstance(node, N.Sort):
        acc["s"] += rows * m.sort_row_s * math.log2(max(rows, 2.0))
        return rows
    if isinstance(node, N.Limit):
        return min(rows, float(node.n))
    if isinstance(node, N.Union):
        return sum(ins)
    if isinstance(node, N.Distinct):
        acc["s"] += rows * m.join_row_s
    return rows


# What eidos.hal.fsum's kernels cost on either host lane's exact route (bench/RESULTS.md, exact sums); each
# lane's DEFAULTS carries them, so `eidos calibrate` measures them per lane.
EXACT_ROW_S = 3e-9              # a float sum/mean/std/var by keys, per value, over the key and value buffers
EXACT_GLOBAL_ROW_S = 0.5e-9     # the same without keys, per value: the kernel alone, every core
EXACT_GROUP_S = 0.4e-6          # the same, per group (1M keys over 10M rows: the counting sort's misses)


def summed(node: N.Aggregate) -> Iterator[tuple[str, DType]]:
    """(function, argument type) of each sum, mean, std and var `node` computes, inside any expression: what
    the cost models price as exact summation. An argument typed only in context (a key read by name inside an
    aggregation) counts as Float64."""
    for _, e in node.aggs:
        for a in e.walk():
            if isinstance(a, E.Agg) and a.arg is not None and a.fn in ("sum", "mean", "std", "var"):
                try:
                    t = infer(a.arg, node.input.schema)
                except Exception:  # noqa: BLE001 - typed only in context: count it as a float
                    t = T.Float64
                yield a.fn, t


def exact_aggregations(node: N.Aggregate) -> tuple[int, int]:
    """(float sums/means/vars/stds, other vars/stds) of `node`: what a host lane sums through eidos.hal.fsum,
    and what it computes with Python's exact integers."""
    floats = others = 0
    for fn, t in summed(node):
        floating = t.is_float or t == T.Null
        floats += floating
        others += fn in ("std", "var") and not floating
    return floats, others


def in_place(node: N.Aggregate) -> bool:
    """Whether a host lane's exact route (eidos.hal.fsum.group_by over the key and value buffers, no
    per-group lists) takes `node`: every aggregation one fsum computes (exact_in_place), and keys that
    group_by groups as eidos does. The polars lane's route and its cost model both ask this."""
    aggs = [a for _, e in node.aggs for a in e.walk() if isinstance(a, E.Agg)]
    try:
        return bool(aggs) and all(groups_by(infer(e, node.input.schema)) for _, e in node.keys) and all(
            exact_in_place(a, node.input.schema) for a in aggs)
    except Exception:  # noqa: BLE001 - typed only in context: the list route's price
        return False


def exact_in_place(a: E.Agg, schema) -> bool:
    """A float sum, mean, var or std of an expression that reads columns: what eidos.hal.fsum computes
    over an engine's buffers."""
    return (a.fn in ("sum", "mean", "var", "std") and a.arg is not None and bool(a.arg.columns())
            and infer(a.arg, schema) in (T.Float32, T.Float64))


def groups_by(t: DType) -> bool:
    """Whether eidos.hal.fsum.group_by groups keys of eidos type t as eidos does (docs/semantics.md
    section 14): not floats (dictionary codes would keep -0.0 apart from 0.0), nested or null-typed keys."""
    return not (t.is_float or t.is_nested or t.name == "Null")
