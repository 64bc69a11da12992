"""Out of core: an input over the memory budget runs on a lane that keeps memory within it, or fails
before running with a ResourceError that names the budget that would do.

Peak memory is measured in a child process (`resource.getrusage(RUSAGE_CHILDREN).ru_maxrss` after it
ends), against the budget plus an allowance for the interpreter and libraries: the peak of a child that
imports eidos, duckdb and pyarrow and runs a one-row plan on the duckdb lane (so sqlglot and DuckDB's
database are loaded, and nothing is held), measured in the same session (about 120 MiB here).

The slow tests (`pytest -m slow tests/lanes/test_out_of_core.py`) run each operation kind over a
parquet file of about 180 MiB (made once per session) at the smallest budget the lane names.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

import eidos as ei
from eidos import col
from eidos.errors import ResourceError
from eidos.hal.planner import decide
from eidos.ir import nodes as N
from eidos.testing.compare import assert_tables_equal

pytest.importorskip("duckdb")

SRC = str(Path(ei.__file__).resolve().parents[1])
MiB = 2**20


def looks(flow: ei.Flow, nbytes: int) -> ei.Flow:
    """`flow` (a parquet scan) as if its file held `nbytes` bytes: the planner goes by the estimate."""
    return ei.Flow(N.Scan(replace(flow.plan.source, nbytes=nbytes)))


@pytest.fixture
def flow(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"k": [i % 7 for i in range(5000)], "v": [float(i) for i in range(5000)]}),
                   tmp_path / "data.parquet")
    return looks(ei.read_parquet(tmp_path / "data.parquet"), 16 * MiB).group_by("k").agg(s=col("k").sum(),
                                                                                          n=ei.count())


@pytest.fixture
def tiny_floors(monkeypatch):
    """The lane's rule with floors small enough for a 5,000-row input, so that the run itself is tested
    (the settings reach DuckDB, the answer is right) where the real floors would ask for 80 MiB."""
    from eidos.lanes.sql import memory

    monkeypatch.setattr(memory, "FLOORS", {k: (0.001, 0.001, 0, 0) for k in memory.FLOORS})
    monkeypatch.setattr(memory, "OVERHEAD", 0)
    monkeypatch.setattr(memory, "SLOPE", 1.0)


def test_over_budget_runs_on_duckdb_within_the_budget(flow, monkeypatch, tiny_floors):
    monkeypatch.setenv("EIDOS_MEMORY_BUDGET", "8MiB")
    d = decide(flow.plan)
    assert d.rule == 3 and d.lane.name == "duckdb"
    assert d.lane.budget == 8 * MiB and d.lane.spill_dir
    assert "exceeds the memory budget 8.0 MiB" in d.reason and "within the budget" in d.reason
    result = flow.run()
    assert ei.last_run().lane == "duckdb"
    assert_tables_equal(result, flow.run(engine="reference"), ordered=False)


def test_below_what_the_lane_needs_is_a_resource_error_in_eidos_terms(flow, monkeypatch):
    monkeypatch.setenv("EIDOS_MEMORY_BUDGET", "1KiB")
    with pytest.raises(ResourceError) as e:
        flow.run()
    text = str(e.value)
    assert text.startswith("EIDOS_MEMORY_BUDGET=1KiB is below what the duckdb lane needs for a group-by over")
    assert re.search(r"set EIDOS_MEMORY_BUDGET to at least \d+MiB", text)
    assert "SET threads" not in text and "memory_limit" not in text
    assert ei.last_run().lane is None


def test_duckdbs_out_of_memory_and_full_disk_are_resource_errors_in_eidos_terms():
    from eidos.lanes.sql.execute import engine_error

    advice = "\n\nPossible solutions:\n* Reducing the number of threads (SET threads=X)"
    memory = engine_error("duckdb", OSError("Out of Memory Error: could not allocate block (30.4 MiB/30.5 MiB used)"
                                            + advice), [], "running the plan over")
    disk = engine_error("duckdb", OSError("Out of Memory Error: failed to offload data block of size 128.0 KiB (1.0 "
                                          "MiB/1.0 MiB used).\nThis limit was set by the 'max_temp_directory_size' "
                                          "setting."), [], "running the plan over")
    assert isinstance(memory, ResourceError) and isinstance(disk, ResourceError)
    assert "SET threads" not in str(memory) and "EIDOS_MEMORY_BUDGET" in str(memory)
    assert "max_temp_directory_size" not in str(disk) and "point TMPDIR at one with more room" in str(disk)


def test_the_error_names_each_kind_and_grows_with_the_input():
    from eidos.lanes.sql.memory import kinds, needs, settings

    t = ei.from_pydict({"k": [1], "v": [1.0]})
    joined = t.join(t, on="k").sort("v").distinct()
    assert kinds(joined.plan) == ["distinct", "sort", "join"]
    assert kinds(t.filter(col("v") > 0).plan) == ["scan"]
    assert kinds(t.agg(n=col("k").n_unique()).plan) == ["group-by"]
    assert kinds(t.agg(n=col("k").sum()).plan) == ["scan"]     # one running total, no hash table
    with pytest.raises(ResourceError, match=r"for a distinct, a sort and a join over 173\.0 MiB of input"):
        settings(joined.plan, 64 * MiB, 2, 173 * MiB, "EIDOS_MEMORY_BUDGET=64MiB")
    sort = t.sort("v").plan

    def least(size):
        with pytest.raises(ResourceError) as e:
            settings(sort, 1, 2, size, "b")
        return int(re.search(r"at least (\d+)MiB", str(e.value)).group(1))

    assert least(1 * MiB) < least(1024 * MiB)
    # at the budget it names, one thread fits; twice that, more threads
    at = settings(sort, least(173 * MiB) * MiB, 8, 173 * MiB, "b")
    assert at["threads"] == 1
    assert needs(int(at["memory_limit"].removesuffix("KiB")) * 1024) <= least(173 * MiB) * MiB
    assert settings(sort, 2 * least(173 * MiB) * MiB, 8, 173 * MiB, "b")["threads"] > 1


def test_out_of_core_settings_stay_on_the_runs_own_connection(flow, monkeypatch, tiny_floors):
    from eidos.lanes.sql.duckdb import _cursor

    def current():
        return _cursor().sql("SELECT current_setting('memory_limit'), current_setting('threads'), "
                             "current_setting('temp_directory')").fetchall()

    flow.run(engine="duckdb")
    before = current()
    monkeypatch.setenv("EIDOS_MEMORY_BUDGET", "8MiB")
    flow.run()
    assert ei.last_run().lane == "duckdb" and ei.last_run().decision.rule == 3
    assert current() == before


def test_within_budget_is_not_out_of_core(flow, monkeypatch):
    monkeypatch.setenv("EIDOS_MEMORY_BUDGET", "1GiB")
    assert decide(flow.plan).rule != 3   # rule 5 here; rule 4 (the GPU lane) on a machine with a GPU


def test_duckdb_is_preferred_for_its_memory_limit_and_leaves_no_spill_folder(flow, monkeypatch, tiny_floors):
    import glob
    import tempfile

    monkeypatch.setenv("EIDOS_MEMORY_BUDGET", "8MiB")
    d = decide(flow.plan)
    assert d.lane.name == "duckdb" and d.lane.memory_limited
    assert "a hard memory limit and as many threads as fit under it" in d.reason
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


# ---------------------------------------------------------------- streaming

def test_duckdb_stream_yields_batches_before_the_result_exists():
    """The last row overflows: a lane that built the whole result first would raise before its first
    batch; a streaming one hands over batches, then raises when DuckDB reaches that row."""
    import numpy as np
    import pyarrow as pa

    from eidos.lanes.sql import DuckDBLane

    values = np.zeros(4_000_000, dtype=np.int8)
    values[-1] = 127
    flow = ei.from_arrow(pa.table({"a": values})).select(b=col("a") + 1)
    batches = DuckDBLane().execute_stream(flow.plan.optimized)
    first = next(batches)
    assert first.num_rows and first.schema == flow.schema.to_arrow()
    seen = first.num_rows
    with pytest.raises(ei.errors.ExecutionError, match="Overflow"):
        for batch in batches:
            seen += batch.num_rows
    assert 0 < seen < len(values)


def test_duckdb_stream_of_an_empty_result_is_one_empty_batch():
    batches = list(ei.from_pydict({"a": [1, 2]}).filter(col("a") > 5).stream(engine="duckdb"))
    assert [b.num_rows for b in batches] == [0] and batches[0].schema.names == ["a"]


def test_no_connection_of_the_lane_draws_a_progress_bar(tmp_path):
    """DuckDB draws one on stdout for a query over two seconds, into the output of `eidos run`."""
    from eidos.lanes.sql.duckdb import Session, _cursor
    from eidos.lanes.sql.execute import prepare

    query = prepare("duckdb", ei.from_pydict({"a": [1]}).plan)
    sessions = [Session(query), Session(query, private=True),
                Session(query, {"memory_limit": "64MiB", "temp_directory": str(tmp_path)})]
    try:
        for con in [_cursor()] + [s.con for s in sessions]:
            assert con.sql("SELECT current_setting('enable_progress_bar')").fetchall() == [(False,)]
    finally:
        for session in sessions:
            session.close()


def test_a_run_between_a_streams_batches_does_not_end_it():
    t = ei.from_pydict({"a": list(range(300_000))})
    batches = t.stream(engine="duckdb")
    rows = next(batches).num_rows
    assert t.filter(col("a") < 3).run(engine="duckdb").num_rows == 3
    assert rows + sum(b.num_rows for b in batches) == 300_000


# ---------------------------------------------------------------- peak memory, in a child process

CHILD = r"""
import json, resource, sys
import eidos as ei
from eidos import col
path, op, out, looks = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
f = ei.read_parquet(path)
if looks:   # as if the file were this large (bytes): the planner goes by the estimate
    from dataclasses import replace
    from eidos.ir.nodes import Scan
    f = ei.Flow(Scan(replace(f.plan.source, nbytes=looks)))
if op == "idle":
    flows = {"idle": ei.from_pydict({"a": [1]})}
else:
    keys = ei.read_parquet(path.replace(".parquet", "-keys.parquet"))
    flows = {"group-by": f.group_by("k").agg(s=col("k").sum(), n=ei.count()), "sort": f.sort("v"),
             "distinct": f.select("k", "s").distinct(), "join": f.join(keys, on="k")}
flow = flows[op]
rows = 0
try:
    for batch in flow.stream(None if op != "idle" else "duckdb"):
        rows += batch.num_rows
    error = None
except ei.errors.EidosError as e:
    error = f"{type(e).__name__}: {e}"
record = ei.last_run()
json.dump({"rows": rows, "error": error, "lane": record.lane, "rule": record.decision.rule}, open(out, "w"))
"""


def child(path, op: str, budget: str | None, tmp_path, looks: int = 0) -> dict:
    """Run `op` over `path` in a fresh process; its result, and its peak RSS in bytes."""
    import os

    env = {k: v for k, v in os.environ.items() if k != "EIDOS_MEMORY_BUDGET"}
    env["PYTHONPATH"] = SRC + os.pathsep + env.get("PYTHONPATH", "")
    if budget:
        env["EIDOS_MEMORY_BUDGET"] = budget
    out = tmp_path / f"{op}.json"
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    # A process's ru_maxrss starts at the peak of the one it was forked from (Linux keeps it across exec),
    # so the run is the child of a small wrapper, not of pytest, and the wrapper reports RUSAGE_CHILDREN
    wrapper = ("import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True); "
               "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    done = subprocess.run([sys.executable, "-c", wrapper, sys.executable, str(script), str(path), op, str(out),
                           str(looks)], env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(out.read_text())
    result["peak"] = int(done.stdout.split()[-1]) * 1024   # Linux reports KiB
    return result


@pytest.fixture(scope="session")
def allowance(tmp_path_factory) -> int:
    """The interpreter and libraries: the peak RSS of a child that ran a one-row plan on the duckdb lane."""
    tmp = tmp_path_factory.mktemp("idle")
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"a": [1]}), tmp / "one.parquet")
    return child(tmp / "one.parquet", "idle", None, tmp)["peak"]


def make(path: Path, rows: int) -> tuple[int, int]:
    """A parquet of `rows` rows (k: about 4 rows a key, v: a float, s: a short string) and a table of its
    keys; returns the number of distinct k and of distinct (k, s)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    rng = np.random.default_rng(7)
    k = rng.integers(0, rows // 4, rows)
    names = pa.array([f"name-{i:06d}" for i in range(100_000)])
    table = pa.table({"k": k, "v": rng.random(rows), "s": names.take(pa.array(rng.integers(0, 100_000, rows)))})
    pq.write_table(table, path, row_group_size=500_000)
    keys = pc.unique(table.column("k"))
    pq.write_table(pa.table({"k": keys, "w": pa.array(np.arange(len(keys), dtype=np.float64))}),
                   str(path).replace(".parquet", "-keys.parquet"))
    pairs = table.select(["k", "s"]).group_by(["k", "s"]).aggregate([]).num_rows
    return len(keys), pairs


def least_budget(path: Path, op: str, tmp_path, looks: int = 0) -> int:
    """The smallest budget (MiB) the lane names for `op` over `path`, from its ResourceError."""
    error = child(path, op, "1MiB", tmp_path, looks)["error"]
    assert error.startswith("ResourceError: EIDOS_MEMORY_BUDGET=1MiB is below"), error
    return int(re.search(r"at least (\d+)MiB", error).group(1))


def check_within_budget(path, op, expected_rows, allowance, tmp_path):
    budget = least_budget(path, op, tmp_path)
    got = child(path, op, f"{budget}MiB", tmp_path)
    assert got["error"] is None and got["rule"] == 3 and got["lane"] == "duckdb"
    assert got["rows"] == expected_rows
    assert got["peak"] <= allowance + budget * MiB, (op, got["peak"] / MiB, allowance / MiB, budget)
    below = child(path, op, f"{budget - 1}MiB", tmp_path)
    assert below["error"].startswith("ResourceError") and f"at least {budget}MiB" in below["error"]


@pytest.fixture(scope="session")
def small(made_once):
    return made_once("small.parquet", lambda path: make(path, 200_000))


@pytest.mark.parametrize("op", ["group-by", "sort"])
def test_the_smallest_budget_named_keeps_peak_memory_within_it(op, small, allowance, tmp_path):
    """A 6 MiB input, made to look like 1 GiB so that rule 3 takes it at the smallest budget the lane
    names (the floors do not shrink with the input; the slow test below runs a real 180 MiB one)."""
    path, (groups, _) = small
    budget = least_budget(path, op, tmp_path, looks=2**30)
    got = child(path, op, f"{budget}MiB", tmp_path, looks=2**30)
    assert got["error"] is None and got["rule"] == 3 and got["lane"] == "duckdb", got
    assert got["rows"] == (groups if op == "group-by" else 200_000)
    assert got["peak"] <= allowance + budget * MiB, (got["peak"] / MiB, allowance / MiB, budget)


@pytest.fixture(scope="session")
def large(made_once):
    return made_once("large.parquet", lambda path: make(path, 6_000_000))


@pytest.mark.slow
@pytest.mark.parametrize("op", ["group-by", "sort", "distinct", "join"])
def test_each_kind_over_180_mib_at_64_mib_says_what_budget_and_runs_within_it(op, large, allowance, tmp_path):
    path, (groups, pairs) = large
    at_64 = child(path, op, "64MiB", tmp_path)
    assert at_64["error"].startswith("ResourceError: EIDOS_MEMORY_BUDGET=64MiB is below what the duckdb lane needs")
    check_within_budget(path, op, {"group-by": groups, "sort": 6_000_000, "distinct": pairs, "join": 6_000_000}[op],
                        allowance, tmp_path)


def test_exact_float_sums_are_a_gap_of_the_lane_within_a_budget():
    """The duckdb lane sums floats exactly by gathering each group's values (list()), which DuckDB cannot spill:
    within a budget it declares them a gap, so such a plan is not taken there (integer sums stay)."""
    from eidos.lanes.sql import DuckDBLane

    lane = DuckDBLane().out_of_core(64 * MiB)
    t = ei.from_pydict({"k": [1, 2], "v": [0.5, 1.5]})
    assert lane.supports(t.group_by("k").agg(s=col("v").sum(), m=col("v").mean()).plan) == \
        ["sum Float64", "mean Float64"]
    assert lane.supports(t.group_by("k").agg(s=col("k").sum(), n=ei.count()).plan) == []
    assert DuckDBLane().supports(t.group_by("k").agg(s=col("v").sum()).plan) == []
