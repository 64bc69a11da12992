"""Fixtures of the SQL lane tests: DuckDB and SQLite files in tmp_path, and a PostgreSQL schema
unique to this test session (dropped afterwards) so parallel or repeated runs cannot collide."""

from __future__ import annotations

import os
import uuid

import pytest

from eidos.testing.databases import POSTGRES_URI, postgres_available
from tests.lanes.helpers import lane_or_skip


@pytest.fixture(scope="session")
def pg_uri() -> str:
    """The test server's uri; skips (with the reason) when no server answers."""
    why = postgres_available(POSTGRES_URI)
    if why:
        pytest.skip(why)
    return POSTGRES_URI


@pytest.fixture(scope="session")
def pg_schema(pg_uri):
    """A schema of this session's own, dropped with its tables at the end."""
    import adbc_driver_postgresql.dbapi as adbc

    name = f"eidos_sqltest_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    with adbc.connect(pg_uri) as con, con.cursor() as cur:
        cur.execute(f'CREATE SCHEMA "{name}"')
        con.commit()
    yield name
    with adbc.connect(pg_uri) as con, con.cursor() as cur:
        cur.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
        con.commit()


@pytest.fixture
def pg_exec(pg_uri):
    """Run statements on the test server (committed)."""
    import adbc_driver_postgresql.dbapi as adbc

    def run(*statements: str):
        with adbc.connect(pg_uri) as con, con.cursor() as cur:
            out = None
            for s in statements:
                cur.execute(s)
                if cur.description:
                    out = cur.fetchall()
            con.commit()
            return out

    return run


@pytest.fixture(autouse=True)
def _lane_runs_here(request):
    """A test parametrized by a SQL lane skips, with the reason, where that lane cannot run (duckdb on a
    free-threaded CPython, which no DuckDB wheel supports)."""
    params = getattr(request.node, "callspec", None)
    if params is not None and "lane" in params.params:
        lane_or_skip(params.params["lane"])


@pytest.fixture
def store(tmp_path, request):
    """store(lane, name, table) -> Flow over `table` kept where `lane` reads it (a file or the session schema)."""
    from eidos.testing.databases import load_table

    def put(lane: str, name: str, table):
        if lane == "postgresql":
            schema = request.getfixturevalue("pg_schema")
            uri = request.getfixturevalue("pg_uri")
            return load_table(uri, f"{schema}.{name}_{uuid.uuid4().hex[:6]}", table)
        ext = "duckdb" if lane == "duckdb" else "sqlite"
        return load_table(f"{lane}:///{tmp_path / ('data.' + ext)}", name, table)

    return put
