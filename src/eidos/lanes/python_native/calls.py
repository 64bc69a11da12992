"""One batch of a Python step, wherever it runs: the calling thread, a worker thread or a worker process.

A step is a `Call`: a udf over columns (optionally only where a guard column is true), or a
map_batches function. `Call.run(table)` computes it over one batch and raises `Failed` naming the
row and the arguments when the function raises or returns a value of the wrong type; the caller
adds which batch it was.
"""

from __future__ import annotations

import datetime as _dt
import itertools
from collections.abc import Callable
from dataclasses import dataclass

import pyarrow as pa

from eidos.errors import ExecutionError
from eidos.hal.arrow import batch_result
from eidos.ir import dtypes as T
from eidos.ir.dtypes import DType
from eidos.ir.evaluate import udf_value
from eidos.ir.schema import Schema

# The most characters of an argument's repr an error message shows.
SHOWN_CHARS = 120

_UNCHECKED = object()   # no value is being checked: an exception came from the function

# The Python type a udf's value of each dtype is without conversion (udf_value checks the others).
_EXACT = {**{name: int for name in ("Int8", "Int16", "Int32", "Int64", "UInt8", "UInt16", "UInt32", "UInt64")},
          "Float64": float, "String": str, "Boolean": bool, "Date": _dt.date, "Timestamp": _dt.datetime}


class Failed(Exception):
    """The function failed on a batch: the message (the reference lane's words), the row within the
    batch and the arguments shown (for a udf). The function's own exception is its __cause__."""

    def __init__(self, text: str, row: int | None = None, arguments: str | None = None):
        super().__init__(text)
        self.text, self.row, self.arguments = text, row, arguments


@dataclass(frozen=True)
class Call:
    """A udf over `args` (column names) giving `dtype`, called only where `guard` is true when given;
    or, with `schema`, a map_batches function giving batches of that schema."""

    fn: Callable
    name: str
    args: tuple[str, ...] = ()
    dtype: DType | None = None
    guard: str | None = None
    schema: Schema | None = None

    @property
    def what(self) -> str:
        return f"map_batches function {self.name}" if self.schema is not None else f"udf {self.name}"

    @property
    def columns(self) -> tuple[str, ...]:
        """The input columns the call reads (None: all of them, for map_batches)."""
        return self.args + ((self.guard,) if self.guard else ())

    def run(self, table: pa.Table) -> pa.Table:
        """The call over `table` (one batch): a one-column table for a udf, the output for map_batches."""
        if self.schema is not None:
            return self._batches(table)
        return pa.table({"out": self._values(table)})

    def _values(self, table: pa.Table) -> pa.Array:
        check = udf_value(self.dtype)
        # values of exactly the type the dtype takes need no check: the common case, kept fast
        exact, (lo, hi) = _EXACT.get(self.dtype.name), (T.int_range(self.dtype) if self.dtype.is_integer else (0, 0))
        columns = [table.column(a).to_pylist() for a in self.args]
        take = table.column(self.guard).to_pylist() if self.guard else None
        out: list = []
        append, fn, integer, checked = out.append, self.fn, exact is int, _UNCHECKED
        one = len(columns) == 1 and take is None   # the common case: no tuple a row
        rows = columns[0] if one else zip(*columns) if columns else itertools.repeat((), table.num_rows)
        try:
            for values in rows:
                if take is not None and take[len(out)] is not True:
                    append(None)
                    continue
                result = fn(values) if one else fn(*values)
                if result is not None and (type(result) is not exact or integer and not lo <= result <= hi):
                    checked = result
                    result = check(result)
                    checked = _UNCHECKED
                append(result)
        except Exception as e:
            row = len(out)
            values = shown((columns[0][row],) if one else tuple(c[row] for c in columns))
            if checked is _UNCHECKED:
                raise Failed(f"{self.what} raised {type(e).__name__}: {e}", row, values) from e
            raise Failed(f"{self.what} {e} (declared return_dtype {self.dtype})", row, values) from None
        return pa.array(out, type=self.dtype.to_arrow())

    def _batches(self, table: pa.Table) -> pa.Table:
        batch = table.combine_chunks().to_batches()
        batch = batch[0] if batch else pa.RecordBatch.from_pylist([], schema=table.schema)
        try:
            out = self.fn(batch)
        except Exception as e:
            raise Failed(f"{self.what} raised {type(e).__name__}: {e}") from e
        try:
            out = batch_result(out, self.schema, self.name)
        except ExecutionError as e:
            raise Failed(str(e)) from None
        return out if isinstance(out, pa.Table) else pa.Table.from_batches([out])


def shown(values: tuple) -> str:
    """Arguments as a message shows them: a tuple's repr, each value's repr cut to SHOWN_CHARS (control
    characters become escapes when the error is printed: eidos.errors.escaped)."""
    parts = [r if len(r := repr(v)) <= SHOWN_CHARS else r[:SHOWN_CHARS - 3] + "..." for v in values]
    return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"
