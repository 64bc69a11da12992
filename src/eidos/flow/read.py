"""Sources: each returns a Flow whose schema is known at once (read from metadata, not data)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from eidos.errors import PlanError, shown
from eidos.flow.frame import Flow
from eidos.ir import dtypes as T
from eidos.ir.nodes import Scan
from eidos.ir.schema import Schema
from eidos.ir.sources import ArrowSource, CsvSource, ParquetSource, SqlSource


def read_parquet(path: str | os.PathLike) -> Flow:
    """A parquet file, a folder of parquet files (searched recursively), or a glob; read lazily.

    Only the files' metadata is read now (the schema, row counts and sizes the planner weighs);
    the data is read when the flow runs, and only the columns it uses. Every file must hold the
    same columns, each as one type. In a folder, links are followed only inside it, each file is
    read once, and key=value folder names are partition columns (see docs/api/sources.md).

    Examples:
        >>> import os, tempfile
        >>> with tempfile.TemporaryDirectory() as folder:
        ...     ei.from_pydict({"a": [1, 2, 3]}).write_parquet(os.path.join(folder, "part-0.parquet"))
        ...     ei.from_pydict({"a": [4]}).write_parquet(os.path.join(folder, "part-1.parquet"))
        ...     ei.read_parquet(folder).agg(n=ei.count(), total=col("a").sum()).run().to_pydict()
        {'n': [4], 'total': [10]}
        >>> with tempfile.TemporaryDirectory() as folder:
        ...     for year in (2023, 2024):
        ...         os.mkdir(os.path.join(folder, f"year={year}"))
        ...         ei.from_pydict({"a": [year % 10]}).write_parquet(os.path.join(folder, f"year={year}", "0.parquet"))
        ...     flow = ei.read_parquet(folder)
        ...     print(flow.schema, flow.filter(col("year") > 2023).run().to_pydict())
        Schema(a: Int64, year: Int64) {'a': [4], 'year': [2024]}
    """
    from eidos.flow.folders import expand, hive
    from eidos.hal.files import parquet_footers

    path = os.fspath(path)
    files, root = expand(path, ".parquet")
    schema, metadata = parquet_footers(path, files)
    keys, values, types = hive(root, files) if root is not None else ((), [], {})
    clash = [k for k in keys if k in schema]
    if clash:
        raise PlanError(f"cannot read parquet {path!r}: column {clash[0]!r} is both in the files and in the "
                        f"folder names ({shown(clash[0])}=...); rename the column or the folders")
    rows = sum(m.num_rows for m in metadata)
    # Uncompressed size: what the data takes in memory, which the planner weighs against the budget.
    nbytes = sum(m.row_group(i).total_byte_size for m in metadata for i in range(m.num_row_groups))
    schema = Schema(schema.items() + tuple((k, types[k]) for k in keys))
    return Flow(Scan(ParquetSource(schema, path=path, files=tuple(files), rows=rows, nbytes=nbytes,
                                   partitions=keys, values=tuple(values) if keys else ())))


def read_csv(path: str | os.PathLike, *, has_header: bool = True, delimiter: str = ",") -> Flow:
    r"""One CSV file; column types are inferred from its first block (1 MiB), and only an empty field is null.

    A later value that is not of its column's inferred type stops the run with an error that names
    the column, the value and the type, on every lane (never a value converted to fit).

    Examples:
        >>> import os, tempfile
        >>> with tempfile.TemporaryDirectory() as folder:
        ...     path = os.path.join(folder, "data.csv")
        ...     with open(path, "w") as f:
        ...         _ = f.write("name;score\nann;1.5\nbob;\n")
        ...     flow = ei.read_csv(path, delimiter=";")
        ...     print(flow.schema, flow.run().to_pydict())
        Schema(name: String, score: Float64) {'name': ['ann', 'bob'], 'score': [1.5, None]}
    """
    import pyarrow.csv as pcsv

    from eidos.hal.files import regular_file

    path = os.fspath(path)
    if not isinstance(delimiter, str) or len(delimiter) != 1:
        raise PlanError(f"read_csv delimiter must be one character, got {delimiter!r}")
    if os.path.isdir(path):
        raise PlanError(f"read_csv reads one file; {path!r} is a folder: read each file and union the flows")
    if not os.path.exists(path):
        glob = any(ch in path for ch in "*?[")
        raise PlanError(f"no such file: {path!r}" + ("; read_csv reads one file, not a glob: read each file "
                                                     "and union the flows" if glob else ""))
    regular_file(path)
    try:
        # Only an empty field is null (as every lane reads it), so 'nan' makes a column Float64, not Int64.
        reader = pcsv.open_csv(path, read_options=pcsv.ReadOptions(autogenerate_column_names=not has_header),
                               parse_options=pcsv.ParseOptions(delimiter=delimiter),
                               convert_options=pcsv.ConvertOptions(null_values=[""], strings_can_be_null=True))
        arrow_schema = reader.schema
        reader.close()
    except (OSError, pa.ArrowInvalid) as e:
        raise PlanError(f"cannot read csv {path!r}: {e}") from e
    fields = []
    for f in arrow_schema:
        t = T.String if pa.types.is_null(f.type) else T.from_arrow(f.type, column=f.name)
        fields.append((f.name, t))
    source = CsvSource(Schema(fields), path=path, has_header=has_header, delimiter=delimiter,
                       nbytes=os.path.getsize(path))
    return Flow(Scan(source))


def from_arrow(obj: Any) -> Flow:
    """A pyarrow Table, RecordBatch, RecordBatchReader or any `__arrow_c_stream__` object.

    That covers a polars or pandas DataFrame and a DuckDB relation; the data is read into memory now.
    A pandas DataFrame's index is dropped, as `from_pandas` does by default.

    Examples:
        >>> import pyarrow as pa
        >>> table = pa.table({"a": pa.array([1, 2], pa.int32()), "s": ["x", None]})
        >>> flow = ei.from_arrow(table)
        >>> flow.schema
        Schema(a: Int32, s: String)
        >>> flow.filter(col("s").is_null()).run().to_pydict()
        {'a': [2], 's': [None]}
    """
    from eidos.flow.interop import from_pandas_table, is_pandas

    if isinstance(obj, pa.RecordBatch):
        table = pa.Table.from_batches([obj])
    elif isinstance(obj, pa.Table):
        table = obj
    elif isinstance(obj, pa.RecordBatchReader):
        table = obj.read_all()
    elif is_pandas(obj):
        table = from_pandas_table(obj, include_index=False)
    elif hasattr(obj, "__arrow_c_stream__"):
        table = pa.RecordBatchReader.from_stream(obj).read_all()
    else:
        raise PlanError(f"from_arrow takes a pyarrow Table, RecordBatch, RecordBatchReader or an object "
                        f"with __arrow_c_stream__ (polars/pandas DataFrame, DuckDB relation), got {type(obj).__name__}")
    return Flow(Scan(ArrowSource.of(table)))


def from_pandas(df: Any, *, include_index: bool = False) -> Flow:
    """A pandas DataFrame; its index is dropped, or kept (`include_index=True`) as its first columns under the
    names `df.reset_index()` gives them ("index" for an unnamed one), never as `__index_level_0__`.

    Examples:
        >>> import pandas as pd
        >>> df = pd.DataFrame({"a": [1, 2]}, index=pd.Index(["x", "y"], name="key"))
        >>> ei.from_pandas(df).schema, ei.from_pandas(df, include_index=True).schema
        (Schema(a: Int64), Schema(key: String, a: Int64))
    """
    from eidos.flow.interop import from_pandas_table, is_pandas

    if not is_pandas(df):
        raise PlanError(f"from_pandas takes a pandas DataFrame, got {type(df).__name__}; from_arrow takes "
                        "other tables")
    return Flow(Scan(ArrowSource.of(from_pandas_table(df, include_index))))


def from_pydict(mapping: Mapping[str, Any]) -> Flow:
    """Columns given as a mapping of name to a list of Python values (None is null).

    Types are inferred as pyarrow infers them: int is Int64, float Float64, str String,
    `datetime.date` Date, `decimal.Decimal` a Decimal.

    Examples:
        >>> flow = ei.from_pydict({"id": [1, 2], "price": [9.5, None], "day": [datetime.date(2024, 1, 2)] * 2})
        >>> flow.schema
        Schema(id: Int64, price: Float64, day: Date)
        >>> flow.select("id", "price").run().to_pydict()
        {'id': [1, 2], 'price': [9.5, None]}
    """
    if not isinstance(mapping, Mapping):
        raise PlanError(f"from_pydict takes a mapping of column name to values, got {type(mapping).__name__}")
    try:
        table = pa.table(dict(mapping))
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError) as e:
        raise PlanError(f"cannot build a table from the given columns: {e}") from e
    return Flow(Scan(ArrowSource.of(table)))


def read_sql(uri: str, *, table: str | None = None, query: str | None = None) -> Flow:
    """A table or query in a database: duckdb:///path.db, sqlite:///path.db, postgresql://user@host:port/db.

    Give exactly one of `table` and `query`. The schema is read from the database now; when every
    source of a plan lives in one database the whole plan runs there and only the result moves.
    `table` is a table's name (`orders`, `sales.orders`), never SQL; `query` is one read-only SELECT
    in the database's dialect (anything else is a PlanError naming what it found). A password in
    the uri (`postgresql://app:PASSWORD@host/db`, percent-encoded) is used to connect and never
    shown or stored: the Flow's explain(), repr, messages and JSON show the uri without it.

    Examples:
        >>> import os, sqlite3, tempfile
        >>> with tempfile.TemporaryDirectory() as folder:
        ...     path = os.path.join(folder, "shop.db")
        ...     with sqlite3.connect(path) as con:
        ...         _ = con.executescript("create table t (k text, v integer); insert into t values ('a', 1), ('b', 2)")
        ...     con.close()
        ...     flow = ei.read_sql(f"sqlite:///{path}", table="t")
        ...     print(flow.schema, flow.filter(col("v") > 1).run().to_pydict())
        Schema(k: String, v: Int64) {'k': ['b'], 'v': [2]}
    """
    from eidos.hal.describe import describe_sql

    if not isinstance(uri, str) or "://" not in uri:
        # The text is not echoed: a malformed uri cannot be reliably cleaned of a password.
        raise PlanError("read_sql needs a uri such as duckdb:///path.db, sqlite:///path.db or "
                        f"postgresql://user@host:5432/db; the {type(uri).__name__} given has no '://'")
    if (table is None) == (query is None):
        raise PlanError("read_sql takes exactly one of table=... or query=...")
    probe = SqlSource(Schema(()), uri=uri, table=table, query=query)
    schema, rows = describe_sql(probe)
    return Flow(Scan(SqlSource(schema, uri=uri, table=table, query=query, rows=rows)))


def from_remote_handle(remote: Any, handle: Any, schema: Schema | pa.Schema | None = None) -> Flow:
    """A table an eidos service keeps (`remote.put_table(table)`, or the result of a run there), named
    by its `handle` on the connection `remote` (`ei.connect`): a plan over it runs on that service
    (rule 2, data locality) and only its result comes back; mixed with local data, only the part
    over it runs there.

    The schema is `schema`, else the handle's (`meta["schema"]`: an Arrow schema, or the [name, dtype]
    pairs a plan's JSON uses); the row count is the handle's. Nothing is fetched.
    """
    from eidos.ir.sources import RemoteSource

    meta = getattr(handle, "meta", None) or {}
    kind = getattr(handle, "kind", meta.get("kind"))
    if kind != "table":
        raise PlanError(f"handle {getattr(handle, 'id', handle)!r} holds a {kind}, not a table: only a table "
                        "can be the source of a Flow")
    schema = _remote_schema(meta.get("schema") if schema is None else schema, handle)
    rows = meta.get("rows")
    source = RemoteSource(schema, address=remote.address, handle=int(handle.id),
                          rows=rows if isinstance(rows, int) and not isinstance(rows, bool) else None)
    return Flow(Scan(source))


def _remote_schema(found: Any, handle: Any) -> Schema:
    if isinstance(found, pa.Schema):
        schema = Schema.from_arrow(found)
        if schema.to_arrow() != found:   # the service reads the table as exactly its schema's Arrow types
            raise PlanError(f"handle {handle.id}'s table holds Arrow types eidos keeps otherwise ({found}; eidos: "
                            f"{schema.to_arrow()}); upload ei.from_arrow(table)'s data, which has them")
        return schema
    if isinstance(found, Schema):
        return found
    if isinstance(found, list):
        from eidos.ir.serialize import read_schema

        return read_schema(found, f"handle {handle.id}'s schema")
    raise PlanError(f"handle {getattr(handle, 'id', handle)!r} says nothing of its table's schema (its meta has "
                    f"{', '.join(map(shown, getattr(handle, 'meta', {}) or {})) or 'nothing'}); give it: "
                    "from_remote_handle(remote, handle, schema=table.schema)")
