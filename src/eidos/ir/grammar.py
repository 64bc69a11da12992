"""The text eidos reads, stated once: what a cast from String accepts (docs/semantics.md section 13)
and what a LIKE pattern means (section 11). The reference evaluator, the Polars translator and the
SQL dialects all build their checks from here.

The regular expressions use only what Python's re, Rust's regex (Polars), RE2 (DuckDB) and
PostgreSQL read alike: classes of literal characters, ASCII digit ranges, `?`, `*`, `{m,n}`,
`(?:...)` and `|`. They hold no backslash (SQL string literals would each need it their own way),
and letters match in any case through classes (`[nN]`), not flags.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable

from eidos.errors import PlanError
from eidos.ir.dtypes import DType

# What Python's str.strip() removes (str.isspace): spaces a cast from String ignores around the text.
SPACE = ("\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005"
         "\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000")

INTEGER = "[+-]?[0-9]+"
NUMBER = "[+-]?(?:[0-9]+[.]?[0-9]*|[.][0-9]+)(?:[eE][+-]?[0-9]+)?"
# Years 0001-9999 (Python's dates; DuckDB and Polars would read year 0); the engine checks the day exists.
DATE = "(?:[1-9][0-9]{3}|0[1-9][0-9]{2}|00[1-9][0-9]|000[1-9])-[0-9]{2}-[0-9]{2}"
TIMESTAMP = DATE + "(?:[ T][0-9]{2}:[0-9]{2}(?::[0-9]{2}(?:[.][0-9]{1,6})?)?)?"

# Words a float cast reads in any case, each with an optional sign ("-nan" is NaN all the same),
# and every spelling of them in lower case with the value it reads as.
_FLOAT_WORDS = {"nan": math.nan, "inf": math.inf, "infinity": math.inf}
FLOAT_WORDS = {sign + word: -value if sign == "-" and not math.isnan(value) else value
               for word, value in _FLOAT_WORDS.items() for sign in ("", "+", "-")}

# Words a Boolean cast reads in any case.
BOOLEAN_WORDS = {"true": True, "false": False}


def float_word_groups() -> list[tuple[float, list[str]]]:
    """The float words (lower case) grouped by the value they read as: NaN, inf, -inf."""
    groups: dict[str, tuple[float, list[str]]] = {}
    for word, value in FLOAT_WORDS.items():
        groups.setdefault(repr(value), (value, []))[1].append(word)
    return list(groups.values())


def caseless(word: str) -> str:
    """`word` as a pattern matching it in any case: 'nan' -> '[nN][aA][nN]'."""
    return "".join(f"[{c.lower()}{c.upper()}]" if c.isalpha() else c for c in word)


def _words(words) -> str:
    return "|".join(caseless(w) for w in sorted(words, key=len, reverse=True))


def text_pattern(dtype: DType) -> str:
    """The text (spaces around it excluded) a cast from String to `dtype` reads."""
    if dtype.is_integer:
        return INTEGER
    if dtype.is_float:
        return f"{NUMBER}|[+-]?(?:{_words(_FLOAT_WORDS)})"
    if dtype.is_decimal:
        return NUMBER
    if dtype.name == "Boolean":
        return _words(BOOLEAN_WORDS)
    if dtype.name == "Date":
        return DATE
    if dtype.name == "Timestamp":
        return TIMESTAMP
    raise PlanError(f"no text form for {dtype}: a cast from String reads numbers, Boolean, Date and Timestamp")


def padded(pattern: str) -> str:
    """`pattern` as group 1, with the spaces a cast ignores allowed on either side."""
    return f"[{SPACE}]*({pattern})[{SPACE}]*"


def whole(pattern: str) -> str:
    """`pattern` anchored to match a whole string, newlines included (Python: use fullmatch)."""
    return f"(?s)^(?:{pattern})$"


# ---------------------------------------------------------------- LIKE

def translate_like(pattern: str, *, any_run: str, one: str, literal: Callable[[str], str]) -> str:
    """A LIKE pattern written in another pattern language: `%` (any run of code points) as `any_run`,
    `_` (exactly one) as `one`, every other character as `literal(ch)`. There is no escape character."""
    return "".join(any_run if ch == "%" else one if ch == "_" else literal(ch) for ch in pattern)


def like_as_regex(pattern: str) -> str:
    """A LIKE pattern as a regular expression matching whole strings (newlines too; case-sensitive).
    Python's re and Rust's regex read it alike; with Python's re, call fullmatch."""
    return "(?s)^" + translate_like(pattern, any_run=".*", one=".", literal=re.escape) + "$"
