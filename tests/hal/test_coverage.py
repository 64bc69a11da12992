"""Coverage as data: typed gaps checked against the types a plan's operations compute in, what a
plan needs collected once per plan, and lane availability looked up once per process."""

from __future__ import annotations

import gc
import importlib.util

import eidos as ei
from eidos import col, lit
from eidos.hal import coverage as C
from eidos.hal import memo, planner
from eidos.hal.lane import installed
from eidos.hal.coverage import Coverage


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
