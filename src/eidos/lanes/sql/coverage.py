"""What each SQL dialect covers, as data: one `Coverage` per dialect (nodes, functions, dtypes,
joins, and typed gaps: patterns (fnmatch) for a function on particular types, such as
"mod Float*" or "cast String->*", where an engine cannot match eidos semantics exactly).
Anything a dialect cannot do exactly is listed here rather than answered differently.

None runs opaque Python (MapBatches, udf) or Python's full case mapping (str_to_lower/upper:
ß -> SS), and float and timestamp text differ in all three. DuckDB divides decimals in floating
point and reads decimal text by its own rounding; PostgreSQL has no remainder of floats and its
power() raises where IEEE gives inf or NaN; SQLite has no exact decimals, 4-byte floats, unsigned
64-bit integers, NaN or timestamps, no std/var, and turns NaN results into NULL.

SQL keeps the order of rows only where a plan sorts them (a hidden row number), so what reads row
order (window functions without order_by, distinct(keep="first"/"last"), sample) over rows in a file's
or table's order is a gap the lane names (SqlLane.supports), and runs after a sort. Explode (a row per
list element) is UNNEST ... WITH ORDINALITY on DuckDB and PostgreSQL (SQLite has no lists).
Durations are 64-bit integers of microseconds in SQL (SQLite has none: it has no timestamps).
PostgreSQL and SQLite do not read text in a format (str.to_date/to_datetime); SQLite writes
dates with the codes %Y %m %d %j only (others make the lane hand the plan over at run time).
"""

from __future__ import annotations

from eidos.hal.coverage import Coverage
from eidos.ir import functions as F

_NOT_SQL = ("udf",)  # opaque Python (with MapBatches nodes): never SQL

# A table has no row order in SQL, so first/last/arg_min/arg_max (which read the plan's row order) have
# none to read; the engines' percentile functions place and interpolate by rules of their own.
_ORDERED = ("first", "last", "arg_min", "arg_max", "implode", "quantile")

# SQLite has no median (nor a sorted list of a group's values).
_NOT_YET = ("median",)

# Windows: SQL has no product aggregate (cum_prod); windows by time are RANGE frames over the time in
# microseconds, so a window of calendar months (which vary in length) is a gap (SqlLane.supports); PostgreSQL
# and DuckDB have no COUNT(DISTINCT) over a
# window; medians are built from ordered list aggregates that take no frame. DuckDB and SQLite do not sum
# floats exactly over a window (DuckDB's exact sum gathers each group's values with list(), which over a
# window would be a list per row; SQLite's SUM adds in row order): sums, means, std and var of floats (and
# DuckDB's decimal means, summed as floats) are typed gaps there. PostgreSQL sums them exactly in numeric.
_NO_WINDOW = ("cum_prod",)
_WINDOW_GAPS = ("over median *", "over n_unique *")
_FLOAT_WINDOWS = tuple(f"{fn} Float*" for fn in ("over sum", "over mean", "over std", "over var", "cum_sum",
                                                  "rolling_sum", "rolling_mean", "rolling_sum_by", "rolling_mean_by"))

# Reading text in a format needs an engine's lenient parser held to eidos's fixed widths: PostgreSQL's
# to_timestamp raises on text naming no real date (where strict=False gives null); SQLite has no such parser.
_NO_STRPTIME = ("str_to_date", "str_to_datetime")

# Python's str.upper/lower use full case mapping (ß -> SS, final sigma); these engines map one
# code point to one, so the results differ on such text.
_CASE_MAPPING = ("str_to_lower", "str_to_upper")

# regexp_replace replaces the first match or every one, not the first n (str.replace(..., n=2)).
_FIRST_N = ("str_replace_n",)

# split(by, inclusive=True) keeps each separator with its part: no SQL function does.
_INCLUSIVE = ("str_split_inclusive",)

# PostgreSQL's regular expressions match the longest text at a position (POSIX), where the others take the
# first alternative that matches (Perl): `a|ab` replaces "a" of "ab" there, "ab" in PostgreSQL. Searching is
# alike; replacing by a pattern is a gap there (replacing text as it is is not).
_LONGEST = ("str_replace_regex", "str_replace_all_regex")

# Text forms that differ between engines and eidos (float repr, timestamp fractions). Text is
# parsed by eidos's rules (a regular expression checks it first), except timestamps.
_TEXT = ("cast String->Timestamp", "cast Float*->String", "cast Timestamp->String", "cast Float*->Decimal*")

# Typed gaps: a function on particular types (hal.coverage.typed_operations names) where an
# engine cannot match eidos semantics exactly.
TYPED_GAPS = {
    # DuckDB divides decimals in floating point; there is no exact integer division of decimals.
    # DuckDB parses decimal text by its own rounding rules.
    # DuckDB's median is built from the two middle values (duckdb.py); their exact midpoint as a
    # double is not in reach for 64-bit integers and decimals (its conversions round twice).
    "duckdb": _TEXT + ("floordiv Decimal*", "cast String->Decimal*", "median Int64", "median UInt64",
                       "median Decimal*") + _WINDOW_GAPS + _FLOAT_WINDOWS + ("over mean Decimal*",
                                                                            "rolling_mean Decimal*",
                                                                            "rolling_mean_by Decimal*"),
    # PostgreSQL has no remainder of floats; power() raises where IEEE gives inf or NaN.
    # Its median of floats is a gap: a midpoint that rounds to zero raises in the cast to double. Its
    # stddev_samp/var_samp of floats raise "value out of range" where the variance overflows (eidos: inf)
    # and round as they go where eidos's are two correctly rounded sums.
    "postgresql": _TEXT + ("mod Float*", "pow *", "median Float*", "std Float*", "var Float*") + _WINDOW_GAPS,
    "sqlite": _TEXT + ("cast String->*",) + tuple(p for t in ("Float32", "Decimal*", "UInt64", "Timestamp", "Duration")
                            for p in (f"* {t}", f"cast *->{t}")) + ("cast Date->*",) + _WINDOW_GAPS + _FLOAT_WINDOWS,
}

# Not translated to SQL yet (docs/coverage.md): nanosecond and zoned timestamps, times of day and structs, and
# their functions; such a plan runs on a lane that reads the database's tables (polars, reference).
# PostgreSQL's composite types are declared by name before use, so a struct there is a gap (DuckDB has STRUCT).
# Nanoseconds: DuckDB has TIMESTAMP_NS but no zoned form; PostgreSQL keeps microseconds (never truncated: a gap).
_NEW_TYPES = ("Timestamp(ns, tz)",)
# replace_time_zone: the engines pick an instant for a wall-clock time their zone skips or repeats, where eidos raises.
_NEW_FUNCTIONS = ("dt_replace_time_zone",)

COVERAGE = {
    "duckdb": Coverage.everything().without(nodes=("MapBatches",),
                                            functions=_CASE_MAPPING + _NOT_SQL + _ORDERED + _FIRST_N + _INCLUSIVE + _NO_WINDOW
                                            + _NEW_FUNCTIONS, dtypes=_NEW_TYPES, typed=TYPED_GAPS["duckdb"]),
    "postgresql": Coverage.everything().without(nodes=("MapBatches",),
                                                functions=_CASE_MAPPING + _NOT_SQL + _ORDERED + _FIRST_N + _INCLUSIVE + _LONGEST
                                                + _NO_WINDOW + _NO_STRPTIME + _NEW_FUNCTIONS + F.STRUCTS,
                                                dtypes=_NEW_TYPES + ("Struct", "Timestamp(ns)"),
                                                typed=TYPED_GAPS["postgresql"]),
    # SQLite: no exact decimals, no 4-byte floats, no unsigned 64-bit integers, no NaN (it
    # stores NaN as NULL, so functions whose answer is NaN for some inputs are left out, and a
    # NaN from float arithmetic on infinities raises UnsupportedError; a NaN literal is a gap), dates and timestamps
    # only as text (dates as ISO text are covered; timestamps are not); std/var are not built in; no
    # list type (JSON text is not a list eidos can compare or index alike).
    "sqlite": Coverage.everything().without(
        nodes=("MapBatches", "Explode"),
        functions=_CASE_MAPPING + _NOT_SQL + _ORDERED + _NOT_YET + _NO_WINDOW + F.LISTS + F.SPLIT + _NO_STRPTIME + ("dt_convert_time_zone", "dt_time")
        + ("std", "var", "pow", "sqrt", "log", "log10", "sin", "cos") + _NEW_FUNCTIONS + F.STRUCTS,
        dtypes=("Decimal", "Float32", "UInt64", "Timestamp", "List", "Duration", "Timestamp(tz)", "Time", "Struct",
                "Timestamp(ns)")
        + _NEW_TYPES, typed=TYPED_GAPS["sqlite"],
        values=("NaN",)),
}

# Within a memory budget (DuckDBLane.out_of_core) the duckdb lane cannot sum floats exactly: its exact route
# gathers each group's values with list() in memory, which DuckDB cannot spill. A plan with them runs elsewhere.
OUT_OF_CORE_GAPS = ("sum Float*", "mean Float*", "var Float*", "std Float*")
