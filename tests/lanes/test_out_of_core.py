"""Out of core: an input over the memory budget runs on a lane that keeps memory bounded."""

from __future__ import annotations

import pytest

import eidos as ei
from eidos import col
from eidos.hal.planner import decide
from eidos.testing.compare import assert_tables_equal

pytest.importorskip("duckdb")


@pytest.fixture
def flow(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"k": [i % 7 for i in range(5000)], "v": [float(i) for i in range(5000)]}),
                   tmp_path / "data.parquet")
    return ei.read_parquet(tmp_path / "data.parquet").group_by("k").agg(s=col("v").sum(), n=ei.count())


def test_over_budget_runs_on_duckdb_with_a_memory_limit(flow, monkeypatch):
    monkeypatch.setenv("EIDOS_MEMORY_BUDGET", "1KiB")
    d = decide(flow.plan)
    assert d.rule == 3 and d.lane.name == "duckdb"
    assert d.lane.memory_limit == 32 * 2**20 and d.lane.spill_dir
    assert "exceeds the memory budget 1.0 KiB" in d.reason
    result = flow.run()
    assert ei.last_run().lane == "duckdb"
    assert_tables_equal(result, flow.run(engine="reference"), ordered=False)


def test_within_budget_is_not_out_of_core(flow, monkeypatch):
    monkeypatch.setenv("EIDOS_MEMORY_BUDGET", "1GiB")
    assert decide(flow.plan).rule != 3   # rule 5 here; rule 4 (the GPU lane) on a machine with a GPU


def test_duckdb_is_preferred_for_its_memory_limit_and_leaves_no_spill_folder(flow, monkeypatch):
    import glob
    import tempfile

    monkeypatch.setenv("EIDOS_MEMORY_BUDGET", "1KiB")
    d = decide(flow.plan)
    assert d.lane.name == "duckdb" and d.lane.memory_limited
    assert "hard memory limit of 32 MiB" in d.reason
    why = dict(d.rejected)["polars"]
    assert "streaming engine" in why and "no memory limit" in why
    before = set(glob.glob(f"{tempfile.gettempdir()}/eidos-duckdb-spill-*"))
    flow.run()
    assert set(glob.glob(f"{tempfile.gettempdir()}/eidos-duckdb-spill-*")) == before


def test_polars_streaming_only_where_duckdb_cannot_run_it_and_explain_says_so(flow, monkeypatch):
    monkeypatch.setenv("EIDOS_MEMORY_BUDGET", "1KiB")
    # Full Unicode case mapping: DuckDB's lower() differs from Python's, so the duckdb lane lacks it.
    lowered = flow.with_columns(name=col("k").cast(ei.String).str.to_lower())
    d = decide(lowered.plan)
    assert d.rule == 3 and d.lane.name == "polars" and d.lane.streaming and not d.lane.memory_limited
    assert "no memory limit: peak memory may exceed the budget" in d.reason
    assert "no memory limit" in lowered.explain()
    assert_tables_equal(lowered.run(), lowered.run(engine="reference"), ordered=False)
