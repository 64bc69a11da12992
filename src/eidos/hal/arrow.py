"""Arrow interchange: make a lane's result match the plan's schema exactly; read local sources through pyarrow."""

from __future__ import annotations

import pyarrow as pa

from eidos.errors import EidosError, ExecutionError, UnsupportedError, shown
from eidos.ir.schema import Schema
from eidos.ir.sources import ArrowSource, CsvSource, FileSource, IpcSource, NdjsonSource, ParquetSource, Source


def conform(data: pa.Table | pa.RecordBatch, schema: Schema, lane: str) -> pa.Table | pa.RecordBatch:
    """`data` with the plan's column names and Arrow types (zero-copy when they already match)."""
    target = schema.to_arrow()
    if data.schema.names != target.names:
        raise ExecutionError(f"lane {lane!r} returned columns {data.schema.names}, expected {target.names}")
    if data.schema.equals(target):
        return data
    try:
        return data.cast(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
        raise ExecutionError(f"lane {lane!r} returned types {data.schema.types} that do not convert to "
                             f"the plan's {target.types}: {e}") from e


def batch_result(out: object, expected: Schema, fn_name: str) -> pa.Table | pa.RecordBatch:
    """What a map_batches function returned, checked against its declared schema and cast to it
    (Arrow types that map to the same eidos types are accepted); every lane checks it this way."""
    if not isinstance(out, (pa.RecordBatch, pa.Table)):
        raise ExecutionError(f"map_batches function {fn_name} returned {type(out).__name__}; "
                             "it must return a pyarrow.RecordBatch")
    try:
        got, why = Schema.from_arrow(out.schema), ""
    except EidosError as e:
        got, why = None, str(e)
    if got != expected:
        arrow = ", ".join(f"{shown(f.name)}: {f.type}" for f in out.schema)
        returned = got.text() if got is not None else f"{arrow} ({why})"
        raise ExecutionError(f"map_batches function {fn_name} returned the wrong schema\n"
                             f"  expected: {expected.text()}\n  got:      {returned}")
    target = expected.to_arrow()
    return out if out.schema == target else out.cast(target)


def read_local(source: Source, columns: tuple[str, ...] | None) -> pa.Table:
    """A local source (Arrow, Parquet, CSV) read with the types its schema declares, limited to `columns`;
    the lanes that read local files through pyarrow share it."""
    names = list(columns) if columns is not None else list(source.schema.names)
    target = pa.schema([pa.field(n, source.schema[n].to_arrow()) for n in names])
    try:
        if isinstance(source, ArrowSource):
            table = source.table.select(names)
        elif isinstance(source, ParquetSource):
            parts = [pq_table(source, i, names, target) for i in range(len(source.files))]
            table = pa.concat_tables(parts) if parts else target.empty_table()
        elif isinstance(source, FileSource):
            table = file_batches(source, names).read_all()
        else:
            raise UnsupportedError(f"this lane reads local sources only, not {source.describe()}")
        return table if table.schema == target else table.cast(target)
    except (OSError, pa.ArrowException) as e:
        raise _read_error(source, e) from e


def _read_error(source: Source, e: BaseException) -> EidosError:
    from eidos.hal.files import arrow_csv_error

    return (isinstance(source, CsvSource) and arrow_csv_error(source, e)) or \
        ExecutionError(f"cannot read {source.describe()}: {e}")


def pq_table(source: ParquetSource, i: int, names: list[str], target: pa.Schema,
             row_groups: tuple[int, ...] | None = None) -> pa.Table:
    """File `i` of `source` (only `row_groups` of it when given): its columns among `names`, and the
    partition columns its path gives."""
    import pyarrow.parquet as pq

    stored = [n for n in names if n not in source.partitions]
    try:
        if row_groups is not None:
            with pq.ParquetFile(_open(source, source.files[i])) as file:
                data = file.read_row_groups(row_groups, columns=stored)
        else:
            # partitioning=None: the path's key=value folders are source.partitions, read by eidos; pyarrow
            # 24 inferred them again from the file's path and failed on a partition that is null everywhere
            data = pq.read_table(_open(source, source.files[i]), columns=stored, partitioning=None)
    except (OSError, pa.ArrowException) as e:
        raise _read_error(source, e) from e
    return _with_partitions(data, source, i, names, target)


def _with_partitions(data, source: ParquetSource, i: int, names: list[str], target: pa.Schema):
    if source.partitions:
        row = dict(zip(source.partitions, source.partition_row(i)))
        arrays = [pa.repeat(pa.scalar(row[n], target.field(n).type), data.num_rows) if n in row
                  else data.column(n) for n in names]
        data = type(data).from_arrays(arrays, schema=target) if isinstance(data, pa.RecordBatch) else \
            pa.Table.from_arrays(arrays, names=names)
    data = data.select(names)
    return data if data.schema == target else data.cast(target)


def parquet_batches(source: ParquetSource, names: list[str]) -> pa.RecordBatchReader:
    """`source`'s columns `names` as a stream of batches, file by file, partition columns included."""
    import pyarrow.parquet as pq

    target = pa.schema([pa.field(n, source.schema[n].to_arrow()) for n in names])
    stored = [n for n in names if n not in source.partitions]

    def batches():
        for i, f in enumerate(source.files):
            try:
                with pq.ParquetFile(_open(source, f)) as file:
                    for batch in file.iter_batches(columns=stored):
                        yield _with_partitions(batch, source, i, names, target)
            except (OSError, pa.ArrowException) as e:
                raise _read_error(source, e) from e

    return pa.RecordBatchReader.from_batches(target, batches())


def file_batches(source: FileSource, names: list[str]) -> pa.RecordBatchReader:
    """`source`'s columns `names` (a CSV, NDJSON or IPC source) as a stream of batches, file by file, parsed
    as every lane parses them: CSV fields as the schema's types (see csv_options), JSON values likewise,
    IPC data as it is, each cast to the schema's types."""
    target = pa.schema([pa.field(n, source.schema[n].to_arrow()) for n in names])

    def batches():
        for f in source.paths:
            try:
                for batch in _file_batches(source, f, names, target):
                    batch = batch.select(names)
                    yield batch if batch.schema == target else batch.cast(target)
            except (OSError, pa.ArrowException) as e:
                raise _read_error(source, e) from e

    return pa.RecordBatchReader.from_batches(target, batches())


def _file_batches(source: FileSource, f: str, names: list[str], target: pa.Schema):
    if isinstance(source, CsvSource):
        import pyarrow.csv as pcsv

        with pcsv.open_csv(_open(source, f), **csv_options(source, names)) as reader:
            yield from reader
    elif isinstance(source, NdjsonSource):
        import pyarrow.json as pjson

        # Keys the schema lacks are left out; a key missing from an object is null.
        whole = pa.schema([f.with_type(_json_type(f.type)) for f in source.schema.to_arrow()])
        options = pjson.ParseOptions(explicit_schema=whole, unexpected_field_behavior="ignore")
        yield from pjson.read_json(_open(source, f), parse_options=options).select(names).to_batches()
    elif isinstance(source, IpcSource):
        with pa.ipc.open_file(_open(source, f)) as reader:
            for i in range(reader.num_record_batches):
                yield reader.get_batch(i).select(names)
    else:
        raise UnsupportedError(f"this lane reads local sources only, not {source.describe()}")


def _json_type(t: pa.DataType) -> pa.DataType:
    """`t` as pyarrow's JSON reader takes it (a list, not a large list: the batch is cast after)."""
    return pa.list_(_json_type(t.value_type)) if pa.types.is_large_list(t) else t


def _open(source: FileSource, f: str):
    """What pyarrow's readers open for file `f` of `source`: the path itself, or an object store's file."""
    from eidos.hal import stores

    return stores.open_input(f, source.storage) if stores.is_remote(f) else f


def csv_options(source: CsvSource, names: list[str] | None, block: int | None = None) -> dict:
    """Every lane's CSV reading: a field equal to one of the source's null values (the empty field among
    them) is null, everything else parses as the declared type ('NaN' is a float NaN). Without `names`,
    the options that infer the types (from the first `block` bytes)."""
    import pyarrow.csv as pcsv

    if names is None:
        convert = pcsv.ConvertOptions(null_values=list(source.null_values), strings_can_be_null=True)
    else:
        convert = pcsv.ConvertOptions(column_types={n: source.schema[n].to_arrow() for n in source.schema.names},
                                      include_columns=names, null_values=list(source.null_values),
                                      strings_can_be_null=True)
    read = pcsv.ReadOptions(autogenerate_column_names=not source.has_header, skip_rows=source.skip_rows,
                            **({"block_size": block} if block else {}))
    quote = source.quote_char if source.quote_char is not None else False
    return {"read_options": read, "parse_options": pcsv.ParseOptions(delimiter=source.delimiter, quote_char=quote),
            "convert_options": convert}


def csv_schema(source: CsvSource, rows: int | None | str = "block") -> list[tuple[str, object]]:
    """The columns of `source`'s files and their types, inferred as read_csv says: from the first file's
    first block (1 MiB), its first `rows` rows, or the whole of it (None); 0 rows: every column a String.
    Every file must have the first one's header. Raises ExecutionError naming the file."""
    import io

    import pyarrow.csv as pcsv

    from eidos.hal.files import csv_header
    from eidos.ir import dtypes as T

    first = source.paths[0]
    try:
        if rows == "block" or rows == 0:
            with pcsv.open_csv(_open(source, first), **csv_options(source, None)) as reader:
                schema = reader.schema
        else:
            data = _open(source, first)
            if rows is not None:
                data = io.BytesIO(_first_rows(source, first, rows))
            schema = pcsv.read_csv(data, **csv_options(source, None)).schema
        if source.has_header:
            for f in source.paths[1:]:
                if csv_header(source, f) != tuple(schema.names):
                    raise ExecutionError(f"cannot read {source.describe()} as one table: {f!r} has the header "
                                         f"{', '.join(map(repr, csv_header(source, f)))}, {first!r} has "
                                         f"{', '.join(map(repr, schema.names))}; every file must have the same one")
    except (OSError, pa.ArrowException) as e:
        raise ExecutionError(f"cannot read csv {first!r}: {e}") from e
    return [(f.name, T.String if rows == 0 or pa.types.is_null(f.type) else T.from_arrow(f.type, column=f.name))
            for f in schema]


def _first_rows(source: CsvSource, f: str, rows: int) -> bytes:
    """The bytes of file `f` up to its `rows`-th data row (rows as the csv module splits them)."""
    import csv

    kept = bytearray()

    def lines():
        with _open_binary(source, f) as file:
            for line in file:
                kept.extend(line)
                yield line.decode("utf-8", "replace")

    want = source.skip_rows + source.has_header + rows
    seen = 0
    for i, row in enumerate(csv.reader(lines(), **csv_dialect(source))):
        seen += bool(row) or i < source.skip_rows
        if seen >= want:
            break
    return bytes(kept)


def csv_dialect(source: CsvSource) -> dict:
    """The csv module's reading of `source`'s separator and quotes, as pyarrow's reader reads them."""
    import csv

    if source.quote_char is None:
        return {"delimiter": source.delimiter, "quoting": csv.QUOTE_NONE}
    return {"delimiter": source.delimiter, "quotechar": source.quote_char, "doublequote": True}


def _open_binary(source: FileSource, f: str):
    from eidos.hal import stores

    return stores.open_binary(f, source.storage) if stores.is_remote(f) else open(f, "rb")
