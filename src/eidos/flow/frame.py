"""Flow: a lazy, immutable plan. Each method returns a new Flow; nothing runs until run()/stream()."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import pyarrow as pa

from eidos.errors import PlanError
from eidos.flow.expr import name_or_expr, to_ir
from eidos.ir import dtypes as T
from eidos.ir import expr as E
from eidos.ir import nodes as N
from eidos.ir.durations import parse_duration
from eidos.ir.order import require_row_order
from eidos.ir.render import tree
from eidos.ir.schema import Schema
from eidos.selectors import Selector, expand


def _names(value: Any, what: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, Sequence) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise PlanError(f"{what} takes a column name or a list of names, got {value!r}")


def _named(exprs: tuple, named: Mapping[str, Any], *, bare_str_is_column: bool = True) -> N.NamedExprs:
    """(name, expr) pairs from positional expressions (named by alias or column) and keyword ones."""
    pairs = []
    for value in exprs:
        if isinstance(value, (list, tuple)):
            pairs.extend(_named(tuple(value), {}))
            continue
        node = name_or_expr(value) if bare_str_is_column else to_ir(value)
        name = E.output_name(node)
        if name is None:
            raise PlanError(f"expression {node} needs a name: add .alias('name') or pass it as name=expr")
        pairs.append((name, E.strip_alias(node)))
    for name, value in named.items():
        pairs.append((name, E.strip_alias(name_or_expr(value) if not isinstance(value, str) else E.Column(value))))
    return tuple(pairs)


class Flow:
    """A lazy relational computation; `run()` chooses a lane, runs it and returns a pyarrow.Table.

    A Flow is immutable: each method returns a new one, and nothing runs until `run()`, `stream()`,
    `write_parquet()` or `write_csv()`. Build one with a source (`ei.from_pydict`, `ei.read_parquet`, ...).

    Examples:
        >>> flow = ei.from_pydict({"k": ["a", "b", "a"], "v": [1, 2, 3]})
        >>> q = flow.filter(col("v") > 1).group_by("k").agg(total=col("v").sum()).sort("k")
        >>> q.schema
        Schema(k: String, total: Int64)
        >>> q.run().to_pydict()
        {'k': ['a', 'b'], 'total': [3, 2]}
    """

    __slots__ = ("_plan",)

    def __init__(self, plan: N.Node):
        plan.schema  # noqa: B018 - validate now, so a bad plan fails where it is built
        self._plan = plan

    @property
    def plan(self) -> N.Node:
        """The root node of the IR plan this Flow describes, before optimizing.

        Examples:
            >>> plan = ei.from_pydict({"a": [1, 2]}).filter(col("a") > 1).plan
            >>> print(plan, "<-", plan.input)
            Filter(a > 1) <- Scan arrow table arrow-... (2 rows)
        """
        return self._plan

    @property
    def schema(self) -> Schema:
        """Output column names and dtypes, known without running.

        Examples:
            >>> ei.from_pydict({"a": [1, 2], "s": ["x", None]}).with_columns(b=col("a") / 2).schema
            Schema(a: Int64, s: String, b: Float64)
        """
        return self._plan.schema

    @property
    def columns(self) -> tuple[str, ...]:
        """The output column names, in order.

        Examples:
            >>> ei.from_pydict({"a": [1], "b": [2]}).columns
            ('a', 'b')
        """
        return self._plan.schema.names

    def __repr__(self) -> str:
        return f"<Flow {self.schema}>\n{tree(self._plan, '  ')}"

    # relational operations
    def filter(self, *predicates: Any, **equalities: Any) -> Flow:
        """The rows where every predicate (a Boolean expression) is true, and every `name=value` holds
        (`col(name) == value`); null counts as false.

        Examples:
            >>> flow = ei.from_pydict({"a": [1, 2, None, 4], "k": ["x", "y", "x", "x"]})
            >>> flow.filter((col("a") > 1) & (col("a") < 4)).run().to_pydict()
            {'a': [2], 'k': ['y']}
            >>> flow.filter(col("a") > 1, k="x").run().to_pydict()
            {'a': [4], 'k': ['x']}
        """
        preds = []
        for p in predicates:
            preds.extend(p if isinstance(p, (list, tuple)) else [p])
        for p in preds:
            if isinstance(p, str):
                raise PlanError(f"filter takes Boolean expressions such as col({p!r}) > 0, not the string {p!r}")
        nodes = [to_ir(p) for p in preds] + [E.Call("eq", (E.Column(n), to_ir(v))) for n, v in equalities.items()]
        if not nodes:
            raise PlanError("filter needs a predicate (col('x') > 0) or an equality (name=value)")
        pred = nodes[0]
        for n in nodes[1:]:
            pred = E.Call("and", (pred, n))
        if not E.contains_window(pred):
            return Flow(N.Filter(self._plan, pred))
        # A window reads every row of the input: computed first as a column (windows live in Projects), then tested.
        keep = tuple((n, E.Column(n)) for n in self.schema.names)
        hidden = self._fresh("keep")
        marked = N.Filter(N.Project(self._plan, keep + ((hidden, pred),)), E.Column(hidden))
        return Flow(N.Project(marked, keep))

    def drop_nulls(self, subset: Any = None) -> Flow:
        """The rows without a null in `subset` (names or a selector; every column when None). NaN is not null.

        Examples:
            >>> flow = ei.from_pydict({"a": [1, None, 3], "b": ["x", "y", None]})
            >>> flow.drop_nulls().run().to_pydict()
            {'a': [1], 'b': ['x']}
            >>> flow.drop_nulls("a").run().to_pydict()
            {'a': [1, 3], 'b': ['x', None]}
        """
        names = self.schema.names if subset is None else self._columns(subset, "drop_nulls subset")
        if not names:
            return self
        return self.filter(*[E.Call("is_not_null", (E.Column(n),)) for n in names])

    def _columns(self, value: Any, what: str) -> tuple[str, ...]:
        """Column names from a name, a selector or a list of them, each checked against the schema."""
        values = value if isinstance(value, (list, tuple)) else [value]
        names = expand(values, self.schema)
        for n in names:
            if not isinstance(n, str):
                raise PlanError(f"{what} takes column names or selectors, got {n!r}")
            if n not in self.schema:
                raise self.schema.missing(n, what)
        return tuple(dict.fromkeys(names))

    def _fresh(self, stem: str) -> str:
        """A column name the flow does not have, for a step's own columns."""
        name, i = f"__eidos_{stem}", 0
        while name in self.schema:
            i += 1
            name = f"__eidos_{stem}{i}"
        return name

    def with_row_index(self, name: str = "index", offset: int = 0) -> Flow:
        """A first column numbering the rows 0, 1, 2, ... (from `offset`) in the flow's row order, which must be
        one the plan defines (docs/semantics.md section 15: sort first after a group_by or join). Int64 (Polars:
        UInt32).

        Examples:
            >>> ei.from_pydict({"a": ["x", "y"]}).with_row_index().run().to_pydict()
            {'index': [0, 1], 'a': ['x', 'y']}
        """
        if not isinstance(name, str):
            raise PlanError(f"with_row_index(name=...) takes a column name, got {name!r}")
        if not isinstance(offset, int) or isinstance(offset, bool) or not 0 <= offset < 2**63:
            raise PlanError(f"with_row_index(offset=...) takes an integer from 0 to 2**63 - 1, got {offset!r}")
        if name in self.schema:
            raise PlanError(f"with_row_index: the flow already has a column {name!r}; choose another name")
        require_row_order(self._plan, "with_row_index")
        one = E.Literal(abs(offset - 1), T.Int64, weak=True)
        index = E.Call("add" if offset >= 1 else "sub", (E.Window("row_number"), one))
        return Flow(N.Project(self._plan, ((name, index),) + tuple((n, E.Column(n)) for n in self.schema.names)))

    def tail(self, n: int = 5) -> Flow:
        """The last `n` rows, in the flow's row order, which must be one the plan defines (see with_row_index).

        Examples:
            >>> ei.from_pydict({"a": [5, 3, 9, 1]}).tail(2).run().to_pydict()
            {'a': [9, 1]}
        """
        if not isinstance(n, int) or isinstance(n, bool) or not 0 <= n <= N.MAX_COUNT:
            raise PlanError(f"tail takes a non-negative integer, got {n!r}")
        require_row_order(self._plan, "tail")
        keep = tuple((c, E.Column(c)) for c in self.schema.names)
        number, rows = self._fresh("row"), self._fresh("rows")
        numbered = N.Project(self._plan, keep + ((number, E.Window("row_number")), (rows, E.Window("count_rows"))))
        last = E.Call("gt", (E.Column(number), E.Call("sub", (E.Column(rows), E.Literal(n, T.Int64, weak=True)))))
        return Flow(N.Project(N.Filter(numbered, last), keep))

    def sample(self, n: int | None = None, *, fraction: float | None = None, with_replacement: bool = False,
               seed: int | None = None) -> Flow:
        """`n` rows (or `fraction` of them, rounded down) chosen by `seed`, the same rows on every lane: each
        row's position (the flow's row order must be defined, as with_row_index's) is hashed with the seed
        by integer arithmetic, and the rows with the smallest hashes are kept, in row order. With
        `with_replacement`, draw j = 1..n takes the row at position 1 + hash(seed, j) mod the row count, in
        draw order (`n` only). Without `seed` one is picked when the plan is built. Polars' sample draws
        other rows for the same seed.

        Examples:
            >>> flow = ei.from_pydict({"a": list(range(10))})
            >>> flow.sample(3, seed=1).run().to_pydict() == flow.sample(3, seed=1).run(engine="reference").to_pydict()
            True
            >>> flow.sample(fraction=0.5, seed=7).run().num_rows
            5
        """
        import random

        from eidos.flow.reshape import sample

        if (n is None) == (fraction is None):
            raise PlanError("sample takes n=... (a number of rows) or fraction=... (of the rows), one of them")
        if n is not None and (not isinstance(n, int) or isinstance(n, bool) or not 0 <= n <= 2**31):
            raise PlanError(f"sample n is a number of rows from 0 to 2**31, got {n!r}")
        if fraction is not None and (not isinstance(fraction, (int, float)) or isinstance(fraction, bool)
                                     or not 0 <= fraction <= 1):
            raise PlanError(f"sample fraction is a number from 0 to 1, got {fraction!r}")
        if with_replacement and n is None:
            raise PlanError("sample with_replacement=True takes n=... (eidos draws that many rows)")
        if seed is None:
            seed = random.randrange(2**62)
        if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
            raise PlanError(f"sample seed is a non-negative integer, got {seed!r}")
        require_row_order(self._plan, "sample")
        return sample(self, n, fraction, with_replacement, seed)

    def select(self, *exprs: Any, **named: Any) -> Flow:
        """Only the given columns: names, expressions (named by `.alias` or their column) and `name=expr`.

        Examples:
            >>> flow = ei.from_pydict({"a": [1, 2], "b": [10, 20]})
            >>> flow.select("b", (col("a") * 2).alias("a2"), total=col("a") + col("b")).run().to_pydict()
            {'b': [10, 20], 'a2': [2, 4], 'total': [11, 22]}
        """
        exprs = tuple(expand(exprs, self.schema))
        if not exprs and not named:
            raise PlanError("select needs at least one column or expression")
        return Flow(N.Project(self._plan, _named(exprs, named)))

    def with_columns(self, *exprs: Any, **named: Any) -> Flow:
        """Every column, with the given ones replaced (same name) or added at the end.

        Examples:
            >>> flow = ei.from_pydict({"a": [1, 2], "b": [10, 20]})
            >>> flow.with_columns(col("a") * 100, c=col("b") + 1).run().to_pydict()
            {'a': [100, 200], 'b': [10, 20], 'c': [11, 21]}
        """
        new = dict(_named(tuple(expand(exprs, self.schema)), named))
        cols = [(n, new.pop(n, E.Column(n))) for n in self.schema.names]
        return Flow(N.Project(self._plan, tuple(cols) + tuple(new.items())))

    def group_by(self, *keys: Any) -> GroupBy:
        """Group rows by `keys` (names or expressions); `.agg(...)` on the result makes one row per group.

        Examples:
            >>> flow = ei.from_pydict({"k": ["a", "b", "a"], "v": [1, 2, 3]})
            >>> flow.group_by("k").agg(n=ei.count(), top=col("v").max()).sort("k").run().to_pydict()
            {'k': ['a', 'b'], 'n': [2, 1], 'top': [3, 2]}
        """
        keys = tuple(expand(keys, self.schema))
        if not keys:
            raise PlanError("group_by needs at least one key; use flow.agg(...) to aggregate everything")
        return GroupBy(self, _named(keys, {}))

    def group_by_dynamic(self, index_column: str, *, every: str, period: str | None = None, offset: str | None = None,
                         closed: str = "left", label: str = "left", group_by: Any = None) -> GroupBy:
        """Group rows into windows of time of length `every` ("1h", "1d", "1w", "1mo") by the Date or Timestamp
        `index_column` (and by `group_by` keys within them); `.agg(...)` makes one row per window that holds
        rows: the keys, the window's start under the index column's name, the aggregations, sorted by them.
        Windows are those of `dt.truncate(every)`: [start, start + every). Polars' other windows (a `period`
        other than `every`, an `offset`, `closed` other than "left", `label` other than "left") are not here yet.

        Examples:
            >>> t = [datetime.datetime(2024, 1, 1, h, m) for h, m in ((0, 10), (0, 50), (2, 5))]
            >>> flow = ei.from_pydict({"t": t, "x": [1, 2, 4]})
            >>> flow.group_by_dynamic("t", every="1h").agg(s=col("x").sum()).run().to_pydict()
            {'t': [datetime.datetime(2024, 1, 1, 0, 0), datetime.datetime(2024, 1, 1, 2, 0)], 's': [3, 4]}
        """
        every_ = parse_duration(every)
        for what, value, plain in (("period", period, None), ("offset", offset, None), ("closed", closed, "left"),
                                   ("label", label, "left")):
            if value != plain and not (what == "period" and parse_duration(value) == every_) \
                    and not (what == "offset" and parse_duration(value).is_zero):
                raise PlanError(f"group_by_dynamic({what}={value!r}): eidos groups by the windows of "
                                f"dt.truncate(every) so far (period=every, no offset, closed='left', label='left')")
        keys = _named(tuple(_names(group_by, "group_by_dynamic(group_by=...)")), {})
        window = E.Call("dt_truncate", (E.Column(index_column),), (str(every_),))
        return _Windows(self, keys + ((index_column, window),))

    def agg(self, *aggs: Any, **named: Any) -> Flow:
        """Aggregate the whole flow into one row.

        Examples:
            >>> ei.from_pydict({"v": [1, 2, 3]}).agg(total=col("v").sum(), n=ei.count()).run().to_pydict()
            {'total': [6], 'n': [3]}
        """
        return GroupBy(self, ()).agg(*aggs, **named)

    def join(self, other: Flow, on: Any = None, *, left_on: Any = None, right_on: Any = None,
             how: str = "inner", suffix: str = "_right") -> Flow:
        """Join with `other` on key columns.

        `how` is one of inner, left, right, full, semi, anti, cross; `on` (the same names on both
        sides) or `left_on`/`right_on` take a name or a list of names. Non-key columns whose names
        clash get `suffix`.

        Examples:
            >>> orders = ei.from_pydict({"id": [1, 2, 3], "cust": [10, 20, 30]})
            >>> names = ei.from_pydict({"cust": [10, 20], "name": ["ann", "bob"]})
            >>> orders.join(names, on="cust", how="left").sort("id").run().to_pydict()
            {'id': [1, 2, 3], 'cust': [10, 20, 30], 'name': ['ann', 'bob', None]}
            >>> orders.join(names, left_on="cust", right_on="cust", how="anti").run().to_pydict()
            {'id': [3], 'cust': [30]}
        """
        if not isinstance(other, Flow):
            raise PlanError(f"join takes another Flow, got {type(other).__name__}")
        if how not in N.JOIN_KINDS:
            raise PlanError(f"unknown join kind {how!r}; use one of {', '.join(N.JOIN_KINDS)}")
        if on is not None and (left_on is not None or right_on is not None):
            raise PlanError("join takes either on=... or left_on=/right_on=..., not both")
        lk = _names(on if on is not None else left_on, "join on")
        rk = _names(on if on is not None else right_on, "join on")
        if how != "cross" and not lk:
            raise PlanError(f"a {how} join needs keys: on=... or left_on=.../right_on=...")
        return Flow(N.Join(self._plan, other._plan, how, lk, rk, suffix))

    def sort(self, *by: Any, descending: bool | Sequence[bool] = False,
             nulls_last: bool | Sequence[bool] | None = None) -> Flow:
        """Rows ordered by `by` (names or expressions); `descending` and `nulls_last` may be one per key.

        Nulls come last unless `nulls_last=False`.

        Examples:
            >>> flow = ei.from_pydict({"k": ["a", "b", "a", None], "v": [1, 2, 3, 4]})
            >>> flow.sort("k", "v", descending=[False, True]).run().to_pydict()
            {'k': ['a', 'a', 'b', None], 'v': [3, 1, 2, 4]}
        """
        if len(by) == 1 and isinstance(by[0], (list, tuple)):
            by = tuple(by[0])
        by = tuple(expand(by, self.schema))
        if not by:
            raise PlanError("sort needs at least one column or expression")
        desc = _per_key(descending, len(by), "descending")
        last = _per_key(nulls_last, len(by), "nulls_last")
        keys = tuple(N.SortKey(E.strip_alias(name_or_expr(b)), d, True if n is None else n)
                     for b, d, n in zip(by, desc, last))
        return Flow(N.Sort(self._plan, keys))

    def limit(self, n: int, offset: int = 0) -> Flow:
        """At most `n` rows, after skipping `offset`; sort first for a defined set of rows.

        Examples:
            >>> ei.from_pydict({"a": [5, 3, 9, 1]}).sort("a").limit(2, offset=1).run().to_pydict()
            {'a': [3, 5]}
        """
        if not isinstance(n, int) or isinstance(n, bool) or not isinstance(offset, int):
            raise PlanError(f"limit takes a non-negative integer, got {n!r}")
        return Flow(N.Limit(self._plan, n, offset))

    def head(self, n: int = 5) -> Flow:
        """The first `n` rows: `limit(n)`.

        Examples:
            >>> ei.from_pydict({"a": [5, 3, 9, 1]}).sort("a").head(2).run().to_pydict()
            {'a': [1, 3]}
        """
        return self.limit(n)

    def top_k(self, k: int, *, by: Any, reverse: bool | Sequence[bool] = False) -> Flow:
        """The `k` rows with the largest values of `by` (names, expressions or a selector), largest first:
        `sort(by, descending=True, nulls_last=True).limit(k)`, so every lane's top-N serves it. Nulls come
        last whatever `reverse` says (as Polars); `reverse=True` takes the smallest. Ties keep input order.

        Examples:
            >>> flow = ei.from_pydict({"k": ["a", "b", "c", "d"], "v": [3, None, 9, 5]})
            >>> flow.top_k(2, by="v").run().to_pydict()
            {'k': ['c', 'd'], 'v': [9, 5]}
        """
        return self._top(k, by, reverse, True, "top_k")

    def bottom_k(self, k: int, *, by: Any, reverse: bool | Sequence[bool] = False) -> Flow:
        """The `k` rows with the smallest values of `by`, smallest first (nulls last); see `top_k`.

        Examples:
            >>> flow = ei.from_pydict({"k": ["a", "b", "c", "d"], "v": [3, None, 9, 5]})
            >>> flow.bottom_k(2, by="v").run().to_pydict()
            {'k': ['a', 'd'], 'v': [3, 5]}
        """
        return self._top(k, by, reverse, False, "bottom_k")

    def _top(self, k: int, by: Any, reverse: Any, largest: bool, what: str) -> Flow:
        if not isinstance(k, int) or isinstance(k, bool) or k < 0:
            raise PlanError(f"{what} takes a number of rows k >= 0, got {k!r}")
        keys = tuple(expand(by if isinstance(by, (list, tuple)) else [by], self.schema))
        flags = _per_key(reverse, len(keys), "reverse")
        return self.sort(*keys, descending=[largest != bool(r) for r in flags], nulls_last=True).limit(k)

    def distinct(self, subset: Any = None, *, keep: str = "any") -> Flow:
        """The rows without duplicates (nulls equal to each other, NaN to NaN), as Polars' `unique`.

        With `subset` (names or a selector) rows are duplicates when those columns are equal. `keep` says
        which of them stays: "any" one, the "first" or the "last" in row order (a plan that leaves its order
        unspecified is a PlanError: sort first), or "none" of them (only rows whose values no other row
        shares). The rows keep their input order where it is defined.

        Examples:
            >>> ei.from_pydict({"a": [1, 2, 1, None, None]}).distinct().sort("a").run().to_pydict()
            {'a': [1, 2, None]}
            >>> flow = ei.from_pydict({"k": ["x", "y", "x"], "v": [1, 2, 3]})
            >>> flow.distinct("k", keep="last").run().to_pydict()
            {'k': ['y', 'x'], 'v': [2, 3]}
            >>> flow.distinct(["k"], keep="none").run().to_pydict()
            {'k': ['y'], 'v': [2]}
        """
        if keep not in N.UNIQUE_KEEPS:
            raise PlanError(f"distinct keep must be one of {', '.join(map(repr, N.UNIQUE_KEEPS))}, got {keep!r}")
        names = self.schema.names if subset is None else self._columns(subset, "distinct subset")
        if not names:
            raise PlanError("distinct subset names no column: give at least one, or subset=None for all")
        if names == self.schema.names and keep == "any":
            return Flow(N.Distinct(self._plan))
        return Flow(N.Unique(self._plan, names, keep))

    def explode(self, columns: Any, *more: Any, empty_as_null: bool = False, keep_nulls: bool = True) -> Flow:
        """A row per element of the List `columns` (names or a selector), the other columns repeated, in row
        order and then list order. Several columns explode together: their lists must be equally long in
        each row (an ExecutionError otherwise). As Polars: an empty list gives no row (one holding null with
        `empty_as_null=True`), a null list one row holding null (none with `keep_nulls=False`).

        Examples:
            >>> flow = ei.from_pydict({"k": ["a", "b", "c"], "xs": [[1, 2], [], None]})
            >>> flow.explode("xs").run().to_pydict()
            {'k': ['a', 'a', 'c'], 'xs': [1, 2, None]}
            >>> flow.explode("xs", empty_as_null=True, keep_nulls=False).run().to_pydict()
            {'k': ['a', 'a', 'b'], 'xs': [1, 2, None]}
        """
        if not isinstance(empty_as_null, bool) or not isinstance(keep_nulls, bool):
            raise PlanError("explode empty_as_null and keep_nulls take True or False")
        names = self._columns([columns, *more] if more else columns, "explode")
        return Flow(N.Explode(self._plan, names, empty_as_null, keep_nulls))

    def unnest(self, columns: Any, *more: Any) -> Flow:
        """Each Struct column of `columns` (names or a selector) replaced, in place, by a column per field, named
        as the field (Polars' `unnest`); a null struct gives nulls. A field name that is already a column is a PlanError.

        Examples:
            >>> flow = ei.from_pydict({"k": [1, 2], "s": [{"a": 10, "b": "x"}, None]})
            >>> flow.unnest("s").run().to_pydict()
            {'k': [1, 2], 'a': [10, None], 'b': ['x', None]}
        """
        names = self._columns([columns, *more] if more else columns, "unnest")
        out: list[tuple[str, E.Expr]] = []
        for n, t in self.schema.items():
            if n not in names:
                out.append((n, E.Column(n)))
            elif not isinstance(t, T.StructType):
                raise PlanError(f"unnest() takes Struct columns; {n!r} is {t}")
            else:
                out += [(f, E.Call("struct_field", (E.Column(n),), (f,))) for f, _ in t.fields]
        return Flow(N.Project(self._plan, tuple(out)))

    def join_asof(self, other: Flow, on: str | None = None, *, left_on: str | None = None,
                  right_on: str | None = None, by: Any = None, by_left: Any = None, by_right: Any = None,
                  strategy: str = "backward", suffix: str = "_right", tolerance: Any = None) -> Flow:
        """Each row with the row of `other` whose `on` value is nearest before its own (`strategy="backward"`:
        the largest not above it), after it ("forward": the smallest not below it) or on either side
        ("nearest"; an equal distance goes forward), among the rows with equal `by` columns, and at most
        `tolerance` away (a number; days, or a `datetime.timedelta` of whole days, for dates; a `timedelta`
        for timestamps). A left join:
        rows without a match get nulls; rows keep the left's order. Unlike Polars, nothing needs sorting.

        Of several right rows with the matched `on` value, the one whose columns sort first (section 8
        order, column by column) is taken, so every lane takes the same one. The right `on` column stays
        unless it has the left's name; the right `by` columns go.

        Examples:
            >>> quotes = ei.from_pydict({"t": [1, 5, 9], "price": [10.0, 11.0, 12.0]})
            >>> trades = ei.from_pydict({"t": [0, 5, 7, 20], "qty": [1, 2, 3, 4]})
            >>> trades.join_asof(quotes, on="t").run().to_pydict()
            {'t': [0, 5, 7, 20], 'qty': [1, 2, 3, 4], 'price': [None, 11.0, 11.0, 12.0]}
            >>> trades.join_asof(quotes, on="t", strategy="nearest", tolerance=2).run().to_pydict()
            {'t': [0, 5, 7, 20], 'qty': [1, 2, 3, 4], 'price': [10.0, 11.0, 12.0, None]}
        """
        import datetime as _dt

        if not isinstance(other, Flow):
            raise PlanError(f"join_asof takes another Flow, got {type(other).__name__}")
        if (on is None) == (left_on is None and right_on is None) or (on is None and None in (left_on, right_on)):
            raise PlanError("join_asof takes on=name, or left_on=name and right_on=name")
        if by is not None and (by_left is not None or by_right is not None):
            raise PlanError("join_asof takes either by=... or by_left=/by_right=..., not both")
        lby = _names(by if by is not None else by_left, "join_asof by")
        rby = _names(by if by is not None else by_right, "join_asof by")
        stamps = self.schema[on or left_on].kind == "Timestamp" if (on or left_on) in self.schema else False
        if isinstance(tolerance, _dt.timedelta) and not stamps:
            if tolerance % _dt.timedelta(days=1):
                raise PlanError(f"join_asof tolerance as a timedelta must be whole days, got {tolerance}")
            tolerance = tolerance.days
        if tolerance is not None and not isinstance(tolerance, (int, float, _dt.timedelta)) or isinstance(tolerance, bool):
            raise PlanError(f"join_asof tolerance is a number (days for dates) or a datetime.timedelta, got "
                            f"{tolerance!r}")
        tol = None if tolerance is None else to_ir(tolerance)
        return Flow(N.AsofJoin(self._plan, other._plan, on or left_on, on or right_on, lby, rby, strategy, tol, suffix))

    def union(self, *others: Flow) -> Flow:
        """All rows of this flow and of `others` (duplicates kept); the schemas must match.

        Examples:
            >>> a, b = ei.from_pydict({"x": [1, 2]}), ei.from_pydict({"x": [2, 3]})
            >>> a.union(b).sort("x").run().to_pydict()
            {'x': [1, 2, 2, 3]}
        """
        for o in others:
            if not isinstance(o, Flow):
                raise PlanError(f"union takes Flows, got {type(o).__name__}")
        return Flow(N.Union((self._plan,) + tuple(o._plan for o in others)))

    def rename(self, mapping: Mapping[str, str]) -> Flow:
        """The same columns, those in `mapping` (old name to new name) renamed.

        Examples:
            >>> ei.from_pydict({"a": [1], "b": [2]}).rename({"a": "x"}).columns
            ('x', 'b')
        """
        if not isinstance(mapping, Mapping):
            raise PlanError(f"rename takes a mapping of old name to new name, got {mapping!r}")
        for old in mapping:
            if old not in self.schema:
                raise self.schema.missing(old, "rename")
        return Flow(N.Project(self._plan, tuple((mapping.get(n, n), E.Column(n)) for n in self.schema.names)))

    def drop(self, *names: str | Selector) -> Flow:
        """Every column but `names` (names or selectors).

        Examples:
            >>> ei.from_pydict({"a": [1], "b": [2], "c": [3]}).drop("a", "c").run().to_pydict()
            {'b': [2]}
        """
        names = tuple(expand(names, self.schema))
        for n in names:
            if n not in self.schema:
                raise self.schema.missing(n, "drop")
        kept = tuple((n, E.Column(n)) for n in self.schema.names if n not in names)
        if not kept:
            raise PlanError("drop would remove every column")
        return Flow(N.Project(self._plan, kept))

    def unpivot(self, on: Any = None, *, index: Any = None, variable_name: str = "variable",
                value_name: str = "value") -> Flow:
        """Wide to long: a row per input row and `on` column, holding the `index` columns, the column's name
        (`variable_name`) and its value (`value_name`, of the `on` columns' supertype). `on` defaults to
        every column not in `index`; names or selectors. Rows come column by column.

        Examples:
            >>> flow = ei.from_pydict({"id": [1, 2], "a": [10, 20], "b": [1.5, None]})
            >>> flow.unpivot(["a", "b"], index="id").run().to_pydict()
            {'id': [1, 2, 1, 2], 'variable': ['a', 'a', 'b', 'b'], 'value': [10.0, 20.0, 1.5, None]}
        """
        from eidos.flow.reshape import unpivot

        return unpivot(self, on, index, variable_name, value_name)

    def pivot(self, on: Any, on_columns: Any = None, *, index: Any = None, values: Any = None,
              aggregate_function: str | None = None, separator: str = "_") -> Flow:
        """Long to wide: a row per distinct `index`, a column per value of `on` (per `values` column), each
        the `aggregate_function` (min, max, sum, mean, median, len, count) of the values in that cell;
        a cell without values is what the aggregation gives for none (null; 0 for len and count).

        `on_columns` lists the values of `on` that become columns; without it they are read now, running
        the flow once (as Polars' eager pivot), sorted. With several `values` columns a column is named
        `{value}{separator}{on value}`.

        Examples:
            >>> flow = ei.from_pydict({"k": ["a", "a", "b"], "on": ["x", "y", "x"], "v": [1, 2, 3]})
            >>> flow.pivot("on", index="k", values="v", aggregate_function="sum").sort("k").run().to_pydict()
            {'k': ['a', 'b'], 'x': [1, 3], 'y': [2, None]}
        """
        from eidos.flow.reshape import pivot

        return pivot(self, on, on_columns, index, values, aggregate_function, separator)

    def describe(self, percentiles: Sequence[float] = (0.25, 0.5, 0.75)) -> Flow:
        """Summary statistics as Polars' `describe`: a row each for count, null_count, mean, std, min, the
        percentiles (nearest value) and max, a column per input column (Float64 for numbers and
        booleans, String text for the rest, which get count, null_count, min and max). Mean and std are
        exact, as the aggregations are.

        Examples:
            >>> ei.from_pydict({"x": [1, 2, None], "s": ["b", "a", "c"]}).describe().run().to_pydict()["x"][:5]
            [2.0, 1.0, 1.5, 0.7071067811865476, 1.0]
        """
        from eidos.flow.reshape import describe

        ps = tuple(percentiles) if isinstance(percentiles, (list, tuple)) else (percentiles,)
        if not all(isinstance(p, (int, float)) and not isinstance(p, bool) and 0 <= p <= 1 for p in ps):
            raise PlanError(f"describe percentiles are numbers from 0 to 1, got {percentiles!r}")
        return describe(self, ps)

    def map_batches(self, fn: Callable[[pa.RecordBatch], pa.RecordBatch], *, schema: Any) -> Flow:
        """Apply an opaque Python function from `pyarrow.RecordBatch` to `pyarrow.RecordBatch`.

        `schema` (a mapping of name to dtype, a pyarrow or an eidos Schema) is what `fn` returns, so
        the plan's schema stays known without running.

        Examples:
            >>> import pyarrow as pa, pyarrow.compute as pc
            >>> def double(batch):
            ...     return pa.record_batch({"a": pc.multiply(batch["a"], 2)})
            >>> ei.from_pydict({"a": [1, 2]}).map_batches(double, schema={"a": ei.Int64}).run().to_pydict()
            {'a': [2, 4]}
        """
        if not callable(fn):
            raise PlanError(f"map_batches takes a callable, got {fn!r}")
        return Flow(N.MapBatches(self._plan, fn, _as_schema(schema)))

    def sql(self, query: str, *, dialect: str = "duckdb", **flows: Any) -> Flow:
        """A SQL query over this flow, named `self` in it (and other Flows by keyword); see `ei.sql`.

        Examples:
            >>> flow = ei.from_pydict({"k": ["a", "b", "a"], "v": [1, 2, 3]})
            >>> flow.sql("SELECT k, sum(v) AS total FROM self WHERE v > 1 GROUP BY k ORDER BY k").run().to_pydict()
            {'k': ['a', 'b'], 'total': [3, 2]}
        """
        from eidos.flow.sql import sql

        return sql(query, dialect=dialect, self=self, **flows)

    # running
    def run(self, engine: str | None = None, *, strict: bool = False, address: str | None = None,
            progress: bool | None = None) -> pa.Table:
        """Run on the lane the HAL chooses (or `engine`); returns a pyarrow.Table.

        A lane that finds at run time that it cannot run the plan hands over to the next capable
        lane with a warning; `strict=True` raises instead. `ei.last_run()` tells where it ran.
        `address` says where a lane that runs elsewhere runs: `run(engine="ray", address="host:6379")`.
        A run longer than a second shows a progress bar in a terminal or notebook (not in a pipe);
        `progress=False` (or EIDOS_PROGRESS=0) turns it off, `progress=True` shows it anywhere.

        Examples:
            >>> flow = ei.from_pydict({"a": [1, 2, 3]}).filter(col("a") >= 2)
            >>> flow.run().to_pydict()
            {'a': [2, 3]}
            >>> flow.run(engine="reference").num_rows
            2
        """
        from eidos.hal.runner import run

        return run(self._plan, engine=engine, strict=strict, address=address, progress=progress)

    def stream(self, engine: str | None = None, *, address: str | None = None) -> Iterator[pa.RecordBatch]:
        """Run and yield the result as pyarrow record batches (how many depends on the lane).

        Examples:
            >>> flow = ei.from_pydict({"a": [1, 2, 3]})
            >>> sum(batch.num_rows for batch in flow.stream())
            3
        """
        from eidos.hal.runner import stream

        return stream(self._plan, engine=engine, address=address)

    def profile(self, engine: str | None = None, *, address: str | None = None):
        """Run, and return a `Profile` of the run: each part and the finishing plan with the lane, rows and
        time, the plan's nodes with the rows the planner estimated, and the engine's own profile where it
        keeps one (DuckDB's operators with rows and time); `.result` is the table `run()` would give.

        Examples:
            >>> p = ei.from_pydict({"a": [1, 2, 3]}).filter(col("a") >= 2).profile(engine="reference")
            >>> p.result.num_rows, p.steps[0][:3]
            (2, ('plan', 'reference', 2))
            >>> print(p.estimated_plan())
              Filter(a >= 2)   ~2 rows
                Scan arrow table arrow-... (3 rows)   ~3 rows
        """
        from eidos.hal.profile import profile

        return profile(self._plan, engine, address=address)

    def explain(self, engine: str | None = None, *, address: str | None = None, analyze: bool = False) -> str:
        """The lane chosen, the deciding rule, every rejected lane with why, and the optimized plan; with
        `analyze=True` the flow runs and its `profile()` follows (rows and time of each step).

        Examples:
            >>> flow = ei.from_pydict({"a": [1, 2, 3]}).filter(col("a") >= 2)
            >>> print(flow.explain(engine="reference"))
            lane: reference   (rule 1, explicit override: engine='reference')
            rejected:
            ...
            plan:
              Filter(a >= 2)
                Scan arrow table arrow-... (3 rows)
        """
        from eidos.hal.planner import explain

        text = explain(self._plan, engine=engine, address=address)
        return f"{text}\nprofile:\n{self.profile(engine, address=address)}" if analyze else text

    # other libraries: each runs the flow once and converts its Arrow result
    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object:
        """Run, and hand the result over by the Arrow C stream interface: `pa.table(flow)`,
        `pl.DataFrame(flow)` and DuckDB's `duckdb.sql("SELECT ... FROM flow")` take a Flow as it is.

        Examples:
            >>> import pyarrow as pa
            >>> pa.table(ei.from_pydict({"a": [1, 2]}).with_columns(b=col("a") * 10)).to_pydict()
            {'a': [1, 2], 'b': [10, 20]}
        """
        return self.run().__arrow_c_stream__(requested_schema)

    def to_pandas(self, engine: str | None = None):
        """Run and return a pandas DataFrame (with pandas' default index).

        Examples:
            >>> ei.from_pydict({"a": [1, 2]}).to_pandas()["a"].tolist()
            [1, 2]
        """
        from eidos.flow.interop import to_pandas

        return to_pandas(self.run(engine))

    def to_polars(self, engine: str | None = None):
        """Run and return a polars DataFrame.

        Examples:
            >>> ei.from_pydict({"a": [1, 2]}).to_polars().shape
            (2, 1)
        """
        from eidos.flow.interop import to_polars

        return to_polars(self.run(engine))

    def to_numpy(self, engine: str | None = None, *, dtype: Any = None):
        """Run and return a 2-D NumPy array, a row per row and a column per column, of the columns' common
        type (or `dtype`). Every column must be boolean, integer or float, without nulls (a DTypeError or an
        ExecutionError names the column and what to do). `np.asarray(flow)` and `ei.tensor(flow)` call it.

        Examples:
            >>> ei.from_pydict({"x": [1, 2], "y": [0.5, 1.5]}).to_numpy()
            array([[1. , 0.5],
                   [2. , 1.5]])
        """
        from eidos.flow.interop import to_numpy

        return to_numpy(self.run(engine), dtype)

    def __array__(self, dtype: Any = None, copy: bool | None = None):
        return self.to_numpy(dtype=dtype)

    def to_torch(self, engine: str | None = None, *, return_type: str = "tensor", dtype: Any = None):
        """Run and return the numeric columns as torch tensors: one 2-D tensor of their common type
        (`return_type="tensor"`), or a 1-D tensor per column (`"dict"`), as Polars' `DataFrame.to_torch`;
        `dtype` (a torch dtype) converts them. Columns as `to_numpy` takes them.

        Examples:
            >>> ei.from_pydict({"x": [1.0, 2.0], "y": [3.0, 4.0]}).to_torch().shape  # doctest: +SKIP
            torch.Size([2, 2])
        """
        from eidos.flow.interop import to_torch

        return to_torch(self.run(engine), return_type, dtype)

    def _repr_html_(self) -> str:
        """What a notebook shows: the schema, the lane the plan would run on and why, and the plan."""
        from eidos.hal.notebook import flow_html

        return flow_html(self._plan)

    def write_parquet(self, path: str, engine: str | None = None, *, compression: str = "zstd",
                      compression_level: int | None = None, row_group_size: int | None = None,
                      partition_by: str | Sequence[str] | None = None, storage_options: dict | None = None,
                      address: str | None = None) -> None:
        """Write the result to `path` atomically: a complete file or none (an old file stays).

        `compression` is one of zstd (the default, as in Polars), snappy, gzip, brotli, lz4 and
        uncompressed, with a `compression_level` for zstd, gzip and brotli; `row_group_size` rows make
        each row group (the last may hold fewer). `partition_by` (a column or a list) writes a folder of
        hive folders `key=value/part-0.parquet` instead, each holding the other columns, which
        `ei.read_parquet(path)` reads back with the keys as columns; the folder is written beside
        `path` and replaces it when complete. An s3:// or gs:// `path` is written to a local temporary
        file and uploaded when complete (the store shows no object until then), with `storage_options`
        as the readers take them.

        Examples:
            >>> import os, tempfile
            >>> with tempfile.TemporaryDirectory() as folder:
            ...     path = os.path.join(folder, "out.parquet")
            ...     ei.from_pydict({"a": [1, 2]}).write_parquet(path, compression="zstd", compression_level=9)
            ...     ei.read_parquet(path).run().to_pydict()
            {'a': [1, 2]}
            >>> with tempfile.TemporaryDirectory() as folder:
            ...     sales = ei.from_pydict({"year": [2023, 2024, 2024], "amount": [1.5, 2.0, 3.0]})
            ...     sales.write_parquet(os.path.join(folder, "sales"), partition_by="year")
            ...     print(sorted(os.listdir(os.path.join(folder, "sales"))))
            ...     ei.read_parquet(os.path.join(folder, "sales")).sort("amount").run().to_pydict()
            ['year=2023', 'year=2024']
            {'amount': [1.5, 2.0, 3.0], 'year': [2023, 2024, 2024]}
        """
        from eidos.flow.sinks import write

        write(self, path, "parquet", engine, address, {"compression": compression, "compression_level": compression_level,
                                                       "row_group_size": row_group_size, "partition_by": partition_by},
              storage_options)

    def write_csv(self, path: str, engine: str | None = None, *, separator: str = ",", include_header: bool = True,
                  null_value: str = "", quote_style: str = "non_numeric", date_format: str | None = None,
                  storage_options: dict | None = None, address: str | None = None) -> None:
        """Write the result to `path` as CSV, atomically: a complete file or none.

        `separator` between fields, a header line unless `include_header=False`, `null_value` for a null
        (the empty field by default), `quote_style` "non_numeric" (every string quoted: the default,
        where Polars quotes only where needed), "always" or "never" (then a value that needs quotes is
        an error), and `date_format` (strftime, e.g. "%d/%m/%Y") for Date columns (ISO by default).

        Examples:
            >>> import os, tempfile
            >>> with tempfile.TemporaryDirectory() as folder:
            ...     path = os.path.join(folder, "out.csv")
            ...     ei.from_pydict({"a": [1, None], "s": ["x", "y"]}).write_csv(path)
            ...     print(open(path).read(), end="")
            ...     ei.from_pydict({"a": [1, None], "day": [datetime.date(2024, 5, 1)] * 2}).write_csv(
            ...         path, separator=";", null_value="NA", quote_style="never", date_format="%d/%m/%Y")
            ...     print(open(path).read(), end="")
            "a","s"
            1,"x"
            ,"y"
            a;day
            1;01/05/2024
            NA;01/05/2024
        """
        from eidos.flow.sinks import write

        write(self, path, "csv", engine, address, {"separator": separator, "include_header": include_header,
                                                   "null_value": null_value, "quote_style": quote_style,
                                                   "date_format": date_format}, storage_options)

    def write_database(self, table: str, connection: str, *, if_table_exists: str = "fail",
                       engine: str | None = None) -> int:
        """Write the result into `table` of a DuckDB, SQLite or PostgreSQL database (`connection` as
        read_sql takes it), in one transaction: after any failure the table is as it was. Returns the
        number of rows written.

        `if_table_exists`: "fail" (the default), "append" (the table's columns must read as the flow's),
        or "replace". `table` is a name ('orders', 'sales.orders'), quoted, never SQL. Each column's type
        maps to one the database holds exactly (docs/api/sources.md lists them), or the write is refused
        before anything runs. `engine` is the lane that computes the result (Polars' `engine` names a
        driver; eidos uses ADBC for SQLite and PostgreSQL, DuckDB's own for DuckDB).

        Examples:
            >>> import os, tempfile
            >>> with tempfile.TemporaryDirectory() as folder:
            ...     uri = f"sqlite:///{os.path.join(folder, 'shop.db')}"
            ...     ei.from_pydict({"k": ["a", "b"], "v": [1, 2]}).write_database("sales", uri)
            ...     ei.from_pydict({"k": ["c"], "v": [3]}).write_database("sales", uri, if_table_exists="append")
            ...     ei.read_sql(uri, table="sales").run().to_pydict()
            2
            1
            {'k': ['a', 'b', 'c'], 'v': [1, 2, 3]}
        """
        from eidos.flow.sinks import write_database

        return write_database(self, table, connection, if_table_exists, engine)

    def to_json(self) -> str:
        """A versioned JSON form of the plan (in-memory data included); `Flow.from_json` reads it back.

        A function the plan calls (`ei.udf`, `map_batches`) is stored by the name it was registered
        under (`ei.register_udf`, `@ei.udf`), else by `module:qualname`.

        Examples:
            >>> text = ei.from_pydict({"a": [1, 2]}).filter(col("a") > 1).to_json()
            >>> text[:45]
            '{"format": "eidos-plan", "version": 1, "plan"'
            >>> ei.Flow.from_json(text).run().to_pydict()
            {'a': [2]}
        """
        from eidos.hal.trust import name_of
        from eidos.ir.serialize import dumps

        return dumps(self._plan, name=name_of)

    @classmethod
    def from_json(cls, text: str | bytes, *, trusted_modules: Iterable[str] = (),
                  allowed_urls: Iterable[str] = ()) -> Flow:
        """The Flow that `to_json()` wrote; it may come from anywhere, so it names no code unless allowed.

        A function the plan names must be registered in this process (`ei.register_udf`,
        `@ei.udf`) or defined in one of `trusted_modules` (a module allows its submodules too);
        anything else is a PlanError that names it and how to allow it. Nothing else is imported.
        A source may read local files and s3:// or gs:// objects (with this process's credentials; the
        plan carries none), and an http(s) URL only below one of `allowed_urls`
        (`("https://data.example.com/public/",)`): a URL a plan names could reach any host.

        Examples:
            >>> flow = ei.from_pydict({"a": [3, 1]}).sort("a")
            >>> ei.Flow.from_json(flow.to_json()).run().to_pydict()
            {'a': [1, 3]}
            >>> import math
            >>> text = ei.from_pydict({"x": [4.0]}).select(r=udf(math.sqrt, ei.Float64)("x")).to_json()
            >>> ei.Flow.from_json(text)
            Traceback (most recent call last):
            ...
            eidos.errors.PlanError: plan JSON at plan.columns[0][1].udf: the plan names function 'math:sqrt', ...
            >>> ei.Flow.from_json(text, trusted_modules=("math",)).run().to_pydict()
            {'r': [2.0]}
        """
        from eidos.hal.trust import Trust
        from eidos.ir.serialize import loads

        if isinstance(allowed_urls, str):
            allowed_urls = (allowed_urls,)
        return cls(loads(text, resolve=Trust.of(trusted_modules).resolve, allowed_urls=tuple(allowed_urls)))


def _per_key(value: Any, n: int, what: str) -> list:
    if isinstance(value, (list, tuple)):
        if len(value) != n:
            raise PlanError(f"sort got {len(value)} {what} flags for {n} keys")
        return list(value)
    if value is not None and not isinstance(value, bool):
        raise PlanError(f"sort {what} takes a bool or a list of bools, got {value!r}")
    return [value] * n


def _as_schema(schema: Any) -> Schema:
    if isinstance(schema, Schema):
        return schema
    if isinstance(schema, pa.Schema):
        return Schema.from_arrow(schema)
    if isinstance(schema, Mapping):
        return Schema((name, T.coerce(t)) for name, t in schema.items())
    raise PlanError(f"map_batches schema must be a mapping of name to dtype, a pyarrow.Schema or an "
                    f"eidos Schema, got {schema!r}")


class GroupBy:
    """flow.group_by(keys): call .agg(...) to get a Flow."""

    __slots__ = ("_flow", "_keys")

    def __init__(self, flow: Flow, keys: N.NamedExprs):
        self._flow, self._keys = flow, keys

    def agg(self, *aggs: Any, **named: Any) -> Flow:
        """One row per group: the keys, then each aggregation (positional ones named by their column).

        Examples:
            >>> flow = ei.from_pydict({"k": ["a", "b", "a"], "v": [1.0, 2.0, 4.0]})
            >>> flow.group_by("k").agg(col("v").mean(), n=ei.count()).sort("k").run().to_pydict()
            {'k': ['a', 'b'], 'v': [2.5, 2.0], 'n': [2, 1]}
        """
        if not aggs and not named:
            raise PlanError("agg needs at least one aggregation, e.g. col('x').sum() or ei.count()")
        pairs = _named(aggs, named, bare_str_is_column=False)
        for name, e in pairs:
            if not E.contains_agg(e) and not (isinstance(e, E.Column) and e.name in dict(self._keys)):
                raise PlanError(f"agg {name!r} is not an aggregation: {e}; use .sum(), .mean(), "
                                ".min(), .max(), .count(), .n_unique(), .std(), .var() or ei.count()")
        return Flow(N.Aggregate(self._flow.plan, self._keys, pairs))


class _Windows(GroupBy):
    """flow.group_by_dynamic(...): `.agg(...)` gives one row per window (and group), sorted by them."""

    __slots__ = ()

    def agg(self, *aggs: Any, **named: Any) -> Flow:
        flow = super().agg(*aggs, **named)
        return flow.sort(*[name for name, _ in self._keys])
