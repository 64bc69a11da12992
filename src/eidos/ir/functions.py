"""The scalar and aggregate functions of the IR, as data.

Lanes list which of these names they support; `typing.py` gives each its
result type; the reference lane gives each its meaning.
"""

from __future__ import annotations

import re

# name -> infix symbol, for operators rendered between their operands.
BINARY_OPERATORS = {
    "add": "+", "sub": "-", "mul": "*", "truediv": "/", "floordiv": "//", "mod": "%", "pow": "**",
    "eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">=",
    "and": "&", "or": "|",
}
UNARY_OPERATORS = {"neg": "-", "not": "~"}

ARITHMETIC = ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow")
COMPARISON = ("eq", "ne", "lt", "le", "gt", "ge")
LOGICAL = ("and", "or", "not")
MATH = ("neg", "abs", "sqrt", "exp", "log", "log10", "sin", "cos", "tanh", "round", "floor", "ceil")
NULLS = ("is_null", "is_not_null", "fill_null")
MEMBERSHIP = ("is_in", "is_between")
# str_replace* are literal (n: the first n; _all every match), str_replace*_regex of a regular expression.
REPLACE = ("str_replace", "str_replace_n", "str_replace_all", "str_replace_regex", "str_replace_all_regex")
STRIP = ("str_strip_chars", "str_strip_chars_start", "str_strip_chars_end")
SPLIT = ("str_split", "str_split_inclusive")   # by literal text, into a List(String)
STRINGS = ("str_contains", "str_contains_regex", "str_starts_with", "str_ends_with", "str_like",
           "str_to_lower", "str_to_upper", "str_len", "str_slice") + REPLACE + STRIP + SPLIT
# What strip_chars(None) strips: Unicode's White_Space, as Polars (Rust's char::is_whitespace); Python's isspace
# would add U+001C..U+001F, SQL's TRIM strips spaces only, so every lane is given these.
WHITESPACE = "\t\n\x0b\x0c\r \x85\xa0\u1680" + "".join(map(chr, range(0x2000, 0x200B))) + "\u2028\u2029\u202f\u205f\u3000"
# Parts of a date or timestamp (Int32), then the functions of one that give a date or timestamp.
DATE_PARTS = ("dt_year", "dt_month", "dt_day", "dt_weekday", "dt_ordinal_day")
TIME_PARTS = ("dt_hour", "dt_minute", "dt_second")
# A Duration's length in whole units (toward zero), Int64.
DURATION_TOTALS = tuple(f"dt_total_{u}" for u in ("days", "hours", "minutes", "seconds", "milliseconds",
                                                  "microseconds"))
# Text to and from dates and timestamps in a format of eidos.ir.timeformat's codes.
FORMATS = ("dt_strftime", "str_to_date", "str_to_datetime")
# Time zones (docs/semantics.md section 1): one zone's wall clock read in another (replace), one instant shown in another (convert).
ZONES = ("dt_replace_time_zone", "dt_convert_time_zone")
TEMPORAL = DATE_PARTS + TIME_PARTS + ("dt_truncate",) + DURATION_TOTALS + FORMATS + ZONES + ("dt_time",)
LISTS = ("list_len", "list_get", "list_contains")
BINARY = ("bin_size",)
STRUCTS = ("struct_field", "struct")   # a field of a struct; a struct of expressions (any number, named)

SCALAR = ARITHMETIC + COMPARISON + LOGICAL + MATH + NULLS + MEMBERSHIP + STRINGS + TEMPORAL + LISTS + BINARY + STRUCTS

# Number of expression arguments each scalar function takes.
ARITY = {fn: 2 for fn in ARITHMETIC + COMPARISON + ("and", "or", "fill_null")}
ARITY.update({fn: 1 for fn in ("not",) + MATH + ("is_null", "is_not_null", "is_in") + STRINGS + TEMPORAL})
ARITY["is_between"] = 3
ARITY.update(list_len=1, list_get=1, list_contains=2, bin_size=1, struct_field=1, struct=None)  # None: any number

# The constant parameters (Call.options) each scalar function takes, in order; the others take none.
# "int" is a 32-bit integer, "length" a non-negative one or None, "values" a tuple of literal values,
# "duration" a duration string (ir/durations.py), "fraction" a float in [0, 1], "interpolation" one of
# QUANTILE_METHODS. Aggregations' options (Agg.options) too.
OPTIONS = {"round": ("int",), "is_in": ("values",), "str_slice": ("int", "length"), "dt_truncate": ("duration",),
           "list_get": ("int",), "struct_field": ("str",), "struct": ("names",), "dt_replace_time_zone": ("zone",), "dt_convert_time_zone": ("zone",),
           "quantile": ("fraction", "interpolation"),
           "dt_strftime": ("str",), "str_to_date": ("str", "bool"), "str_to_datetime": ("str", "bool"),
           **{fn: ("str",) for fn in ("str_contains", "str_contains_regex", "str_starts_with", "str_ends_with", "str_like")},
           **{fn: ("str", "str") for fn in REPLACE}, "str_replace_n": ("str", "str", "int"),
           **{fn: ("chars",) for fn in STRIP}, **{fn: ("str",) for fn in SPLIT}}

# The method a user wrote, for messages and explain, where the IR's name is not simply it with str./dt.
_METHODS = {"str_contains_regex": "str.contains", "str_replace_n": "str.replace", "str_replace_regex": "str.replace",
            "str_replace_all_regex": "str.replace_all", "str_split_inclusive": "str.split"}


def method(fn: str) -> str:
    """How `fn` reads as the method that builds it (`str_starts_with` -> `str.starts_with`)."""
    return _METHODS.get(fn) or re.sub(r"^(str|dt|list|bin|struct)_", r"\1.", fn)


AGGREGATES = ("sum", "mean", "min", "max", "count", "n_unique", "std", "var", "median", "quantile",
              "first", "last", "arg_min", "arg_max", "implode", "count_rows")
# Aggregations whose value depends on the order of the group's rows (docs/semantics.md section 15).
ORDERED_AGGREGATES = ("first", "last", "arg_min", "arg_max", "implode")
QUANTILE_METHODS = ("nearest", "higher", "lower", "midpoint", "linear")

# Window functions (Window nodes, docs/semantics.md section 19), and the constant parameters
# (Window.options) each takes: "int" a 32-bit integer, "size" one from 1 to 2**31-1, "count" one from 0.
# rank: its method and whether it ranks descending. An aggregation over a window is a Window of an
# AGGREGATES name (coverage lists it as the form "over").
WINDOW_OPTIONS = {
    "row_number": (), "rank": ("method", "bool"), "shift": ("int",),
    "cum_sum": (), "cum_prod": (), "cum_min": (), "cum_max": (), "cum_count": (),
    **{f"rolling_{f}": ("size", "count") for f in ("sum", "mean", "min", "max")},
    **{f"rolling_{f}_by": ("duration", "count", "closed") for f in ("sum", "mean", "min", "max")},
}
ROLLING_CLOSED = ("right", "left", "both", "none")   # which ends of (t - window_size, t] a window by time holds
WINDOWS = tuple(WINDOW_OPTIONS)
RANK_METHODS = ("average", "min", "max", "dense", "ordinal")

# Window functions whose result depends on the order of the rows of a partition (rank only as "ordinal").
ORDERED_WINDOWS = ("row_number", "shift", "cum_sum", "cum_prod", "cum_min", "cum_max", "cum_count",
                   "rolling_sum", "rolling_mean", "rolling_min", "rolling_max")

# Pseudo-functions a coverage table lists for expression forms that are not Calls ("over": an
# aggregation computed over a window).
FORMS = ("case", "cast", "udf", "over")

ALL = SCALAR + AGGREGATES + WINDOWS + FORMS
