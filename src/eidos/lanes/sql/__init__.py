"""The SQL lanes: DuckDB (embedded, local data and DuckDB files), SQLite and PostgreSQL (pushdown).

One translator (translate.py) renders each plan per dialect (duckdb.py, sqlite.py,
postgresql.py); execute.py runs it. Engines and sqlglot load only when a lane runs.
"""

from __future__ import annotations

import contextlib

from eidos.errors import ResourceError
from eidos.hal.lane import Availability, Estimate, Lane, installed
from eidos.hal.memo import once
from eidos.ir import expr as E
from eidos.ir import nodes as N
from eidos.ir.durations import parse_duration
from eidos.ir.order import reads_row_order
from eidos.ir.sources import SqlSource
from eidos.lanes.sql.coverage import COVERAGE, OUT_OF_CORE_GAPS

INSTALL = "pip install 'eidos[sql]'"


def _sorted(node: N.Node) -> bool:
    """Whether the order of `node`'s rows comes from a Sort: the only row order SQL carries (as a column)."""
    if isinstance(node, N.Sort):
        return True
    if isinstance(node, (N.Filter, N.Project, N.Limit, N.Unique, N.AsofJoin)) or (
            isinstance(node, N.Join) and node.how in ("semi", "anti")):
        return _sorted(node.inputs[0])
    return isinstance(node, N.Union) and all(map(_sorted, node.inputs))


def _unsorted_windows(plan: N.Node) -> list[str]:
    """Window functions reading the row order of rows that SQL holds in no order (a file's or table's)."""
    return [f"{w} reads the order of rows the plan does not sort (SQL keeps a file's row order only after a sort)"
            for node in plan.walk() if isinstance(node, N.Project) and not _sorted(node.input)
            for e in node.columns for w in e[1].walk() if isinstance(w, E.Window) and reads_row_order(w)]


def _calendar_windows(plan: N.Node) -> list[str]:
    """Windows by time whose length is calendar months: a RANGE frame takes a fixed number of microseconds."""
    return [f"{w} windows by calendar months (SQL's RANGE frames here take a fixed length)"
            for node in plan.walk() if isinstance(node, N.Project) for e in node.columns for w in e[1].walk()
            if isinstance(w, E.Window) and w.fn.endswith("_by") and parse_duration(w.options[0]).months]


class SqlLane(Lane):
    """A lane that runs a whole plan as one SQL statement where its data lives."""

    packages: tuple[str, ...] = ()

    def is_available(self) -> Availability:
        missing = [p for p in self.packages if not installed(p)]
        if missing:
            return Availability(False, f"needs {', '.join(missing)}: {INSTALL}")
        return Availability(True)

    def supports(self, plan: N.Node) -> list[str]:
        found = self.coverage.gaps(plan) + _unsorted_windows(plan) + _calendar_windows(plan)
        places = set()
        for node in plan.walk():
            if isinstance(node, N.Scan):
                why = self.can_read(node.source)
                if why:
                    found.append(why)
                elif isinstance(node.source, SqlSource):
                    places.add(node.source.uri)
        if len(places) > 1:
            found.append(f"sources live in {len(places)} different {self.name} databases")
        found += [f"distinct(keep={n.keep!r}) over rows in file order (SQL keeps the order of sorted rows only)"
                  for n in plan.walk() if isinstance(n, N.Unique) and n.keep in ("first", "last") and not _sorted(n.input)]
        return list(dict.fromkeys(found))

    # Whether an Aggregate of float sums, means, var and std takes the exact route (lanes/sql/exact.py): the
    # engine runs its input, eidos.hal.fsum aggregates the Arrow result. For engines whose own float sum is
    # not correctly rounded (DuckDB, SQLite); PostgreSQL sums floats exactly in numeric.
    exact_route = False

    def describe(self, plan: N.Node) -> list[str]:
        """The SQL this lane sends for `plan` (explain shows it), and where the exact route takes an Aggregate."""
        if not self.exact_route:
            return self._sql_lines(plan)
        from eidos.hal.exact_aggregate import in_place, route
        from eidos.lanes.sql import exact

        lines: list[str] = []

        def note(agg: N.Aggregate):
            rows = route(agg)
            lines.extend([exact.IN_PLACE] if in_place(rows) is not None
                         else [exact.ROUTE.format(engine=self.name)] + self._sql_lines(rows))
            return agg.schema.to_arrow().empty_table()

        if route(plan) is not None:
            note(plan)
            return lines
        if not self._reads_arrow:
            return self._sql_lines(plan)
        rest = exact.below(plan, note)
        return lines + self._sql_lines(rest) if lines else self._sql_lines(plan)

    @property
    def _reads_arrow(self) -> bool:
        """Whether the engine reads a table in memory, so the exact route can take an Aggregate below the root
        too (exact.below hands the engine its result as an Arrow table); SQLite reads only its own file."""
        return "local" in self.reads

    def _sql_lines(self, plan: N.Node) -> list[str]:
        """The SQL this lane sends for `plan`; a plan reading other parts' results gets its SQL when they
        have run."""
        import sqlglot

        from eidos.ir.sources import PartSource
        from eidos.lanes.sql.execute import dialect, prepare

        if any(isinstance(n, N.Scan) and isinstance(n.source, PartSource) for n in plan.walk()):
            return [f"sql ({self.name}): made when the parts it reads have run"]
        text = sqlglot.transpile(prepare(self.name, plan).sql, read=dialect(self.name).sqlglot, pretty=True)[0]
        return [f"sql ({self.name}):"] + [f"  {line}" for line in text.splitlines()]

    def execute(self, plan: N.Node):
        return self._run(plan)

    def execute_profiled(self, plan: N.Node):
        lines: list[str] = []
        return self._run(plan, lines), lines

    def _run(self, plan: N.Node, profile: list[str] | None = None):
        if self.exact_route:
            from eidos.hal.exact_aggregate import finish, in_place, route
            from eidos.lanes.sql import exact
            from eidos.lanes.sql.execute import conform

            rows = route(plan)   # exact float aggregation: the engine runs its input, eidos.hal.fsum the rest
            if rows is not None:
                table = in_place(rows)
                return conform(finish(plan, self._run(rows, profile) if table is None else table), plan.schema)
            if self._reads_arrow:
                plan = exact.below(plan, lambda agg: self._run(agg, profile))
        return self._send(plan, profile)

    def _send(self, plan: N.Node, profile: list[str] | None = None):
        from eidos.lanes.sql.execute import run

        return run(self.name, plan, profile=profile)

    def execute_stream(self, plan: N.Node):
        from eidos.lanes.sql.execute import stream

        yield from stream(self.name, plan)

    def write_table(self, uri: str, table: str, schema, batches, if_table_exists: str) -> int:
        """`batches` into `table` of the database at `uri`, in one transaction (flow.write_database)."""
        from eidos.lanes.sql.write import write

        return write(self.name, uri, table, schema, batches, if_table_exists)

    def describe_source(self, source: SqlSource):
        """(Schema, estimated rows or None) of a table or query, read from the database's catalog."""
        from eidos.lanes.sql.execute import describe

        return describe(self.name, source)


class DuckDBLane(SqlLane):
    """Embedded DuckDB: a local vector engine (parquet, CSV, Arrow) that also reads DuckDB files.

    `out_of_core(budget)` gives a DuckDB lane that keeps a run within the memory budget: a hard
    memory limit, as many threads as fit under it, spilling to a temporary folder of the run's own
    (lanes/sql/memory.py has the rule and where its figures come from); a budget below what the plan
    needs raises ResourceError naming the budget that would do. DuckDB keeps its own memory under
    the limit, which Polars' streaming engine does not promise (bench/out_of_core.py measures both).
    """

    name = "duckdb"
    exact_route = True
    kind = "vector"
    coverage = COVERAGE["duckdb"]
    reads = frozenset({"local", "duckdb"})
    packages = ("duckdb", "sqlglot")

    def __init__(self, *, budget: int | None = None, spill_dir: str | None = None):
        self.budget, self.spill_dir = budget, spill_dir
        if budget is not None:
            # The exact float aggregates gather each group's values (list()), which no budget bounds.
            self.coverage = COVERAGE["duckdb"].without(typed=OUT_OF_CORE_GAPS)

    @property
    def memory_limited(self) -> bool:
        return self.budget is not None

    @property
    def out_of_core_how(self) -> str:
        if self.budget is None:
            return "in memory"
        return (f"within the budget: a hard memory limit and as many threads as fit under it, spilling to a "
                f"temporary folder in {self.spill_dir}")

    def out_of_core(self, budget_bytes: int) -> Lane:
        import tempfile

        return DuckDBLane(budget=budget_bytes, spill_dir=tempfile.gettempdir())

    def _send(self, plan: N.Node, profile: list[str] | None = None):
        from eidos.lanes.sql.execute import run

        if self.budget is None:
            return run(self.name, plan, profile=profile)
        with self._within_budget(plan) as settings:
            return run(self.name, plan, settings, profile=profile)

    def execute_stream(self, plan: N.Node):
        from eidos.lanes.sql.execute import stream

        if self.budget is None:
            yield from stream(self.name, plan)
            return
        with self._within_budget(plan) as settings:
            yield from stream(self.name, plan, settings)

    @contextlib.contextmanager
    def _within_budget(self, plan: N.Node):
        """DuckDB's settings for one run within the budget, with a spill folder of the run's own (DuckDB
        names its spill files alike) that is removed after it."""
        import tempfile

        from eidos.hal.cost import input_bytes
        from eidos.hal.devices import budget_text, detect_devices
        from eidos.lanes.sql.memory import settings

        text = budget_text(self.budget)
        chosen = settings(plan, self.budget, detect_devices().cpu_cores, input_bytes(plan), text)
        with tempfile.TemporaryDirectory(prefix="eidos-duckdb-spill-", dir=self.spill_dir) as spill:
            try:
                yield {**chosen, "temp_directory": spill, "preserve_insertion_order": False}
            except ResourceError as e:
                raise ResourceError(f"{e} (out of core within {text}: DuckDB's memory limit "
                                    f"{chosen['memory_limit']}, {chosen['threads']} threads)") from e

    def __repr__(self) -> str:
        budget = f", memory budget {self.budget // 2**20} MiB" if self.budget else ""
        return f"<lane duckdb (vector{budget})>"

    def estimate(self, plan: N.Node) -> Estimate:
        from eidos.hal.constants import key
        from eidos.lanes.sql.cost import DEFAULTS, estimate

        return once(plan, "duckdb.estimate " + key(DEFAULTS), lambda: estimate(plan))

    def constants(self):
        from eidos.lanes.sql.cost import DEFAULTS

        return DEFAULTS


class SQLiteLane(SqlLane):
    """SQLite database files through the ADBC driver (Arrow results)."""

    name = "sqlite"
    kind = "pushdown"
    exact_route = True
    coverage = COVERAGE["sqlite"]
    reads = frozenset({"sqlite"})
    packages = ("adbc_driver_sqlite", "adbc_driver_manager", "sqlglot")


class PostgresLane(SqlLane):
    """PostgreSQL servers through the ADBC driver (Arrow results)."""

    name = "postgresql"
    kind = "pushdown"
    coverage = COVERAGE["postgresql"]
    reads = frozenset({"postgresql", "postgres"})
    packages = ("adbc_driver_postgresql", "adbc_driver_manager", "sqlglot")
