"""The fraction of its input a filter keeps, from what the source knows of the columns it tests.

For a predicate over columns read unchanged from one source (renamed, filtered or sorted on the way up):

- `column == literal`: 1 / the column's distinct values (eidos.hal.distinct); `is_in` of k values: k / them;
- `column <, <=, >, >= literal` (numbers, decimals, dates): the share of the column's [min, max] the bounds
  leave (of its whole values, for integers and dates), values taken as spread evenly (parquet: the row
  groups' statistics; in-memory Arrow: the column's min and max); the bounds of one column under one `and`
  make one interval (a date range is one month, not the product of two halves);
- `and`: the product; `or`: 1 - the product of what each side drops; `not`: 1 - the fraction.

What the statistics cannot tell (a comparison of two columns, a string match, a computed column) counts once,
as the row flow's `filter_keeps` (so a predicate they tell nothing of keeps what it kept before them). System R's
estimates (Selinger et al., SIGMOD 1979), with min and max where it guessed a third.
"""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal

from eidos.hal.memo import once
from eidos.ir import expr as E
from eidos.ir import nodes as N
from eidos.ir.rewrite import conjuncts
from eidos.ir.sources import ArrowSource, ParquetSource, Source

_FLIP = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le"}


def keeps(node: N.Filter, unknown: float) -> float:
    """The fraction of its input rows `node` keeps; `unknown` for the part statistics cannot tell."""
    known, told_all = _fraction(node.predicate, node.input)
    return known * (1.0 if told_all else unknown)


def _fraction(e: E.Expr, below: N.Node) -> tuple[float, bool]:
    """(fraction the parts statistics tell keep, whether they told all of `e`)."""
    if isinstance(e, E.Call) and e.fn == "and":
        return _conjunction(conjuncts(e), below)
    if isinstance(e, E.Call) and e.fn == "or":
        parts = [_fraction(a, below) for a in e.args]
        if all(told for _, told in parts):
            return 1.0 - math.prod(1.0 - f for f, _ in parts), True
        return 1.0, False
    if isinstance(e, E.Call) and e.fn == "not":
        f, told = _fraction(e.args[0], below)
        return (1.0 - f, True) if told else (1.0, False)
    if isinstance(e, E.Call) and e.fn in ("eq", "is_in"):
        column = _column(e)
        ndv = _distinct(below, column) if column is not None else None
        if ndv is None:
            return 1.0, False
        values = 1 if e.fn == "eq" else len(e.options[0]) if e.options else 1
        return min(1.0, values / ndv), True
    if _bound(e) is not None:
        return _conjunction([e], below)
    return 1.0, False


def _conjunction(terms: list[E.Expr], below: N.Node) -> tuple[float, bool]:
    """The terms of an `and`: bounds on one column make one interval; the rest multiply."""
    bounds: dict[str, list[tuple[str, float]]] = {}
    known, told = 1.0, True
    for t in terms:
        b = _bound(t)
        if b is None:
            f, ok = _fraction(t, below)
            known, told = known * f, told and ok
        else:
            bounds.setdefault(b[0], []).append(b[1:])
    for name, ops in bounds.items():
        span = _range(below, name)
        if span is None:
            told = False
        else:
            known *= _share(ops, *span)
    return known, told


def _share(ops: list[tuple[str, float]], low: float, high: float, discrete: bool) -> float:
    """The share of [low, high] the bounds `ops` leave; of its whole values where the column holds only those
    (integers, dates: x > 1 over [1, 2] keeps one value of two)."""
    lo, hi = -math.inf, math.inf
    for op, v in ops:
        if discrete:   # the whole values the bound keeps: x > 1.5 and x >= 2 both start at 2
            v = {"gt": math.floor(v) + 1, "ge": math.ceil(v), "lt": math.ceil(v) - 1, "le": math.floor(v)}[op]
        lo, hi = (max(lo, v), hi) if op in ("gt", "ge") else (lo, min(hi, v))
    if discrete:
        return max(0.0, min(hi, high) - max(lo, low) + 1) / (high - low + 1)
    if high <= low:
        return 1.0 if lo <= low <= hi else 0.0
    return max(0.0, min(hi, high) - max(lo, low)) / (high - low)


def _bound(e: E.Expr) -> tuple[str, str, float] | None:
    """(column, op with the column on the left, the literal as a number) of `column op literal`."""
    if not (isinstance(e, E.Call) and e.fn in _FLIP and len(e.args) == 2):
        return None
    a, b = e.args
    op = e.fn
    if isinstance(a, E.Literal) and isinstance(b, E.Column):
        a, b, op = b, a, _FLIP[op]
    if not (isinstance(a, E.Column) and isinstance(b, E.Literal)):
        return None
    value = _number(b.value)
    return None if value is None else (a.name, op, value)


def _column(e: E.Call) -> str | None:
    """The column `e` tests against literals (eq: one side a column, the other a literal; is_in: its column)."""
    if e.fn == "is_in":
        return e.args[0].name if isinstance(e.args[0], E.Column) else None
    a, b = e.args
    if isinstance(a, E.Column) and isinstance(b, E.Literal):
        return a.name
    if isinstance(b, E.Column) and isinstance(a, E.Literal):
        return b.name
    return None


def _number(v) -> float | None:
    """A statistic or literal as a number on one scale: dates as days, decimals and numbers as floats."""
    if isinstance(v, bool):
        return None
    if isinstance(v, dt.datetime):
        return None   # zones and units: not compared here
    if isinstance(v, dt.date):
        return float(v.toordinal())
    if isinstance(v, (int, float, Decimal)):
        f = float(v)
        return f if math.isfinite(f) else None
    return None


def _distinct(below: N.Node, column: str) -> float | None:
    from eidos.hal.distinct import distinct, origin

    found = origin(below, [column])
    return None if found is None else distinct(found[0].source, (found[1][0],))


def _range(below: N.Node, column: str) -> tuple[float, float, bool] | None:
    from eidos.hal.distinct import origin

    found = origin(below, [column])
    if found is None:
        return None
    source, name = found[0].source, found[1][0]
    return once(source, f"range {name}", lambda: _min_max(source, name))


def _min_max(source: Source, name: str) -> tuple[float, float, bool] | None:
    """(min, max) of column `name` in `source` as numbers (_number), and whether it holds whole values only
    (integers, dates), or None where it cannot be told."""
    import pyarrow as pa

    try:
        if isinstance(source, ArrowSource):
            import pyarrow.compute as pc

            m = pc.min_max(source.table.column(name))
            pairs = [(m["min"].as_py(), m["max"].as_py())]
        elif isinstance(source, ParquetSource) and source.files and name not in source.partitions \
                and not any("://" in f for f in source.files):
            from eidos.hal.distinct import statistics

            stats = statistics(source.files, name)
            if stats is None:
                return None
            pairs = [(s.min, s.max) for s in stats]
        else:
            return None
    except (OSError, pa.ArrowException, KeyError, ValueError, IndexError):
        return None
    nums = [(_number(a), _number(b)) for a, b in pairs if a is not None]
    if not nums or any(a is None or b is None for a, b in nums):
        return None
    discrete = all(isinstance(a, (int, dt.date)) for pair in pairs for a in pair if a is not None)
    return min(a for a, _ in nums), max(b for _, b in nums), discrete
