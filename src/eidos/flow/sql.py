"""SQL in: a query parsed by sqlglot becomes an eidos plan, run with eidos semantics on any lane.

`ei.sql(query, **flows)` and `Flow.sql(query)` call `parse`. sqlglot is imported here only (the `sql`
extra); each SELECT becomes Scan/Join/Filter/Aggregate/Project/Sort/Limit nodes, each SQL expression an
IR expression. What has no IR form (a window frame ending after the row, recursive CTEs, ...) is an UnsupportedError
naming it; a name that does not resolve is a PlanError listing what exists.
"""

from __future__ import annotations

import calendar
import datetime as _dt
import decimal
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from eidos.errors import BackendUnavailable, PlanError, UnsupportedError, did_you_mean
from eidos.ir import dtypes as T
from eidos.ir import expr as E
from eidos.ir import nodes as N
from eidos.ir.typing import literal_dtype, promote

try:
    import sqlglot
    from sqlglot import exp
except ImportError:  # pragma: no cover - the sql extra is absent
    sqlglot = None

TYPES = {"TINYINT": T.Int8, "SMALLINT": T.Int16, "INT": T.Int32, "BIGINT": T.Int64, "UTINYINT": T.UInt8,
         "USMALLINT": T.UInt16, "UINT": T.UInt32, "UBIGINT": T.UInt64, "FLOAT": T.Float32, "DOUBLE": T.Float64,
         "BOOLEAN": T.Boolean, "VARCHAR": T.String, "TEXT": T.String, "CHAR": T.String, "NVARCHAR": T.String,
         "DATE": T.Date, "TIMESTAMP": T.Timestamp, "DATETIME": T.Timestamp}
AGGREGATES = {"Sum": "sum", "Avg": "mean", "Min": "min", "Max": "max", "Stddev": "std", "StddevSamp": "std",
              "Variance": "var", "VarianceSamp": "var", "Median": "median"}
UNARY = {"Abs": "abs", "Sqrt": "sqrt", "Exp": "exp", "Ln": "log", "Floor": "floor", "Ceil": "ceil", "Sin": "sin",
         "Cos": "cos", "Tanh": "tanh", "Lower": "str_to_lower", "Upper": "str_to_upper", "Length": "str_len",
         "Year": "dt_year", "Month": "dt_month", "Day": "dt_day", "Hour": "dt_hour", "Minute": "dt_minute",
         "Second": "dt_second", "DayOfWeekIso": "dt_weekday", "DayOfYear": "dt_ordinal_day"}
BINARY = {"Add": "add", "Sub": "sub", "Mul": "mul", "Div": "truediv", "IntDiv": "floordiv", "Mod": "mod",
          "Pow": "pow", "EQ": "eq", "NEQ": "ne", "LT": "lt", "LTE": "le", "GT": "gt", "GTE": "ge",
          "And": "and", "Or": "or"}
TEXT_TESTS = {"StartsWith": "str_starts_with", "EndsWith": "str_ends_with", "Contains": "str_contains"}
PARTS = {"YEAR": "dt_year", "MONTH": "dt_month", "DAY": "dt_day", "HOUR": "dt_hour", "MINUTE": "dt_minute",
         "SECOND": "dt_second", "ISODOW": "dt_weekday", "DOY": "dt_ordinal_day", "DAYOFYEAR": "dt_ordinal_day"}
# INTERVAL units that make a Duration (DAY, MONTH and YEAR move dates by the calendar).
CLOCK_UNITS = {"HOUR": "hours", "MINUTE": "minutes", "SECOND": "seconds", "MILLISECOND": "milliseconds",
               "MICROSECOND": "microseconds", "WEEK": "weeks"}
# date_trunc's units, as the duration strings of dt.truncate (DuckDB's weeks start on Mondays too).
TRUNC_UNITS = {"MICROSECOND": "1us", "MILLISECOND": "1ms", "SECOND": "1s", "MINUTE": "1m", "HOUR": "1h",
               "DAY": "1d", "WEEK": "1w", "MONTH": "1mo", "QUARTER": "1q", "YEAR": "1y", "DECADE": "10y"}


def _dollars(rewrite: str, text: str) -> str:
    """An RE2 replacement (\\1 a group, \\\\ a backslash) written as eidos' (Polars') ${1}, with $ as $$."""
    import re

    def piece(m: re.Match) -> str:
        if m.group(1) is not None:
            return "${" + m.group(1) + "}"
        if m.group() == "\\\\":
            return "\\"
        if m.group() == "$":
            return "$$"
        if m.group().startswith("\\"):
            raise UnsupportedError(f"ei.sql reads \\0 to \\9 and \\\\ in REGEXP_REPLACE's replacement, not {m.group()}: {text}")
        return m.group()

    return re.sub(r"\\([0-9])|\\\\|\\.?|\$|[^\\$]+", piece, rewrite, flags=re.S)


def parse(query: str, flows: Mapping[str, Any], *, dialect: str = "duckdb",
          files: Callable[[str], Any] | None = None) -> N.Node:
    """The plan of `query`, its tables named by `flows` (name -> Flow); `files(path)` reads a quoted path."""
    if sqlglot is None:
        raise BackendUnavailable("ei.sql needs sqlglot, which is not installed: pip install 'eidos[sql]'")
    if not isinstance(query, str):
        raise PlanError(f"ei.sql takes the query as a str, got {type(query).__name__}")
    try:
        trees = sqlglot.parse(query, read=dialect)
    except sqlglot.errors.ParseError as e:
        raise PlanError(f"the SQL does not parse ({dialect} dialect): {e}") from None
    except ValueError as e:  # an unknown dialect
        raise PlanError(f"ei.sql: {e}") from None
    trees = [t for t in trees if t is not None]
    if len(trees) != 1:
        raise PlanError(f"ei.sql takes one query, got {len(trees)} statements")
    tables = {}
    for name, flow in flows.items():
        plan = getattr(flow, "plan", None)
        if not isinstance(plan, N.Node):
            raise PlanError(f"ei.sql table {name!r} must be a Flow, got {type(flow).__name__}")
        tables[name.lower()] = plan
    return Query(tables, dialect, files).statement(trees[0])


@dataclass(frozen=True)
class Field:
    """A column a query can name: `table.name`, held in the plan as `internal`."""

    table: str | None
    name: str
    internal: str
    star: bool = True      # part of SELECT *
    using: bool = False    # the merged column of JOIN ... USING, which an unqualified name means


@dataclass
class Rel:
    plan: N.Node
    fields: list[Field]

    def names(self) -> str:
        return ", ".join(f"{f.table}.{f.name}" if f.table else f.name for f in self.fields) or "(none)"

    def resolve(self, name: str, table: str | None, quoted: bool = True) -> Field:
        for exact in (True, False):
            if exact is False and quoted:
                break
            found = [f for f in self.fields if _same(f.name, name, exact)
                     and (table is None or (f.table is not None and f.table.lower() == table.lower()))]
            if len(found) > 1:
                shown = [f for f in found if f.star]   # USING's merged column hides the two it merges
                if table is None and len(shown) == 1:
                    return shown[0]
                raise PlanError(f"column {name!r} is ambiguous: it may be "
                                f"{' or '.join(f'{f.table}.{f.name}' for f in found)}; qualify it")
            if found:
                return found[0]
        what = f"{table}.{name}" if table else name
        hint = did_you_mean(what, [f"{f.table}.{f.name}" if table else f.name for f in self.fields])
        raise PlanError(f"column {what!r} does not exist in the query\n  columns: {self.names()}"
                        + (f"\n  {hint}" if hint else ""))


def _same(a: str, b: str, exact: bool) -> bool:
    return a == b if exact else a.lower() == b.lower()


class Query:
    """One translation: the tables in reach (CTEs shadow the caller's), fresh internal names."""

    def __init__(self, tables: dict[str, N.Node], dialect: str, files: Callable | None):
        self.tables, self.dialect, self.files, self.counter = tables, dialect, files, 0
        self.windows: dict[str, exp.Window] = {}   # the SELECT's named windows

    def fresh(self, stem: str) -> str:
        self.counter += 1
        return f"__{stem}{self.counter}"

    # ---------------------------------------------------------------- statements
    def statement(self, tree: exp.Expression) -> N.Node:
        if isinstance(tree, exp.Subquery):
            return self.statement(tree.this)
        outer = dict(self.tables)
        try:
            with_ = tree.args.get("with_") or tree.args.get("with")
            if with_ is not None:
                if with_.args.get("recursive"):
                    raise UnsupportedError("ei.sql does not support WITH RECURSIVE")
                for cte in with_.expressions:
                    self.tables[cte.alias_or_name.lower()] = self._rename(self.statement(cte.this), cte)
            if isinstance(tree, exp.Select):
                return self.select(tree)
            if isinstance(tree, exp.Union):
                return self.union(tree)
            kind = type(tree).__name__.upper()
            raise UnsupportedError(f"ei.sql runs queries (SELECT, UNION ALL); {kind} is not supported"
                                   if not isinstance(tree, (exp.Intersect, exp.Except))
                                   else f"ei.sql does not support {kind}")
        finally:
            self.tables = outer

    def union(self, tree: exp.Union) -> N.Node:
        left, right = self.statement(tree.left), self.statement(tree.right)
        ls, rs = left.schema, right.schema
        if len(ls) != len(rs):
            raise PlanError(f"UNION inputs have {len(ls)} and {len(rs)} columns; they need the same number")
        types = [promote(a, b, op="union") for a, b in zip(ls.dtypes, rs.dtypes)]
        plan: N.Node = N.Union(tuple(_cast_to(side, ls.names, types) for side in (left, right)))
        if tree.args.get("distinct"):
            plan = N.Distinct(plan)
        rel = Rel(plan, [Field(None, n, n) for n in ls.names])
        items = [(n, E.Column(n), None) for n in ls.names]
        return self.finish(tree, N.Project(plan, tuple((n, e) for n, e, _ in items)), self.orders(tree, items, rel))

    def select(self, tree: exp.Select) -> N.Node:
        for arg in ("pivots", "connect", "sample", "locks"):
            if tree.args.get(arg):
                raise UnsupportedError(f"ei.sql does not support {arg.upper()} in a SELECT")
        if tree.args.get("distinct") and tree.args["distinct"].args.get("on"):
            raise UnsupportedError("ei.sql does not support SELECT DISTINCT ON")
        where = _conjuncts(tree.args["where"].this) if tree.args.get("where") else []
        for window in (w for term in where for w in term.find_all(exp.Window)):
            raise UnsupportedError(f"ei.sql computes window functions after WHERE, as SQL does; filter on one in "
                                   f"QUALIFY (SELECT ... QUALIFY row_number() OVER (...) = 1): "
                                   f"{window.sql(self.dialect)}")
        rel = self.from_(tree, where)
        plain = [t for t in where if not any(True for _ in t.find_all(exp.Subquery, exp.Exists))]
        if plain:
            predicate = self.expr(plain[0], rel)
            for term in plain[1:]:
                predicate = E.Call("and", (predicate, self.expr(term, rel)))
            rel = Rel(N.Filter(rel.plan, predicate), rel.fields)
        for term in where:
            if term not in plain:
                rel = self.filter(rel, term)
        self.windows = {w.this.name.lower(): w for w in tree.args.get("windows") or ()}   # WINDOW w AS (...)
        items = self.items(tree, rel)
        group = tree.args.get("group")
        if group or tree.args.get("having") or any(E.contains_agg(e) for _, e, _ in items):
            return self.aggregate(tree, rel, items, group)
        columns = [(name, e) for name, e, _ in items]
        qualify = tree.args.get("qualify")
        cond = self.expr(qualify.this, rel, items=items) if qualify else None
        plan, columns, orders = self.staged(rel.plan, columns, self.orders(tree, items, rel), cond)
        return self.finish(tree, N.Project(plan, tuple(columns)), orders)
    def items(self, tree: exp.Select, rel: Rel) -> list[tuple[str, E.Expr, exp.Expression]]:
        """(output name, IR expression, SQL expression) per select item, `*` expanded."""
        out = []
        for item in tree.expressions:
            if isinstance(item, exp.Star) or (isinstance(item, exp.Column) and isinstance(item.this, exp.Star)):
                table = item.table if isinstance(item, exp.Column) else None
                star = item.this if isinstance(item, exp.Column) else item
                for arg in ("replace", "rename", "ilike"):
                    if star.args.get(arg):
                        raise UnsupportedError(f"ei.sql does not support * {arg.upper()}")
                fields = [f for f in rel.fields if f.star and (not table or (f.table or "").lower() == table.lower())]
                if table and not fields:
                    raise PlanError(f"{table}.* names no table of the query; tables: "
                                    f"{', '.join(sorted({f.table for f in rel.fields if f.table})) or '(none)'}")
                excluded = {Rel(rel.plan, fields).resolve(c.name, c.table or None, c.this.quoted).internal
                            for c in star.args.get("except_") or star.args.get("except") or ()}
                fields = [f for f in fields if f.internal not in excluded]
                out.extend((f.name, E.Column(f.internal), item) for f in fields)
                continue
            body = item.this if isinstance(item, exp.Alias) else item
            name = item.alias if isinstance(item, exp.Alias) else (
                body.name if isinstance(body, exp.Column) else body.sql(self.dialect, normalize_functions="lower"))
            out.append((name, self.expr(body, rel), body))
        seen = set()
        for name, _, _ in out:
            if name in seen:
                raise PlanError(f"the query's result would have two columns named {name!r}; give one an alias "
                                "(AS other_name), or join with USING (...) to keep one key column")
            seen.add(name)
        return out

    def aggregate(self, tree: exp.Select, rel: Rel, items: list, group: exp.Group | None) -> N.Node:
        if group and (group.args.get("rollup") or group.args.get("cube") or group.args.get("grouping_sets")):
            raise UnsupportedError("ei.sql does not support ROLLUP, CUBE or GROUPING SETS")
        terms = [e for _, e, _ in items if not E.contains_agg(e)] if group and group.args.get("all") else [
            self.by_position_or_alias(g, items, rel) for g in (group.expressions if group else [])]
        keys: list[tuple[str, E.Expr]] = []
        for e in terms:
            if E.contains_agg(e):
                raise PlanError(f"GROUP BY {e} contains an aggregate")
            if e not in (k for _, k in keys):
                keys.append((e.name if isinstance(e, E.Column) else self.fresh("key"), e))
        key_of = {e: E.Column(name) for name, e in keys}
        aggs: list[tuple[str, E.Expr]] = []

        def lift(e: E.Expr, sql: exp.Expression) -> E.Expr:
            """`e` over the Aggregate's output: keys and aggregations by their column there."""
            if e in key_of:
                return key_of[e]
            if isinstance(e, E.Agg):
                for name, a in aggs:
                    if a == e:
                        return E.Column(name)
                aggs.append((self.fresh("agg"), e))
                return E.Column(aggs[-1][0])
            if isinstance(e, E.Column):
                raise PlanError(f"column {_user(e.name, rel)!r} must appear in GROUP BY or in an aggregate "
                                f"such as sum(...): {sql.sql(self.dialect)}")
            kids = e.children()
            return E.replace_children(e, tuple(lift(k, sql) for k in kids)) if kids else e

        select, taken = [], {name for name, _ in keys}
        for name, e, sql in items:
            before = len(aggs)
            lifted = lift(e, sql)
            if len(aggs) == before + 1 and lifted == E.Column(aggs[-1][0]) and name not in taken:
                aggs[-1] = (name, aggs[-1][1])  # the item is one aggregation: the Aggregate names it
                lifted = E.Column(name)
            taken.add(name)
            select.append((name, lifted))
        having = tree.args.get("having")
        having_ir = lift(self.expr(having.this, rel, items=items), having.this) if having else None
        orders = self.orders(tree, items, rel, lift)
        if not keys and not aggs:
            aggs.append((self.fresh("agg"), E.Agg("count_rows")))
        plan: N.Node = N.Aggregate(rel.plan, tuple(keys), tuple(aggs))
        if having_ir is not None:
            plan = N.Filter(plan, having_ir)
        qualify = tree.args.get("qualify")
        cond = lift(self.expr(qualify.this, rel, items=items), qualify.this) if qualify else None
        plan, select, orders = self.staged(plan, select, orders, cond)
        return self.finish(tree, N.Project(plan, tuple(select)), orders)

    def orders(self, tree: exp.Expression, items: list, rel: Rel, lift: Callable | None = None) -> list:
        """(output name or None, expression or None, descending, nulls last) per ORDER BY term."""
        out = []
        order = tree.args.get("order")
        for o in order.expressions if order else []:
            name, e = self.output_named(o.this, items), None
            if name is None:
                e = self.expr(o.this, rel, items=items)
                e = lift(e, o.this) if lift else e
            nf = o.args.get("nulls_first")
            out.append((name, e, bool(o.args.get("desc")), not nf if nf is not None else True))
        return out

    def finish(self, tree: exp.Expression, plan: N.Project, orders: list) -> N.Node:
        """DISTINCT, ORDER BY (with the columns it needs beyond the select list), LIMIT, OFFSET."""
        distinct = isinstance(tree, exp.Select) and tree.args.get("distinct")
        out = [name for name, _ in plan.columns]
        by_ir = {e: name for name, e in plan.columns}
        keys, extra = [], []
        for name, e, desc, last in orders:
            if name is None:
                name = by_ir.get(e)
                if name is None:
                    if distinct:
                        raise PlanError(f"ORDER BY {e} of a SELECT DISTINCT must be one of its columns")
                    name = self.fresh("order")
                    extra.append((name, e))
                    by_ir[e] = name
            keys.append(N.SortKey(E.Column(name), desc, last))
        node: N.Node = N.Project(plan.input, plan.columns + tuple(extra)) if extra else plan
        if _identity(node):
            node = node.input
        if distinct:
            node = N.Distinct(node)
        if keys:
            node = N.Sort(node, tuple(keys))
        node = self.limit(tree, node)
        if extra:
            node = N.Project(node, tuple((n, E.Column(n)) for n in out))
        return node

    def limit(self, tree: exp.Expression, node: N.Node) -> N.Node:
        n, offset = tree.args.get("limit"), tree.args.get("offset")
        if n is None and offset is None:
            return node
        count = self.integer(n.expression, "LIMIT") if n is not None else N.MAX_COUNT
        return N.Limit(node, count, self.integer(offset.expression, "OFFSET") if offset is not None else 0)

    def integer(self, e: exp.Expression, what: str) -> int:
        if isinstance(e, exp.Literal) and not e.is_string and e.is_int:
            return int(e.this)
        raise UnsupportedError(f"ei.sql takes {what} as an integer constant, got {e.sql(self.dialect)}")

    def by_position_or_alias(self, e: exp.Expression, items: list, rel: Rel) -> E.Expr:
        """GROUP BY / ORDER BY: `2` is the second select item; a bare name that is no input column, an alias."""
        i = _position(e, items, "GROUP BY")
        if i is not None:
            return items[i][1]
        if isinstance(e, exp.Column) and not e.table:
            try:
                rel.resolve(e.name, None, e.this.quoted)
            except PlanError:
                for name, ir, _ in items:
                    if name.lower() == e.name.lower():
                        return ir
        return self.expr(e, rel)

    def output_named(self, e: exp.Expression, items: list) -> str | None:
        """ORDER BY: the output column a position or a select alias names; None for an expression."""
        i = _position(e, items, "ORDER BY")
        if i is not None:
            return items[i][0]
        if isinstance(e, exp.Column) and not e.table:
            for name, _, _ in items:
                if name == e.name or (not e.this.quoted and name.lower() == e.name.lower()):
                    return name
        return None

    # ---------------------------------------------------------------- FROM and JOIN
    def from_(self, tree: exp.Select, where: list[exp.Expression]) -> Rel:
        source = tree.args.get("from_") or tree.args.get("from")
        if source is None:
            if tree.args.get("joins"):
                raise PlanError("JOIN without FROM")
            return Rel(_one_row(), [])
        rel = self.table(source.this)
        joins = tree.args.get("joins") or []
        steal = all(j.side not in ("RIGHT", "FULL") for j in joins)
        for j in joins:
            rel = self.join(rel, j, where if steal else [])
        return rel

    def table(self, t: exp.Expression) -> Rel:
        alias = t.alias_or_name if isinstance(t, exp.Table) else t.alias
        if isinstance(t, exp.Subquery):
            plan = self._rename(self.statement(t.this), t)
        elif isinstance(t, exp.Table) and isinstance(t.this, exp.Identifier):
            if t.args.get("db") or t.args.get("catalog"):
                raise PlanError(f"ei.sql names tables by the keyword arguments it is given, not "
                                f"{t.sql(self.dialect)}; pass the table as ei.sql(query, name=flow)")
            plan = self.named(t.name, t.this.quoted)
            plan = self._rename(plan, t)
        elif isinstance(t, exp.Table) and isinstance(t.this, (exp.ReadParquet, exp.ReadCSV)):
            call = t.this
            path = call.this if isinstance(call, exp.ReadCSV) else (call.expressions or [None])[0]
            if self.files is None or not (isinstance(path, exp.Literal) and path.is_string):
                raise PlanError(f"{call.sql(self.dialect)} reads a file: pass files=True to ei.sql (eidos query "
                                "does), with the path as one string constant")
            plan = self.files(path.this, "csv" if isinstance(call, exp.ReadCSV) else "parquet").plan
            alias = t.alias or None
        else:
            raise UnsupportedError(f"ei.sql reads tables named by its arguments or subqueries in FROM, not "
                                   f"{t.sql(self.dialect)} ({type(t).__name__})")
        return Rel(plan, [Field(alias or None, n, n) for n in plan.schema.names])

    def named(self, name: str, quoted: bool) -> N.Node:
        plan = self.tables.get(name.lower())
        if plan is not None:
            return plan
        if quoted and self.files is not None:
            plan = self.files(name).plan
            self.tables[name.lower()] = plan
            return plan
        names = sorted(self.tables)
        hint = did_you_mean(name.lower(), names)
        raise PlanError(f"table {name!r} is not known to the query; tables: {', '.join(names) or '(none)'}"
                        + (f"\n  {hint}" if hint else "")
                        + "\n  pass it as ei.sql(query, name=flow)")

    def _rename(self, plan: N.Node, t: exp.Expression) -> N.Node:
        alias = t.args.get("alias")
        cols = [c.name for c in alias.columns] if alias is not None and alias.columns else []
        if not cols:
            return plan
        names = plan.schema.names
        if len(cols) > len(names):
            raise PlanError(f"{alias.sql(self.dialect)} names {len(cols)} columns; the table has {len(names)}")
        return N.Project(plan, tuple((cols[i] if i < len(cols) else n, E.Column(n)) for i, n in enumerate(names)))

    def join(self, left: Rel, j: exp.Join, where: list) -> Rel:
        right = self.table(j.this)
        how = {"LEFT": "left", "RIGHT": "right", "FULL": "full"}.get(j.side, "inner")
        kind = (j.kind or "").upper()
        if kind in ("SEMI", "ANTI", "ASOF", "POSITIONAL") or j.args.get("method"):
            raise UnsupportedError(f"ei.sql does not support {j.sql(self.dialect).split(' JOIN')[0]} JOIN")
        using, on = j.args.get("using"), j.args.get("on")
        if using:
            pairs = []
            for ident in using:
                lf, rf = left.resolve(ident.name, None, ident.quoted), right.resolve(ident.name, None, ident.quoted)
                pairs.append((E.Column(lf.internal), E.Column(rf.internal)))
            right, pairs = self.apart(left, right, pairs, how)
            return self.keyed(left, right, how, pairs, using=[i.name for i in using])
        terms = _conjuncts(on) if on is not None else []
        if on is None and kind != "CROSS" and how != "inner":
            raise PlanError(f"a {how.upper()} JOIN needs ON or USING")
        if on is None:
            terms = [w for w in where if self._between(w, left, right)]
            for w in terms:
                where.remove(w)
        pairs, rest = [], []
        for term in terms:
            pair = self.key_pair(term, left, right)
            (pairs.append(pair) if pair else rest.append(term))
        right, pairs = self.apart(left, right, pairs, how)
        if not pairs:
            if how != "inner":
                raise UnsupportedError(f"ei.sql runs a {how.upper()} JOIN whose ON has an equality between the "
                                       f"two sides; got ON {on.sql(self.dialect) if on is not None else ''}")
            out = Rel(N.Join(left.plan, right.plan, "cross", (), ()), left.fields + right.fields)
            for term in rest:
                out = self.filter(out, term)
            return out
        pre = {"left": right, "right": left}.get(how)
        post = []
        for term in rest:
            if pre is not None and self._within(term, pre):
                if how == "left":
                    right = self.filter(right, term)
                else:
                    left = self.filter(left, term)
            elif how == "inner":
                post.append(term)
            else:
                raise UnsupportedError(f"ei.sql runs a {how.upper()} JOIN whose ON is equalities between the "
                                       f"two sides and conditions on the {'right' if how == 'left' else 'left'} "
                                       f"side only; got {term.sql(self.dialect)}")
        out = self.keyed(left, right, how, pairs)
        for term in post:
            out = self.filter(out, term)
        return out

    def keyed(self, left: Rel, right: Rel, how: str, pairs: list, using: list | None = None) -> Rel:
        """The equi-join of `left` and `right` on `pairs` of key expressions, every side's column kept as SQL
        keeps it: a key column the join would fill from the other side is joined through a copy."""
        copy_left, copy_right = how in ("right", "full"), how != "inner"
        lcols, rcols, lk, rk = [], [], [], []
        for le, re in pairs:
            for e, cols, keys, copy in ((le, lcols, lk, copy_left), (re, rcols, rk, copy_right)):
                if isinstance(e, E.Column) and not copy and e.name not in keys:
                    keys.append(e.name)
                else:
                    name = self.fresh("k")
                    cols.append((name, e))
                    keys.append(name)
        lplan, rplan = _with(left.plan, lcols), _with(right.plan, rcols)
        fields = list(left.fields)
        rfields = list(right.fields)
        if how == "inner":  # a right key column that is a plain column reads the left one it equals
            for (le, re) in pairs:
                if isinstance(re, E.Column) and isinstance(le, E.Column) and re.name in rk:
                    rfields = [replace(f, internal=le.name) if f.internal == re.name else f for f in rfields]
        if using:
            merged = []
            for name, (le, re) in zip(using, pairs):
                key = lk[pairs.index((le, re))]
                merged.append(Field(None, name, key, True, True))
                fields = [replace(f, star=False) if f.internal == le.name else f for f in fields]
                rfields = [replace(f, star=False) if f.name.lower() == name.lower() else f for f in rfields]
            first = next((i for i, f in enumerate(left.fields) if f.internal == pairs[0][0].name), 0)
            fields = fields[:first] + merged + fields[first:]
        plan = N.Join(lplan, rplan, how, tuple(lk), tuple(rk))
        return Rel(plan, fields + rfields)

    def apart(self, left: Rel, right: Rel, pairs: list, how: str) -> tuple[Rel, list]:
        """`right` with the columns whose names the left side holds renamed (`alias.name`), but for the
        keys an inner join drops; and `pairs` reading the new names."""
        dropped = {re.name for _, re in pairs if how == "inner" and isinstance(re, E.Column)}
        taken = {f.internal for f in left.fields} | set(left.plan.schema.names)
        renames = {}
        for n in right.plan.schema.names:
            if n in taken and n not in dropped:
                renames[n] = self._unique(f"{right.fields[0].table or 'right'}.{n}", taken)
            taken.add(renames.get(n, n))
        if not renames:
            return right, pairs
        plan = N.Project(right.plan, tuple((renames.get(n, n), E.Column(n)) for n in right.plan.schema.names))
        fields = [replace(f, internal=renames.get(f.internal, f.internal)) for f in right.fields]
        rename = lambda e: E.Column(renames.get(e.name, e.name)) if isinstance(e, E.Column) else e  # noqa: E731
        return Rel(plan, fields), [(le, E.transform(re, rename)) for le, re in pairs]

    def key_pair(self, term: exp.Expression, left: Rel, right: Rel) -> tuple[E.Expr, E.Expr] | None:
        if not isinstance(term, exp.EQ):
            return None
        a, b = term.this, term.expression
        for x, y in ((a, b), (b, a)):
            if self._within(x, left) and self._within(y, right) and _columns(x) and _columns(y):
                return self.expr(x, left), self.expr(y, right)
        return None

    def _within(self, e: exp.Expression, rel: Rel) -> bool:
        """Whether every column `e` names resolves in `rel` (and no subquery hides inside)."""
        if any(True for _ in e.find_all(exp.Subquery, exp.Exists)):
            return False
        try:
            for c in _columns(e):
                rel.resolve(c.name, c.table or None, c.this.quoted)
        except PlanError:
            return False
        return True

    def _between(self, e: exp.Expression, left: Rel, right: Rel) -> bool:
        """Whether `e` (a WHERE term) compares the two sides of a comma join and nothing else."""
        return (isinstance(e, exp.EQ) and self.key_pair(e, left, right) is not None
                and self._within(e, Rel(left.plan, left.fields + right.fields)))

    @staticmethod
    def _unique(name: str, taken: set[str]) -> str:
        out, i = name, 1
        while out in taken:
            i += 1
            out = f"{name}_{i}"
        return out

    # ---------------------------------------------------------------- WHERE terms with subqueries
    def filter(self, rel: Rel, term: exp.Expression) -> Rel:
        negated = isinstance(term, exp.Not)
        inner = term.this if negated else term
        if isinstance(inner, exp.Paren):
            inner = inner.this
        if isinstance(inner, exp.Exists):
            return self.exists(rel, inner.this, "anti" if negated else "semi")
        if isinstance(inner, exp.In) and inner.args.get("query") is not None:
            if negated:
                raise UnsupportedError("ei.sql does not support NOT IN (subquery), whose answer turns on nulls "
                                       "in the subquery; write NOT EXISTS (SELECT ... WHERE key = outer.key)")
            sub = self.statement(inner.args["query"])
            if len(sub.schema) != 1:
                raise PlanError(f"IN (subquery) needs a subquery of one column, got {sub.schema.text()}")
            key = self.expr(inner.this, rel)
            return self._semi(rel, sub, [(key, E.Column(sub.schema.names[0]))], "semi")
        return Rel(N.Filter(rel.plan, self.expr(term, rel)), rel.fields)

    def exists(self, rel: Rel, sub: exp.Expression, how: str) -> Rel:
        """[NOT] EXISTS (SELECT ... FROM ... WHERE inner = outer AND ...): a semi (anti) join on the equalities."""
        if not isinstance(sub, exp.Select) or sub.args.get("group") or sub.args.get("limit"):
            raise UnsupportedError("ei.sql runs EXISTS over a plain SELECT ... FROM ... WHERE, without GROUP BY "
                                   f"or LIMIT; got {sub.sql(self.dialect)}")
        where = _conjuncts(sub.args["where"].this) if sub.args.get("where") else []
        inner = self.from_(sub, [])
        pairs = []
        for term in list(where):
            pair = self.key_pair(term, inner, rel) if not self._within(term, inner) else None
            if pair:
                pairs.append((pair[1], pair[0]))
                where.remove(term)
        for term in where:
            if not self._within(term, inner):
                raise UnsupportedError(f"ei.sql runs a correlated EXISTS whose conditions on the outer query are "
                                       f"equalities; got {term.sql(self.dialect)}")
            inner = self.filter(inner, term)
        if not pairs:
            raise UnsupportedError("ei.sql runs EXISTS correlated by at least one equality with the outer query")
        return self._semi(rel, inner.plan, pairs, how)

    def _semi(self, rel: Rel, sub: N.Node, pairs: list, how: str) -> Rel:
        lcols, rcols, lk, rk = [], [], [], []
        for le, re in pairs:
            for e, cols, keys in ((le, lcols, lk), (re, rcols, rk)):
                if isinstance(e, E.Column):
                    keys.append(e.name)
                else:
                    keys.append(self.fresh("k"))
                    cols.append((keys[-1], e))
        plan = N.Join(_with(rel.plan, lcols), _with(sub, rcols), how, tuple(lk), tuple(rk))
        if lcols:
            plan = N.Project(plan, tuple((n, E.Column(n)) for n in rel.plan.schema.names))
        return Rel(plan, rel.fields)

    # ---------------------------------------------------------------- expressions
    def expr(self, e: exp.Expression, rel: Rel, items: list | None = None) -> E.Expr:
        """The IR form of a SQL expression over `rel`'s fields; `items` lets HAVING/ORDER BY name select aliases."""
        x = lambda sub: self.expr(sub, rel, items)  # noqa: E731
        name = type(e).__name__
        if isinstance(e, exp.Paren):
            return x(e.this)
        if e.args.get("negate"):  # NOT LIKE, NOT ILIKE (sqlglot marks them, not wraps them)
            positive = e.copy()
            positive.set("negate", None)
            return E.Call("not", (x(positive),))
        if isinstance(e, exp.Column):
            if isinstance(e.this, exp.Star):
                raise PlanError(f"{e.sql(self.dialect)} is not an expression")
            try:
                return E.Column(rel.resolve(e.name, e.table or None, e.this.quoted).internal)
            except PlanError:
                for alias, ir, _ in items or ():
                    if not e.table and alias.lower() == e.name.lower():
                        return ir
                raise
        if isinstance(e, (exp.Literal, exp.Boolean, exp.Null)) or _is_typed_literal(e):
            return _literal(e)
        if isinstance(e, exp.Window):
            return self.window(e, x)
        if isinstance(e, (exp.Add, exp.Sub)) and (isinstance(e.expression, exp.Interval)
                                                 or isinstance(e.this, exp.Interval)):
            return self.interval(e, x)
        if name in BINARY:
            return E.Call(BINARY[name], (x(e.this), x(e.expression)))
        if isinstance(e, exp.Neg):
            return E.Call("neg", (x(e.this),))
        if isinstance(e, exp.Not):
            return E.Call("not", (x(e.this),))
        if isinstance(e, exp.Is):
            if not isinstance(e.expression, exp.Null):
                raise UnsupportedError(f"ei.sql supports IS [NOT] NULL, not {e.sql(self.dialect)}")
            return E.Call("is_null", (x(e.this),))
        if isinstance(e, exp.Between):
            return E.Call("is_between", (x(e.this), x(e.args["low"]), x(e.args["high"])))
        if isinstance(e, exp.In):
            if e.args.get("query") is not None or e.args.get("unnest") or e.args.get("field"):
                raise UnsupportedError(f"ei.sql runs IN (subquery) only as a condition of WHERE joined by AND: "
                                       f"{e.sql(self.dialect)}")
            values = [_literal_value(v) for v in e.expressions]
            if all(v is not _NOT_CONSTANT and v is not None for v in values):
                return E.Call("is_in", (x(e.this),), (tuple(values),))
            target = x(e.this)
            out = None
            for v in e.expressions:
                eq = E.Call("eq", (target, x(v)))
                out = eq if out is None else E.Call("or", (out, eq))
            return out
        if isinstance(e, (exp.Like, exp.ILike)):
            pattern = e.expression
            if not (isinstance(pattern, exp.Literal) and pattern.is_string) or e.args.get("escape"):
                raise UnsupportedError(f"ei.sql takes a LIKE pattern as a string constant without ESCAPE: "
                                       f"{e.sql(self.dialect)}")
            if isinstance(e, exp.ILike):
                return E.Call("str_like", (E.Call("str_to_lower", (x(e.this),)),), (pattern.this.lower(),))
            return E.Call("str_like", (x(e.this),), (pattern.this,))
        if isinstance(e, exp.Case):
            subject = e.this
            branches = []
            for when in e.args.get("ifs") or []:
                cond = x(when.this)
                if subject is not None:
                    cond = E.Call("eq", (x(subject), cond))
                branches.append((cond, x(when.args["true"])))
            default = e.args.get("default")
            return E.Case(tuple(branches), x(default) if default is not None else E.Literal(None, T.Null, weak=True))
        if isinstance(e, exp.If):
            default = e.args.get("false")
            return E.Case(((x(e.this), x(e.args["true"])),),
                          x(default) if default is not None else E.Literal(None, T.Null, weak=True))
        if isinstance(e, exp.Cast):
            if isinstance(e, exp.TryCast):
                raise UnsupportedError("ei.sql does not support TRY_CAST: a value that does not convert is an error")
            return E.Cast(x(e.this), self.dtype(e.to))
        if isinstance(e, exp.Coalesce):
            out = x(e.this)
            for other in e.expressions:
                out = E.Call("fill_null", (out, x(other)))
            return out
        if name in UNARY:
            return E.Call(UNARY[name], (x(e.this),))
        if isinstance(e, exp.Log):  # log(x) and log10(x) are base 10 (DuckDB, PostgreSQL); log(b, x)
            if e.expression is None:
                return E.Call("log10", (x(e.this),))
            base, arg = x(e.this), x(e.expression)
            if isinstance(base, E.Literal) and base.value == 10:
                return E.Call("log10", (arg,))
            return E.Call("truediv", (E.Call("log", (arg,)), E.Call("log", (base,))))
        if name in TEXT_TESTS:
            text = e.expression
            if not (isinstance(text, exp.Literal) and text.is_string):
                raise UnsupportedError(f"ei.sql takes the text of {name.lower()} as a string constant")
            return E.Call(TEXT_TESTS[name], (x(e.this),), (text.this,))
        if isinstance(e, (exp.DPipe, exp.Concat, exp.ConcatWs, exp.Replace, exp.RegexpReplace, exp.RegexpLike,
                          exp.Trim)):
            return self.text(e, x)
        if isinstance(e, (exp.Split, exp.StringToArray)):
            if e.args.get("null") is not None:
                raise UnsupportedError(f"ei.sql splits text by a separator only: {e.sql(self.dialect)}")
            return E.Call("str_split", (x(e.this),), (self.text_constant(e.expression, "the separator of a split"),))
        if isinstance(e, exp.Round):
            digits = e.args.get("decimals")
            return E.Call("round", (x(e.this),), (self.integer(digits, "ROUND's digits") if digits else 0,))
        if isinstance(e, exp.Substring):
            start = self.integer(e.args["start"], "SUBSTRING's start") if e.args.get("start") else 1
            length = e.args.get("length")
            if start < 1:
                raise UnsupportedError(f"ei.sql takes SUBSTRING's start from 1, got {start}")
            return E.Call("str_slice", (x(e.this),),
                          (start - 1, self.integer(length, "SUBSTRING's length") if length is not None else None))
        if isinstance(e, exp.Extract):
            part = e.this.name.upper()
            if part not in PARTS:
                raise UnsupportedError(f"ei.sql extracts {', '.join(PARTS)}, not {part}")
            return E.Call(PARTS[part], (x(e.expression),))
        if isinstance(e, (exp.TimeToStr, exp.StrToTime)):  # strftime(t, format), strptime(s, format)
            fmt = e.args.get("format")
            if not (isinstance(fmt, exp.Literal) and fmt.is_string):
                raise UnsupportedError(f"ei.sql takes the format of {name.lower()} as a string constant")
            if isinstance(e, exp.TimeToStr):
                return E.Call("dt_strftime", (x(e.this),), (fmt.this,))
            return E.Call("str_to_datetime", (x(e.this),), (fmt.this, True))
        if isinstance(e, (exp.TimestampTrunc, exp.DateTrunc)):
            unit = e.args["unit"].name.upper().rstrip("S") if e.args.get("unit") else ""
            if unit not in TRUNC_UNITS:
                raise UnsupportedError(f"ei.sql truncates to {', '.join(u.lower() for u in TRUNC_UNITS)}, "
                                       f"not {unit.lower() or e.sql(self.dialect)}")
            return E.Call("dt_truncate", (x(e.this),), (TRUNC_UNITS[unit],))
        if isinstance(e, exp.Count):
            arg = e.this
            if arg is None or isinstance(arg, exp.Star):
                return E.Agg("count_rows")
            if isinstance(arg, exp.Distinct):
                if len(arg.expressions) != 1:
                    raise UnsupportedError("ei.sql counts DISTINCT of one expression")
                return E.Agg("n_unique", x(arg.expressions[0]))
            return E.Agg("count", x(arg))
        if name in AGGREGATES:
            if isinstance(e.this, exp.Distinct):
                raise UnsupportedError(f"ei.sql does not support {name.upper()}(DISTINCT ...)")
            return E.Agg(AGGREGATES[name], x(e.this))
        if isinstance(e, (exp.Subquery, exp.Exists)):
            raise UnsupportedError(f"ei.sql runs subqueries in FROM, and EXISTS / IN (subquery) as conditions of "
                                   f"WHERE joined by AND; not {e.sql(self.dialect)}")
        text = e.sql(self.dialect)
        what = f"the function {text.split('(')[0]}" if isinstance(e, exp.Func) else name
        raise UnsupportedError(f"ei.sql does not support {what}: {text}")

    # ---------------------------------------------------------------- windows
    def window(self, w: exp.Window, x: Callable) -> E.Expr:
        """fn(...) OVER (PARTITION BY ... ORDER BY ... [frame]) as eidos windows (docs/semantics.md section 18).
        SQL's default frame with ORDER BY holds the row's peers (equal ORDER BY values), which no eidos window
        does: such a window is a placeholder here that `staged` computes in steps."""
        text, f = w.sql(self.dialect), w.this
        if not isinstance(f, exp.Func) or isinstance(f, (exp.IgnoreNulls, exp.RespectNulls)):
            raise UnsupportedError(f"ei.sql does not support this window: {text}")
        if w.args.get("alias"):   # OVER w or OVER (w ORDER BY ...): the named window, with what this one adds
            name = w.args["alias"].name
            named = self.windows.get(name.lower())
            if named is None:
                raise PlanError(f"window {name!r} is not defined (WINDOW {name} AS (...)): {text}")
            if w.args.get("partition_by") or (w.args.get("order") and named.args.get("order")):
                raise PlanError(f"a window over {name!r} adds neither PARTITION BY nor a second ORDER BY: {text}")
            w = w.copy()
            for arg in ("partition_by", "order", "spec"):
                if not w.args.get(arg) and named.args.get(arg):
                    w.set(arg, named.args[arg].copy() if arg != "partition_by" else [p.copy() for p in named.args[arg]])
        parts = tuple(x(p) for p in w.args.get("partition_by") or ())
        keys = w.args["order"].expressions if w.args.get("order") else []
        by = tuple(x(o.this) for o in keys)
        each = tuple((bool(o.args.get("desc")), o.args.get("nulls_first") is not True) for o in keys)
        mixed = len(set(each)) > 1   # an eidos window has one direction: these windows read a Sort's row order
        desc, last = each[0] if each else (False, True)

        def over(fn: str, args: tuple = (), options: tuple = (), order: bool = True) -> E.Window:
            if mixed and order:
                if fn.startswith("__range"):
                    raise UnsupportedError(f"ei.sql takes one direction (ASC or DESC) and one NULLS FIRST/LAST for "
                                           f"every ORDER BY key of a window over a row's peers: {text}")
                return E.Window("__sorted", (E.Window(fn, args, parts, options=options),), (), by, options=(each,))
            return E.Window(fn, args, parts, by if order else (), desc and order, last and order, options)

        if isinstance(f, exp.RowNumber):
            return over("row_number")
        if isinstance(f, (exp.Rank, exp.DenseRank)):
            if not by:  # every row is a peer of every other
                return E.Literal(1, T.Int64)
            if isinstance(f, exp.DenseRank):
                return over("__range_dense")
            below = E.Call("sub", (over("__range_count_rows"), E.Window("count_rows", (), parts + by)))
            return E.Call("add", (below, E.Literal(1, T.Int64)))
        if isinstance(f, (exp.Lag, exp.Lead)):
            n = self.integer(f.args["offset"], f"{type(f).__name__.upper()}'s offset") if f.args.get("offset") else 1
            fill = (x(f.args["default"]),) if f.args.get("default") is not None else ()
            return over("shift", (x(f.this),) + fill, (n if isinstance(f, exp.Lag) else -n,))
        agg = x(f)
        if not isinstance(agg, E.Agg):
            raise UnsupportedError(f"ei.sql computes over a window the aggregations (sum, avg, min, max, count, ...), "
                                   f"row_number, rank, dense_rank, lag and lead; not {f.sql(self.dialect)}")
        args = () if agg.arg is None else (agg.arg,)
        frame = self.frame(w, text, bool(by))
        if frame == "all":
            return over(agg.fn, args, agg.options, order=False)
        if frame == "peers":
            if agg.fn not in ("sum", "min", "max", "count", "count_rows"):
                raise UnsupportedError(f"ei.sql computes {agg.fn} over the rows up to a row's peers (ORDER BY with "
                                       f"no frame, or RANGE) only for sum, min, max and count; write ROWS BETWEEN "
                                       f"UNBOUNDED PRECEDING AND CURRENT ROW to end the frame at the row: {text}")
            return over(f"__range_{agg.fn}", args)
        size = 2**31 - 1 if frame is None else frame + 1
        if agg.fn in ("count", "count_rows"):
            if frame is None:
                return over("row_number") if agg.fn == "count_rows" else over("cum_count", args)
            one = E.Literal(1, T.Int64) if agg.fn == "count_rows" else E.Cast(E.Call("is_not_null", args), T.Int64)
            return over("rolling_sum", (one,), (size, 0))
        if agg.fn not in ("sum", "mean", "min", "max"):
            raise UnsupportedError(f"ei.sql computes sum, avg, min, max and count over a ROWS frame, not {agg.fn}: "
                                   f"{text}")
        return over(f"rolling_{agg.fn}", args, (size, 1))

    def frame(self, w: exp.Window, text: str, ordered: bool) -> str | int | None:
        """A window's frame: "all" (the partition), "peers" (up to the row's last peer: SQL's default with
        ORDER BY), None (ROWS from the partition's start to the row) or n (ROWS BETWEEN n PRECEDING AND CURRENT ROW)."""
        spec = w.args.get("spec")
        if spec is None:
            return "peers" if ordered else "all"
        start, end = spec.args.get("start"), spec.args.get("end") or "CURRENT ROW"
        start_side, end_side = spec.args.get("start_side"), spec.args.get("end_side")
        if start == "UNBOUNDED" and start_side == "PRECEDING":
            if end == "UNBOUNDED" and end_side == "FOLLOWING":
                return "all"
            if end == "CURRENT ROW":
                return None if spec.args.get("kind") == "ROWS" else "peers" if ordered else "all"
        if spec.args.get("kind") == "ROWS" and start_side == "PRECEDING" and end == "CURRENT ROW" \
                and isinstance(start, exp.Literal) and start.is_int and 0 <= int(start.this) < 2**31 - 1:
            return int(start.this)
        raise UnsupportedError(f"ei.sql runs the window frames ROWS BETWEEN n PRECEDING (or UNBOUNDED PRECEDING) AND "
                               f"CURRENT ROW, RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW, and the whole "
                               f"partition; not {spec.sql(self.dialect)}: {text}")

    def staged(self, plan: N.Node, columns: list, orders: list, qualify: E.Expr | None = None
               ) -> tuple[N.Node, list, list]:
        """`columns` and `orders` over `plan`, each window over a row's peers (window()'s placeholder) computed in
        two steps before them: each peer group's value (p) and one row to hold it (f); then the ROWS frame from
        the partition's start to that row, placed last among its peers (v); the row's value is v of its group's f.
        With QUALIFY's condition, the columns and it are computed over every row, then the rows it holds kept."""
        sorted_: dict = {}

        def read_order(e: E.Expr) -> E.Expr:   # a window of mixed directions reads the order of a Sort by its keys
            nonlocal plan
            if isinstance(e, E.Window) and e.fn == "__sorted":
                if e not in sorted_:
                    keys = tuple(N.SortKey(k, d, n) for k, (d, n) in zip(e.order_by, e.options[0]))
                    sorted_[e] = self.fresh("sorted")
                    plan = N.Project(N.Sort(plan, keys), tuple((n, E.Column(n)) for n in plan.schema.names)
                                     + ((sorted_[e], e.args[0]),))
                return E.Column(sorted_[e])
            return e

        columns = [(name, E.transform(e, read_order)) for name, e in columns]
        orders = [(name, e if e is None else E.transform(e, read_order), d, n) for name, e, d, n in orders]
        qualify = qualify if qualify is None else E.transform(qualify, read_order)
        if qualify is not None:
            if any(e is not None and E.contains_window(e) for _, e, _, _ in orders):
                raise UnsupportedError("ei.sql orders a query with QUALIFY by its columns, not by another window")
            hidden, q = [(self.fresh("item"), e) for _, e in columns], self.fresh("qualify")
            plan, exprs, _ = self.staged(plan, hidden + [(q, qualify)], [])
            plan = N.Filter(N.Project(plan, tuple((n, E.Column(n)) for n in plan.schema.names) + tuple(exprs)),
                            E.Column(q))
            return plan, [(name, E.Column(h)) for (name, _), (h, _) in zip(columns, hidden)], orders
        first: list = []
        second: list = []
        done: dict = {}
        null = E.Literal(None, T.Null, weak=True)

        def step(e: E.Expr) -> E.Expr:
            if not (isinstance(e, E.Window) and e.fn.startswith("__range_")):
                return e
            if e not in done:
                fn, peers = e.fn[len("__range_"):], e.partition_by + e.order_by
                p, f, v = self.fresh("peers"), self.fresh("holder"), self.fresh("upto")
                first.append((p, E.Literal(1, T.Int64) if fn == "dense" else E.Window(fn, e.args, peers)))
                first.append((f, E.Call("eq", (E.Window("row_number", (), peers, e.order_by, e.descending,
                                                         e.nulls_last), E.Literal(1, T.Int64)))))
                held = E.Column(f) if not e.descending else E.Call("not", (E.Column(f),))
                roll = f"rolling_{fn}" if fn in ("sum", "min", "max") else "rolling_sum"
                second.append((v, E.Window(roll, (E.Case(((E.Column(f), E.Column(p)),), null),), e.partition_by,
                                           e.order_by + (held,), e.descending, e.nulls_last, (2**31 - 1, 1))))
                done[e] = E.Window("max", (E.Case(((E.Column(f), E.Column(v)),), null),), peers)
            return done[e]

        columns = [(name, E.transform(e, step)) for name, e in columns]
        orders = [(name, e if e is None else E.transform(e, step), desc, last) for name, e, desc, last in orders]
        for added in (first, second):
            if added:
                plan = N.Project(plan, tuple((n, E.Column(n)) for n in plan.schema.names) + tuple(added))
        return plan, columns, orders

    def text(self, e: exp.Expression, x: Callable) -> E.Expr:
        """||, CONCAT and CONCAT_WS (which leave nulls out), REPLACE, REGEXP_REPLACE (RE2's \\1 in the replacement;
        'g' for every match), REGEXP_MATCHES and ~, TRIM/LTRIM/RTRIM (spaces, or the characters given)."""
        from eidos.flow.expr import Expr, concat_str

        if isinstance(e, exp.DPipe):
            return E.Call("add", (x(e.this), x(e.expression)))
        if isinstance(e, (exp.Concat, exp.ConcatWs)):
            parts = list(e.expressions)
            sep = self.text_constant(parts.pop(0), "CONCAT_WS's separator") if isinstance(e, exp.ConcatWs) else ""
            return concat_str([Expr(x(p)) for p in parts], separator=sep, ignore_nulls=True).node
        if isinstance(e, exp.Trim):
            chars = self.text_constant(e.expression, "TRIM's characters") if e.expression is not None else " "
            fn = {"LEADING": "str_strip_chars_start", "TRAILING": "str_strip_chars_end"}.get(
                str(e.args.get("position") or "").upper(), "str_strip_chars")
            return E.Call(fn, (x(e.this),), (chars,))
        pattern = self.text_constant(e.expression, f"{type(e).__name__.upper()}'s pattern")
        if isinstance(e, exp.RegexpLike):
            return Expr(x(e.this)).str.contains(pattern).node
        value = self.text_constant(e.args.get("replacement"), "the replacement")
        if isinstance(e, exp.Replace):   # every occurrence; SQL finds the empty text nowhere
            return E.Call("str_replace_all", (x(e.this),), (pattern, value)) if pattern else x(e.this)
        flags = self.text_constant(e.args["modifiers"], "REGEXP_REPLACE's options") if e.args.get("modifiers") else ""
        if flags not in ("", "g") or any(e.args.get(k) for k in ("position", "occurrence", "parameters")):
            raise UnsupportedError(f"ei.sql takes REGEXP_REPLACE's options 'g' or none: {e.sql(self.dialect)}")
        s = Expr(x(e.this)).str
        value = _dollars(value, e.sql(self.dialect))
        return (s.replace_all(pattern, value) if flags else s.replace(pattern, value)).node

    def text_constant(self, e: exp.Expression | None, what: str) -> str:
        if not (isinstance(e, exp.Literal) and e.is_string):
            raise UnsupportedError(f"ei.sql takes {what} as a string constant, got {e.sql(self.dialect) if e else 'none'}")
        return e.this

    def interval(self, e: exp.Expression, x: Callable) -> E.Expr:
        """date ± INTERVAL: folded on a constant date; a number of days on a column."""
        iv, other = (e.expression, e.this) if isinstance(e.expression, exp.Interval) else (e.this, e.expression)
        sign = -1 if isinstance(e, exp.Sub) else 1
        if sign < 0 and iv is e.this:
            raise UnsupportedError(f"ei.sql cannot subtract a date from an interval: {e.sql(self.dialect)}")
        unit = (iv.args.get("unit").name if iv.args.get("unit") else "").upper().rstrip("S")
        amount = _literal_value(iv.this)
        if isinstance(amount, str) and amount.strip().lstrip("-").isdigit():
            amount = int(amount)
        if unit in CLOCK_UNITS and isinstance(amount, int):  # a Duration: timestamps move by it
            return E.Call("add" if sign > 0 else "sub",
                          (x(other), E.Literal(_dt.timedelta(**{CLOCK_UNITS[unit]: amount}), T.Duration)))
        if not isinstance(amount, int) or unit not in ("DAY", "MONTH", "YEAR"):
            raise UnsupportedError(f"ei.sql takes INTERVAL 'n' with a unit of {', '.join(CLOCK_UNITS)}, DAY, MONTH "
                                   f"or YEAR, got {iv.sql(self.dialect)}")
        base = x(other)
        if isinstance(base, E.Literal) and isinstance(base.value, _dt.date):
            months = amount * (12 if unit == "YEAR" else 1) if unit != "DAY" else 0
            return E.Literal(_shift(base.value, sign * amount if unit == "DAY" else 0, sign * months), base.dtype)
        if unit != "DAY":
            raise UnsupportedError(f"ei.sql adds INTERVAL ... {unit} only to a constant date; a column takes days: "
                                   f"{e.sql(self.dialect)}")
        return E.Call("add", (base, E.Literal(sign * amount, T.Int64, weak=True)))

    def dtype(self, t: exp.DataType) -> T.DType:
        kind = t.this.name
        if kind == "DECIMAL":
            params = [int(p.this.this) for p in t.expressions]
            return T.Decimal(*params) if params else T.Decimal(18, 3)
        if kind in TYPES:
            return TYPES[kind]
        raise UnsupportedError(f"ei.sql casts to {', '.join(sorted(TYPES))} and DECIMAL(p, s), not "
                               f"{t.sql(self.dialect)}")


_NOT_CONSTANT = object()


def _position(e: exp.Expression, items: list, what: str) -> int | None:
    """The select item (from 0) a constant `2` in GROUP BY / ORDER BY names; None for anything else."""
    if not (isinstance(e, exp.Literal) and not e.is_string and e.is_int):
        return None
    i = int(e.this)
    if not 1 <= i <= len(items):
        raise PlanError(f"{what} position {i} is not in the select list (1 to {len(items)})")
    return i - 1


def _literal_value(e: exp.Expression) -> Any:
    if isinstance(e, exp.Paren):
        return _literal_value(e.this)
    if isinstance(e, exp.Neg):
        v = _literal_value(e.this)
        return -v if isinstance(v, (int, float, decimal.Decimal)) else _NOT_CONSTANT
    if isinstance(e, (exp.Literal, exp.Boolean, exp.Null)) or _is_typed_literal(e):
        return _literal(e).value
    return _NOT_CONSTANT


def _is_typed_literal(e: exp.Expression) -> bool:
    """DATE '2024-01-01' and TIMESTAMP '...': a cast of a string constant to a date or timestamp."""
    return (isinstance(e, exp.Cast) and not isinstance(e, exp.TryCast) and isinstance(e.this, exp.Literal)
            and e.this.is_string and e.to.this.name in ("DATE", "TIMESTAMP", "DATETIME"))


def _literal(e: exp.Expression) -> E.Literal:
    if isinstance(e, exp.Null):
        return E.Literal(None, T.Null, weak=True)
    if isinstance(e, exp.Boolean):
        return E.Literal(bool(e.this), T.Boolean)
    if isinstance(e, exp.Cast):
        text = e.this.this
        try:
            if e.to.this.name == "DATE":
                return E.Literal(_dt.date.fromisoformat(text), T.Date)
            return E.Literal(_dt.datetime.fromisoformat(text), T.Timestamp)
        except ValueError:
            raise PlanError(f"{e.sql()} is not a valid {e.to.this.name.lower()} (write it as YYYY-MM-DD)") from None
    if e.is_string:
        return E.Literal(e.this, T.String)
    text = e.this
    if e.is_int:
        return E.Literal(int(text), literal_dtype(int(text)), weak=True)
    if "e" in text.lower():
        return E.Literal(float(text), T.Float64, weak=True)
    value = decimal.Decimal(text)   # 0.06 is a decimal, as in DuckDB and the SQL standard
    return E.Literal(value, literal_dtype(value))


def _shift(d: _dt.date, days: int, months: int) -> _dt.date:
    """`d` moved by months (the day clamped to the month's end, as SQL does) and days."""
    if months:
        m = d.year * 12 + d.month - 1 + months
        year, month = divmod(m, 12)
        d = _dt.date(year, month + 1, min(d.day, calendar.monthrange(year, month + 1)[1]))
    return d + _dt.timedelta(days=days)


def _conjuncts(e: exp.Expression) -> list[exp.Expression]:
    while isinstance(e, exp.Paren):
        e = e.this
    if isinstance(e, exp.And):
        return _conjuncts(e.this) + _conjuncts(e.expression)
    return [e]


def _columns(e: exp.Expression) -> list[exp.Column]:
    return [c for c in e.find_all(exp.Column) if not isinstance(c.this, exp.Star)]


def _with(plan: N.Node, cols: list) -> N.Node:
    if not cols:
        return plan
    return N.Project(plan, tuple((n, E.Column(n)) for n in plan.schema.names) + tuple(cols))


def _identity(node: N.Node) -> bool:
    return (isinstance(node, N.Project) and node.input.schema.names == tuple(n for n, _ in node.columns)
            and all(e == E.Column(n) for n, e in node.columns))


def _cast_to(plan: N.Node, names: tuple, types: list) -> N.Node:
    schema = plan.schema
    if schema.names == names and list(schema.dtypes) == types:
        return plan
    return N.Project(plan, tuple((name, E.Column(old) if t == dt else E.Cast(E.Column(old), t))
                                 for name, old, dt, t in zip(names, schema.names, schema.dtypes, types)))


def _user(internal: str, rel: Rel) -> str:
    for f in rel.fields:
        if f.internal == internal:
            return f"{f.table}.{f.name}" if f.table else f.name
    return internal


def _one_row() -> N.Node:
    """One row and no column a query can name, for SELECT without FROM."""
    from eidos.flow.read import from_pydict

    return from_pydict({"__one": [0]}).plan


def read_file(path: str, kind: str | None = None):
    """A path in FROM: CSV by `kind` or the extension, else parquet (a file, a folder or a glob)."""
    from eidos.flow.read import read_csv, read_parquet

    if kind == "csv" or (kind is None and path.lower().endswith(".csv")):
        return read_csv(path)
    return read_parquet(path)


def sql(query: str, *, dialect: str = "duckdb", files: bool = False, **flows: Any):
    """A Flow from a SQL query over the Flows named by the keyword arguments.

    The query is parsed by sqlglot (`dialect`, DuckDB's by default) into eidos's plan, so it runs on any
    lane with eidos's semantics and `explain()`. With `files=True` a quoted path in FROM
    (`FROM 'data/*.parquet'`, `'t.csv'`) is read as `ei.read_parquet` / `ei.read_csv` read it.
    What has no eidos form (a window frame ending after the row, WITH RECURSIVE, ...) is an UnsupportedError naming
    it; `dialect` and `files` are not table names. Needs sqlglot (`pip install 'eidos[sql]'`).

    Examples:
        >>> orders = ei.from_pydict({"id": [1, 2, 3], "cust": [10, 20, 10], "amount": [5.0, 7.5, 4.0]})
        >>> names = ei.from_pydict({"cust": [10, 20], "name": ["ann", "bob"]})
        >>> q = ei.sql("SELECT n.name, sum(o.amount) AS total FROM orders o JOIN names n USING (cust) "
        ...            "GROUP BY n.name ORDER BY total DESC", orders=orders, names=names)
        >>> q.run().to_pydict()
        {'name': ['ann', 'bob'], 'total': [9.0, 7.5]}
    """
    from eidos.flow.frame import Flow

    return Flow(parse(query, flows, dialect=dialect, files=read_file if files else None))
