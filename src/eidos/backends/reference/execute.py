"""Run a translated plan: read local sources into column lists, call map_batches, build the Arrow result."""

from __future__ import annotations

import pyarrow as pa

from eidos.backends.reference.translate import Rows, function_name, translate
from eidos.errors import EidosError, ExecutionError, UnsupportedError
from eidos.hal.arrow import batch_result
from eidos.ir import nodes as N
from eidos.ir.schema import Schema
from eidos.ir.sources import ArrowSource, CsvSource, ParquetSource, Source


def execute(plan: N.Node) -> pa.Table:
    """The result of `plan` as a pyarrow.Table with exactly `plan.schema.to_arrow()`."""
    try:
        rows = translate(plan, _Executor())()
        return to_table(rows, plan.schema)
    except EidosError:
        raise
    except Exception as e:  # a bug in this lane: still an eidos error, with the cause kept
        raise ExecutionError(f"the reference lane failed: {type(e).__name__}: {e}") from e


def to_table(rows: Rows, schema: Schema) -> pa.Table:
    target = schema.to_arrow()
    arrays = []
    for field, values in zip(target, rows.columns):
        try:
            arrays.append(pa.array(values, type=field.type))
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError) as e:
            raise ExecutionError(f"column {field.name!r} does not convert to {field.type}: {e}") from e
    return pa.Table.from_arrays(arrays, schema=target)


def from_arrow(data: pa.Table | pa.RecordBatch) -> Rows:
    return Rows([c.to_pylist() for c in data.columns], data.num_rows)


class _Executor:
    """The Ctx that translated plans call back into."""

    def read(self, node: N.Scan) -> Rows:
        table = read_source(node.source, node.columns)
        return from_arrow(table)

    def call_map_batches(self, node: N.MapBatches, rows: Rows) -> Rows:
        name = function_name(node.fn)
        batch = pa.RecordBatch.from_pydict(
            {f.name: pa.array(c, type=f.type) for f, c in zip(node.input.schema.to_arrow(), rows.columns)},
            schema=node.input.schema.to_arrow())
        try:
            out = node.fn(batch)
        except Exception as e:
            raise ExecutionError(f"map_batches function {name} raised {type(e).__name__}: {e}") from e
        return from_arrow(batch_result(out, node.output_schema, name))


def read_source(source: Source, columns: tuple[str, ...] | None) -> pa.Table:
    """A local source read with the types its schema declares, limited to `columns`."""
    names = list(columns) if columns is not None else list(source.schema.names)
    target = pa.schema([pa.field(n, source.schema[n].to_arrow()) for n in names])
    try:
        if isinstance(source, ArrowSource):
            table = source.table.select(names)
        elif isinstance(source, ParquetSource):
            table = _read_parquet(source, names, target)
        elif isinstance(source, CsvSource):
            table = _read_csv(source, names, target)
        else:
            raise UnsupportedError(f"the reference lane reads local sources only, not {source.describe()}")
        return table if table.schema == target else table.cast(target)
    except (OSError, pa.ArrowException) as e:
        raise ExecutionError(f"cannot read {source.describe()}: {e}") from e


def _read_parquet(source: ParquetSource, names: list[str], target: pa.Schema) -> pa.Table:
    import pyarrow.parquet as pq

    parts = [pq.read_table(f, columns=names).select(names).cast(target) for f in source.files]
    return pa.concat_tables(parts) if parts else target.empty_table()


def _read_csv(source: CsvSource, names: list[str], target: pa.Schema) -> pa.Table:
    """Empty fields are null; everything else parses as the declared type (so 'NaN' is a float NaN)."""
    import pyarrow.csv as pcsv

    types = {n: source.schema[n].to_arrow() for n in source.schema.names}
    table = pcsv.read_csv(
        source.path,
        read_options=pcsv.ReadOptions(autogenerate_column_names=not source.has_header),
        parse_options=pcsv.ParseOptions(delimiter=source.delimiter),
        convert_options=pcsv.ConvertOptions(column_types=types, include_columns=names,
                                            null_values=[""], strings_can_be_null=True))
    return table.select(names)
