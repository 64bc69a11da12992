"""Sources: each returns a Flow whose schema is known at once (read from metadata, not data)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import pyarrow as pa

from eidos.errors import EidosError, PlanError, shown
from eidos.flow.frame import Flow
from eidos.ir import dtypes as T
from eidos.ir.nodes import Scan
from eidos.ir.schema import Schema
from eidos.ir.sources import ArrowSource, CsvSource, IpcSource, NdjsonSource, ParquetSource, SqlSource


def read_parquet(path: str | os.PathLike, *, storage_options: Mapping[str, Any] | None = None) -> Flow:
    """A parquet file, a folder of parquet files (searched recursively), or a glob; read lazily.

    Only the files' metadata is read now (the schema, row counts and sizes the planner weighs);
    the data is read when the flow runs, and only the columns it uses. Every file must hold the
    same columns, each as one type. In a folder, links are followed only inside it, each file is
    read once, and key=value folder names are partition columns (see docs/api/sources.md). An s3://,
    gs:// or https:// path reads objects, with `storage_options` (aws_access_key_id, ...) or the
    environment's credentials, which nothing eidos shows or stores holds (docs/api/sources.md).

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
    storage = _storage(storage_options)
    files, root = expand(path, ".parquet", storage)
    schema, metadata = parquet_footers(path, files, storage)
    keys, values, types = hive(root, files) if root is not None else ((), [], {})
    clash = [k for k in keys if k in schema]
    if clash:
        raise PlanError(f"cannot read parquet {path!r}: column {clash[0]!r} is both in the files and in the "
                        f"folder names ({shown(clash[0])}=...); rename the column or the folders")
    rows = sum(m.num_rows for m in metadata)
    # Uncompressed size: what the data takes in memory, which the planner weighs against the budget.
    nbytes = sum(m.row_group(i).total_byte_size for m in metadata for i in range(m.num_row_groups))
    schema = Schema(schema.items() + tuple((k, types[k]) for k in keys))
    return Flow(Scan(ParquetSource(schema, path=path, files=tuple(files), rows=rows, nbytes=nbytes, storage=storage,
                                   partitions=keys, values=tuple(values) if keys else ())))


_BLOCK = "block"


def read_csv(source: str | os.PathLike, *, has_header: bool = True, separator: str = ",", quote_char: str | None = '"',
             skip_rows: int = 0, schema_overrides: Mapping[str, T.DType] | None = None,
             null_values: str | Sequence[str] | None = None, infer_schema_length: int | None | str = _BLOCK,
             storage_options: Mapping[str, Any] | None = None, delimiter: str | None = None) -> Flow:
    r"""CSV files: one file, a folder (its .csv files, searched recursively) or a glob, read as one table.

    Column types are inferred from the first file's first block (1 MiB) unless `infer_schema_length`
    says otherwise (N rows; None for the whole file, 0 for every column a String), and
    `schema_overrides` ({name: dtype}) sets a column's type outright. An empty field is null, and so
    is a field equal to one of `null_values`. The first `skip_rows` rows of each file are skipped
    before its header; `has_header=False` names the columns f0, f1, ...; `quote_char=None` reads
    quotes as text. Every file must have the first one's header. `delimiter` is `separator`'s older
    name. A value that is not of its column's type stops the run with an error that names the
    column, the value and the type, on every lane (never a value converted to fit). Object-store paths
    and `storage_options` as for read_parquet.

    Examples:
        >>> import os, tempfile
        >>> with tempfile.TemporaryDirectory() as folder:
        ...     path = os.path.join(folder, "data.csv")
        ...     with open(path, "w") as f:
        ...         _ = f.write("exported 2024-05-01\nname;score;code\nann;1.5;007\nbob;NA;012\n")
        ...     flow = ei.read_csv(path, separator=";", skip_rows=1, null_values="NA",
        ...                        schema_overrides={"code": ei.String})
        ...     print(flow.schema, flow.run().to_pydict())
        Schema(name: String, score: Float64, code: String) {'name': ['ann', 'bob'], 'score': [1.5, None], 'code': ['007', '012']}
    """
    from eidos.flow.folders import expand
    from eidos.hal.arrow import csv_schema

    path = os.fspath(source)
    if delimiter is not None:
        if separator not in (",", delimiter):
            raise PlanError(f"read_csv takes separator={separator!r} or delimiter={delimiter!r}, not both")
        separator = delimiter
    for name, value in (("separator", separator), ("quote_char", quote_char)):
        if not (isinstance(value, str) and len(value) == 1) and not (name == "quote_char" and value is None):
            raise PlanError(f"read_csv {name} must be one character{' or None' * (name == 'quote_char')}, "
                            f"got {value!r}")
    if not _count(skip_rows):
        raise PlanError(f"read_csv skip_rows must be a whole number >= 0, got {skip_rows!r}")
    if not (infer_schema_length in (_BLOCK, None) or _count(infer_schema_length)):
        raise PlanError("read_csv infer_schema_length must be a number of rows >= 0 or None (the whole file), "
                        f"got {infer_schema_length!r}")
    nulls = (null_values,) if isinstance(null_values, str) else tuple(null_values or ())
    if not all(isinstance(v, str) for v in nulls):
        raise PlanError(f"read_csv null_values must be a string or a list of strings, got {null_values!r}")
    storage = _storage(storage_options)
    files, _ = expand(path, ".csv", storage)
    csv = CsvSource(Schema(()), path=path, files=tuple(files), storage=storage, has_header=has_header, delimiter=separator,
                    null_values=tuple(dict.fromkeys(("", *nulls))), skip_rows=skip_rows, quote_char=quote_char)
    try:
        fields = dict(csv_schema(csv, infer_schema_length))
    except EidosError as e:
        raise PlanError(str(e)) from e
    schema = _overridden(fields, schema_overrides, csv)
    inferred = {_BLOCK: "the first block (1 MiB)", None: "the whole first file"}.get(
        infer_schema_length, f"the first {infer_schema_length} rows")
    return Flow(Scan(replace(csv, schema=schema, nbytes=_size(files, storage),
                             inferred=inferred + " and schema_overrides" * bool(schema_overrides))))


def _storage(storage_options) -> tuple[tuple[str, str], ...]:
    from eidos.hal.stores import options

    return options(storage_options)


def _size(files: list[str], storage) -> int | None:
    """The files' bytes on disk or in the store (None where a URL does not say)."""
    from eidos.hal import stores

    try:
        return sum(stores.info(f, storage)[0] if stores.is_remote(f) else os.path.getsize(f) for f in files)
    except OSError:
        return None


def _count(n: object) -> bool:
    return isinstance(n, int) and not isinstance(n, bool) and n >= 0


def read_ndjson(source: str | os.PathLike, *, schema_overrides: Mapping[str, T.DType] | None = None,
                storage_options: Mapping[str, Any] | None = None) -> Flow:
    r"""Newline-delimited JSON: one file, a folder (its .ndjson and .jsonl files) or a glob, one object a line.

    Columns and types are inferred from the first file's first block (1 MiB), as pyarrow's JSON reader
    infers them (integers Int64, other numbers Float64, true/false Boolean, strings String: an ISO date
    in a string stays a String, as in Polars); `schema_overrides` sets a column's type outright. A key
    missing from an object is null there; a key the schema lacks is left out. A value that is not of its
    column's type stops the run with an error on every lane.

    Examples:
        >>> import os, tempfile
        >>> with tempfile.TemporaryDirectory() as folder:
        ...     path = os.path.join(folder, "events.ndjson")
        ...     with open(path, "w") as f:
        ...         _ = f.write('{"user": "ann", "n": 3}\n{"user": "bob", "n": null, "extra": 1.5}\n')
        ...     flow = ei.read_ndjson(path)
        ...     print(flow.schema, flow.run().to_pydict())
        Schema(user: String, n: Int64, extra: Float64) {'user': ['ann', 'bob'], 'n': [3, None], 'extra': [None, 1.5]}
    """
    import pyarrow.json as pjson

    from eidos.flow.folders import expand
    from eidos.hal.arrow import _open

    path = os.fspath(source)
    storage = _storage(storage_options)
    files, _ = expand(path, (".ndjson", ".jsonl"), storage)
    probe = NdjsonSource(Schema(()), path=path, files=tuple(files), storage=storage)
    try:
        with pjson.open_json(_open(probe, files[0])) as reader:
            found = reader.schema
    except (OSError, pa.ArrowException) as e:
        raise PlanError(f"cannot read ndjson {files[0]!r}: {e}") from e
    fields = {f.name: T.String if pa.types.is_null(f.type) or pa.types.is_timestamp(f.type)
              else T.from_arrow(f.type, column=f.name) for f in found}
    return Flow(Scan(replace(probe, schema=_overridden(fields, schema_overrides, probe),
                             nbytes=_size(files, storage))))


def read_ipc(source: str | os.PathLike, *, storage_options: Mapping[str, Any] | None = None) -> Flow:
    """Arrow IPC files (Feather v2): one file, a folder (its .arrow, .ipc and .feather files) or a glob.

    The data is read as it is, with the types its schema holds; every file must hold the first one's
    columns and types, when the Flow is built and when it runs.

    Examples:
        >>> import os, tempfile, pyarrow as pa, pyarrow.feather as feather
        >>> with tempfile.TemporaryDirectory() as folder:
        ...     path = os.path.join(folder, "data.arrow")
        ...     feather.write_feather(pa.table({"a": [1, 2], "s": ["x", None]}), path)
        ...     flow = ei.read_ipc(path)
        ...     print(flow.schema, flow.filter(col("a") > 1).run().to_pydict())
        Schema(a: Int64, s: String) {'a': [2], 's': [None]}
    """
    from eidos.flow.folders import expand
    from eidos.hal.arrow import _open
    from eidos.hal.files import mismatch

    path = os.fspath(source)
    storage = _storage(storage_options)
    files, _ = expand(path, (".arrow", ".ipc", ".feather"), storage)
    probe = IpcSource(Schema(()), path=path, files=tuple(files), storage=storage)
    schema, rows = None, 0
    for f in files:
        try:
            with pa.ipc.open_file(_open(probe, f)) as reader:
                got = Schema.from_arrow(reader.schema)
                rows += sum(reader.get_batch(i).num_rows for i in range(reader.num_record_batches))
        except (OSError, pa.ArrowException) as e:
            raise PlanError(f"cannot read ipc {f!r}: {e} (read_ipc reads Arrow IPC files, Feather v2)") from e
        differs = schema is not None and mismatch(schema, repr(files[0]), got, f)
        if differs:
            raise PlanError(f"cannot read ipc {path!r} as one table: {differs}; every file must hold the same "
                            "columns, each as one type")
        schema = schema or got
    return Flow(Scan(replace(probe, schema=schema, rows=rows, nbytes=_size(files, storage))))


def _overridden(fields: dict, overrides: Mapping[str, T.DType] | None, source) -> Schema:
    """The inferred `fields` with `overrides`' types, each naming a column that exists, as an eidos dtype."""
    for name, t in (overrides or {}).items():
        if name not in fields:
            raise PlanError(f"schema_overrides names column {name!r}, which {source.describe()} does not have; "
                            f"columns: {', '.join(map(shown, fields))}")
        if not isinstance(t, T.DType):
            raise PlanError(f"schema_overrides gives {name!r} the type {t!r}; give an eidos dtype such as ei.Int64")
        fields[name] = t
    return Schema(tuple(fields.items()))


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
