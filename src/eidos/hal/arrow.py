"""Arrow interchange: make a lane's result match the plan's schema exactly; read local sources through pyarrow."""

from __future__ import annotations

import pyarrow as pa

from eidos.errors import EidosError, ExecutionError, UnsupportedError, shown
from eidos.ir.schema import Schema
from eidos.ir.sources import ArrowSource, CsvSource, ParquetSource, Source


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
        elif isinstance(source, CsvSource):
            table = _read_csv(source, names, target)
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
            with pq.ParquetFile(source.files[i]) as file:
                data = file.read_row_groups(row_groups, columns=stored)
        else:
            # partitioning=None: the path's key=value folders are source.partitions, read by eidos; pyarrow
            # 24 inferred them again from the file's path and failed on a partition that is null everywhere
            data = pq.read_table(source.files[i], columns=stored, partitioning=None)
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
                with pq.ParquetFile(f) as file:
                    for batch in file.iter_batches(columns=stored):
                        yield _with_partitions(batch, source, i, names, target)
            except (OSError, pa.ArrowException) as e:
                raise _read_error(source, e) from e

    return pa.RecordBatchReader.from_batches(target, batches())


def csv_batches(source: CsvSource, names: list[str]) -> pa.RecordBatchReader:
    """`source`'s columns `names` as a stream of batches, parsed as every lane parses CSV (see _read_csv)."""
    import pyarrow.csv as pcsv

    target = pa.schema([pa.field(n, source.schema[n].to_arrow()) for n in names])

    def batches():
        try:
            with pcsv.open_csv(source.path, **_csv_options(source, names)) as reader:
                for batch in reader:
                    yield batch.select(names)
        except (OSError, pa.ArrowException) as e:
            raise _read_error(source, e) from e

    return pa.RecordBatchReader.from_batches(target, batches())


def _csv_options(source: CsvSource, names: list[str]) -> dict:
    """Empty fields are null; everything else parses as the declared type (so 'NaN' is a float NaN)."""
    import pyarrow.csv as pcsv

    types = {n: source.schema[n].to_arrow() for n in source.schema.names}
    return {"read_options": pcsv.ReadOptions(autogenerate_column_names=not source.has_header),
            "parse_options": pcsv.ParseOptions(delimiter=source.delimiter),
            "convert_options": pcsv.ConvertOptions(column_types=types, include_columns=names,
                                                   null_values=[""], strings_can_be_null=True)}


def _read_csv(source: CsvSource, names: list[str], target: pa.Schema) -> pa.Table:
    import pyarrow.csv as pcsv

    return pcsv.read_csv(source.path, **_csv_options(source, names)).select(names)
