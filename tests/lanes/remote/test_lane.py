"""The remote lane against a real service on loopback: where the planner sends a plan (rule 2 for
tables on the service, never local data by itself), what engine='remote' sends and releases, what
explain says moves, and errors (no connection; the service's errors as the same class)."""

from __future__ import annotations

import re

import pyarrow as pa
import pytest

import eidos as ei
from eidos import col
from eidos.errors import BackendUnavailable, ExecutionError, PlanError, UnsupportedError
from eidos.hal import registry
from eidos.lanes.remote import execute
from eidos.testing.compare import assert_tables_equal

PEOPLE = pa.table({"id": pa.array([1, 2, 3, 4], pa.int64()), "dept": pa.array(["a", "b", "a", None], pa.large_string())})
DEPTS = pa.table({"dept": pa.array(["a", "b"], pa.large_string()), "floor": pa.array([3, 1], pa.int64())})
BIG = pa.table({"x": pa.array(range(20_000), pa.int64())})   # over EMBED_BYTES: uploaded


def shout(s):
    """A function the service has not allowed: it is defined in a module the service does not trust."""
    return None if s is None else s.upper()


def test_unavailable_without_a_connection(no_connection):
    flow = ei.from_arrow(PEOPLE)
    with pytest.raises(BackendUnavailable, match=r"no eidos service is connected: call ei\.connect\("):
        flow.run(engine="remote")
    info = {b.name: b for b in ei.backends()}["remote"]
    assert not info.available and "ei.connect(" in info.reason


def test_the_planner_never_sends_local_data(remote):
    flow = ei.from_arrow(PEOPLE).filter(col("id") > 1)
    decision = flow.explain()
    assert not decision.startswith("lane: remote")
    assert re.search(r"\n  remote +sources: none lives on an eidos service \(engine='remote' runs the plan", decision)
    flow.run()
    assert ei.last_run().lane != "remote"


@pytest.mark.parametrize("table", [PEOPLE, BIG], ids=["embedded", "uploaded"])
def test_named_it_sends_local_data_and_releases_it(remote, service_handles, table):
    flow = ei.from_arrow(table).filter(col(table.column_names[0]) > 1)
    before = service_handles()
    got = flow.run(engine="remote")
    assert ei.last_run().lane == "remote"
    assert_tables_equal(got, flow.run(engine="reference"), ordered=False)
    assert service_handles() == before   # uploads and the result released


def test_named_it_sends_a_self_joined_input_once(remote, monkeypatch):
    puts = []
    real = type(remote).put_table
    monkeypatch.setattr(type(remote), "put_table", lambda self, t: puts.append(t.num_rows) or real(self, t))
    big = ei.from_arrow(BIG)
    flow = big.join(big.select(x="x", y=col("x") * 2), on="x").filter(col("x") < 3)
    assert_tables_equal(flow.run(engine="remote"), flow.run(engine="reference"), ordered=False)
    assert puts == [20_000]


def test_a_plan_over_a_table_on_the_service_runs_there(remote):
    people = on_service(remote, PEOPLE)
    flow = people.filter(col("dept") == "a").select("id")
    text = flow.explain()
    assert text.startswith("lane: remote   (rule 2, data locality: every source lives in remote:eidos://")
    assert f"  stays there: table {people.plan.source.handle} on the eidos service at {remote.address}" in text
    assert flow.run().to_pydict() == {"id": [1, 3]}
    assert ei.last_run().lane == "remote"


def test_a_mixed_plan_runs_the_service_subtree_there_and_the_rest_here(remote):
    people = on_service(remote, PEOPLE).filter(col("id") < 4)
    flow = people.join(ei.from_arrow(DEPTS), on="dept").sort("id")
    decision = flow.explain()
    assert "rule 2, data locality: sources live in several places: 1 part pushed down to remote" in decision
    assert "part 1: remote   (rule 2, data locality: every source lives in remote:eidos://" in decision
    got = flow.run()
    record = ei.last_run()
    assert record.lane != "remote"
    assert ("remote", "pushed-down part: 3 rows fetched") in record.attempts
    expected = ei.from_arrow(PEOPLE).filter(col("id") < 4).join(ei.from_arrow(DEPTS), on="dept").sort("id")
    assert got.to_pydict() == expected.run(engine="reference").to_pydict()


def test_explain_names_the_service_and_what_moves(remote):
    people = on_service(remote, PEOPLE)
    depts, big = ei.from_arrow(DEPTS), ei.from_arrow(BIG)
    flow = people.join(depts, on="dept").join(big.select(id="x"), on="id")
    lines = flow.explain(engine="remote").splitlines()
    at = lines.index(f"remote: runs on the eidos service at {remote.address}, on its own lanes; what moves:")
    assert lines[at + 1:] == [
        f"  stays there: table {people.plan.source.handle} on the eidos service at {remote.address} (4 rows): "
        "read there in place",
        f"  to the service: {depts.plan.source.describe()}: embedded in the plan (" + f"{DEPTS.nbytes} B, under 64 KiB)",
        f"  to the service: {big.plan.source.describe()}: uploaded as an Arrow table (156.2 KiB)",
        "  back: the result (id, dept, floor) as Arrow",
    ]


def test_address_picks_the_connection(remote):
    flow = ei.from_arrow(PEOPLE)
    assert flow.run(engine="remote", address=remote.address).num_rows == 4
    with pytest.raises(BackendUnavailable, match="no connection to the eidos service at eidos://127.0.0.1:9 is open"):
        flow.run(engine="remote", address="eidos://127.0.0.1:9")


def test_a_value_error_on_the_service_is_the_same_class_and_message(remote):
    flow = ei.from_pydict({"s": ["12", "x"]}).select(n=col("s").cast(ei.Int64))
    with pytest.raises(ExecutionError) as ref:
        flow.run(engine="reference")
    with pytest.raises(ExecutionError) as got:
        flow.run(engine="remote")
    assert str(ref.value) in str(got.value)


def test_a_function_the_service_has_not_allowed_is_its_plan_error(remote):
    flow = ei.from_pydict({"s": ["a", None]}).select(t=ei.udf(shout, ei.String)(col("s")))
    with pytest.raises(PlanError, match="has not allowed"):
        flow.run(engine="remote")


def test_a_function_without_a_name_cannot_go_to_a_service(remote):
    flow = ei.from_pydict({"s": ["a"]}).select(t=ei.udf(lambda s: s, ei.String)(col("s")))
    lane = registry.get("remote").named()
    assert any("no importable name" in gap for gap in lane.supports(flow.plan))
    with pytest.raises(UnsupportedError, match="no importable name"):
        flow.run(engine="remote")


def test_streaming_fetches_the_result_as_batches(remote, service_handles):
    flow = on_service(remote, BIG).filter(col("x") % 2 == 0)
    before = service_handles()
    batches = list(flow.stream())
    assert sum(b.num_rows for b in batches) == 10_000
    assert service_handles() == before


def test_an_interrupted_run_is_cancelled_on_the_service(remote, monkeypatch, service_handles):
    asked: list[str] = []

    def interrupted(fragment, timeout=None):
        asked.append(fragment["id"])
        raise KeyboardInterrupt

    monkeypatch.setattr(remote, "run_subgraph", interrupted)
    monkeypatch.setattr(remote, "cancel", lambda plan_id: asked.append(("cancel", plan_id)))
    before = service_handles()
    with pytest.raises(KeyboardInterrupt):
        ei.from_arrow(BIG).run(engine="remote")
    assert asked == [asked[0], ("cancel", asked[0])]
    assert service_handles() == before   # the upload released


def test_tables_on_two_services_run_each_on_its_own(remote):
    from tests.remote.conftest import TOKEN, start_service

    other = start_service(pool_bytes=16 << 20)
    try:
        with ei.connect(other.address, token=TOKEN) as second:
            flow = on_service(remote, PEOPLE).join(on_service(second, DEPTS), on="dept")
            text = flow.explain()
            assert "2 parts pushed down to remote (remote:eidos://" in text
            assert sorted(flow.run().column("id").to_pylist()) == [1, 2, 3]
            with pytest.raises(UnsupportedError, match="sources on several eidos services .*: a plan runs on one"):
                flow.run(engine="remote")
    finally:
        other.shutdown()


def test_named_it_reads_files_here_and_databases_through_their_lane(remote, tmp_path):
    import sqlite3

    pytest.importorskip("adbc_driver_sqlite", reason="the sqlite lane needs eidos[sql]")

    import pyarrow.parquet as pq

    pq.write_table(PEOPLE, tmp_path / "people.parquet")
    with sqlite3.connect(tmp_path / "shop.db") as con:
        con.executescript("create table depts (dept text, floor integer); insert into depts values ('a', 3), ('b', 1)")
    con.close()
    people = ei.read_parquet(str(tmp_path / "people.parquet"))
    depts = ei.read_sql(f"sqlite:///{tmp_path / 'shop.db'}", table="depts")
    flow = people.join(depts, on="dept").select("id", "floor").sort("id")
    text = flow.explain(engine="remote")
    assert "part 1: sqlite" in text
    assert f"to the service: {people.plan.source.describe()}: read here, embedded in the plan" in text
    assert flow.run(engine="remote").to_pydict() == {"id": [1, 2, 3], "floor": [3, 1, 3]}
    assert ei.last_run().attempts[-1] == ("remote", "ok")


def test_a_table_whose_connection_is_closed_names_how_to_connect(service, no_connection):
    from tests.remote.conftest import TOKEN

    with ei.connect(service.address, token=TOKEN) as conn:
        flow = on_service(conn, PEOPLE).filter(col("id") > 1)
    with pytest.raises(UnsupportedError, match=r"remote: no eidos service is connected: call ei\.connect\("):
        flow.run()
    with pytest.raises(BackendUnavailable, match=r"no eidos service is connected"):
        flow.run(engine="remote")


def test_inputs_small_enough_are_embedded():
    assert execute.EMBED_BYTES == 64 << 10
    small, big = ei.from_arrow(PEOPLE).plan, ei.from_arrow(BIG).plan
    assert [m.how for m in execute.moves(small)] == ["embedded"]
    assert [m.how for m in execute.moves(big)] == ["uploaded"]


def on_service(remote, table: pa.Table) -> ei.Flow:
    from eidos.flow.read import from_remote_handle

    return from_remote_handle(remote, remote.put_table(table), schema=table.schema)
