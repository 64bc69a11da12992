"""What users write first, through eidos beside the engine's own SQL, in one run.

    python bench/first_queries.py [--rows 10000000] [--pg-rows 1000000] [--runs 5]

- top-N on DuckDB: `read_parquet(...).sort("x", descending=True).head(10)` on the duckdb lane, the polars
  lane and auto, beside DuckDB's `ORDER BY x DESC LIMIT 10` and Polars' `sort(...).head(10)` on the same file.
- top-N on PostgreSQL over an indexed column, and string equality on an indexed text column: eidos
  (the plan runs there, rule 2) beside the same query written natively, run through the same driver (ADBC).
  Needs PostgreSQL at EIDOS_TEST_POSTGRESQL (default postgresql://postgres@127.0.0.1:5432/test); the
  table is made in a schema of this run's own and dropped after.
- float sums on SQLite (`--sqlite-rows`): a global and a 16-key `sum()` through the sqlite lane, which
  sums exactly (a registered aggregate, so the run reads through Python's sqlite3), beside SQLite's own
  SUM (compensated, not correctly rounded) through ADBC; the results agree within 1e-12 and the number of
  sums where SQLite's own differs from the exact one is printed.

Prints min and median seconds of --runs runs and the ratio eidos/native (min over min); every eidos
result is checked against the native one. The physical limit: a top-N reads its column once (the file's
size over the disk/page-cache bandwidth) where there is no index, and a few index pages where there is.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import tempfile
import time
import uuid

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import eidos as ei
from eidos import col

PG = os.environ.get("EIDOS_TEST_POSTGRESQL", "postgresql://postgres@127.0.0.1:5432/test")


def timed(fn, runs: int) -> tuple[float, float, object]:
    out, times = None, []
    for _ in range(runs):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return min(times), statistics.median(times), out


def row(name: str, eidos_fn, native_fn, runs: int, same) -> None:
    eidos_fn(), native_fn()   # warm: files in the page cache, connections and translations made
    e_min, e_med, e_out = timed(eidos_fn, runs)
    n_min, n_med, n_out = timed(native_fn, runs)
    assert same(e_out, n_out), f"{name}: eidos and the native engine disagree"
    print(f"{name:<44} eidos {e_min * 1e3:8.1f} / {e_med * 1e3:8.1f} ms   native {n_min * 1e3:8.1f} / "
          f"{n_med * 1e3:8.1f} ms   ratio {e_min / n_min:5.2f}x")


def duckdb_top_n(folder: str, rows: int, runs: int) -> None:
    import duckdb
    import polars as pl

    path = os.path.join(folder, "values.parquet")
    rng = np.random.default_rng(0)
    pq.write_table(pa.table({"x": rng.random(rows), "k": rng.integers(0, 1000, rows)}), path)
    flow = ei.read_parquet(path).sort("x", descending=True).head(10)
    con = duckdb.connect()
    native = f"SELECT * FROM read_parquet('{path}') ORDER BY x DESC NULLS LAST LIMIT 10"
    same = lambda a, b: a.to_pydict() == b.to_pydict()  # noqa: E731
    row(f"top 10 of {rows:,} (duckdb lane vs DuckDB)", lambda: flow.run(engine="duckdb"),
        lambda: con.sql(native).to_arrow_table(), runs, same)
    lazy = pl.scan_parquet(path).sort("x", descending=True, nulls_last=True).head(10)
    row(f"top 10 of {rows:,} (polars lane vs Polars)", lambda: flow.run(engine="polars"),
        lambda: lazy.collect().to_arrow(), runs, same)
    row(f"top 10 of {rows:,} (auto vs DuckDB)", lambda: flow.run(), lambda: con.sql(native).to_arrow_table(),
        runs, same)


def postgresql(rows: int, runs: int) -> None:
    import adbc_driver_postgresql.dbapi as pg

    schema = f"bench_{uuid.uuid4().hex[:8]}"
    con = pg.connect(PG)
    con.adbc_connection.set_autocommit(True)
    cur = con.cursor()
    cur.execute(f"CREATE SCHEMA {schema}")
    try:
        cur.execute(f"CREATE TABLE {schema}.t AS SELECT g AS id, random() AS x, md5(g::text) AS s "
                    f"FROM generate_series(1, {rows}) g")
        cur.execute(f"CREATE INDEX ON {schema}.t (x)")
        cur.execute(f"CREATE INDEX ON {schema}.t (s)")
        cur.execute(f"ANALYZE {schema}.t")
        cur.execute(f"SELECT s FROM {schema}.t WHERE id = {rows // 2}")
        needle = cur.fetchone()[0]
        t = ei.read_sql(PG, table=f"{schema}.t")

        def native(sql):
            def go():
                cur.execute(sql)
                return cur.fetch_arrow_table()
            return go

        same = lambda a, b: sorted(a.column("id").to_pylist()) == sorted(b.column("id").to_pylist())  # noqa: E731
        top = t.sort("x").head(10)
        row(f"top 10 of {rows:,}, indexed (PostgreSQL)", lambda: top.run(),
            native(f"SELECT id, x, s FROM {schema}.t ORDER BY x LIMIT 10"), runs, same)
        # Nulls last (eidos' order) on a descending key: what an index in ascending order cannot serve.
        top = t.sort("x", descending=True).head(10)
        row(f"top 10 desc of {rows:,}, nulls last (PostgreSQL)", lambda: top.run(),
            native(f"SELECT id, x, s FROM {schema}.t ORDER BY x DESC NULLS LAST LIMIT 10"), runs, same)
        eq = t.filter(col("s") == needle)
        row(f"s = '...' of {rows:,}, indexed (PostgreSQL)", lambda: eq.run(),
            native(f"SELECT id, x, s FROM {schema}.t WHERE s = '{needle}'"), runs, same)
    finally:
        cur.execute(f"DROP SCHEMA {schema} CASCADE")
        con.close()


def sqlite_sums(folder: str, rows: int, runs: int) -> None:
    import adbc_driver_sqlite.dbapi as adbc

    path = os.path.join(folder, "sums.sqlite")
    rng = np.random.default_rng(0)
    con = adbc.connect(path)
    cur = con.cursor()
    cur.execute("CREATE TABLE t (k INTEGER, x REAL)")
    cur.adbc_ingest("t", pa.table({"k": rng.integers(0, 16, rows), "x": rng.standard_normal(rows) * 1e3}),
                    mode="append")
    con.commit()
    t = ei.read_sql(f"sqlite:///{path}", table="t")

    def native(sql):
        def go():
            cur.execute(sql)
            return cur.fetch_arrow_table()
        return go

    def same(a, b):
        a, b = (sorted(zip(*[x.column(i).to_pylist() for i in range(x.num_columns)])) for x in (a, b))
        off = sum(x[-1] != y[-1] for x, y in zip(a, b))
        print(f"    SQLite's own SUM differs from the exact sum in {off} of {len(a)}")
        return all(math.isclose(x[-1], y[-1], rel_tol=1e-12) for x, y in zip(a, b))

    row(f"sum of {rows:,} floats (SQLite)", lambda: t.agg(s=col("x").sum()).run(), native("SELECT SUM(x) FROM t"),
        runs, same)
    row(f"sum of {rows:,} floats by 16 keys (SQLite)", lambda: t.group_by("k").agg(s=col("x").sum()).run(),
        native("SELECT k, SUM(x) FROM t GROUP BY k"), runs, same)
    con.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--pg-rows", type=int, default=1_000_000)
    parser.add_argument("--sqlite-rows", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    print(f"eidos {ei.__version__}; {os.cpu_count()} cores; min / median of {args.runs} runs")
    with tempfile.TemporaryDirectory() as folder:
        duckdb_top_n(folder, args.rows, args.runs)
        sqlite_sums(folder, args.sqlite_rows, args.runs)
    postgresql(args.pg_rows, args.runs)


if __name__ == "__main__":
    main()
