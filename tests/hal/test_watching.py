"""Watching long work: Flow.profile() and explain(analyze=True), the logger "eidos", the SQL in explain,
and the progress bar."""

from __future__ import annotations

import io
import logging
import time

import pyarrow as pa
import pytest

import eidos as ei
from eidos import col
from eidos.errors import PlanError
from eidos.hal import progress
from tests.lanes.conftest import LANES
from tests.lanes.helpers import LOADERS, lane_or_skip, sqlite_table

DATA = pa.table({"k": ["a", "b", "a", "c"], "x": [1, 2, 3, 4]})


def _flow(source: ei.Flow | None = None):
    source = ei.from_arrow(DATA) if source is None else source
    return source.filter(col("x") > 1).group_by("k").agg(s=col("x").sum()).sort("k")


@pytest.mark.parametrize("lane", LANES)
def test_a_profile_holds_the_result_each_step_and_the_estimates(lane, tmp_path):
    flow = _flow()
    there = _flow(LOADERS[lane](tmp_path, "t", DATA)) if lane in LOADERS else flow
    gaps = lane_or_skip(lane).supports(there.plan)
    if gaps:
        pytest.skip(f"lane {lane!r} lacks {', '.join(gaps)}")
    p = there.profile(engine=lane)
    assert p.result.equals(flow.run(engine="reference"))
    ((what, ran_on, rows, seconds),) = p.steps
    assert (what, ran_on, rows) == ("plan", lane, 3) and seconds > 0
    estimated = p.estimated_plan().splitlines()
    assert estimated[0].startswith("  Sort") and all(" rows" in line.split("~")[-1] for line in estimated)
    text = str(p)
    assert text.startswith(f"ran on {lane} in ") and "plan (estimated rows):" in text
    assert ("HASH_GROUP_BY" in text and "FILTER" in text) if lane == "duckdb" else \
        f"{lane} keeps no profile of its own" in text
    assert "eidos profile" in p._repr_html_()


def test_a_split_plans_profile_has_a_step_per_part(tmp_path):
    source = sqlite_table(tmp_path, "create table t (k text, v integer); insert into t values ('a', 1), ('b', 2)")
    local = ei.from_pydict({"k": ["a", "b"], "w": [10, 20]})
    flow = source.filter(col("v") > 0).join(local, on="k").sort("k")
    p = flow.profile()
    assert [step[0] for step in p.steps][-1] == "plan" and any(w.startswith("part ") for w, *_ in p.steps)
    assert p.result.to_pydict() == {"k": ["a", "b"], "v": [1, 2], "w": [10, 20]}


def test_explain_analyze_runs_and_adds_the_profile():
    flow = _flow()
    plain = flow.explain(engine="duckdb")
    analyzed = flow.explain(engine="duckdb", analyze=True)
    assert analyzed.startswith(plain) and "\nprofile:\nran on duckdb in " in analyzed
    assert "profile:" not in plain


def test_explain_shows_the_sql_a_database_lane_sends():
    lane_or_skip("duckdb")
    text = _flow().explain(engine="duckdb")
    sql = text[text.index("sql (duckdb):"):]
    assert "SELECT" in sql and "GROUP BY" in sql and "ORDER BY" in sql


def test_the_eidos_logger_records_decisions_handovers_and_sql(caplog):
    lane_or_skip("duckdb")
    with caplog.at_level(logging.DEBUG, logger="eidos"):
        _flow().run(engine="duckdb")
    records = [(r.name, r.levelname, r.getMessage()) for r in caplog.records if r.name.startswith("eidos")]
    assert ("eidos.hal.runner", "INFO", "lane duckdb chosen (rule 1: engine='duckdb')") in records
    assert any(name == "eidos.lanes.sql.execute" and level == "DEBUG" and message.startswith("duckdb runs: ")
               and "GROUP BY" in message for name, level, message in records)
    assert any(message.startswith("ran on duckdb in ") for _, _, message in records)


class _Console:
    """A console as rich draws on a terminal, kept in memory."""

    def __init__(self, terminal: bool):
        from rich.console import Console

        self.out = io.StringIO()
        self.console = Console(file=self.out, force_terminal=terminal, force_jupyter=False, width=100)


def _slow(seconds: float):
    def wait(batch: pa.RecordBatch) -> pa.RecordBatch:
        time.sleep(seconds)
        return batch

    return ei.from_pydict({"a": [1, 2]}).map_batches(wait, schema={"a": ei.Int64})


def test_a_long_run_shows_a_bar_on_a_terminal_and_nothing_in_a_pipe(monkeypatch):
    monkeypatch.setattr(progress, "DELAY_S", 0.05)
    monkeypatch.delenv("EIDOS_PROGRESS", raising=False)
    for terminal, shown in ((True, True), (False, False)):
        screen = _Console(terminal)
        monkeypatch.setattr(progress, "console", lambda screen=screen: screen.console)
        assert _slow(0.5).run(engine="reference").num_rows == 2
        assert ("eidos: running on reference" in screen.out.getvalue()) is shown
    screen = _Console(True)
    monkeypatch.setattr(progress, "console", lambda: screen.console)
    _slow(0.3).run(engine="reference", progress=False)
    monkeypatch.setenv("EIDOS_PROGRESS", "0")
    _slow(0.3).run(engine="reference")
    assert screen.out.getvalue() == ""


def test_a_short_run_shows_nothing_and_a_bad_setting_is_named(monkeypatch):
    screen = _Console(True)
    monkeypatch.setattr(progress, "console", lambda: screen.console)
    ei.from_pydict({"a": [1]}).run(engine="reference", progress=True)
    assert screen.out.getvalue() == ""
    monkeypatch.setenv("EIDOS_PROGRESS", "sometimes")
    with pytest.raises(PlanError, match="EIDOS_PROGRESS is 1 .* or 0 .*, not 'sometimes'"):
        ei.from_pydict({"a": [1]}).run(engine="reference")
