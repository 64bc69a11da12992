"""String functions on every lane that declares them, against the reference lane on the same inputs:
str.replace/replace_all (regular expressions with group references, and literal text), generated patterns and
text included; each lane's gaps declared (PostgreSQL's longest-match regular expressions, the first n)."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import eidos as ei
from eidos import col
from eidos.errors import PlanError
from eidos.testing.strategies import REGEX_ALPHABET, examples, regexes
from tests.lanes.helpers import declaring, lane_or_skip

LANES = declaring("str_replace")
TEXT = ["baaac", "a.b$c", "", None, "2024-03-09", "aXa", "x\ny", "é٣é", "a\\b"]
texts = st.lists(st.one_of(st.none(), st.text(st.sampled_from(REGEX_ALPHABET), max_size=6)), min_size=1, max_size=8)


def same_as_reference(lane, load_into, source, exprs: dict):
    """The expressions over `source` that `lane` declares, run there and on the reference lane alike; their names."""
    backend = lane_or_skip(lane)
    names = [n for n, e in exprs.items()
             if all(g.startswith("cannot read") for g in backend.supports(source.select(e).plan))]
    if not names:
        return names
    flow = source.select(**{n: exprs[n] for n in names})
    expected = flow.run(engine="reference")
    assert load_into(backend, flow).run(engine=lane, strict=True).to_pydict() == expected.to_pydict()
    return names


REPLACING = {
    "every_empty_match": col("s").str.replace_all("a*", "-"),
    "groups": col("s").str.replace(r"(\d+)-(\d+)", "$2/${1}$$"),
    "named": col("s").str.replace("(?P<x>a)(X)?", r"[${x}$2\]"),
    "whole": col("s").str.replace_all(r"[^\n]\d?", "<$0>"),
    "lazy": col("s").str.replace_all("a+?", "_"),
    "literal": col("s").str.replace(".", "\\", literal=True),
    "literal_all": col("s").str.replace_all("a", "$1", literal=True),
    "literal_empty": col("s").str.replace_all("", "-", literal=True),
    "literal_first_empty": col("s").str.replace("", "$", literal=True),
    "literal_n": col("s").str.replace("a", "<$0>", literal=True, n=2),
}


@pytest.mark.parametrize("lane", LANES)
def test_replacing_as_the_reference(lane, load_into):
    source = ei.from_arrow(pa.table({"s": pa.array(TEXT, pa.string())}))
    names = same_as_reference(lane, load_into, source, REPLACING)
    gaps = {"duckdb": {"literal_n"}, "postgresql": {"literal_n", "every_empty_match", "groups", "named", "whole",
                                                     "lazy"}}.get(lane, set())
    assert set(REPLACING) - set(names) == gaps


def test_replacing_means_what_polars_means():
    got = ei.from_pydict({"s": ["baaac", "2024-03", "aXa", None]}).select(**REPLACING).run(engine="reference")
    assert got.to_pydict() == {
        "every_empty_match": ["-b-c-", "-2-0-2-4---0-3-", "-X-", None], "groups": ["baaac", "03/2024$", "aXa", None],
        "named": ["b[a\\]aac", "2024-03", "[aX\\]a", None], "whole": ["<b><a><a><a><c>", "<20><24><-0><3>", "<a><X><a>", None],
        "lazy": ["b___c", "2024-03", "_X_", None], "literal": ["baaac", "2024-03", "aXa", None],
        "literal_all": ["b$1$1$1c", "2024-03", "$1X$1", None], "literal_empty": ["-b-a-a-a-c-", "-2-0-2-4---0-3-", "-a-X-a-", None],
        "literal_first_empty": ["$baaac", "$2024-03", "$aXa", None], "literal_n": ["b<$0><$0>ac", "2024-03", "<$0>X<$0>", None]}


@pytest.mark.parametrize("lane", declaring("str_replace_regex", "str_replace_all_regex"))
@settings(max_examples=examples(15), deadline=None)
@given(patterns=st.lists(regexes(), min_size=1, max_size=3), rows=texts,
       values=st.lists(st.sampled_from(["", "-", "<$0>", "$$\\", "${0}${0}"]), min_size=3, max_size=3))
def test_generated_patterns_replace_as_the_reference(lane, load_into, patterns, rows, values):
    source = ei.from_arrow(pa.table({"s": pa.array(rows, pa.string())}))
    exprs = {**{f"f{i}": col("s").str.replace(p, values[i]) for i, p in enumerate(patterns)},
             **{f"a{i}": col("s").str.replace_all(p, values[-i]) for i, p in enumerate(patterns)}}
    assert same_as_reference(lane, load_into, source, exprs) == list(exprs), patterns


@pytest.mark.parametrize("call, what", [
    (lambda: col("s").str.replace("(a)", "$2"), "names group '2'"),
    (lambda: col("s").str.replace("(a)", "$1a"), r"write \$\{1\}a"),
    (lambda: col("s").str.replace("(?P<x>a)", "${y}"), "names group 'y'"),
    (lambda: col("s").str.replace("a", "b", n=2), "literal=True"),
    (lambda: col("s").str.replace("a", "b", literal=True, n=0), "at least 1"),
    (lambda: col("s").str.replace_all(r"(a)\1", "b"), "backreference"),
    (lambda: col("s").str.replace_all("a", 1), "two strings")])
def test_what_a_replacement_cannot_say_is_refused_naming_it(call, what):
    with pytest.raises(PlanError, match=what):
        call()


SPACES = " \t\n\u3000\xa0\x1c\u200b"   # White_Space, and three that are not (Python's isspace takes \x1c)
STRIPPING = {
    "both": col("s").str.strip_chars(), "start": col("s").str.strip_chars_start(), "end": col("s").str.strip_chars_end(),
    "set": col("s").str.strip_chars("aé"), "set_start": col("s").str.strip_chars_start("a."),
    "set_end": col("s").str.strip_chars_end("c$"), "nothing": col("s").str.strip_chars(""),
}


@pytest.mark.parametrize("lane", LANES)
def test_stripping_as_the_reference(lane, load_into):
    source = ei.from_arrow(pa.table({"s": pa.array(TEXT + [SPACES + "a" + SPACES[::-1], "\x85 \u2029"], pa.string())}))
    assert same_as_reference(lane, load_into, source, STRIPPING) == list(STRIPPING)


def test_strip_chars_strips_unicode_white_space_as_polars():
    text = SPACES + "a" + SPACES[::-1]
    got = ei.from_pydict({"s": [text, None]}).select(**STRIPPING).run(engine="reference").to_pydict()
    assert got["both"] == ["\x1c\u200ba\u200b\x1c", None]
    assert got["start"] == ["\x1c\u200ba" + SPACES[::-1], None] and got["end"] == [SPACES + "a\u200b\x1c", None]


@pytest.mark.parametrize("lane", LANES)
@settings(max_examples=examples(10), deadline=None)
@given(rows=st.lists(st.one_of(st.none(), st.text(st.sampled_from("ab é" + SPACES), max_size=6)), min_size=1, max_size=8),
       chars=st.lists(st.one_of(st.none(), st.text(st.sampled_from("ab é\t\u3000"), max_size=3)), min_size=3, max_size=3))
def test_generated_text_strips_as_the_reference(lane, load_into, rows, chars):
    source = ei.from_arrow(pa.table({"s": pa.array(rows, pa.string())}))
    exprs = {"both": col("s").str.strip_chars(chars[0]), "start": col("s").str.strip_chars_start(chars[1]),
             "end": col("s").str.strip_chars_end(chars[2])}
    assert same_as_reference(lane, load_into, source, exprs) == list(exprs)


JOINING = {
    "plus": col("a") + col("b"), "plus_text": "<" + col("a") + ">",
    "sep": ei.concat_str(["a", "b", "c"], separator=", "),
    "bare": ei.concat_str([col("a"), col("b")]),
    "skip_nulls": ei.concat_str("a", "b", "c", separator="-é", ignore_nulls=True),
    "skip_nulls_bare": ei.concat_str("a", "c", ignore_nulls=True),
}
PARTS = {"a": ["x", None, "", "é", None], "b": ["1", "2", None, "", None], "c": ["!", None, "?", "", None]}


@pytest.mark.parametrize("lane", LANES)
def test_joining_strings_as_the_reference(lane, load_into):
    source = ei.from_arrow(pa.table({k: pa.array(v, pa.string()) for k, v in PARTS.items()}))
    assert same_as_reference(lane, load_into, source, JOINING) == list(JOINING)


def test_joining_strings_means_what_polars_means():
    got = ei.from_pydict(PARTS).select(**JOINING).run(engine="reference").to_pydict()
    assert got == {"plus": ["x1", None, None, "é", None], "plus_text": ["<x>", None, "<>", "<é>", None],
                   "sep": ["x, 1, !", None, None, "é, , ", None], "bare": ["x1", None, None, "é", None],
                   "skip_nulls": ["x-é1-é!", "2", "-é?", "é-é-é", ""], "skip_nulls_bare": ["x!", "", "?", "é", ""]}


@pytest.mark.parametrize("bad, what", [(lambda: col("a") + 1, "two Strings for +"),
                                       (lambda: col("a") * col("b"), "needs numbers"),
                                       (lambda: ei.concat_str([]), "at least one")])
def test_joining_what_is_not_text_is_refused(bad, what):
    with pytest.raises(PlanError, match=what):
        ei.from_pydict(PARTS).select(x=bad())


def test_sql_text_functions_mean_what_duckdb_means():
    duckdb = pytest.importorskip("duckdb")
    table = pa.table({"a": pa.array(["x1x", None, " é ", ""], pa.string()), "b": pa.array(["b", "c", None, ""])})
    query = r"""SELECT a || b AS p, concat(a, b, '!') AS c, concat_ws('-', a, b) AS w, replace(a, 'x', '$') AS r,
        replace(a, '', 'z') AS r0, regexp_replace(a, '(x)', '<\1\\$>', 'g') AS g, regexp_replace(a, 'x', 'y') AS f,
        regexp_matches(a, '^x') AS m, a ~ 'x$' AS m2, trim(a) AS t, ltrim(a, ' x') AS l, rtrim(a) AS rt FROM t"""
    con = duckdb.connect()
    con.register("t", table)
    expected = con.sql(query).to_arrow_table().to_pydict()
    q = ei.sql(query, t=ei.from_arrow(table))
    assert q.run(engine="reference").to_pydict() == expected
    with pytest.raises(ei.errors.UnsupportedError, match="options 'g' or none"):
        ei.sql("SELECT regexp_replace(a, 'x', 'y', 'i') FROM t", t=ei.from_arrow(table))


SPLITTING = {"comma": col("s").str.split(","), "chars": col("s").str.split(""), "two": col("s").str.split("a$"),
             "inclusive": col("s").str.split("a", inclusive=True),
             "inclusive_chars": col("s").str.split("", inclusive=True)}


@pytest.mark.parametrize("lane", LANES)
def test_splitting_as_the_reference(lane, load_into):
    source = ei.from_arrow(pa.table({"s": pa.array(TEXT + ["a,b,", ",", "a,,b", "e\u0301,日本"], pa.string())}))
    names = same_as_reference(lane, load_into, source, SPLITTING)
    gaps = {"sqlite": set(SPLITTING), "duckdb": {"inclusive", "inclusive_chars"},
            "postgresql": {"inclusive", "inclusive_chars"}}.get(lane, set())
    assert set(SPLITTING) - set(names) == gaps


def test_splitting_means_what_polars_means():
    got = ei.from_pydict({"s": ["a,b,", "", None, ",", "aXa"]}).select(**SPLITTING).run(engine="reference").to_pydict()
    assert got["comma"] == [["a", "b", ""], [""], None, ["", ""], ["aXa"]]
    assert got["chars"] == [["a", ",", "b", ","], [], None, [","], ["a", "X", "a"]]
    assert got["inclusive"] == [["a", ",b,"], [], None, [","], ["a", "Xa"]]
    assert got["inclusive_chars"] == got["chars"]


@pytest.mark.parametrize("lane", declaring("str_split"))
@settings(max_examples=examples(10), deadline=None)
@given(rows=st.lists(st.one_of(st.none(), st.text(st.sampled_from("ab,é "), max_size=6)), min_size=1, max_size=8),
       by=st.lists(st.text(st.sampled_from("ab,é"), max_size=2), min_size=2, max_size=2))
def test_generated_text_splits_as_the_reference(lane, load_into, rows, by):
    source = ei.from_arrow(pa.table({"s": pa.array(rows, pa.string())}))
    exprs = {"a": col("s").str.split(by[0]), "b": col("s").str.split(by[1]),
             "c": col("s").str.split(by[0], inclusive=True)}
    names = same_as_reference(lane, load_into, source, exprs)
    assert names == (["a", "b", "c"] if lane in declaring("str_split_inclusive") else ["a", "b"])
