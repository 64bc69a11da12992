"""Coverage as data: typed gaps checked against the types a plan's operations compute in, what a
plan needs collected once per plan, lane availability looked up once per process, every lane's
table held to what its translator has a rule for, and docs/coverage.md kept in step."""

from __future__ import annotations

import gc
import importlib.util
from pathlib import Path

import pytest

import eidos as ei
from eidos import col, lit
from eidos.hal import coverage as C
from eidos.hal import memo, planner, registry
from eidos.hal.coverage import Coverage
from eidos.hal.lane import installed
from eidos.ir import dtypes as T
from eidos.ir import functions as F
from eidos.ir import nodes as N
from eidos.testing.compare import assert_tables_equal


def _flow():
    return ei.from_pydict({"x": [1.5, 2.5], "d": [1, 2], "s": ["1", "2"]})


def test_typed_gaps_name_the_operation_and_its_types():
    cov = Coverage.everything().without(typed=("mod Float*", "cast String->*"))
    plan = _flow().select(m=col("x") % 2.0, i=col("d") % 2, c=col("s").cast(ei.Int64)).plan
    assert cov.gaps(plan) == ["mod Float64", "cast String->Int64"]
    assert Coverage.everything().gaps(plan) == []


def test_typed_names_use_adapted_and_common_types():
    schema = _flow().plan.schema
    assert C.typed_operations((col("d") + 1).node, schema) == ["add Int64"]
    assert C.typed_operations((col("d") + col("x")).node, schema) == ["add Float64"]
    assert C.typed_operations(col("x").sum().node, schema) == ["sum Float64"]
    assert C.typed_operations(lit("a").node, schema) == []


def test_without_keeps_earlier_typed_gaps():
    cov = Coverage.everything().without(typed=("pow *",)).without(typed=("mod Float*", "pow *"))
    assert cov.typed_gaps == ("pow *", "mod Float*")


def test_what_a_plan_needs_is_collected_once(monkeypatch):
    calls = []
    real = C._collect
    monkeypatch.setattr(C, "_collect", lambda plan: calls.append(plan) or real(plan))
    flow = _flow().filter(col("x") > 1).select(y=col("x") * 2)
    for _ in range(3):
        planner.decide(flow.plan)
    assert len(calls) == 1  # every lane's check and every run read the one collection


def test_memo_entries_go_with_their_plan():
    plan = _flow().select(y=col("x") + 1).plan
    assert memo.once(plan, "test", lambda: 41) == 41
    assert memo.once(plan, "test", lambda: 0) == 41
    key = id(plan)
    assert key in memo._MEMO
    del plan
    gc.collect()
    assert key not in memo._MEMO


def test_availability_is_looked_up_once(monkeypatch, request):
    installed.cache_clear()
    request.addfinalizer(installed.cache_clear)
    looked = []
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: looked.append(name) or real(name, *a))
    flow = _flow().select(y=col("x") + 1)
    planner.decide(flow.plan)
    first = len(looked)
    planner.decide(flow.plan)
    planner.decide(flow.select("y").plan)
    assert first > 0 and len(looked) == first
    assert len(set(looked)) == len(looked)


# ---------------------------------------------------------------- tables held to the translators

def _translated(lane: str) -> Coverage:
    """What `lane`'s translator has a rule for (its `translated()`), skipping where its engine is absent."""
    if lane == "polars":
        pytest.importorskip("polars")
        from eidos.lanes.polars.translate import translated

        return translated()
    if lane in ("duckdb", "postgresql", "sqlite"):
        pytest.importorskip("sqlglot")
        from eidos.lanes.sql.execute import dialect
        from eidos.lanes.sql.translate import translated

        return translated(dialect(lane))
    if lane == "triton":
        from eidos.lanes.triton.translate import translated

        return translated()
    # the reference lane is the IR's definition: every function is ir.evaluate's
    from eidos.lanes.reference import translate as R

    return Coverage(C.dispatched(R.translate, N.Node), frozenset(F.SCALAR + F.AGGREGATES + F.WINDOWS) | C.forms(R._expr),
                    frozenset(T.KINDS))


# The triton lane computes powers and aggregations in execute.py, around the programs its translator
# builds: test_triton_computes_what_its_translator_leaves_to_execute runs each.
AROUND_TRANSLATION = {"triton": {f"function {fn}" for fn in ("pow",) + F.AGGREGATES}}


@pytest.mark.parametrize("lane", ["reference", "polars", "duckdb", "sqlite", "postgresql", "triton"])
def test_every_declared_name_has_a_translation(lane):
    declared = registry.get(lane).coverage
    missing = [m for m in declared.untranslated(_translated(lane)) if m not in AROUND_TRANSLATION.get(lane, ())]
    assert missing == [], f"the {lane} lane's coverage table declares what its translator has no rule for"


def test_a_declared_name_without_a_rule_is_named():
    declared = Coverage.everything()
    rules = declared.without(nodes=("Join",), functions=("str_len",), dtypes=("Date",))
    assert declared.untranslated(rules) == ["node Join", "function str_len", "dtype Date"]


def test_triton_computes_what_its_translator_leaves_to_execute():
    pytest.importorskip("torch")
    from eidos.lanes.triton.execute import execute
    from eidos.lanes.triton.target import Device

    left = {m.split(" ", 1)[1] for m in AROUND_TRANSLATION["triton"]} & registry.get("triton").coverage.functions
    aggs = {fn: ei.count() if fn == "count_rows" else getattr(col("x"), fn)() for fn in left if fn in F.AGGREGATES}
    flow = ei.from_pydict({"k": [1, 1, 2, 2], "x": [1.5, 2.0, -3.0, None]}).with_columns(
        p=col("x") ** 2).group_by("k").agg(**aggs, p=col("p").sum())
    assert set(aggs) | {"pow"} == left
    got = execute(flow.plan, Device("reference"))
    assert_tables_equal(got, flow.run(engine="reference"), ordered=False)


def test_docs_coverage_is_up_to_date():
    path = Path(__file__).resolve().parents[2] / "docs" / "coverage.md"
    assert path.read_text(encoding="utf-8") == C.markdown(), \
        f"docs/coverage.md differs from the lanes' coverage tables; regenerate it: {C.REGENERATE}"


def test_the_matrix_marks_what_each_lane_lacks():
    text = C.markdown()
    lanes = [lane.name for lane in C.builtin_lanes()]
    row = next(line for line in text.splitlines() if line.startswith("| str_to_upper |"))
    marks = dict(zip(lanes, [c.strip() for c in row.strip("|").split("|")][2:]))
    assert marks["polars"] == "✓" and marks["duckdb"] == "" and marks["triton"] == ""
