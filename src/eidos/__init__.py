"""eidos: one portable computation, run on the engine that suits it.

Import is light: engines (polars, duckdb, numba, torch, ...) load only when a
lane that needs them runs.

Examples:
    >>> import eidos as ei
    >>> from eidos import col
    >>> flow = ei.from_pydict({"region": ["east", "west", "east"], "amount": [10.0, 5.0, 2.5]})
    >>> q = flow.group_by("region").agg(revenue=col("amount").sum(), orders=ei.count()).sort("region")
    >>> q.run().to_pydict()
    {'region': ['east', 'west'], 'revenue': [12.5, 5.0], 'orders': [2, 1]}
"""

from __future__ import annotations

from eidos import errors
from eidos.flow.expr import (
    Expr,
    coalesce,
    col,
    concat_str,
    count,
    date,
    datetime,
    duration,
    lit,
    row_number,
    struct,
    udf,
    when,
)
from eidos.flow.frame import Flow, GroupBy
from eidos.flow.read import (
    from_arrow,
    from_pandas,
    from_pydict,
    read_csv,
    read_ipc,
    read_ndjson,
    read_parquet,
    read_sql,
)
from eidos.hal.registry import backends, register_backend
from eidos.hal.trust import register_udf
from eidos.ir.dtypes import (
    Binary,
    Boolean,
    Date,
    Datetime,
    Decimal,
    DType,
    Duration,
    Float32,
    Float64,
    Int8,
    Int16,
    Int32,
    Int64,
    List,
    String,
    Struct,
    Time,
    Timestamp,
    UInt8,
    UInt16,
    UInt32,
    UInt64,
)
from eidos.ir.schema import Schema

__version__ = "0.1.0"

_LAZY = {
    "detect_devices": "eidos.hal.devices",
    "DeviceInfo": "eidos.hal.devices",
    "Lane": "eidos.hal.lane",
    "Backend": "eidos.hal.lane",
    "last_run": "eidos.hal.runner",
    "tensor": "eidos.tensor",
    "Tensor": "eidos.tensor",
    "realize": "eidos.tensor",
    "eager": "eidos.tensor",
    "from_dlpack": "eidos.tensor",
    "set_backend": "eidos.tensor",
    "set_backend_priority": "eidos.tensor",
    "connect": "eidos.remote",
    "calibrate": "eidos.calibration",
    "cost_constants": "eidos.calibration",
    "sql": "eidos.flow.sql",
}


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'eidos' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)


__all__ = [
    "errors", "Expr", "coalesce", "col", "concat_str", "count", "date", "datetime", "duration", "lit", "row_number", "struct", "udf",
    "when", "Flow", "GroupBy",
    "from_arrow", "from_pandas", "from_pydict", "read_csv", "read_ipc", "read_ndjson", "read_parquet", "read_sql", "Schema",
    "backends", "register_backend", "register_udf",
    "Binary", "Boolean", "Date", "Datetime", "Decimal", "DType", "Float32", "Float64", "Int8", "Int16", "Int32", "Int64",
    "List", "String", "Struct", "Time", "Timestamp", "Duration", "UInt8", "UInt16", "UInt32", "UInt64", *_LAZY,
]
