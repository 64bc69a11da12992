"""A lane's run-time error in the user's terms: the runner re-runs a failed plan on the reference lane
for its message (eidos.hal.replay), never for its answer, and only within a bound on the input."""

from __future__ import annotations

import sqlite3

import pyarrow as pa
import pytest

import eidos as ei
from eidos import col
from eidos.errors import ExecutionError, ResourceError
from eidos.hal import registry, replay
from eidos.hal.lane import Lane

pytest.importorskip("polars")

OVERFLOW = ei.from_arrow(pa.table({"a": pa.array([1, 100], pa.int8())})).select(t=col("a") + col("a"))
REFERENCE = "integer overflow: 100 + 100 = 200 does not fit in Int8 (-128..127)\n  in Project [t=a + a]: t = a + a"


class Wrong(Lane):
    """A lane that fails on every plan, though the reference lane runs them."""

    name = "wrong"
    kind = "vector"

    def __init__(self, error: Exception):
        self.error = error

    def execute(self, plan):
        raise self.error


@pytest.fixture
def wrong():
    def add(error):
        registry.register_backend("wrong", Wrong(error))

    yield add
    registry.unregister_backend("wrong")


def test_the_message_is_the_reference_lanes_and_the_record_says_why():
    with pytest.raises(ExecutionError) as e:
        OVERFLOW.run(engine="polars")
    assert str(e.value) == REFERENCE
    assert "i128" not in str(e.value) and "literal" not in str(e.value)
    engine = e.value.__cause__
    assert isinstance(engine, ExecutionError) and "polars failed" in str(engine)   # the engine's own, kept
    (lane, outcome), = ei.last_run().attempts
    assert lane == "polars" and outcome.endswith("the reference lane re-ran it for the message")


def test_a_stream_that_fails_gives_the_reference_lanes_message_too():
    with pytest.raises(ExecutionError) as e:
        list(OVERFLOW.stream(engine="duckdb"))
    assert str(e.value).startswith(REFERENCE)


def test_a_lane_that_fails_where_the_reference_lane_does_not_is_a_bug_and_says_so(wrong):
    wrong(ExecutionError("engine: bad thing in c1"))
    flow = ei.from_pydict({"a": [1, 2]}).select(b=col("a") * 2)
    with pytest.raises(ExecutionError) as e:
        flow.run(engine="wrong")
    first, rest = str(e.value).split("\n", 1)
    assert first == "engine: bad thing in c1"   # both outcomes, the reference's answer never returned
    assert "lane 'wrong' failed, but the reference lane ran the same plan without error" in rest
    assert "2 rows, the first: b=2" in rest and "a bug in the wrong lane" in rest


def test_over_the_bound_no_re_run_and_the_message_says_how_to_get_it(monkeypatch):
    monkeypatch.setattr(replay, "LIMIT", 1)
    ran = []
    monkeypatch.setattr(registry.get("reference"), "execute", lambda plan: ran.append(plan))
    with pytest.raises(ExecutionError) as e:
        OVERFLOW.run(engine="polars")
    assert ran == []
    assert "polars failed" in str(e.value)
    assert "this is the polars engine's message: the reference lane" in str(e.value)
    assert "re-runs only plans of up to 0.0 MiB of input" in str(e.value)
    assert "not re-run" in ei.last_run().attempts[0][1]


def test_the_bound_is_at_most_an_eighth_of_the_budget(monkeypatch):
    monkeypatch.setenv("EIDOS_MEMORY_BUDGET", "80MiB")
    assert replay.limit() == 10 * 2**20
    monkeypatch.setenv("EIDOS_MEMORY_BUDGET", "64GiB")
    assert replay.limit() == replay.LIMIT


def test_resource_errors_are_never_re_run(wrong, monkeypatch):
    wrong(ResourceError("EIDOS_MEMORY_BUDGET=1KiB is below what it needs"))
    ran = []
    monkeypatch.setattr(registry.get("reference"), "execute", lambda plan: ran.append(plan))
    with pytest.raises(ResourceError, match="1KiB is below"):
        ei.from_pydict({"a": [1]}).run(engine="wrong")
    assert ran == []


def test_database_sources_are_read_through_the_lane_that_failed(tmp_path):
    pytest.importorskip("adbc_driver_sqlite")
    path = tmp_path / "t.db"
    with sqlite3.connect(path) as con:
        con.execute("create table t (a integer)")
        con.executemany("insert into t values (?)", [(1,), (2**62,)])
    flow = ei.read_sql(f"sqlite:///{path}", table="t").select(b=col("a") * 4)
    with pytest.raises(ExecutionError) as e:
        flow.run()
    assert str(e.value).startswith("integer overflow: 4611686018427387904 * 4 = 18446744073709551616 does not fit "
                                   "in Int64")
    assert ei.last_run().attempts[-1][0] == "sqlite" and "re-ran" in ei.last_run().attempts[-1][1]
    # a pushed-down part that fails: the same message
    names = ei.from_pydict({"b": [4], "name": ["four"]})
    with pytest.raises(ExecutionError) as e:
        flow.join(names, on="b").run()
    assert str(e.value).startswith("integer overflow: 4611686018427387904 * 4")
