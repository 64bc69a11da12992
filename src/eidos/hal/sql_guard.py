"""The SQL a plan carries: a query source is one read-only SELECT, a table source a table's name.

A plan is data and may come from anywhere, and a database source carries SQL text (`query=`) or a
name (`table=`) that eidos sends to a database. So before any of it reaches one, `check` reads it
with sqlglot in the source's own dialect and refuses (PlanError, naming what it found) anything
but a single query that only reads: a second statement, SET, COPY, PRAGMA, ATTACH, INSERT and the
other statements, a CTE that changes data, `SELECT ... INTO`, `FOR UPDATE`, and functions that
reach past the database's tables (files, settings, sequences, other servers, SQL text run as a
query: `FUNCTIONS` below). What the database then receives is sqlglot's rendering of the tree
that was checked, never the text itself, so no trick of quoting or comments that one parser reads
otherwise than another can smuggle a statement past the check.

This lives in the HAL, beside the trust model for code a plan names, because every path that
sends a plan's SQL to a database meets here: the build-time `describe_sql` (any lane), and the
SQL lanes' describe and run, which take a query's text or tree only from `query_sql` and
`statement`. The lanes add what their engines offer besides (a read-only transaction, a DuckDB
connection that cannot reach files or change settings); this check does not rely on them.

Examples:
    >>> from eidos.ir.schema import Schema
    >>> from eidos.ir.sources import SqlSource
    >>> ok = SqlSource(Schema(()), uri="duckdb:///:memory:", query="SELECT 1 AS a -- one")
    >>> query_sql(ok)
    'SELECT 1 AS a'
    >>> check(SqlSource(Schema(()), uri="duckdb:///:memory:", query="SELECT 1; SET memory_limit='1MB'"))
    Traceback (most recent call last):
    ...
    eidos.errors.PlanError: the duckdb query source must be one read-only SELECT; found 2 statements...
"""

from __future__ import annotations

import functools
import logging
import re
import threading

from eidos.errors import PlanError

# Source scheme -> sqlglot dialect; any other scheme is read as sqlglot reads that name, else generic SQL.
DIALECTS = {"duckdb": "duckdb", "sqlite": "sqlite", "postgresql": "postgres", "postgres": "postgres"}

_FILES = "reads or writes files"
_SETTINGS = "changes the session's settings or state"
_SERVERS = "reaches another database or server"
_RUNS_SQL = "runs SQL text of its own"
_ADMIN = "is a server administration function"
_EXTENSIONS = "loads code into the database"

# Functions a read-only query may not call, per dialect: exact names, then name prefixes.
FUNCTIONS = {
    "duckdb": ({"glob": _FILES, "sniff_csv": _FILES, "query": _RUNS_SQL, "query_table": _RUNS_SQL,
                "json_execute_serialized_sql": _RUNS_SQL, "setseed": _SETTINGS, "nextval": _SETTINGS,
                "currval": _SETTINGS, "getvariable": _SETTINGS, "getenv": _SETTINGS, "current_setting": _SETTINGS,
                "checkpoint": _SETTINGS, "force_checkpoint": _SETTINGS, "which_secret": _SETTINGS,
                "st_read": _FILES, "load_extension": _EXTENSIONS},
               (("read_", _FILES), ("parquet_", _FILES), ("iceberg_", _FILES), ("delta_", _FILES),
                ("ducklake_", _FILES), ("sqlite_", _SERVERS), ("postgres_", _SERVERS), ("mysql_", _SERVERS),
                ("duckdb_", _SETTINGS), ("pragma_", _SETTINGS))),
    "postgres": ({"set_config": _SETTINGS, "nextval": _SETTINGS, "setval": _SETTINGS,
                  "query_to_xml": _RUNS_SQL, "query_to_xml_and_xmlschema": _RUNS_SQL,
                  "query_to_xmlschema": _RUNS_SQL, "cursor_to_xml": _RUNS_SQL, "cursor_to_xmlschema": _RUNS_SQL},
                 (("pg_", _ADMIN), ("lo_", _FILES), ("dblink", _SERVERS))),
    "sqlite": ({"load_extension": _EXTENSIONS, "readfile": _FILES, "writefile": _FILES, "edit": _FILES,
                "fsdir": _FILES, "zipfile": _FILES, "fts3_tokenizer": _EXTENSIONS},
               (("pragma_", _SETTINGS),)),
}
# PostgreSQL's pg_ functions that only describe values.
HARMLESS = frozenset({"pg_typeof", "pg_column_size", "pg_size_pretty", "pg_size_bytes", "pg_client_encoding",
                      "pg_encoding_to_char"})
# The only functions a query may read rows from (in FROM or JOIN): they make rows of their arguments.
TABLE_FUNCTIONS = frozenset({"unnest", "generate_series", "exploding_generate_series", "range", "json_each",
                             "json_tree", "jsonb_each", "jsonb_each_text", "json_each_text", "json_array_elements",
                             "jsonb_array_elements", "json_array_elements_text", "jsonb_array_elements_text",
                             "regexp_split_to_table"})
_quiet = threading.Lock()
INTERNAL = "__eidos_"   # the names eidos gives the parts of the statements it writes
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def dialect(source) -> str | None:
    import sqlglot

    scheme = source.scheme
    if scheme in DIALECTS:
        return DIALECTS[scheme]
    return scheme if scheme in sqlglot.Dialect.classes else None


def check(source) -> None:
    """PlanError unless the source's table is a table's name and its query one read-only SELECT."""
    if getattr(source, "table", None) is not None:
        _check_table(source.table, source.scheme)
    elif getattr(source, "query", None) is not None:
        _parsed(dialect(source), source.query, source.scheme)


def statement(source):
    """The checked query as a sqlglot tree (a copy of its own, without comments), to embed."""
    check(source)
    return _parsed(dialect(source), source.query, source.scheme).copy()


def query_sql(source) -> str:
    """The checked query as its dialect's SQL text: what a database is given in place of the plan's text."""
    return statement(source).sql(dialect=dialect(source))


def _check_table(name: str, scheme: str) -> None:
    # Each part becomes one quoted identifier (so 'x"; DROP TABLE t' names a table, oddly): never SQL.
    parts = name.split(".") if isinstance(name, str) else [""]
    if not 1 <= len(parts) <= 3 or not all(p and not _CONTROL.search(p) for p in parts):
        raise PlanError(f"the {scheme} source's table must be a table's name, optionally qualified by its "
                        f"schema and catalog (orders, sales.orders): one to three non-empty names between "
                        f"dots, without control characters; got {name!r}. For anything else give a query")
    if any(p.lower().startswith(INTERNAL) for p in parts):
        raise PlanError(f"the {scheme} source's table {name!r} uses a name eidos keeps for itself ({INTERNAL}...)")


@functools.lru_cache(maxsize=256)
def _parsed(dialect_name: str | None, text: str, scheme: str):
    import sqlglot
    from sqlglot import exp
    from sqlglot.errors import SqlglotError

    def refuse(found: str) -> PlanError:
        return PlanError(f"the {scheme} query source must be one read-only SELECT; found {found}: "
                         f"{_short(text)}")

    try:
        with _quiet:   # sqlglot warns (to stderr) of statements it reads as a bare command; refused here
            level = logging.getLogger("sqlglot").level
            logging.getLogger("sqlglot").setLevel(logging.ERROR)
            try:
                trees = [t for t in sqlglot.parse(text, read=dialect_name) if t is not None]
            finally:
                logging.getLogger("sqlglot").setLevel(level)
    except SqlglotError as e:
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise PlanError(f"the {scheme} query source is not SQL eidos can read as one SELECT "
                        f"({dialect_name or 'generic'} dialect): {first}: {_short(text)}") from None
    if len(trees) != 1:
        raise refuse(f"{len(trees)} statements" if trees else "no statement")
    (tree,) = trees
    if not isinstance(tree, (exp.Query, exp.Values)):
        raise refuse(_what(tree))
    denied, prefixes = FUNCTIONS.get(dialect_name, _ALL)
    for node in tree.walk():
        if isinstance(node, _statements()):
            raise refuse(f"{_what(node)} inside it")
        if isinstance(node, exp.Into):
            raise refuse("SELECT ... INTO, which makes a table")
        if isinstance(node, exp.Lock):
            raise refuse("FOR UPDATE/SHARE, which takes locks")
        if isinstance(node, exp.Func):
            name = _function(node)
            why = denied.get(name) or next((w for p, w in prefixes if name.startswith(p)), None)
            if why and name not in HARMLESS:
                raise refuse(f"a call of {name}(), which {why}")
            if isinstance(node.parent, (exp.Table, exp.Lateral, exp.From, exp.Join)) and name not in TABLE_FUNCTIONS:
                raise refuse(f"rows read from {name}(); a query source reads the database's tables, and of "
                             f"functions only {', '.join(sorted(TABLE_FUNCTIONS - {'exploding_generate_series'}))}")
        if isinstance(node, exp.Table):
            _check_table_ref(node, dialect_name, refuse)
    for node in tree.walk():
        node.comments = None
    return tree


def _check_table_ref(node, dialect_name, refuse) -> None:
    from sqlglot import exp

    names = [p.name for p in node.parts if isinstance(p, exp.Identifier)]
    if any(n.lower().startswith(INTERNAL) for n in names):
        raise refuse(f"the name {node.sql(dialect=dialect_name)}, which eidos keeps for itself")
    if dialect_name == "duckdb" and len(names) == 1 and re.search(r"[./\\:]", names[0]):
        # DuckDB reads a table name that looks like a file as that file (a replacement scan)
        raise refuse(f"the table {names[0]!r}, which DuckDB would read as a file")


def _function(node) -> str:
    from sqlglot import exp

    if isinstance(node, exp.Anonymous):
        return node.name.lower()
    try:
        return node.sql_name().lower()
    except NotImplementedError:
        return type(node).__name__.lower()


def _what(node) -> str:
    from sqlglot import exp

    word = str(node.this).upper() if isinstance(node, exp.Command) else node.key.upper()
    return f"{'an' if word[:1] in 'AEIOU' else 'a'} {word} statement"


def _short(text: str) -> str:
    text = " ".join(text.split())
    return repr(text if len(text) <= 120 else text[:117] + "...")


@functools.cache
def _statements() -> tuple[type, ...]:
    """The sqlglot node types of statements and clauses that do more than read."""
    from sqlglot import exp

    names = ("DML", "DDL", "Drop", "Alter", "Set", "SetItem", "Pragma", "Attach", "Detach", "Use", "Transaction",
             "Commit", "Rollback", "Command", "LoadData", "Install", "Export", "Analyze", "Describe", "Show",
             "Grant", "Revoke", "TruncateTable", "Cache", "Uncache", "Refresh", "Summarize", "Kill", "Declare",
             "Execute", "Comment", "Returning")
    return tuple(getattr(exp, n) for n in names if hasattr(exp, n))


_ALL = ({k: v for d in FUNCTIONS.values() for k, v in d[0].items()},
        tuple(p for d in FUNCTIONS.values() for p in d[1]))
