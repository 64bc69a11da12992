"""Run a translated plan: read local sources into column lists, call map_batches, build the Arrow result."""

from __future__ import annotations

import functools

import pyarrow as pa

from eidos.errors import EidosError, ExecutionError
from eidos.hal.arrow import batch_result, read_local
from eidos.ir import dtypes as T
from eidos.ir import nodes as N
from eidos.ir.evaluate.values import from_count, to_count
from eidos.ir.render import function_name
from eidos.ir.schema import Schema
from eidos.lanes.reference.translate import Rows, translate


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
            arrays.append(to_arrow(values, schema[field.name]))
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError) as e:
            raise ExecutionError(f"column {field.name!r} does not convert to {field.type}: {e}") from e
    return pa.Table.from_arrays(arrays, schema=target)


def from_arrow(data: pa.Table | pa.RecordBatch) -> Rows:
    return Rows([values(c) for c in data.columns], data.num_rows)


# Timestamps in nanoseconds or in a zone travel as their Arrow counts: Python's datetime holds neither
# nanoseconds nor (through pyarrow) one instant of a repeated hour, so the counts are turned into values here.
@functools.cache   # asked per value; a type's kinds are a walk of it
def _counted(t: T.DType) -> bool:
    return not _COUNTED.isdisjoint(t.kinds)


_COUNTED = frozenset({"Timestamp(ns)", "Timestamp(tz)"})


def _as_counts(t: T.DType) -> pa.DataType:
    """`t`'s Arrow type with each counted timestamp an int64."""
    if isinstance(t, T.TimestampType) and _counted(t):
        return pa.int64()
    if isinstance(t, T.ListType):
        return pa.large_list(_as_counts(t.inner))
    if isinstance(t, T.StructType):
        return pa.struct([pa.field(n, _as_counts(f)) for n, f in t.fields])
    return t.to_arrow()


def _map(v, t: T.DType, f):
    if v is None:
        return None
    if isinstance(t, T.ListType):
        return [_map(x, t.inner, f) for x in v]
    if isinstance(t, T.StructType):
        return {n: _map(v[n], ft, f) for n, ft in t.fields}
    return f(v, t) if isinstance(t, T.TimestampType) and _counted(t) else v


def values(column: pa.Array | pa.ChunkedArray) -> list:
    """A column's values as the reference lane computes with them (eidos.ir.evaluate's values)."""
    t = T.from_arrow(column.type)
    if not _counted(t):
        return column.to_pylist()
    return [_map(v, t, from_count) for v in column.cast(_as_counts(t)).to_pylist()]


def to_arrow(values: list, t: T.DType) -> pa.Array:
    if not _counted(t):
        return pa.array(values, type=t.to_arrow())
    return pa.array([_map(v, t, to_count) for v in values], type=_as_counts(t)).cast(t.to_arrow())


class _Executor:
    """The Ctx that translated plans call back into."""

    def read(self, node: N.Scan) -> Rows:
        table = read_local(node.source, node.columns)
        return from_arrow(table)

    def call_map_batches(self, node: N.MapBatches, rows: Rows) -> Rows:
        name = function_name(node.fn)
        batch = pa.RecordBatch.from_pydict(
            {n: to_arrow(c, t) for (n, t), c in zip(node.input.schema.items(), rows.columns)},
            schema=node.input.schema.to_arrow())
        try:
            out = node.fn(batch)
        except Exception as e:
            raise ExecutionError(f"map_batches function {name} raised {type(e).__name__}: {e}") from e
        return from_arrow(batch_result(out, node.output_schema, name))
