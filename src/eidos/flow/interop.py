"""A Flow's result in the forms other libraries take (NumPy, pandas, Polars, torch), and pandas in.

Each conversion runs the flow once (on the lane the HAL chooses, or `engine`) and converts the Arrow
result; the libraries are imported only here, when asked for, so `import eidos` stays light.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
import pyarrow as pa

from eidos.errors import BackendUnavailable, DTypeError, ExecutionError, PlanError, shown
from eidos.ir.dtypes import from_arrow

# Arrow types whose columns become numbers in a matrix (NumPy, torch); decimals, strings and dates do not.
_NUMERIC = (pa.types.is_integer, pa.types.is_floating, pa.types.is_boolean)


def _library(name: str, purpose: str):
    import importlib

    try:
        return importlib.import_module(name)
    except ImportError as e:
        raise BackendUnavailable(f"{purpose} needs {name}, which is not installed: pip install {name}") from e


def numeric_columns(table: pa.Table) -> list[np.ndarray]:
    """Each column of `table` as a NumPy array, refusing what has no number form: a column that is not
    boolean, integer or float (naming it and its type, with the cast that would do), or one holding nulls
    (a matrix has no null; fill_null or filter first)."""
    arrays = []
    for name, column in zip(table.column_names, table.columns):
        if not any(is_(column.type) for is_ in _NUMERIC):
            raise DTypeError(f"column {shown(name)} is {from_arrow(column.type, column=name)}, not a number; a matrix takes boolean, integer "
                             f"and float columns: select the numeric ones, or cast it (col({name!r}).cast(ei.Float64))")
        if column.null_count:
            raise ExecutionError(f"column {shown(name)} holds {column.null_count} null(s), which a matrix cannot hold; "
                                 f"use col({name!r}).fill_null(value) or filter them out first")
        arrays.append(column.to_numpy())
    return arrays


def to_numpy(table: pa.Table, dtype: Any = None) -> np.ndarray:
    """The table as a 2-D array, a row per row and a column per column, of the columns' common type
    (NumPy's promotion) or `dtype`."""
    arrays = numeric_columns(table)
    if not arrays:
        raise PlanError("a flow with no columns has no matrix form")
    common = np.result_type(*arrays) if dtype is None else np.dtype(dtype)
    out = np.empty((table.num_rows, len(arrays)), dtype=common, order="F")
    for j, a in enumerate(arrays):
        out[:, j] = a
    return out


def to_pandas(table: pa.Table):
    _library("pandas", "to_pandas()")
    return table.to_pandas()


def to_polars(table: pa.Table):
    return _library("polars", "to_polars()").from_arrow(table)


def to_torch(table: pa.Table, return_type: str, dtype: Any):
    """`return_type="tensor"`: one 2-D tensor of the columns' common type (or `dtype`); `"dict"`: a 1-D
    tensor per column, each of its own type, as Polars' DataFrame.to_torch gives."""
    torch = _library("torch", "to_torch()")
    if return_type == "tensor":
        out = torch.from_numpy(np.ascontiguousarray(to_numpy(table)))
    elif return_type == "dict":
        out = {name: torch.from_numpy(a if a.flags.writeable else a.copy())
               for name, a in zip(table.column_names, numeric_columns(table))}
    else:
        raise PlanError(f"to_torch return_type is 'tensor' or 'dict', not {return_type!r}")
    if dtype is None:
        return out
    if isinstance(out, dict):
        return {name: t.to(dtype) for name, t in out.items()}
    return out.to(dtype)


def from_pandas_table(df: Any, include_index: bool) -> pa.Table:
    """A pandas DataFrame as Arrow: its index dropped, or (include_index=True) kept as its first columns
    under the names pandas' reset_index gives them ("index", or the index's own names)."""
    if include_index:
        df = df.reset_index()
    try:
        return pa.Table.from_pandas(df, preserve_index=False)
    except (pa.ArrowInvalid, pa.ArrowTypeError, ValueError) as e:
        raise PlanError(f"cannot read the pandas DataFrame as Arrow: {e}") from e


def is_pandas(obj: Any) -> bool:
    """Whether obj is a pandas DataFrame, known without importing pandas (a DataFrame means pandas is loaded)."""
    pandas = sys.modules.get("pandas")
    return pandas is not None and isinstance(obj, pandas.DataFrame)
