"""Sinks: write a Flow's result to a file atomically.

The result streams into a temporary file beside the target, which is renamed
over it only when complete: after any failure there is no partial file, and
a file that was there before is untouched. A new file gets the mode the umask
gives (as any tool's would); a file written over keeps its mode; a symbolic
link is written through, to the file it names. `atomic` does the same for
any writer (the command's demo files).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import stat
import tempfile
from collections.abc import Iterator

from eidos.errors import EidosError, ExecutionError, PlanError, shown

COMPRESSIONS = ("zstd", "snappy", "gzip", "brotli", "lz4", "uncompressed")
QUOTE_STYLES = {"non_numeric": "needed", "always": "all_valid", "never": "none"}


def write(flow, path: str | os.PathLike, fmt: str, engine: str | None, address: str | None = None,
          options: dict | None = None, storage_options: dict | None = None) -> None:
    """`flow`'s result into `path` as `fmt` ("parquet", "csv") with the writer's `options` (checked first).
    An s3:// or gs:// path is written to a local temporary file first and uploaded once complete."""
    from eidos.hal import stores
    from eidos.ir.uri import check_path

    options = (parquet_options if fmt == "parquet" else csv_options)(flow.schema, **(options or {}))
    keys = options.pop("partition_by", None)
    path = os.fspath(path)
    if not stores.is_remote(path):
        if storage_options:
            raise PlanError(f"storage_options are for object-store paths (s3://, gs://), not the local {path!r}")
        return _write_partitioned(flow, path, keys, engine, address, options) if keys else \
            _write_file(flow, path, fmt, engine, address, options)
    check_path(path)
    storage = stores.options(storage_options)
    if keys:
        raise PlanError(f"cannot write {path!r} partitioned: partition_by writes a local folder; write it there "
                        "and copy the folder to the store")
    with tempfile.TemporaryDirectory(prefix="eidos-upload-") as folder:
        local = os.path.join(folder, "out." + fmt)
        _write_file(flow, local, fmt, engine, address, options)
        try:
            stores.upload(local, path, storage)
        except OSError as e:
            raise ExecutionError(f"writing {fmt} to {path!r} failed: the upload failed: {e}") from e


DATABASES = {"duckdb": "duckdb", "sqlite": "sqlite", "postgresql": "postgresql", "postgres": "postgresql"}


def write_database(flow, table: str, connection: str, if_table_exists: str, engine: str | None) -> int:
    """`flow`'s result into `table` of the database `connection` names, through that database's lane."""
    from eidos.hal import registry
    from eidos.ir import nodes as N
    from eidos.ir.schema import Schema
    from eidos.ir.sources import SqlSource

    scheme = connection.split("://", 1)[0].lower() if isinstance(connection, str) and "://" in connection else None
    if scheme not in DATABASES:
        raise PlanError("write_database takes a connection uri such as duckdb:///path.db, sqlite:///path.db or "
                        "postgresql://user@host:5432/db (the text given is not shown: it may hold a password)")
    lane = registry.get(DATABASES[scheme])
    # A flow that reads the database it writes to is run whole first: its reading connection would
    # meet the writing one (DuckDB refuses both in one process, SQLite's write lock would block it).
    same = any(isinstance(n, N.Scan) and isinstance(n.source, SqlSource) and n.source.uri == SqlSource(
        Schema(()), uri=connection).uri for n in flow.plan.walk())
    batches = iter(flow.run(engine).to_batches()) if same else flow.stream(engine)
    return lane.write_table(connection, table, flow.schema, batches, if_table_exists)


def _write_file(flow, path: str, fmt: str, engine, address, options: dict) -> None:
    import pyarrow.csv as pcsv
    import pyarrow.parquet as pq

    with atomic(path, fmt) as tmp:
        batches = flow.stream(engine, address=address)
        schema = flow.schema.to_arrow()
        if fmt == "parquet":
            size = options.pop("row_group_size")
            with pq.ParquetWriter(tmp, schema, **options) as writer:
                for table in _row_groups(batches, size):
                    writer.write_table(table, row_group_size=size)
        else:
            dates = options.pop("date_format")
            with pcsv.CSVWriter(tmp, _dated(schema, dates), write_options=pcsv.WriteOptions(**options)) as writer:
                for batch in batches:
                    writer.write_batch(_dated(batch, dates))


def parquet_options(schema, compression="zstd", compression_level=None, row_group_size=None,
                    partition_by=None) -> dict:
    """write_parquet's arguments, checked: a PlanError names the one that is wrong and what is right."""
    if compression not in COMPRESSIONS:
        raise PlanError(f"write_parquet compression must be one of {', '.join(COMPRESSIONS)}, got {compression!r}")
    if compression_level is not None and (not isinstance(compression_level, int) or isinstance(compression_level, bool)
                                          or compression in ("snappy", "lz4", "uncompressed")):
        raise PlanError(f"write_parquet compression_level is a whole number for zstd, gzip or brotli, got "
                        f"{compression_level!r} for {compression}")
    if row_group_size is not None and (not isinstance(row_group_size, int) or isinstance(row_group_size, bool)
                                       or row_group_size < 1):
        raise PlanError(f"write_parquet row_group_size is a number of rows >= 1, got {row_group_size!r}")
    keys = [partition_by] if isinstance(partition_by, str) else list(partition_by or ())
    for k in keys:
        if k not in schema:
            raise PlanError(f"write_parquet partition_by names column {k!r}, which the flow does not have; "
                            f"columns: {', '.join(map(shown, schema.names))}")
    if keys and len(keys) == len(schema):
        raise PlanError("write_parquet partition_by takes some of the columns, not all: the files need one")
    return {"compression": "none" if compression == "uncompressed" else compression,
            "compression_level": compression_level, "row_group_size": row_group_size, "partition_by": keys}


def csv_options(schema, separator=",", include_header=True, null_value="", quote_style="non_numeric",
                date_format=None) -> dict:
    """write_csv's arguments, checked, as pyarrow's WriteOptions (and a strftime format for dates)."""
    if not (isinstance(separator, str) and len(separator) == 1) or separator in '"\r\n':
        raise PlanError(f"write_csv separator must be one character other than a quote or line end, got {separator!r}")
    if not isinstance(null_value, str) or any(c in null_value for c in '"\r\n' + separator):
        raise PlanError(f"write_csv null_value is text without quotes, line ends or the separator, got {null_value!r}")
    if quote_style not in QUOTE_STYLES:
        raise PlanError(f"write_csv quote_style must be one of {', '.join(QUOTE_STYLES)}, got {quote_style!r} "
                        "(Polars' 'necessary' is not offered: pyarrow's writer quotes every string)")
    if date_format is not None and not isinstance(date_format, str):
        raise PlanError(f"write_csv date_format is a strftime format such as '%d/%m/%Y', got {date_format!r}")
    return {"include_header": bool(include_header), "delimiter": separator, "null_string": null_value,
            "quoting_style": QUOTE_STYLES[quote_style],
            "quoting_header": QUOTE_STYLES[quote_style], "date_format": date_format}


def _row_groups(batches, size: int | None):
    """`batches` as tables of `size` rows each (the last may be shorter); one table a batch without a size."""
    import pyarrow as pa

    held, rows = [], 0
    for batch in batches:
        held.append(pa.Table.from_batches([batch]))
        rows += batch.num_rows
        if size is None or rows >= size:
            table = pa.concat_tables(held)
            cut = rows if size is None else rows - rows % size
            yield table.slice(0, cut)
            held, rows = [table.slice(cut)], rows - cut
    if rows:
        yield pa.concat_tables(held)


def _dated(data, fmt: str | None):
    """`data` (a batch or its schema) with its Date columns as text in `fmt`."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if fmt is None:
        return data
    if isinstance(data, pa.Schema):
        return pa.schema([f.with_type(pa.string()) if pa.types.is_date(f.type) else f for f in data])
    arrays = [pc.strftime(c.cast(pa.timestamp("s")), format=fmt) if pa.types.is_date(c.type) else c
              for c in data.columns]
    return pa.RecordBatch.from_arrays(arrays, schema=_dated(data.schema, fmt))


def _write_partitioned(flow, path, keys: list[str], engine, address, options) -> None:
    """Hive folders key=value below folder `path` (values URL-encoded, null as __HIVE_DEFAULT_PARTITION__),
    each holding the other columns; written into a new folder beside `path` that replaces it when complete."""
    import pyarrow.dataset as ds

    path = os.fspath(path)
    if os.path.exists(path) and not os.path.isdir(path):
        raise PlanError(f"cannot write {path!r} partitioned: it is a file; partition_by writes a folder of folders")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise PlanError(f"cannot write {path!r}: folder {folder!r} does not exist")
    tmp = _temporary_folder(path, folder)
    try:
        schema = flow.schema.to_arrow()
        size = options.pop("row_group_size")
        reader = flow.stream(engine, address=address)
        ds.write_dataset(pa_reader(schema, reader), tmp, format="parquet",
                         partitioning=ds.partitioning(schema.empty_table().select(keys).schema, flavor="hive"),
                         file_options=ds.ParquetFileFormat().make_write_options(**options),
                         basename_template="part-{i}.parquet", existing_data_behavior="overwrite_or_ignore",
                         max_rows_per_group=size or 1 << 20, min_rows_per_group=size or 0, use_threads=False)
        old = f"{tmp}.old" if os.path.isdir(path) else None
        if old:
            os.rename(path, old)
        try:
            os.rename(tmp, path)
        except OSError:
            if old:
                os.rename(old, path)
            raise
        if old:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException as e:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(e, (EidosError, KeyboardInterrupt, SystemExit, GeneratorExit)):
            raise
        raise ExecutionError(f"writing parquet to {path!r} failed: {type(e).__name__}: {e}") from e


def _temporary_folder(path: str, folder: str) -> str:
    """A new empty folder beside `path` (mode 0777 less the umask, which the kernel applies)."""
    for _ in range(100):
        tmp = os.path.join(folder, f".{os.path.basename(os.path.abspath(path))}.{secrets.token_hex(6)}.tmp")
        try:
            os.mkdir(tmp, 0o777)
        except FileExistsError:
            continue
        except OSError as e:
            raise PlanError(f"cannot write {path!r}: cannot create a folder in {folder!r}: {e.strerror}") from e
        return tmp
    raise PlanError(f"cannot write {path!r}: no free temporary name in {folder!r}")


def pa_reader(schema, batches):
    import pyarrow as pa

    return pa.RecordBatchReader.from_batches(schema, batches)


@contextlib.contextmanager
def atomic(path: str | os.PathLike, fmt: str) -> Iterator[str]:
    """The name of a new temporary file beside `path` to write `fmt` data into; renamed over `path` when
    the block ends, removed when it raises (any error but an EidosError becomes an ExecutionError)."""
    path = os.fspath(path)
    target = os.path.realpath(path) if os.path.islink(path) else path
    if os.path.isdir(target):
        raise PlanError(f"cannot write {path!r}: it is a folder; give a file name such as "
                        f"{os.path.join(path, 'out.' + fmt)!r}")
    folder = os.path.dirname(os.path.abspath(target))
    if not os.path.isdir(folder):
        raise PlanError(f"cannot write {path!r}: folder {folder!r} does not exist")
    tmp = _temporary(target, folder, path)
    try:
        yield tmp
        os.replace(tmp, target)
    except BaseException as e:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        if isinstance(e, (EidosError, KeyboardInterrupt, SystemExit, GeneratorExit)):
            raise
        raise ExecutionError(f"writing {fmt} to {path!r} failed: {type(e).__name__}: {e}") from e


def _temporary(target: str, folder: str, shown: str) -> str:
    """A new empty file beside `target`: with the target's mode when it exists, else 0666 less the umask
    (the kernel applies it, so no process-wide umask is read or changed)."""
    try:
        keep = stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        keep = None
    except OSError as e:
        raise PlanError(f"cannot write {shown!r}: {e.strerror}") from e
    for _ in range(100):
        tmp = os.path.join(folder, f".{os.path.basename(target)}.{secrets.token_hex(6)}.tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600 if keep is not None else 0o666)
        except FileExistsError:
            continue
        except OSError as e:
            raise PlanError(f"cannot write {shown!r}: cannot create a file in {folder!r}: {e.strerror}") from e
        try:
            if keep is not None:
                os.fchmod(fd, keep)
        except OSError as e:
            os.close(fd)
            os.unlink(tmp)
            raise PlanError(f"cannot write {shown!r}: cannot give the new file the old one's mode: "
                            f"{e.strerror}") from e
        os.close(fd)
        return tmp
    raise PlanError(f"cannot write {shown!r}: no free temporary name in {folder!r}")
