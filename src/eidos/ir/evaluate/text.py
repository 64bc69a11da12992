"""Strings: literal search, LIKE, case mapping, length and slices, all over code points."""

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


def _strings(fn: str, options: tuple, ts: Sequence[DType], rt: DType) -> Fn:
    if ts[0] == T.Null:
        return lambda a: None
    if fn == "str_contains":
        (s,) = options
        return strict1(lambda a: s in a)
    if fn == "str_contains_regex":
        from eidos.ir.regex import render

        search = re.compile(render(options[0], "python")).search
        return strict1(lambda a: search(a) is not None)
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


KERNELS = {fn: _strings for fn in F.STRINGS}
