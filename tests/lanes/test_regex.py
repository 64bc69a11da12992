"""`str.contains(pattern)`: one regular-expression dialect, matched alike on every lane that declares it.

Generated patterns (every construct of eidos.ir.regex, nested) over generated text (ASCII and not, digits
beyond ASCII, newlines, characters a pattern escapes) on each lane against the reference lane; the
constructs the dialect refuses, refused; SQLite through a function the lane registers on its own connection,
on RE2 as the reference lane; a catastrophic pattern over a long text answered at once (RE2 never backtracks)."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import eidos as ei
from eidos import col
from eidos.errors import PlanError
from eidos.testing.strategies import REGEX_ALPHABET, examples, regexes
from tests.lanes.helpers import declaring, lane_or_skip, sqlite_table

LANES = declaring("str_contains_regex")
texts = st.lists(st.one_of(st.none(), st.text(st.sampled_from(REGEX_ALPHABET), max_size=6)), min_size=1, max_size=8)


@pytest.mark.parametrize("lane", LANES)
@settings(max_examples=examples(25), deadline=None)
@given(patterns=st.lists(regexes(), min_size=1, max_size=4), rows=texts)
def test_generated_patterns_match_as_the_reference(lane, load_into, patterns, rows):
    backend = lane_or_skip(lane)
    source = ei.from_arrow(pa.table({"s": pa.array(rows, pa.string())}))
    flow = source.select("s", **{f"m{i}": col("s").str.contains(p) for i, p in enumerate(patterns)})
    expected = flow.run(engine="reference")
    got = load_into(backend, flow).run(engine=lane, strict=True)
    assert got.to_pydict() == expected.to_pydict(), patterns


def test_the_dialect_means_the_same_on_each_engine():
    flow = ei.from_pydict({"s": ["a\nb", "x٣", "x3", "ab\n", "A.B"]})
    q = flow.select(dot=col("s").str.contains("a.b"), digit=col("s").str.contains(r"x\d"),
                    end=col("s").str.contains("b$"), escaped=col("s").str.contains(r"A\.B"),
                    literal=col("s").str.contains(".", literal=True))
    expected = {"dot": [False, False, False, False, False], "digit": [False, False, True, False, False],
                "end": [True, False, False, False, False], "escaped": [False, False, False, False, True],
                "literal": [False, False, False, False, True]}
    assert q.run(engine="reference").to_pydict() == expected
    for lane in ("polars", "duckdb"):
        lane_or_skip(lane)
        assert q.run(engine=lane).to_pydict() == expected


def test_a_catastrophic_pattern_runs_in_linear_time_on_the_reference_lane():
    # Python's re backtracks through 2**40 ways of splitting the a's before failing (hours); RE2 reads the text once
    flow = ei.from_pydict({"s": ["a" * 40 + "b", "a" * 40, None]})
    got = flow.select(col("s").str.contains("(a+)+$"), n=col("s").str.contains("^(a|aa)+$")).run(engine="reference")
    assert got.to_pydict() == {"s": [False, True, None], "n": [False, True, None]}


@pytest.mark.parametrize("pattern, what", [(r"(a)\1", "a backreference"), ("(?=a)", "lookahead"),
                                           (r"\bword", "word boundary"), ("(?i)abc", "inline flag"),
                                           ("a{256}", "repeat count over 255"),
                                           ("(?:a{40}){30}", "multiply past 1000"), (r"[^a\D]", "negated class"),
                                           ("(a", "does not parse")])
def test_what_the_dialect_lacks_is_refused_naming_it(pattern, what):
    with pytest.raises(PlanError, match=what):
        col("s").str.contains(pattern)


def test_sqlite_matches_through_re2_registered_on_its_own_connection_only(tmp_path):
    import sqlite3

    source = sqlite_table(tmp_path, "create table t (s text); insert into t values ('apple'), ('pear'), (null), "
                                    f"('{'a' * 40}b'), ('{'a' * 40}')")
    flow = source.filter(col("s").str.contains("^p|(a+)+$"))
    assert lane_or_skip("sqlite").supports(flow.plan) == []
    assert flow.explain().splitlines()[0].split()[1] == "sqlite"
    assert flow.run(engine="sqlite", strict=True).to_pydict() == {"s": ["pear", "a" * 40]}
    got = source.select(m=col("s").str.contains("p+l"), n=col("s").str.len()).run(engine="sqlite", strict=True)
    assert got.to_pydict() == {"m": [True, False, None, False, False], "n": [5, 4, None, 41, 40]}
    with sqlite3.connect(tmp_path / "data.db") as con, pytest.raises(sqlite3.OperationalError, match="no such function"):
        con.execute("select eidos_re2_search(s, 'a') from t").fetchall()    # nothing registered beyond the run
    con.close()
