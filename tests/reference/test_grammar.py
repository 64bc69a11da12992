"""eidos.ir.grammar: the text a cast from String reads and what a LIKE pattern means, stated once."""

from __future__ import annotations

import math
import re
import sys

import pytest

from eidos.errors import PlanError
from eidos.ir import dtypes as T
from eidos.ir import evaluate as V
from eidos.ir import grammar as G


def test_space_is_what_str_strip_removes():
    assert set(G.SPACE) == {chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace()}


@pytest.mark.parametrize("dtype, good, bad", [
    (T.Int64, ["0", "-0", "+12", "007"], ["", "+", "1.0", "1e3", "1_000", "١٢", "0x10", " 1"]),
    (T.Float64, ["1.", ".5", "-1.5e-3", "1E+5", "nan", "-NaN", "+Inf", "iNfInItY", "-infinity"],
     ["", ".", "1e", "e5", "+-1", "infinit", "nana", "1.5f", "in f"]),
    (T.Decimal(10, 2), ["1.", ".5", "-1.5e-3"], ["nan", "inf", "1e", ""]),
    (T.Boolean, ["true", "FALSE", "tRuE"], ["yes", "1", "t", "truefalse"]),
    (T.Date, ["2020-02-29", "0001-01-01", "9999-12-31", "2021-02-30"],
     ["0000-01-01", "2020-2-1", "20200101", "2020-01-01 00:00"]),
    (T.Timestamp, ["2020-01-01", "2020-01-01 10:00", "2020-01-01T10:00:59.123456"],
     ["2020-01-01 10", "2020-01-01 10:00:00.1234567", "0000-01-01 10:00"]),
])
def test_text_patterns(dtype, good, bad):
    pattern = re.compile(G.text_pattern(dtype))
    assert [t for t in good if not pattern.fullmatch(t)] == []
    assert [t for t in bad if pattern.fullmatch(t)] == []
    padded = re.compile(G.padded(G.text_pattern(dtype)))
    assert padded.fullmatch(f"\u3000{good[0]}\n").group(1) == good[0]


def test_patterns_hold_no_backslash():
    for t in (T.Int8, T.Float32, T.Decimal(5, 1), T.Boolean, T.Date, T.Timestamp):
        assert "\\" not in G.padded(G.text_pattern(t))


def test_no_text_form_for_string():
    with pytest.raises(PlanError, match="no text form for String"):
        G.text_pattern(T.String)


def test_float_words():
    assert [(repr(v), ws) for v, ws in G.float_word_groups()] == [
        ("nan", ["nan", "+nan", "-nan"]), ("inf", ["inf", "+inf", "infinity", "+infinity"]),
        ("-inf", ["-inf", "-infinity"])]
    assert math.copysign(1.0, G.FLOAT_WORDS["-nan"]) == 1.0
    assert G.caseless("nan") == "[nN][aA][nN]"


@pytest.mark.parametrize("pattern, matches, misses", [
    ("", [""], ["a", "\n"]),
    ("%", ["", "a", "x\ny\n"], []),
    ("_", ["é", "😀", "\n", "%"], ["", "e\u0301", "ab"]),
    ("a\\%", ["a\\", "a\\bc"], ["a", "abc"]),
    ("a.c", ["a.c"], ["abc"]),
    ("[x]_", ["[x]!"], ["x!"]),
    ("(a|b)*", ["(a|b)*"], ["", "ab"]),
    ("^$%", ["^$", "^$x"], [""]),
    ("a", ["a"], ["a\n", "A"]),
])
def test_like(pattern, matches, misses):
    like = V.like_regex(pattern)
    assert [s for s in matches if not like.fullmatch(s)] == []
    assert [s for s in misses if like.fullmatch(s)] == []


def test_like_in_another_pattern_language():
    glob = G.translate_like("a%_[*?]", any_run="*", one="?", literal=lambda ch: f"[{ch}]" if ch in "*?[" else ch)
    assert glob == "a*?[[][*][?]]"
