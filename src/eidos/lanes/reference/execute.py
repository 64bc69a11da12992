"""Run a translated plan: read local sources into column lists, call map_batches, build the Arrow result."""

from __future__ import annotations

import pyarrow as pa

from eidos.errors import EidosError, ExecutionError
from eidos.hal.arrow import batch_result, read_local
from eidos.ir import nodes as N
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
            arrays.append(pa.array(values, type=field.type))
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError) as e:
            raise ExecutionError(f"column {field.name!r} does not convert to {field.type}: {e}") from e
    return pa.Table.from_arrays(arrays, schema=target)


def from_arrow(data: pa.Table | pa.RecordBatch) -> Rows:
    return Rows([c.to_pylist() for c in data.columns], data.num_rows)


class _Executor:
    """The Ctx that translated plans call back into."""

    def read(self, node: N.Scan) -> Rows:
        table = read_local(node.source, node.columns)
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
