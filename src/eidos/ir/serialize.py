"""The versioned JSON form of a plan; round-trips losslessly.

In-memory Arrow data is embedded as base64 Arrow IPC. An opaque Python function is stored by the
name the writer's `name` gives it and read back only through the reader's `resolve`: this module
never imports or calls anything a plan names (`eidos.hal.trust` decides what a name may mean).

A plan may come from anywhere, so reading checks the shape of every value before using it: a
malformed document is a PlanError that says where in it things went wrong (`plan.input.columns[1]`).
"""

from __future__ import annotations

import base64
import binascii
import datetime as _dt
import decimal as _decimal
import json
import math
import re
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from eidos.errors import PlanError, did_you_mean
from eidos.ir import dtypes as T
from eidos.ir import expr as E
from eidos.ir import nodes as N
from eidos.ir import sources as S
from eidos.ir import uri as uri_mod
from eidos.ir.schema import Schema
from eidos.ir.typing import check_duration, convert_literal
from eidos.jsondoc import read
from eidos.jsondoc import show as _show

FORMAT = "eidos-plan"
VERSION = 1
# Deeper documents are refused before they are read (eidos.jsondoc), so that what the reader, validation, rewriting,
# explain and the lanes walk recursively stays well inside Python's recursion limit. A plan node counts
# two levels (each node costs the recursive walks about as much as two levels of an expression), so a
# plan may be 100 nodes deep, or an expression 100 operators deep (`{"call": ..., "args": [...]}` is two
# levels), or any mix. Measured: 150 nodes or 150 operators deep run on every lane.
MAX_DEPTH = 200
MAX_COUNT = N.MAX_COUNT

Name = Callable[[Callable, str], str]        # (function, what it is) -> the name a plan stores
Resolve = Callable[[str], Callable]          # a stored name -> the function; PlanError if not allowed


# ---------------------------------------------------------------- values

def _value(v: Any) -> Any:
    """A Python literal value as JSON; non-JSON types are tagged."""
    if v is None or isinstance(v, (bool, str)):
        return v
    if isinstance(v, int):
        return v if abs(v) < 2**53 else {"int": str(v)}
    if isinstance(v, float):
        return v if math.isfinite(v) else {"float": repr(v)}
    if isinstance(v, _dt.timedelta):
        return {"duration": str(v // _dt.timedelta(microseconds=1))}
    if isinstance(v, _dt.datetime):
        return {"timestamp": v.isoformat()}
    if isinstance(v, _dt.date):
        return {"date": v.isoformat()}
    if isinstance(v, _dt.time):
        return {"time": v.isoformat()}
    if isinstance(v, _decimal.Decimal):
        return {"decimal": str(v)}
    if isinstance(v, tuple):
        return {"tuple": [_value(x) for x in v]}
    if isinstance(v, bytes):
        return {"bytes": v.hex()}
    raise PlanError(f"cannot store value {v!r} of type {type(v).__name__} in JSON")


def _schema(s: Schema) -> list:
    return [[n, str(t)] for n, t in s.items()]


# ---------------------------------------------------------------- writing

def expr_to(e: E.Expr, name: Name) -> dict:
    if isinstance(e, E.Column):
        return {"col": e.name}
    if isinstance(e, E.Literal):
        out = {"lit": _value(e.value), "dtype": str(e.dtype)}
        if e.weak:
            out["weak"] = True
        return out
    if isinstance(e, E.Alias):
        return {"alias": e.name, "expr": expr_to(e.expr, name)}
    if isinstance(e, E.Cast):
        return {"cast": str(e.dtype), "expr": expr_to(e.expr, name)}
    if isinstance(e, E.Call):
        return {"call": e.fn, "args": [expr_to(a, name) for a in e.args], "options": [_value(o) for o in e.options]}
    if isinstance(e, E.Case):
        return {"case": [[expr_to(c, name), expr_to(v, name)] for c, v in e.branches],
                "otherwise": expr_to(e.otherwise, name)}
    if isinstance(e, E.Agg):
        out = {"agg": e.fn, "arg": None if e.arg is None else expr_to(e.arg, name)}
        return {**out, "options": [_value(o) for o in e.options]} if e.options else out
    if isinstance(e, E.Window):
        return {"window": e.fn, "args": [expr_to(a, name) for a in e.args],
                "partition_by": [expr_to(a, name) for a in e.partition_by],
                "order_by": [expr_to(a, name) for a in e.order_by], "descending": e.descending,
                "nulls_last": e.nulls_last, "options": [_value(o) for o in e.options]}
    if isinstance(e, E.Udf):
        return {"udf": name(e.fn, "udf function"), "dtype": str(e.return_dtype),
                "args": [expr_to(a, name) for a in e.args]}
    raise PlanError(f"cannot store expression {type(e).__name__} in JSON")


def _ipc(table: pa.Table) -> str:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return base64.b64encode(sink.getvalue().to_pybytes()).decode("ascii")


def source_to(s: S.Source) -> dict:
    base = {"schema": _schema(s.schema)}
    if isinstance(s, S.ParquetSource):
        hive = {"partitions": list(s.partitions), "values": [list(v) for v in s.values]} if s.partitions else {}
        return base | {"source": "parquet", "path": s.path, "files": list(s.files), "rows": s.rows,
                       "bytes": s.nbytes} | hive
    if isinstance(s, S.CsvSource):
        return base | {"source": "csv", "path": s.path, "files": list(s.paths), "has_header": s.has_header,
                       "delimiter": s.delimiter, "null_values": list(s.null_values), "skip_rows": s.skip_rows,
                       "quote_char": s.quote_char, "bytes": s.nbytes}
    if isinstance(s, (S.NdjsonSource, S.IpcSource)):   # storage options (credentials) are never stored
        return base | {"source": s.kind, "path": s.path, "files": list(s.paths), "bytes": s.nbytes}
    if isinstance(s, S.ArrowSource):
        return base | {"source": "arrow", "ipc": _ipc(s.table)}   # the data is its identity: no name
    if isinstance(s, S.SqlSource):
        return base | {"source": "sql", "uri": s.uri, "table": s.table, "query": s.query, "rows": s.rows}
    if isinstance(s, S.RemoteSource):
        return base | {"source": "remote", "address": s.address, "handle": s.handle, "rows": s.rows}
    raise PlanError(f"cannot store source {type(s).__name__} in JSON")


def node_to(n: N.Node, name: Name) -> dict:
    def named(pairs: N.NamedExprs) -> list:
        return [[k, expr_to(e, name)] for k, e in pairs]

    if isinstance(n, N.Scan):
        return {"node": "Scan", "source": source_to(n.source),
                "columns": None if n.columns is None else list(n.columns)}
    if isinstance(n, N.Filter):
        return {"node": "Filter", "input": node_to(n.input, name), "predicate": expr_to(n.predicate, name)}
    if isinstance(n, N.Project):
        return {"node": "Project", "input": node_to(n.input, name), "columns": named(n.columns)}
    if isinstance(n, N.Aggregate):
        return {"node": "Aggregate", "input": node_to(n.input, name), "keys": named(n.keys), "aggs": named(n.aggs)}
    if isinstance(n, N.Join):
        return {"node": "Join", "left": node_to(n.left, name), "right": node_to(n.right, name), "how": n.how,
                "left_on": list(n.left_on), "right_on": list(n.right_on), "suffix": n.suffix}
    if isinstance(n, N.Sort):
        return {"node": "Sort", "input": node_to(n.input, name),
                "keys": [[expr_to(k.expr, name), k.descending, k.nulls_last] for k in n.keys]}
    if isinstance(n, N.Limit):
        return {"node": "Limit", "input": node_to(n.input, name), "n": n.n, "offset": n.offset}
    if isinstance(n, N.Distinct):
        return {"node": "Distinct", "input": node_to(n.input, name)}
    if isinstance(n, N.Unique):
        return {"node": "Unique", "input": node_to(n.input, name), "subset": list(n.subset), "keep": n.keep}
    if isinstance(n, N.Explode):
        return {"node": "Explode", "input": node_to(n.input, name), "columns": list(n.columns),
                "empty_as_null": n.empty_as_null, "keep_nulls": n.keep_nulls}
    if isinstance(n, N.AsofJoin):
        return {"node": "AsofJoin", "left": node_to(n.left, name), "right": node_to(n.right, name),
                "left_on": n.left_on, "right_on": n.right_on, "left_by": list(n.left_by),
                "right_by": list(n.right_by), "strategy": n.strategy, "suffix": n.suffix,
                "tolerance": None if n.tolerance is None else expr_to(n.tolerance, name)}
    if isinstance(n, N.Union):
        return {"node": "Union", "inputs": [node_to(i, name) for i in n.inputs]}
    if isinstance(n, N.MapBatches):
        return {"node": "MapBatches", "input": node_to(n.input, name), "fn": name(n.fn, "map_batches function"),
                "schema": _schema(n.output_schema)}
    raise PlanError(f"cannot store plan node {type(n).__name__} in JSON")


def dumps(plan: N.Node, *, name: Name) -> str:
    """The JSON text of `plan`; `name(fn, what)` gives the name stored for each function it calls."""
    return json.dumps({"format": FORMAT, "version": VERSION, "plan": node_to(plan, name)})


# ---------------------------------------------------------------- reading

_KINDS = {"str": (str,), "bool": (bool,), "list": (list,), "object": (dict,), "int": (int,)}
_WHAT = {"str": "a string", "bool": "true or false", "list": "a list", "object": "an object",
         "int": "an integer", "count": f"an integer in 0..{MAX_COUNT}"}


def _fail(at: str, message: str) -> PlanError:
    return PlanError(f"plan JSON at {at}: {message}")


def _check(v: Any, kind: str, at: str) -> Any:
    base = "int" if kind == "count" else kind
    ok = isinstance(v, _KINDS[base]) and (base == "bool" or not isinstance(v, bool))
    if ok and kind == "count":
        ok = 0 <= v <= MAX_COUNT
    if not ok:
        raise _fail(at, f"expected {_WHAT[kind]}, got {_show(v)}")
    return v


def _field(j: dict, key: str, kind: str, at: str, *, null: bool = False) -> Any:
    if key not in j:
        raise _fail(at, f"missing {key!r}")
    v = j[key]
    return None if v is None and null else _check(v, kind, f"{at}.{key}")


def _only(j: dict, keys: tuple[str, ...], at: str) -> None:
    extra = [k for k in j if k not in keys]
    if extra:
        raise _fail(at, f"unknown key {_key(extra[0])}; expected the keys {', '.join(keys)}")


def _key(k: Any) -> str:
    return repr(k) if isinstance(k, str) else _show(k)


def _strings(j: Any, at: str) -> tuple[str, ...]:
    return tuple(_check(x, "str", f"{at}[{i}]") for i, x in enumerate(_check(j, "list", at)))


def _dtype(j: Any, at: str) -> T.DType:
    try:
        return T.parse(_check(j, "str", at))
    except PlanError as e:
        raise _fail(at, str(e)) from None


def _unschema(j: Any, at: str) -> Schema:
    fields = []
    for i, pair in enumerate(_check(j, "list", at)):
        if not (isinstance(pair, list) and len(pair) == 2):
            raise _fail(f"{at}[{i}]", f"expected [name, dtype], got {_show(pair)}")
        fields.append((_check(pair[0], "str", f"{at}[{i}][0]"), _dtype(pair[1], f"{at}[{i}][1]")))
    try:
        return Schema(fields)
    except PlanError as e:
        raise _fail(at, str(e)) from None


def read_schema(j: Any, what: str) -> Schema:
    """A schema in a plan's JSON form ([[name, dtype], ...]) from elsewhere (a remote handle's meta);
    PlanError naming `what` and the bad entry."""
    return _unschema(j, what)


_TAGS = ("int", "float", "decimal", "timestamp", "date", "duration", "tuple", "bytes", "time")


def _unvalue(j: Any, at: str) -> Any:
    if j is None or isinstance(j, (bool, str, int, float)):
        return j
    if not (isinstance(j, dict) and len(j) == 1 and next(iter(j)) in _TAGS):
        raise _fail(at, f"expected a JSON scalar or an object with one key of {', '.join(_TAGS)}, got {_show(j)}")
    (tag, x), = j.items()
    if tag == "tuple":
        return tuple(_unvalue(v, f"{at}.tuple[{i}]") for i, v in enumerate(_check(x, "list", f"{at}.tuple")))
    text = _check(x, "str", f"{at}.{tag}")
    try:
        if tag in ("int", "duration"):  # a duration is its microseconds, within 64 bits
            if not re.fullmatch(r"-?[0-9]{1,19}" if tag == "duration" else r"-?[0-9]+", text):
                raise ValueError(text)
            return int(text) if tag == "int" else check_duration(_dt.timedelta(microseconds=int(text)))
        if tag == "float":
            return float(text)
        if tag == "decimal":
            return _decimal.Decimal(text)
        if tag == "bytes":
            return bytes.fromhex(text)
        if tag == "time":
            return _dt.time.fromisoformat(text)
        return _dt.datetime.fromisoformat(text) if tag == "timestamp" else _dt.date.fromisoformat(text)
    except (ValueError, _decimal.InvalidOperation):
        raise _fail(f"{at}.{tag}", f"{_show(text)} is not a {tag}") from None


def _literal(j: dict, at: str) -> E.Literal:
    dtype = _dtype(j.get("dtype"), f"{at}.dtype")
    value = _unvalue(j["lit"], f"{at}.lit")
    try:
        value = convert_literal(value, dtype)
    except PlanError as e:
        raise _fail(at, str(e)) from None
    return E.Literal(value, dtype, weak=_check(j.get("weak", False), "bool", f"{at}.weak"))


# expression tag -> (required keys, optional keys)
_EXPRS = {"col": (("col",), ()), "lit": (("lit", "dtype"), ("weak",)), "alias": (("alias", "expr"), ()),
          "cast": (("cast", "expr"), ()), "call": (("call", "args", "options"), ()),
          "case": (("case", "otherwise"), ()), "agg": (("agg", "arg"), ("options",)), "udf": (("udf", "dtype", "args"), ()),
          "window": (("window", "args", "partition_by", "order_by", "descending", "nulls_last", "options"), ())}
_NODES = {"Scan": ("source", "columns"), "Filter": ("input", "predicate"), "Project": ("input", "columns"),
          "Aggregate": ("input", "keys", "aggs"), "Join": ("left", "right", "how", "left_on", "right_on", "suffix"),
          "Sort": ("input", "keys"), "Limit": ("input", "n", "offset"), "Distinct": ("input",),
          "Union": ("inputs",), "MapBatches": ("input", "fn", "schema"), "Unique": ("input", "subset", "keep"),
          "Explode": ("input", "columns", "empty_as_null", "keep_nulls"),
          "AsofJoin": ("left", "right", "left_on", "right_on", "left_by", "right_by", "strategy", "suffix",
                       "tolerance")}
_SOURCES = {"parquet": ("path", "files", "rows", "bytes", "partitions", "values"), "csv": ("path", "files", "has_header", "delimiter", "null_values", "skip_rows", "quote_char", "bytes"),
            "ndjson": ("path", "files", "bytes"), "ipc": ("path", "files", "bytes"),
            "arrow": ("token", "ipc"), "sql": ("uri", "table", "query", "rows"),
            "remote": ("address", "handle", "rows")}


class _Reader:
    """Reads one document; `resolve` turns a function's stored name into the function, or refuses."""

    def __init__(self, resolve: Resolve, allowed_urls: tuple[str, ...] = ()):
        self.resolve, self.allowed_urls = resolve, allowed_urls

    def function(self, j: dict, key: str, at: str) -> Callable:
        ref = _field(j, key, "str", at)
        try:
            return self.resolve(ref)
        except PlanError as e:
            raise _fail(f"{at}.{key}", str(e)) from None

    def expr(self, j: Any, at: str) -> E.Expr:
        _check(j, "object", at)
        tags = [k for k in j if k in _EXPRS]
        if len(tags) != 1:
            raise _fail(at, f"an expression is an object with exactly one of the keys {', '.join(_EXPRS)}, "
                            f"got the keys {', '.join(map(_key, j)) or '(none)'}")
        tag = tags[0]
        required, optional = _EXPRS[tag]
        _only(j, required + optional, at)
        for key in required:
            if key not in j:
                raise _fail(at, f"missing {key!r}")
        sub = self.expr
        if tag == "col":
            return E.Column(_field(j, "col", "str", at))
        if tag == "lit":
            return _literal(j, at)
        if tag == "alias":
            return E.Alias(sub(j["expr"], f"{at}.expr"), _field(j, "alias", "str", at))
        if tag == "cast":
            return E.Cast(sub(j["expr"], f"{at}.expr"), _dtype(j["cast"], f"{at}.cast"))
        if tag == "call":
            args = _field(j, "args", "list", at)
            options = _field(j, "options", "list", at)
            return E.Call(_field(j, "call", "str", at), tuple(sub(a, f"{at}.args[{i}]") for i, a in enumerate(args)),
                          tuple(_unvalue(o, f"{at}.options[{i}]") for i, o in enumerate(options)))
        if tag == "case":
            branches = []
            for i, pair in enumerate(_field(j, "case", "list", at)):
                if not (isinstance(pair, list) and len(pair) == 2):
                    raise _fail(f"{at}.case[{i}]", f"expected [condition, value], got {_show(pair)}")
                branches.append((sub(pair[0], f"{at}.case[{i}][0]"), sub(pair[1], f"{at}.case[{i}][1]")))
            if not branches:
                raise _fail(f"{at}.case", "a case needs at least one [condition, value] branch")
            return E.Case(tuple(branches), sub(j["otherwise"], f"{at}.otherwise"))
        if tag == "agg":
            options = _check(j.get("options", []), "list", f"{at}.options")
            return E.Agg(_field(j, "agg", "str", at), None if j["arg"] is None else sub(j["arg"], f"{at}.arg"),
                         tuple(_unvalue(o, f"{at}.options[{i}]") for i, o in enumerate(options)))
        if tag == "window":
            parts = {k: tuple(sub(a, f"{at}.{k}[{i}]") for i, a in enumerate(_field(j, k, "list", at)))
                     for k in ("args", "partition_by", "order_by")}
            options = tuple(_unvalue(o, f"{at}.options[{i}]") for i, o in enumerate(_field(j, "options", "list", at)))
            return E.Window(_field(j, "window", "str", at), parts["args"], parts["partition_by"], parts["order_by"],
                            _field(j, "descending", "bool", at), _field(j, "nulls_last", "bool", at), options)
        args = _field(j, "args", "list", at)
        return E.Udf(self.function(j, "udf", at), _dtype(j["dtype"], f"{at}.dtype"),
                     tuple(sub(a, f"{at}.args[{i}]") for i, a in enumerate(args)))

    def named(self, j: Any, at: str) -> N.NamedExprs:
        out = []
        for i, pair in enumerate(_check(j, "list", at)):
            if not (isinstance(pair, list) and len(pair) == 2):
                raise _fail(f"{at}[{i}]", f"expected [name, expression], got {_show(pair)}")
            out.append((_check(pair[0], "str", f"{at}[{i}][0]"), self.expr(pair[1], f"{at}[{i}][1]")))
        return tuple(out)

    def source(self, j: Any, at: str) -> S.Source:
        _check(j, "object", at)
        kind = _field(j, "source", "str", at)
        if kind not in _SOURCES:
            raise _fail(f"{at}.source", f"unknown source kind {kind!r}; kinds: {', '.join(_SOURCES)}")
        _only(j, ("schema", "source", *_SOURCES[kind]), at)
        schema = _unschema(j.get("schema"), f"{at}.schema")
        if "path" in _SOURCES[kind]:   # what a plan's author may make this process reach (eidos.ir.uri)
            for i, path in enumerate([_field(j, "path", "str", at), *_strings(j.get("files", []), f"{at}.files")]):
                try:
                    uri_mod.check_path(path, self.allowed_urls)
                except PlanError as e:
                    raise _fail(f"{at}.path" if i == 0 else f"{at}.files[{i - 1}]", str(e)) from None
        if kind == "parquet":
            files = _strings(j.get("files"), f"{at}.files")
            keys, values = self.partitions(j, schema, len(files), at)
            return S.ParquetSource(schema, path=_field(j, "path", "str", at), files=files,
                                   rows=_field(j, "rows", "count", at, null=True),
                                   nbytes=_field(j, "bytes", "count", at, null=True), partitions=keys, values=values)
        if kind == "csv":
            delimiter = _field(j, "delimiter", "str", at)
            if len(delimiter) != 1:
                raise _fail(f"{at}.delimiter", f"a csv delimiter is one character, got {_show(delimiter)}")
            quote = j.get("quote_char", '"')
            if quote is not None and (not isinstance(quote, str) or len(quote) != 1):
                raise _fail(f"{at}.quote_char", f"a csv quote_char is one character or null, got {_show(quote)}")
            path = _field(j, "path", "str", at)
            return S.CsvSource(schema, path=path, files=_strings(j.get("files", [path]), f"{at}.files"),
                               has_header=_field(j, "has_header", "bool", at), delimiter=delimiter,
                               null_values=_strings(j.get("null_values", [""]), f"{at}.null_values"),
                               skip_rows=_check(j.get("skip_rows", 0), "count", f"{at}.skip_rows"), quote_char=quote,
                               nbytes=_field(j, "bytes", "count", at, null=True))
        if kind in ("ndjson", "ipc"):
            cls = S.NdjsonSource if kind == "ndjson" else S.IpcSource
            return cls(schema, path=_field(j, "path", "str", at), files=_strings(j.get("files"), f"{at}.files"),
                       nbytes=_field(j, "bytes", "count", at, null=True))
        if kind == "arrow":
            # a "token" (older files have one) names nothing: the source is its data, with a new label
            return S.ArrowSource.of(_unipc(_field(j, "ipc", "str", at), schema, f"{at}.ipc"), schema)
        if kind == "remote":
            address = _field(j, "address", "str", at)
            if not address.startswith("eidos://"):
                raise _fail(f"{at}.address", f"a remote source's address is eidos://host:port, got {_show(address)}")
            return S.RemoteSource(schema, address=address, handle=_field(j, "handle", "count", at),
                                  rows=_field(j, "rows", "count", at, null=True))
        table, query = _field(j, "table", "str", at, null=True), _field(j, "query", "str", at, null=True)
        if (table is None) == (query is None):
            raise _fail(at, "a sql source names a table or a query (one of them, the other null)")
        return S.SqlSource(schema, uri=_field(j, "uri", "str", at), table=table, query=query,
                           rows=_field(j, "rows", "count", at, null=True))

    def partitions(self, j: dict, schema: Schema, n_files: int, at: str) -> tuple[tuple, tuple]:
        """A parquet source's partition keys (the last columns of its schema) and, per file, their values."""
        if "partitions" not in j and "values" not in j:
            return (), ()
        keys = _strings(j.get("partitions"), f"{at}.partitions")
        if not keys or keys != schema.names[len(schema) - len(keys):]:
            raise _fail(f"{at}.partitions", f"partition keys are the last columns of the schema, got {_show(list(keys))}")
        for k in keys:
            if schema[k].name not in ("Int64", "Float64", "Date", "String"):
                raise _fail(f"{at}.partitions", f"partition column {k!r} is {schema[k]}; Int64, Float64, Date or String")
        rows = _check(j.get("values"), "list", f"{at}.values")
        if len(rows) != n_files:
            raise _fail(f"{at}.values", f"one list of values per file: {n_files} files, {len(rows)} lists")
        values = []
        for i, row in enumerate(rows):
            where = f"{at}.values[{i}]"
            if not isinstance(row, list) or len(row) != len(keys) or not all(v is None or isinstance(v, str) for v in row):
                raise _fail(where, f"expected {len(keys)} strings or nulls, got {_show(row)}")
            for k, v in zip(keys, row):
                try:
                    S.partition_value(v, schema[k])
                except ValueError:
                    raise _fail(where, f"{v!r} is not a {schema[k]} value of partition {k!r}") from None
            values.append(tuple(row))
        return keys, tuple(values)

    def node(self, j: Any, at: str) -> N.Node:
        _check(j, "object", at)
        kind = _field(j, "node", "str", at)
        if kind not in _NODES:
            hint = did_you_mean(kind, _NODES)
            raise _fail(f"{at}.node", f"unknown plan node {kind!r}" + (f"; {hint}" if hint else "")
                        + f"; nodes: {', '.join(_NODES)}")
        _only(j, ("node", *_NODES[kind]), at)
        for key in _NODES[kind]:
            if key not in j:
                raise _fail(at, f"missing {key!r}")

        def child(key: str = "input") -> N.Node:
            return self.node(j[key], f"{at}.{key}")

        if kind == "Scan":
            cols = j["columns"]
            return N.Scan(self.source(j["source"], f"{at}.source"),
                          None if cols is None else _strings(cols, f"{at}.columns"))
        if kind == "Filter":
            return N.Filter(child(), self.expr(j["predicate"], f"{at}.predicate"))
        if kind == "Project":
            return N.Project(child(), self.named(j["columns"], f"{at}.columns"))
        if kind == "Aggregate":
            return N.Aggregate(child(), self.named(j["keys"], f"{at}.keys"), self.named(j["aggs"], f"{at}.aggs"))
        if kind == "Join":
            return N.Join(child("left"), child("right"), _field(j, "how", "str", at),
                          _strings(j["left_on"], f"{at}.left_on"), _strings(j["right_on"], f"{at}.right_on"),
                          _field(j, "suffix", "str", at))
        if kind == "Sort":
            keys = []
            for i, k in enumerate(_field(j, "keys", "list", at)):
                where = f"{at}.keys[{i}]"
                if not (isinstance(k, list) and len(k) == 3):
                    raise _fail(where, f"expected [expression, descending, nulls_last], got {_show(k)}")
                nulls_last = None if k[2] is None else _check(k[2], "bool", f"{where}[2]")
                keys.append(N.SortKey(self.expr(k[0], f"{where}[0]"), _check(k[1], "bool", f"{where}[1]"), nulls_last))
            return N.Sort(child(), tuple(keys))
        if kind == "Limit":
            return N.Limit(child(), _field(j, "n", "count", at), _field(j, "offset", "count", at))
        if kind == "Distinct":
            return N.Distinct(child())
        if kind == "Unique":
            return N.Unique(child(), _strings(j["subset"], f"{at}.subset"), _field(j, "keep", "str", at))
        if kind == "Explode":
            return N.Explode(child(), _strings(j["columns"], f"{at}.columns"),
                             _check(j["empty_as_null"], "bool", f"{at}.empty_as_null"),
                             _check(j["keep_nulls"], "bool", f"{at}.keep_nulls"))
        if kind == "AsofJoin":
            tol = j["tolerance"]
            return N.AsofJoin(child("left"), child("right"), _field(j, "left_on", "str", at),
                              _field(j, "right_on", "str", at), _strings(j["left_by"], f"{at}.left_by"),
                              _strings(j["right_by"], f"{at}.right_by"), _field(j, "strategy", "str", at),
                              None if tol is None else self.expr(tol, f"{at}.tolerance"), _field(j, "suffix", "str", at))
        if kind == "Union":
            inputs = _field(j, "inputs", "list", at)
            if not inputs:
                raise _fail(f"{at}.inputs", "a union needs at least one input")
            return N.Union(tuple(self.node(x, f"{at}.inputs[{i}]") for i, x in enumerate(inputs)))
        return N.MapBatches(child(), self.function(j, "fn", at), _unschema(j["schema"], f"{at}.schema"))


def _unipc(text: str, schema: Schema, at: str) -> pa.Table:
    try:
        table = pa.ipc.open_stream(pa.py_buffer(base64.b64decode(text, validate=True))).read_all()
    except (binascii.Error, ValueError, OSError, pa.ArrowException) as e:
        raise _fail(at, f"not base64 Arrow IPC data: {e}") from None
    if table.schema.names != list(schema.names) or table.schema.types != [t.to_arrow() for t in schema.dtypes]:
        raise _fail(at, f"the data's columns ({table.schema}) are not the declared schema {schema}")
    return table


def _weight(obj: dict) -> int:
    return 2 if "node" in obj else 1


def loads(text: str | bytes | dict, *, resolve: Resolve, allowed_urls: tuple[str, ...] = ()) -> N.Node:
    """A plan from its JSON form; `resolve(name)` gives the function a stored name means (or refuses).

    PlanError for malformed JSON, an unknown version, a value of the wrong shape (naming where in
    the document), a function `resolve` refuses, and a plan that does not validate.
    """
    doc = read(text, error=PlanError, what="plan JSON", max_depth=MAX_DEPTH, weight=_weight,
               levels=", where a plan node counts two (about 100 plan nodes, or 100 operators of an expression, "
                      "one inside another)")
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise PlanError(f"not an eidos plan: expected a JSON object with \"format\": \"{FORMAT}\"")
    if doc.get("version") != VERSION or isinstance(doc.get("version"), bool):
        raise PlanError(f"plan JSON version {_show(doc.get('version'))} is not supported; this eidos reads "
                        f"version {VERSION}")
    _only(doc, ("format", "version", "plan"), "the top level")
    plan = _Reader(resolve, tuple(allowed_urls)).node(doc.get("plan"), "plan")
    plan.schema  # noqa: B018 - validate
    return plan
