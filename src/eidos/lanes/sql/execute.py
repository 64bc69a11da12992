"""Running a translated plan: connect, run one statement, fetch Arrow, conform it to the plan's
schema, and map every engine failure to an eidos error that names the source and the cause.

Nothing that could hold a password leaves here: sources show their uris without one, a uri or
libpq keyword/value string an engine echoes has its secrets masked by parsing, and an engine
message that still holds a password is withheld (and that engine exception is then not chained).
"""

from __future__ import annotations

import functools
import importlib
import logging
import re
import threading
import traceback
import weakref
from collections.abc import Iterator
from urllib.parse import quote

import pyarrow as pa

from eidos.errors import EidosError, ExecutionError, PlanError, ResourceError, UnsupportedError
from eidos.hal import sql_guard
from eidos.ir import nodes as N
from eidos.ir.schema import Schema
from eidos.ir.sources import SqlSource
from eidos.ir.uri import redact

# A child of the logger "eidos": the SQL each run sends to its database, at DEBUG.
log = logging.getLogger(__name__)

DIALECTS = {"duckdb": "eidos.lanes.sql.duckdb", "sqlite": "eidos.lanes.sql.sqlite",
            "postgresql": "eidos.lanes.sql.postgresql"}


def module(lane: str):
    return importlib.import_module(DIALECTS[lane])


def dialect(lane: str):
    mod = module(lane)
    return next(v for k, v in vars(mod).items() if k.endswith("Dialect") and k != "Dialect")()


# ---------------------------------------------------------------- secrets

def leaks(text: str, sources) -> bool:
    """Whether `text` holds a source's password as a token of its own (a one-letter password is not
    found inside every word that has that letter)."""
    for s in sources:
        for _, secret in getattr(s, "secrets", ()):
            for form in {secret, quote(secret, safe="")} - {""}:
                if re.search(rf"(?<!\w){re.escape(form)}(?!\w)", text):
                    return True
    return False


def scrub(text: str, sources) -> str | None:
    """`text` with each uri a driver was given shown as the source shows it and every other secret a
    uri or libpq keyword/value string holds masked (by parsing: eidos.ir.uri); None when a source's
    password is still in it, so that the caller withholds the engine's message."""
    for s in sources:
        if isinstance(s, SqlSource) and s.secrets:
            text = text.replace(s.connection_uri(), s.uri)
    text = redact(text)
    return None if leaks(text, sources) else text


def where(sources) -> str:
    shown = [s.describe() for s in sources]
    return ", ".join(dict.fromkeys(shown)) or "no sources"


WITHHELD = "(the engine's message is withheld: it held the password)"
NO_PASSWORD = ("; the uri names no password (a plan's JSON never stores one): give it in the uri, or "
               "through PGPASSWORD, a password file (~/.pgpass or passfile=) or a service file")


def engine_error(lane: str, e: BaseException, sources, doing: str, kind=ExecutionError) -> EidosError:
    """An eidos error for an engine failure; the engine's exception is chained only when nothing in
    it (its message or its own causes) held a secret."""
    raw = f"{type(e).__name__}: {e}"
    text = scrub(raw, sources)
    m = re.search(r"eidos: ([^'\"\n]*)", text or "")
    if text is None:
        cause = WITHHELD
    else:
        cause = m.group(1).strip() if m else re.split(r"\n\s*(?:LINE \d+:|Query was:)", text)[0].strip()
    if m and "NaN" in cause:
        kind = UnsupportedError
    if "no password supplied" in cause and not any(getattr(s, "secrets", ()) for s in sources):
        cause += NO_PASSWORD
    if "Out of Memory Error:" in raw:   # DuckDB's (an OSError from its Arrow stream); its advice is not the user's
        full = "max_temp_directory_size" in raw   # the spill folder's disk, not the memory limit
        kind, cause = ResourceError, cause.split("\n", 1)[0] + (
            "; the disk of the spill folder is full: point TMPDIR at one with more room" if full else
            "; a larger memory budget (EIDOS_MEMORY_BUDGET) gives the engine more memory")
    err = kind(f"the {lane} lane failed {doing} {where(sources)}: {cause}")
    full = "".join(traceback.format_exception(e))
    if text == raw and scrub(full, sources) == full:
        err.__cause__ = e
    else:
        err.__suppress_context__ = True
    return err


# ---------------------------------------------------------------- results

def conform(table: pa.Table, schema: Schema) -> pa.Table:
    """The engine's Arrow result cast to exactly the plan's Arrow schema."""
    target = schema.to_arrow()
    if table.num_columns != len(target):
        raise ExecutionError(f"the engine returned {table.num_columns} columns, the plan has {len(target)}")
    columns = []
    for i, field in enumerate(target):
        col = table.column(i)
        if isinstance(col.type, pa.ExtensionType):
            col = pa.chunked_array([c.storage for c in col.chunks], type=col.type.storage_type)
        if pa.types.is_null(field.type) or col.null_count == len(col):
            # all null (or no rows): engines that infer result types from values (SQLite) give any type
            col = pa.nulls(len(col), type=field.type)
        elif col.type != field.type:
            try:
                col = col.cast(field.type)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                raise ExecutionError(f"column {field.name!r}: the engine returned {col.type} values that are "
                                     f"not {schema[field.name]}: {e}") from e
        columns.append(col)
    return pa.Table.from_arrays(columns, schema=target)


# ---------------------------------------------------------------- running

def fetch_adbc(con, sql: str, *, rollback: bool = False, read_only: bool = False) -> pa.Table:
    """One statement through an ADBC connection, its whole result as Arrow; `rollback` rolls its
    transaction back after it, `read_only` makes that transaction READ ONLY first (PostgreSQL)."""
    cur = con.cursor()
    try:
        if read_only:
            cur.execute("SET TRANSACTION READ ONLY")
        cur.execute(sql)
        return cur.fetch_arrow_table()
    finally:
        cur.close()
        if rollback:
            con.rollback()


_PREPARED: dict[str, weakref.WeakKeyDictionary] = {}
_prepared_lock = threading.Lock()


@functools.cache
def _dialect(lane: str):
    return dialect(lane)


def prepare(lane: str, plan: N.Node):
    """The plan as one SQL statement for `lane`, translated once per plan and dialect.

    Keyed by the plan itself (nodes are immutable and compare by structure, so an equal plan
    built again finds it too); held weakly, so an entry lives as long as its plan and keeps no
    data alive after it."""
    from eidos.lanes.sql.translate import to_sql

    cache = _PREPARED.get(lane)
    if cache is None:
        cache = _PREPARED.setdefault(lane, weakref.WeakKeyDictionary())
    query = cache.get(plan)
    if query is None:
        for n in plan.walk():
            if isinstance(n, N.Scan) and isinstance(n.source, SqlSource):
                sql_guard.check(n.source)   # a query's text is checked again where it is embedded
        d = _dialect(lane)
        query = to_sql(plan, d)
        if (exact := d.exact_form()) is not None:
            # translated only where the engine needs it (rarely); the plan held weakly, as the cache holds it
            held = weakref.ref(plan)
            query.exact = lambda: to_sql(held(), exact).sql
        with _prepared_lock:
            cache[plan] = query
    return query


def run(lane: str, plan: N.Node, settings: dict | None = None, *, profile: list[str] | None = None) -> pa.Table:
    """Translate `plan` to one SQL statement, run it where its sources live, return the result as Arrow.
    `settings` are engine settings for the connection (DuckDB's memory_limit and temp_directory); with a
    `profile` list, an engine that keeps a profile of the run (DuckDB) adds its lines there."""
    mod = module(lane)
    sources = [n.source for n in plan.walk() if isinstance(n, N.Scan)]
    query = _guard(lane, sources, "translating the plan over", lambda: prepare(lane, plan))
    log.debug("%s runs: %s", lane, query.sql)
    con = _guard(lane, sources, "connecting to", lambda: mod.connect(query, settings))
    profiled = profile is not None and hasattr(con, "fetch_profiled")
    try:
        fetch = (lambda: con.fetch_profiled(query.sql, profile)) if profiled else (lambda: con.fetch(query.sql))
        table = _guard(lane, sources, "running the plan over", fetch)
    finally:
        try:
            con.close()
        except Exception:  # noqa: BLE001, S110 - closing after a failure must not hide it
            pass
    return conform(table, plan.schema)


def stream(lane: str, plan: N.Node, settings: dict | None = None) -> Iterator[pa.RecordBatch]:
    """`run`, batch by batch. Where the dialect's module can open a session that reads the result as
    the engine produces it (`open_stream`: DuckDB's), each batch is conformed and yielded as it comes,
    so neither the engine nor this process holds the whole result; elsewhere the result is fetched
    whole first. An empty result is one batch of no rows (a consumer always learns the schema)."""
    mod = module(lane)
    opener = getattr(mod, "open_stream", None)
    empty = pa.RecordBatch.from_pylist([], schema=plan.schema.to_arrow())
    if opener is None:
        yield from run(lane, plan, settings).to_batches() or [empty]
        return
    sources = [n.source for n in plan.walk() if isinstance(n, N.Scan)]
    query = _guard(lane, sources, "translating the plan over", lambda: prepare(lane, plan))
    log.debug("%s streams: %s", lane, query.sql)
    con = _guard(lane, sources, "connecting to", lambda: opener(query, settings))
    try:
        reader = _guard(lane, sources, "running the plan over", lambda: con.batches(query.sql))
        rows = 0
        while (batch := _guard(lane, sources, "running the plan over", lambda: next(reader, None))) is not None:
            if batch.num_rows:
                rows += batch.num_rows
                yield from conform(pa.Table.from_batches([batch]), plan.schema).to_batches()
        if not rows:
            yield empty
    finally:
        try:
            con.close()
        except Exception:  # noqa: BLE001, S110 - closing after a failure must not hide it
            pass


def _guard(lane, sources, doing, thunk, kind=ExecutionError):
    """thunk(), with any engine exception turned into an eidos error raised outside the except block
    (so an engine message holding a password is not even kept as the implicit context)."""
    err = None
    try:
        return thunk()
    except EidosError as e:
        text = scrub(str(e), sources)
        if text == str(e):
            raise
        err = type(e)(text if text is not None else f"{where(sources)}: {WITHHELD}")
    except Exception as e:  # noqa: BLE001 - engines raise many types; each becomes an eidos error
        err = engine_error(lane, e, sources, doing, kind)
    raise err


def describe(lane: str, source: SqlSource) -> tuple[Schema, int | None]:
    """Schema and a row estimate of a database table or query, without fetching its rows."""
    sql_guard.check(source)
    mod = module(lane)
    return _guard(lane, [source], "reading", lambda: mod.describe(source), kind=PlanError)
