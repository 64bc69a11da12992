"""Compare two result tables under eidos semantics, with a diff a person can read.

NaN equals NaN and null equals null; floats agree within a relative tolerance
(Float32 columns within 1e-6 at least); decimals, integers, strings, dates
and booleans must be equal, lists and structs exactly (by their text). Unordered comparison sorts both sides into one
canonical row order first.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from typing import Any

import pyarrow as pa

MAX_SHOWN = 10


def assert_tables_equal(actual: Any, expected: Any, *, ordered: bool | None = None,
                        float_rel: float = 1e-9, float_abs: float = 1e-12,
                        check_order: bool | None = None) -> None:
    """Raise AssertionError (with a diff) unless the tables hold the same rows under eidos semantics.

    `ordered=False` ignores row order (results of group_by, joins, unsorted plans).
    `check_order` is another name for `ordered`. Floats agree within `float_rel` (at least 1e-6 for
    Float32) or `float_abs`; `float_rel=0, float_abs=0` asks for every float bit for bit (NaN equals NaN).
    """
    if ordered is None:
        ordered = check_order
    if ordered is None:
        raise TypeError("assert_tables_equal needs ordered=True or ordered=False")
    actual, expected = _table(actual), _table(expected)
    problems = _schema_problems(actual.schema, expected.schema)
    if problems:
        raise AssertionError("tables differ in schema\n" + "\n".join(problems))
    floats = [pa.types.is_floating(f.type) for f in expected.schema]
    narrow = (lambda t: float_rel > 0 and (pa.types.is_float32(t) or pa.types.is_float16(t)))  # 0: exact for all
    tolerances = [max(float_rel, 1e-6) if narrow(f.type) else float_rel for f in expected.schema]
    a_rows, e_rows = _rows(actual), _rows(expected)
    if not ordered:
        a_rows, e_rows = _canonical(a_rows, floats), _canonical(e_rows, floats)
    names = expected.schema.names
    diffs = []
    for i, (ra, re_) in enumerate(zip(a_rows, e_rows)):
        for c, (va, ve) in enumerate(zip(ra, re_)):
            if not values_equal(va, ve, floats[c], tolerances[c], float_abs):
                diffs.append((i, names[c], va, ve))
    if len(a_rows) != len(e_rows) or diffs:
        raise AssertionError(_report(a_rows, e_rows, diffs, names, floats, ordered))


def values_equal(a: Any, b: Any, is_float: bool = False, rel: float = 1e-9, abs_: float = 1e-12) -> bool:
    """One value against another: null == null, NaN == NaN, floats within tolerance, the rest exactly."""
    if a is None or b is None:
        return a is None and b is None
    if is_float or isinstance(a, float) or isinstance(b, float):
        a, b = float(a), float(b)
        if a != a or b != b:
            return a != a and b != b
        if math.isinf(a) or math.isinf(b):
            return a == b
        return math.isclose(a, b, rel_tol=rel, abs_tol=abs_)
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return a == b


def _table(obj: Any) -> pa.Table:
    if isinstance(obj, pa.Table):
        return obj
    if isinstance(obj, pa.RecordBatch):
        return pa.Table.from_batches([obj])
    if isinstance(obj, Mapping):
        return pa.table(dict(obj))
    raise TypeError(f"expected a pyarrow Table, RecordBatch or a mapping of columns, got {type(obj).__name__}")


def _schema_problems(a: pa.Schema, e: pa.Schema) -> list[str]:
    if a.names != e.names:
        return [f"  columns: actual {a.names}", f"           expected {e.names}"]
    out = []
    for fa, fe in zip(a, e):
        if not _same_type(fa.type, fe.type):
            out.append(f"  column {fe.name!r}: actual {fa.type}, expected {fe.type}")
    return out


def _same_type(a: pa.DataType, b: pa.DataType) -> bool:
    if a == b:
        return True
    strings = (pa.types.is_string, pa.types.is_large_string, pa.types.is_string_view)
    return any(f(a) for f in strings) and any(f(b) for f in strings)


def _rows(t: pa.Table) -> list[tuple]:
    # a list or struct value is compared (and ordered) by its text: exactly, NaN equal to NaN
    cols = [[repr(v) if isinstance(v, (list, dict)) else v for v in c.to_pylist()]
            if pa.types.is_nested(c.type) else c.to_pylist() for c in t.columns]
    return list(zip(*cols)) if cols else [() for _ in range(t.num_rows)]


def _sort_value(v: Any, is_float: bool) -> tuple:
    if v is None:
        return (2, 0)
    if is_float:
        if v != v:
            return (1, 0)
        return (0, float(f"{v:.6g}") if math.isfinite(v) else v)
    return (0, v)


def _canonical(rows: list[tuple], floats: list[bool]) -> list[tuple]:
    """Rows in one canonical order: exact columns first, floats (coarsened) last, so near-equal floats pair up."""
    exact = [c for c, f in enumerate(floats) if not f]
    inexact = [c for c, f in enumerate(floats) if f]

    def key(row: tuple) -> tuple:
        return (tuple(_sort_value(row[c], False) for c in exact)
                + tuple(_sort_value(row[c], True) for c in inexact)
                + tuple((1, 0) if row[c] != row[c] else _sort_value(row[c], False) for c in inexact))

    return sorted(rows, key=key)


def _show(v: Any) -> str:
    return "null" if v is None else repr(v)


def _report(a_rows: list, e_rows: list, diffs: list, names: list[str], floats: list[bool], ordered: bool) -> str:
    lines = [f"tables differ ({'ordered' if ordered else 'unordered'} compare): "
             f"actual has {len(a_rows)} rows, expected {len(e_rows)}"]
    if not ordered:
        originals = {_loose(r, floats): r for r in a_rows + e_rows}
        ca = Counter(_loose(r, floats) for r in a_rows)
        ce = Counter(_loose(r, floats) for r in e_rows)
        missing = [originals[k] for k in (ce - ca).elements()]
        extra = [originals[k] for k in (ca - ce).elements()]
        for title, group in (("rows expected but missing", missing), ("rows not expected", extra)):
            if group:
                lines.append(f"  {title} ({len(group)}):")
                lines += [f"    {_row_text(r, names)}" for r in group[:MAX_SHOWN]]
                if len(group) > MAX_SHOWN:
                    lines.append(f"    ... {len(group) - MAX_SHOWN} more")
        if len(lines) > 1:
            return "\n".join(lines)
    if diffs:
        lines.append(f"  {len(diffs)} differing values (row, column: actual != expected):")
        for i, name, va, ve in diffs[:MAX_SHOWN]:
            lines.append(f"    row {i}, {name}: {_show(va)} != {_show(ve)}")
        if len(diffs) > MAX_SHOWN:
            lines.append(f"    ... {len(diffs) - MAX_SHOWN} more")
    elif len(a_rows) != len(e_rows):
        longer, which = (a_rows, "actual") if len(a_rows) > len(e_rows) else (e_rows, "expected")
        lines.append(f"  extra rows in {which}:")
        lines += [f"    {_row_text(r, names)}" for r in longer[min(len(a_rows), len(e_rows)):][:MAX_SHOWN]]
    return "\n".join(lines)


def _loose(row: tuple, floats: list[bool]) -> tuple:
    """A hashable form of a row in which floats equal to ~6 digits (and NaN with NaN) compare equal."""
    return tuple(_sort_value(v, f) for v, f in zip(row, floats))


def _row_text(row: tuple, names: list[str]) -> str:
    return "{" + ", ".join(f"{n}: {_show(v)}" for n, v in zip(names, row)) + "}"
