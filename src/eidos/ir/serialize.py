"""The versioned JSON form of a plan; round-trips losslessly.

In-memory Arrow data is embedded as base64 Arrow IPC; an opaque Python
function is stored by importable name `module:qualname`, and one that has
none (a lambda, a closure) is refused with a clear error.
"""

from __future__ import annotations

import base64
import datetime as _dt
import decimal as _decimal
import importlib
import json
import math
from typing import Any

import pyarrow as pa

from eidos.errors import PlanError
from eidos.ir import dtypes as T
from eidos.ir import expr as E
from eidos.ir import nodes as N
from eidos.ir import sources as S
from eidos.ir.schema import Schema

FORMAT = "eidos-plan"
VERSION = 1


# ---------------------------------------------------------------- values

def _value(v: Any) -> Any:
    """A Python literal value as JSON; non-JSON types are tagged."""
    if v is None or isinstance(v, (bool, str)):
        return v
    if isinstance(v, int):
        return v if abs(v) < 2**53 else {"int": str(v)}
    if isinstance(v, float):
        return v if math.isfinite(v) else {"float": repr(v)}
    if isinstance(v, _dt.datetime):
        return {"timestamp": v.isoformat()}
    if isinstance(v, _dt.date):
        return {"date": v.isoformat()}
    if isinstance(v, _decimal.Decimal):
        return {"decimal": str(v)}
    if isinstance(v, tuple):
        return {"tuple": [_value(x) for x in v]}
    raise PlanError(f"cannot store value {v!r} of type {type(v).__name__} in JSON")


def _unvalue(j: Any) -> Any:
    if not isinstance(j, dict):
        return j
    (tag, x), = j.items()
    return {
        "int": int, "float": float, "decimal": _decimal.Decimal,
        "timestamp": _dt.datetime.fromisoformat, "date": _dt.date.fromisoformat,
        "tuple": lambda xs: tuple(_unvalue(i) for i in xs),
    }[tag](x)


def _fn_ref(fn: Any, what: str) -> str:
    module, qualname = getattr(fn, "__module__", None), getattr(fn, "__qualname__", None)
    if not module or not qualname or "<" in qualname:
        raise PlanError(f"{what} {fn!r} has no importable name (a lambda or a nested function); "
                        "define it at module level so the plan can be stored as JSON")
    if _resolve(f"{module}:{qualname}") is not fn:
        raise PlanError(f"{what} {module}:{qualname} does not import back as the same object; "
                        "define it at module level so the plan can be stored as JSON")
    return f"{module}:{qualname}"


def _resolve(ref: str) -> Any:
    module, _, qualname = ref.partition(":")
    try:
        obj = importlib.import_module(module)
        for part in qualname.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as e:
        raise PlanError(f"cannot import function {ref!r} named in the plan: {e}") from e
    return obj


def _schema(s: Schema) -> list:
    return [[n, str(t)] for n, t in s.items()]


def _unschema(j: list) -> Schema:
    return Schema((n, T.parse(t)) for n, t in j)


# ---------------------------------------------------------------- expressions

def expr_to(e: E.Expr) -> dict:
    if isinstance(e, E.Column):
        return {"col": e.name}
    if isinstance(e, E.Literal):
        out = {"lit": _value(e.value), "dtype": str(e.dtype)}
        if e.weak:
            out["weak"] = True
        return out
    if isinstance(e, E.Alias):
        return {"alias": e.name, "expr": expr_to(e.expr)}
    if isinstance(e, E.Cast):
        return {"cast": str(e.dtype), "expr": expr_to(e.expr)}
    if isinstance(e, E.Call):
        return {"call": e.fn, "args": [expr_to(a) for a in e.args], "options": [_value(o) for o in e.options]}
    if isinstance(e, E.Case):
        return {"case": [[expr_to(c), expr_to(v)] for c, v in e.branches], "otherwise": expr_to(e.otherwise)}
    if isinstance(e, E.Agg):
        return {"agg": e.fn, "arg": None if e.arg is None else expr_to(e.arg)}
    if isinstance(e, E.Udf):
        return {"udf": _fn_ref(e.fn, "udf function"), "dtype": str(e.return_dtype),
                "args": [expr_to(a) for a in e.args]}
    raise PlanError(f"cannot store expression {type(e).__name__} in JSON")


def expr_from(j: dict) -> E.Expr:
    if "col" in j:
        return E.Column(j["col"])
    if "lit" in j:
        return E.Literal(_unvalue(j["lit"]), T.parse(j["dtype"]), weak=j.get("weak", False))
    if "alias" in j:
        return E.Alias(expr_from(j["expr"]), j["alias"])
    if "cast" in j:
        return E.Cast(expr_from(j["expr"]), T.parse(j["cast"]))
    if "call" in j:
        return E.Call(j["call"], tuple(expr_from(a) for a in j["args"]), tuple(_unvalue(o) for o in j["options"]))
    if "case" in j:
        return E.Case(tuple((expr_from(c), expr_from(v)) for c, v in j["case"]), expr_from(j["otherwise"]))
    if "agg" in j:
        return E.Agg(j["agg"], None if j["arg"] is None else expr_from(j["arg"]))
    if "udf" in j:
        return E.Udf(_resolve(j["udf"]), T.parse(j["dtype"]), tuple(expr_from(a) for a in j["args"]))
    raise PlanError(f"unknown expression in plan JSON: {sorted(j)}")


def _named(pairs: N.NamedExprs) -> list:
    return [[n, expr_to(e)] for n, e in pairs]


def _unnamed(j: list) -> N.NamedExprs:
    return tuple((n, expr_from(e)) for n, e in j)


# ---------------------------------------------------------------- sources

def _ipc(table: pa.Table) -> str:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return base64.b64encode(sink.getvalue().to_pybytes()).decode("ascii")


def _unipc(text: str) -> pa.Table:
    return pa.ipc.open_stream(pa.py_buffer(base64.b64decode(text))).read_all()


def source_to(s: S.Source) -> dict:
    base = {"schema": _schema(s.schema)}
    if isinstance(s, S.ParquetSource):
        return base | {"source": "parquet", "path": s.path, "files": list(s.files), "rows": s.rows, "bytes": s.nbytes}
    if isinstance(s, S.CsvSource):
        return base | {"source": "csv", "path": s.path, "has_header": s.has_header, "delimiter": s.delimiter,
                       "bytes": s.nbytes}
    if isinstance(s, S.ArrowSource):
        return base | {"source": "arrow", "token": s.token, "ipc": _ipc(s.table)}
    if isinstance(s, S.SqlSource):
        return base | {"source": "sql", "uri": s.uri, "table": s.table, "query": s.query, "rows": s.rows}
    raise PlanError(f"cannot store source {type(s).__name__} in JSON")


def source_from(j: dict) -> S.Source:
    schema = _unschema(j["schema"])
    kind = j["source"]
    if kind == "parquet":
        return S.ParquetSource(schema, path=j["path"], files=tuple(j["files"]), rows=j["rows"], nbytes=j["bytes"])
    if kind == "csv":
        return S.CsvSource(schema, path=j["path"], has_header=j["has_header"], delimiter=j["delimiter"],
                           nbytes=j["bytes"])
    if kind == "arrow":
        return S.ArrowSource(schema, token=j["token"], table=_unipc(j["ipc"]))
    if kind == "sql":
        return S.SqlSource(schema, uri=j["uri"], table=j["table"], query=j["query"], rows=j["rows"])
    raise PlanError(f"unknown source kind {kind!r} in plan JSON")


# ---------------------------------------------------------------- nodes

def node_to(n: N.Node) -> dict:
    if isinstance(n, N.Scan):
        return {"node": "Scan", "source": source_to(n.source),
                "columns": None if n.columns is None else list(n.columns)}
    if isinstance(n, N.Filter):
        return {"node": "Filter", "input": node_to(n.input), "predicate": expr_to(n.predicate)}
    if isinstance(n, N.Project):
        return {"node": "Project", "input": node_to(n.input), "columns": _named(n.columns)}
    if isinstance(n, N.Aggregate):
        return {"node": "Aggregate", "input": node_to(n.input), "keys": _named(n.keys), "aggs": _named(n.aggs)}
    if isinstance(n, N.Join):
        return {"node": "Join", "left": node_to(n.left), "right": node_to(n.right), "how": n.how,
                "left_on": list(n.left_on), "right_on": list(n.right_on), "suffix": n.suffix}
    if isinstance(n, N.Sort):
        return {"node": "Sort", "input": node_to(n.input),
                "keys": [[expr_to(k.expr), k.descending, k.nulls_last] for k in n.keys]}
    if isinstance(n, N.Limit):
        return {"node": "Limit", "input": node_to(n.input), "n": n.n, "offset": n.offset}
    if isinstance(n, N.Distinct):
        return {"node": "Distinct", "input": node_to(n.input)}
    if isinstance(n, N.Union):
        return {"node": "Union", "inputs": [node_to(i) for i in n.inputs]}
    if isinstance(n, N.MapBatches):
        return {"node": "MapBatches", "input": node_to(n.input), "fn": _fn_ref(n.fn, "map_batches function"),
                "schema": _schema(n.output_schema)}
    raise PlanError(f"cannot store plan node {type(n).__name__} in JSON")


def node_from(j: dict) -> N.Node:
    kind = j.get("node")
    if kind == "Scan":
        cols = j["columns"]
        return N.Scan(source_from(j["source"]), None if cols is None else tuple(cols))
    if kind == "Filter":
        return N.Filter(node_from(j["input"]), expr_from(j["predicate"]))
    if kind == "Project":
        return N.Project(node_from(j["input"]), _unnamed(j["columns"]))
    if kind == "Aggregate":
        return N.Aggregate(node_from(j["input"]), _unnamed(j["keys"]), _unnamed(j["aggs"]))
    if kind == "Join":
        return N.Join(node_from(j["left"]), node_from(j["right"]), j["how"], tuple(j["left_on"]),
                      tuple(j["right_on"]), j["suffix"])
    if kind == "Sort":
        return N.Sort(node_from(j["input"]), tuple(N.SortKey(expr_from(e), d, nl) for e, d, nl in j["keys"]))
    if kind == "Limit":
        return N.Limit(node_from(j["input"]), j["n"], j["offset"])
    if kind == "Distinct":
        return N.Distinct(node_from(j["input"]))
    if kind == "Union":
        return N.Union(tuple(node_from(i) for i in j["inputs"]))
    if kind == "MapBatches":
        return N.MapBatches(node_from(j["input"]), _resolve(j["fn"]), _unschema(j["schema"]))
    raise PlanError(f"unknown plan node {kind!r} in plan JSON")


def dumps(plan: N.Node) -> str:
    return json.dumps({"format": FORMAT, "version": VERSION, "plan": node_to(plan)})


def loads(text: str | bytes | dict) -> N.Node:
    """A plan from its JSON form; PlanError for malformed JSON or an unknown version."""
    try:
        doc = json.loads(text) if isinstance(text, (str, bytes)) else text
    except json.JSONDecodeError as e:
        raise PlanError(f"plan JSON is malformed: {e}") from e
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise PlanError(f"not an eidos plan: expected a JSON object with \"format\": \"{FORMAT}\"")
    if doc.get("version") != VERSION:
        raise PlanError(f"plan JSON version {doc.get('version')!r} is not supported; this eidos reads version {VERSION}")
    try:
        plan = node_from(doc["plan"])
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise PlanError(f"plan JSON is malformed: {type(e).__name__}: {e}") from e
    plan.schema  # noqa: B018 - validate
    return plan
