"""Strings: search (literal and regular expressions, through RE2), LIKE, case mapping, length and slices, all over
code points."""

from __future__ import annotations

import re
from collections.abc import Sequence

from eidos.errors import PlanError
from eidos.ir import dtypes as T
from eidos.ir import functions as F
from eidos.ir.dtypes import DType
from eidos.ir.evaluate.values import Fn, strict1
from eidos.ir.grammar import like_as_regex


def like_regex(pattern: str) -> re.Pattern:
    """SQL LIKE (ir.grammar): % is any run of code points, _ exactly one; no escape; case-sensitive. Use fullmatch."""
    return re.compile(like_as_regex(pattern))


def _slice(offset: int, length: int | None) -> Fn:
    def f(s: str) -> str:
        start = offset if offset >= 0 else len(s) + offset
        end = len(s) if length is None else start + length
        return s[max(start, 0):max(end, 0)]
    return f


def re2(function: str, **options) -> Fn:
    """A kernel of pyarrow's RE2 `function` (`pc.match_substring_regex`...): linear in the text, so no pattern of
    an untrusted plan can make it backtrack for hours as Python's re would. It maps a whole column at once (its
    `column`); the pattern is compiled here, so RE2 refusing it is a PlanError before any row."""
    import pyarrow as pa
    import pyarrow.compute as pc

    built = (pc.ReplaceSubstringOptions if "replacement" in options else pc.MatchSubstringOptions)(**options)

    def column(values: list) -> list:
        return pc.call_function(function, [pa.array(values, pa.string())], built).to_pylist()

    try:
        column([""])
    except pa.ArrowInvalid as e:
        raise PlanError(f"{options.get('pattern')!r}: {e}") from None
    f = strict1(lambda a: pc.call_function(function, [pa.scalar(a, pa.string())], built).as_py())
    f.column = column
    return f


def _split(by: str, inclusive: bool) -> Fn:
    """Polars' split: by each `by` (the empty text: into code points); `inclusive` keeps each `by` at the end of
    its part, and there is no empty last part."""
    def f(s: str) -> list:
        if not by:
            return list(s)
        parts = s.split(by)
        if not inclusive:
            return parts
        return [p + by for p in parts[:-1]] + parts[-1:] * bool(parts[-1])
    return f


def _strings(fn: str, options: tuple, ts: Sequence[DType], rt: DType) -> Fn:
    if ts[0] == T.Null:
        return lambda a: None
    if fn == "str_contains":
        (s,) = options
        return strict1(lambda a: s in a)
    if fn == "str_contains_regex":
        from eidos.ir.regex import render

        return re2("match_substring_regex", pattern=render(options[0], "re2"))
    if fn in ("str_replace_regex", "str_replace_all_regex"):
        from eidos.ir.regex import render, replacement, rewrite

        pattern, value = options
        return re2("replace_substring_regex", pattern=render(pattern, "re2", capture=True),
                   replacement=rewrite(replacement(pattern, value), "re2"),
                   max_replacements=1 if fn == "str_replace_regex" else None)
    if fn in ("str_replace", "str_replace_n", "str_replace_all"):
        old, new, *n = options
        count = n[0] if n else 1 if fn == "str_replace" else -1
        return strict1(lambda a: a.replace(old, new, count))
    if fn in F.STRIP:
        chars = F.WHITESPACE if options[0] is None else options[0]
        strip = {"str_strip_chars": str.strip, "str_strip_chars_start": str.lstrip, "str_strip_chars_end": str.rstrip}[fn]
        return strict1(lambda a: strip(a, chars))
    if fn in F.SPLIT:
        return strict1(_split(options[0], fn == "str_split_inclusive"))
    if fn == "str_starts_with":
        (s,) = options
        return strict1(lambda a: a.startswith(s))
    if fn == "str_ends_with":
        (s,) = options
        return strict1(lambda a: a.endswith(s))
    if fn == "str_like":
        match = like_regex(options[0]).fullmatch
        return strict1(lambda a: match(a) is not None)
    if fn == "str_to_lower":
        return strict1(str.lower)
    if fn == "str_to_upper":
        return strict1(str.upper)
    if fn == "str_len":
        return strict1(len)
    if fn == "str_slice":
        return strict1(_slice(*options))
    raise PlanError(f"unknown string function {fn!r}")


KERNELS = {fn: _strings for fn in F.STRINGS} | {"bin_size": lambda *_: strict1(len)}
