"""eidos data types: a small closed set, each with one Arrow form.

Type promotion lives in `eidos.ir.typing`; this module only names the types
and maps them to and from Arrow.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pyarrow as pa

from eidos.errors import PlanError


@dataclass(frozen=True)
class DType:
    """A column type. Compare with `==`; render with `str()`."""

    name: str

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"ei.{self.name}"

    # Kinds, used by type inference and lane coverage tables.
    @property
    def is_integer(self) -> bool:
        return self.name in _INT_BITS

    @property
    def is_signed_integer(self) -> bool:
        return self.is_integer and not self.name.startswith("UInt")

    @property
    def is_unsigned_integer(self) -> bool:
        return self.is_integer and self.name.startswith("UInt")

    @property
    def is_float(self) -> bool:
        return self.name in ("Float32", "Float64")

    @property
    def is_decimal(self) -> bool:
        return False

    @property
    def is_numeric(self) -> bool:
        return self.is_integer or self.is_float or self.is_decimal

    @property
    def is_temporal(self) -> bool:
        return self.name in ("Date", "Timestamp")

    @property
    def is_timestamp(self) -> bool:
        """A Timestamp of any unit and time zone."""
        return self.name == "Timestamp"

    @property
    def kinds(self) -> tuple[str, ...]:
        """The coverage-table names a column of this type needs of a lane: its kind and its parts' kinds; for a
        Timestamp "Timestamp(ns)" and "Timestamp(tz)" where it has nanoseconds or a time zone."""
        return tuple(dict.fromkeys((self.kind,) + tuple(k for p in self.parts for k in p.kinds)))

    @property
    def is_nested(self) -> bool:
        """A List or Struct: values that hold values; no order or equality is defined on them."""
        return bool(self.parts)

    @property
    def parts(self) -> tuple[DType, ...]:
        """The types a nested type's values hold (a list's element type, a struct's field types)."""
        return ()

    @property
    def bits(self) -> int:
        """Width of an integer or float type in bits."""
        if self.is_integer:
            return _INT_BITS[self.name]
        return {"Float32": 32, "Float64": 64}.get(self.name, 0)

    @property
    def kind(self) -> str:
        """The coverage-table name of the type family: 'Decimal' for every decimal."""
        return self.name

    def to_arrow(self) -> pa.DataType:
        return _TO_ARROW[self.name]


@dataclass(frozen=True, repr=False)
class DecimalType(DType):
    """Fixed-point decimal with SQL precision (1..38) and scale (0..precision)."""

    precision: int = 38
    scale: int = 0

    def __str__(self) -> str:
        return f"Decimal({self.precision}, {self.scale})"

    def __repr__(self) -> str:
        return f"ei.Decimal({self.precision}, {self.scale})"

    @property
    def is_decimal(self) -> bool:
        return True

    @property
    def kind(self) -> str:
        return "Decimal"

    def to_arrow(self) -> pa.DataType:
        return pa.decimal128(self.precision, self.scale)


MAX_DECIMAL_PRECISION = 38
# How deep types may nest (List(List(...))): plans are untrusted input, and every walk over a type recurses.
MAX_NESTING = 16


@dataclass(frozen=True, repr=False)
class ListType(DType):
    """A list of values of one type (Arrow large_list); each list and each element may be null."""

    inner: DType | None = None

    def __str__(self) -> str:
        return f"List({self.inner})"

    def __repr__(self) -> str:
        return f"ei.List({self.inner!r})"

    @property
    def parts(self) -> tuple[DType, ...]:
        return (self.inner,)

    @property
    def kind(self) -> str:
        return "List"

    def to_arrow(self) -> pa.DataType:
        return pa.large_list(self.inner.to_arrow())


TIME_UNITS = ("ms", "us", "ns")


@dataclass(frozen=True, repr=False)
class TimestampType(DType):
    """A point in time counted in `unit` (ms, us, ns) since 1970-01-01, naive (`tz` None: a wall-clock time
    in no zone) or an instant shown in the IANA time zone `tz`. `ei.Timestamp` is microseconds, naive."""

    unit: str = "us"
    tz: str | None = None

    def __str__(self) -> str:
        if self.unit == "us" and self.tz is None:
            return "Timestamp"   # the text (and so plan fingerprints) of the plain type stays as it was
        return f"Timestamp({self.unit}" + (f", {self.tz!r})" if self.tz is not None else ")")

    def __repr__(self) -> str:
        if self.unit == "us" and self.tz is None:
            return "ei.Timestamp"
        return f"ei.Datetime({self.unit!r}" + (f", {self.tz!r})" if self.tz is not None else ")")

    @property
    def kinds(self) -> tuple[str, ...]:
        ns, tz = self.unit == "ns", self.tz is not None
        return ("Timestamp",) + (("Timestamp(ns)",) if ns else ()) + (("Timestamp(tz)",) if tz else ()) + \
            (("Timestamp(ns, tz)",) if ns and tz else ())

    def to_arrow(self) -> pa.DataType:
        return pa.timestamp(self.unit, self.tz)


def Datetime(time_unit: str = "us", time_zone: str | None = None) -> TimestampType:  # noqa: N802 - reads like a type
    """A timestamp type as Polars names it: `time_unit` "ms", "us" or "ns"; `time_zone` an IANA name
    ("UTC", "Europe/Berlin") or None for a naive timestamp. `ei.Datetime()` is `ei.Timestamp`."""
    if time_unit not in TIME_UNITS:
        raise PlanError(f"time_unit must be one of {', '.join(TIME_UNITS)}, got {time_unit!r}")
    if time_zone is not None:
        time_zone = zone(time_zone)
    return TimestampType("Timestamp", time_unit, time_zone)


def zone(name: object) -> str:
    """`name` checked as an IANA time zone this machine knows ("UTC", "Europe/Berlin")."""
    import zoneinfo

    if not isinstance(name, str) or not _ZONE.fullmatch(name):
        raise PlanError(f"a time zone is an IANA name such as 'UTC' or 'Europe/Berlin', got {name!r}")
    try:
        zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise PlanError(f"unknown time zone {name!r}; use an IANA name such as 'UTC' or 'Europe/Berlin'") from None
    return name


_ZONE = re.compile(r"[A-Za-z][A-Za-z0-9_+\-]*(/[A-Za-z0-9_+\-]+){0,3}", re.ASCII)


@dataclass(frozen=True, repr=False)
class StructType(DType):
    """Named fields, each of its own type (Arrow struct); the struct and each field may be null."""

    fields: tuple[tuple[str, DType], ...] = ()

    def __str__(self) -> str:
        return "Struct(" + ", ".join(f"{n!r}: {t}" for n, t in self.fields) + ")"

    def __repr__(self) -> str:
        return "ei.Struct({" + ", ".join(f"{n!r}: {t!r}" for n, t in self.fields) + "})"

    @property
    def parts(self) -> tuple[DType, ...]:
        return tuple(t for _, t in self.fields)

    @property
    def kind(self) -> str:
        return "Struct"

    def field(self, name: str) -> DType:
        for n, t in self.fields:
            if n == name:
                return t
        raise PlanError(f"struct has no field {name!r}; fields: {', '.join(n for n, _ in self.fields)}")

    def to_arrow(self) -> pa.DataType:
        return pa.struct([pa.field(n, t.to_arrow()) for n, t in self.fields])


def Struct(fields: object) -> StructType:  # noqa: N802 - reads like a type
    """A struct type from {name: dtype} or [(name, dtype), ...]; names unique and non-empty."""
    items = list(fields.items()) if isinstance(fields, dict) else list(fields)
    if not items or not all(isinstance(f, tuple) and len(f) == 2 and isinstance(f[0], str) and f[0] for f in items):
        raise PlanError(f"a Struct needs fields as {{name: dtype}}, at least one, got {fields!r}")
    names = [n for n, _ in items]
    if len(set(names)) != len(names):
        raise PlanError(f"struct field names must be unique, got {names}")
    t = StructType("Struct", tuple((n, coerce(d)) for n, d in items))
    if any(d == Null for _, d in t.fields):
        raise PlanError("a struct field needs a type such as ei.Int64, not Null")
    if depth(t) > MAX_NESTING:
        raise PlanError(f"types nest at most {MAX_NESTING} deep, got {t}")
    return t


def depth(t: DType) -> int:
    """How many nested types hold `t`'s values (0 for a simple type)."""
    return 1 + max(depth(p) for p in t.parts) if t.parts else 0


def List(inner: object) -> ListType:  # noqa: N802 - reads like a type
    """A list type whose elements are `inner` (a dtype, an Arrow type or a type name)."""
    t = ListType("List", coerce(inner))
    if t.inner == Null:
        raise PlanError("a List needs an element type such as ei.Int64, not Null")
    if depth(t) > MAX_NESTING:
        raise PlanError(f"types nest at most {MAX_NESTING} deep, got {t}")
    return t


def Decimal(precision: int, scale: int = 0) -> DecimalType:  # noqa: N802 - reads like a type
    """A decimal type; precision 1..38, scale 0..precision."""
    if not isinstance(precision, int) or not 1 <= precision <= MAX_DECIMAL_PRECISION:
        raise PlanError(f"decimal precision must be an integer in 1..{MAX_DECIMAL_PRECISION}, got {precision!r}")
    if not isinstance(scale, int) or not 0 <= scale <= precision:
        raise PlanError(f"decimal scale must be an integer in 0..precision ({precision}), got {scale!r}")
    return DecimalType("Decimal", precision, scale)


_INT_BITS = {
    "Int8": 8, "Int16": 16, "Int32": 32, "Int64": 64,
    "UInt8": 8, "UInt16": 16, "UInt32": 32, "UInt64": 64,
}

Int8, Int16, Int32, Int64 = DType("Int8"), DType("Int16"), DType("Int32"), DType("Int64")
UInt8, UInt16, UInt32, UInt64 = DType("UInt8"), DType("UInt16"), DType("UInt32"), DType("UInt64")
Float32, Float64 = DType("Float32"), DType("Float64")
Boolean, String = DType("Boolean"), DType("String")
Date, Timestamp = DType("Date"), TimestampType("Timestamp")
# A time of day in microseconds after midnight (Arrow time64('us')); Python's datetime.time.
Time = DType("Time")
# A signed length of time in microseconds (Timestamp - Timestamp); Python's datetime.timedelta.
Duration = DType("Duration")
Binary = DType("Binary")
# The type of an untyped `lit(None)`: it takes the type of whatever it meets.
Null = DType("Null")

_TO_ARROW = {
    "Int8": pa.int8(), "Int16": pa.int16(), "Int32": pa.int32(), "Int64": pa.int64(),
    "UInt8": pa.uint8(), "UInt16": pa.uint16(), "UInt32": pa.uint32(), "UInt64": pa.uint64(),
    "Float32": pa.float32(), "Float64": pa.float64(),
    "Boolean": pa.bool_(), "String": pa.large_string(),
    "Date": pa.date32(), "Timestamp": pa.timestamp("us"), "Time": pa.time64("us"), "Duration": pa.duration("us"), "Null": pa.null(),
    "Binary": pa.large_binary(),
}

ALL_SIMPLE = (Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64,
              Float32, Float64, Boolean, String, Date, Timestamp, Duration, Binary, Time)
BY_NAME = {t.name: t for t in ALL_SIMPLE + (Null,)}
INTEGERS = ALL_SIMPLE[:8]
# Every type family a lane's coverage table may list.
KINDS = tuple(t.name for t in ALL_SIMPLE) + ("Timestamp(ns)", "Timestamp(tz)", "Timestamp(ns, tz)", "Decimal", "List",
                                          "Struct")


def int_range(dtype: DType) -> tuple[int, int]:
    """Inclusive value range of an integer type; overflow past it raises."""
    bits = dtype.bits
    if dtype.is_unsigned_integer:
        return 0, 2**bits - 1
    return -(2 ** (bits - 1)), 2 ** (bits - 1) - 1


def from_arrow(t: pa.DataType, *, column: str = "?") -> DType:
    """The eidos type of an Arrow type; PlanError names the column for types eidos lacks."""
    if pa.types.is_dictionary(t):
        return from_arrow(t.value_type, column=column)
    for name, arrow in _TO_ARROW.items():
        if t == arrow:
            return BY_NAME[name]
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return String
    if pa.types.is_decimal(t):
        if t.precision > MAX_DECIMAL_PRECISION:
            raise PlanError(f"column {column!r} has type {t}; eidos decimals hold at most 38 digits")
        return Decimal(t.precision, t.scale)
    if pa.types.is_date(t):
        return Date
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        return Binary
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return List(from_arrow(t.value_type, column=column))
    if pa.types.is_struct(t):
        return Struct([(t.field(i).name, from_arrow(t.field(i).type, column=column)) for i in range(t.num_fields)])
    if pa.types.is_time(t):
        raise PlanError(f"column {column!r} has type {t}; eidos times of day are microseconds "
                        "(cast to time64('us'))")
    if pa.types.is_duration(t):
        raise PlanError(f"column {column!r} has type {t}; eidos durations are microseconds (cast to duration('us'))")
    if pa.types.is_timestamp(t):
        if t.unit == "s":
            raise PlanError(f"column {column!r} has type {t}; eidos timestamps count ms, us or ns "
                            "(cast to timestamp('ms'))")
        try:
            return Datetime(t.unit, t.tz)
        except PlanError as e:
            raise PlanError(f"column {column!r} has type {t}: {e}") from None
    raise PlanError(f"column {column!r} has Arrow type {t}, which eidos does not support; "
                    f"supported: {', '.join(KINDS)}")


def parse(text: str) -> DType:
    """Inverse of `str(dtype)`: used by the JSON form (untrusted: nesting is bounded)."""
    if not isinstance(text, str):
        raise PlanError(f"a dtype is written as a str such as 'Int64' or 'Decimal(10, 2)', got {text!r}")
    tokens = _TOKEN.findall(text)
    if "".join(tokens) != text:
        raise PlanError(f"unknown dtype {text!r}; known: {', '.join(KINDS)}")
    tokens = [t for t in tokens if not t.isspace()]
    t, end = _parse(tokens, 0, text, 0)
    if end != len(tokens):
        raise PlanError(f"unknown dtype {text!r}: unexpected {tokens[end]!r}")
    return t


_TOKEN = re.compile(r"\s+|[A-Za-z][A-Za-z0-9]*|\d+|[(),:]|'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"", re.ASCII)


def _text(token: str, text: str) -> str:
    """A quoted token's text (as repr() writes it)."""
    import ast

    if token[:1] not in ("'", '"'):
        raise PlanError(f"unknown dtype {text!r}: expected a quoted name, got {token!r}")
    return ast.literal_eval(token)


def _parse(tokens: list[str], i: int, text: str, level: int) -> tuple[DType, int]:
    def expect(j: int, want: str) -> int:
        if j >= len(tokens) or tokens[j] != want:
            raise PlanError(f"unknown dtype {text!r}: expected {want!r} at token {j}")
        return j + 1

    if level > MAX_NESTING:
        raise PlanError(f"dtype {text[:60]!r}... nests more than {MAX_NESTING} deep")
    name = tokens[i] if i < len(tokens) else ""
    if name == "Decimal":
        j = expect(i + 1, "(")
        p, s = (tokens[j], tokens[j + 2]) if j + 2 < len(tokens) else ("", "")
        if not (p.isdigit() and s.isdigit() and len(p) <= 3 and len(s) <= 3) or tokens[j + 1] != ",":
            raise PlanError(f"unknown dtype {text!r}; a decimal is written 'Decimal(precision, scale)'")
        return Decimal(int(p), int(s)), expect(j + 3, ")")
    if name == "List":
        inner, j = _parse(tokens, expect(i + 1, "("), text, level + 1)
        return List(inner), expect(j, ")")
    if name in ("Timestamp", "Datetime") and i + 1 < len(tokens) and tokens[i + 1] == "(":
        unit = tokens[i + 2] if i + 2 < len(tokens) else ""
        if i + 3 < len(tokens) and tokens[i + 3] == ",":
            return Datetime(unit, _text(tokens[i + 4] if i + 4 < len(tokens) else "", text)), expect(i + 5, ")")
        return Datetime(unit), expect(i + 3, ")")
    if name == "Struct":
        fields, j = [], expect(i + 1, "(")
        while True:
            field = _text(tokens[j] if j < len(tokens) else "", text)
            t, j = _parse(tokens, expect(j + 1, ":"), text, level + 1)
            fields.append((field, t))
            if j < len(tokens) and tokens[j] == ",":
                j += 1
                continue
            return Struct(fields), expect(j, ")")
    if name in BY_NAME:
        return BY_NAME[name], i + 1
    raise PlanError(f"unknown dtype {text!r}; known: {', '.join(KINDS)}")


def coerce(obj: object) -> DType:
    """Accept an eidos dtype, a pyarrow type or a type name where a dtype is asked for."""
    if isinstance(obj, DType):
        return obj
    if isinstance(obj, pa.DataType):
        return from_arrow(obj)
    if isinstance(obj, str):
        return parse(obj)
    raise PlanError(f"expected a dtype such as ei.Int64 or ei.Decimal(15, 2), got {obj!r}")
