"""The SQL lanes: DuckDB (embedded, local data and DuckDB files), SQLite and PostgreSQL (pushdown).

One translator (translate.py) renders each plan per dialect (duckdb.py, sqlite.py,
postgresql.py); execute.py runs it. Engines and sqlglot load only when a lane runs.
"""

from __future__ import annotations

from eidos.hal.lane import Availability, Estimate, Lane, installed
from eidos.hal.memo import once
from eidos.ir import nodes as N
from eidos.ir.sources import SqlSource
from eidos.lanes.sql.coverage import COVERAGE

INSTALL = "pip install 'eidos[sql]'"


class SqlLane(Lane):
    """A lane that runs a whole plan as one SQL statement where its data lives."""

    packages: tuple[str, ...] = ()

    def is_available(self) -> Availability:
        missing = [p for p in self.packages if not installed(p)]
        if missing:
            return Availability(False, f"needs {', '.join(missing)}: {INSTALL}")
        return Availability(True)

    def supports(self, plan: N.Node) -> list[str]:
        found = self.coverage.gaps(plan)
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
        return list(dict.fromkeys(found))

    def execute(self, plan: N.Node):
        from eidos.lanes.sql.execute import run

        return run(self.name, plan)

    def describe_source(self, source: SqlSource):
        """(Schema, estimated rows or None) of a table or query, read from the database's catalog."""
        from eidos.lanes.sql.execute import describe

        return describe(self.name, source)


class DuckDBLane(SqlLane):
    """Embedded DuckDB: a local vector engine (parquet, CSV, Arrow) that also reads DuckDB files.

    `out_of_core(budget)` gives a DuckDB lane with a hard memory limit that spills to a temporary
    folder: DuckDB keeps its own memory under the limit, which Polars' streaming engine does not
    promise (bench/out_of_core.py measures both).
    """

    name = "duckdb"
    kind = "vector"
    coverage = COVERAGE["duckdb"]
    reads = frozenset({"local", "duckdb"})
    packages = ("duckdb", "sqlglot")
    # Of the budget, what DuckDB may use: the rest is the interpreter, Arrow results and the lanes' code.
    MEMORY_SHARE = 0.5
    MIN_MEMORY = 32 * 2**20  # below this DuckDB cannot even hold its buffers

    def __init__(self, *, memory_limit: int | None = None, spill_dir: str | None = None):
        self.memory_limit, self.spill_dir = memory_limit, spill_dir

    @property
    def memory_limited(self) -> bool:
        return self.memory_limit is not None

    @property
    def out_of_core_how(self) -> str:
        if self.memory_limit is None:
            return "in memory"
        return (f"with a hard memory limit of {self.memory_limit // 2**20} MiB, spilling to a temporary "
                f"folder in {self.spill_dir}")

    def out_of_core(self, budget_bytes: int) -> Lane:
        import tempfile

        return DuckDBLane(memory_limit=max(self.MIN_MEMORY, int(budget_bytes * self.MEMORY_SHARE)),
                          spill_dir=tempfile.gettempdir())

    def execute(self, plan: N.Node):
        from eidos.lanes.sql.execute import run

        if self.memory_limit is None:
            return run(self.name, plan)
        import tempfile

        # A folder of this run's own (DuckDB names its spill files alike), removed after it.
        with tempfile.TemporaryDirectory(prefix="eidos-duckdb-spill-", dir=self.spill_dir) as spill:
            return run(self.name, plan, {"memory_limit": f"{self.memory_limit // 2**20}MB",
                                         "temp_directory": spill, "preserve_insertion_order": False})

    def __repr__(self) -> str:
        limit = f", memory limit {self.memory_limit // 2**20} MiB" if self.memory_limit else ""
        return f"<lane duckdb (vector{limit})>"

    def estimate(self, plan: N.Node) -> Estimate:
        from eidos.lanes.sql.cost import estimate

        return once(plan, "duckdb.estimate", lambda: estimate(plan))


class SQLiteLane(SqlLane):
    """SQLite database files through the ADBC driver (Arrow results)."""

    name = "sqlite"
    kind = "pushdown"
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
