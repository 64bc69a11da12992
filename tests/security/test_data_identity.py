"""In-memory data is known by what it holds, never by a name a plan file could carry: a plan cannot
make eidos hand it another plan's data, and every cache keyed by plans keeps to that."""

from __future__ import annotations

import json
import math

import pyarrow as pa
import pytest

import eidos as ei
from eidos import col
from eidos.errors import PlanError
from eidos.hal.lane import installed
from eidos.ir import nodes as N
from eidos.ir.sources import ArrowSource

LANES = ["reference", "polars", "duckdb"]


def _source(flow: ei.Flow) -> ArrowSource:
    return next(n.source for n in flow.plan.walk() if isinstance(n, N.Scan))


def _arrow_sources(doc):
    if isinstance(doc, dict):
        if doc.get("source") == "arrow":
            yield doc
        for v in doc.values():
            yield from _arrow_sources(v)
    elif isinstance(doc, list):
        for v in doc:
            yield from _arrow_sources(v)


def _lane(name: str) -> str:
    if name != "reference" and not installed(name):
        pytest.skip(f"{name} is not installed")
    return name


@pytest.mark.parametrize("lane", LANES)
def test_a_plan_file_naming_another_plans_data_gets_its_own(lane):
    _lane(lane)
    mine = ei.from_pydict({"a": [1, 2, 3]})
    q = mine.agg(s=col("a").sum())
    assert q.run(engine=lane).to_pydict() == {"s": [6]}   # the lane has seen (and may keep) this plan
    label = _source(mine).label
    assert label in q.explain()
    doc = json.loads(ei.from_pydict({"a": [100, 200, 300]}).agg(s=col("a").sum()).to_json())
    for s in _arrow_sources(doc):   # a forged file naming the first plan's data as older files did
        s["token"] = label
    forged = ei.Flow.from_json(json.dumps(doc))
    assert forged.run(engine=lane).to_pydict() == {"s": [600]}
    assert _source(forged) != _source(mine)
    assert label not in forged.explain()


def test_plan_json_holds_no_name_for_its_data():
    flow = ei.from_pydict({"a": [1]})
    text = flow.to_json()
    assert _source(flow).label not in text
    assert [sorted(s) for s in _arrow_sources(json.loads(text))] == [["ipc", "schema", "source"]]


def test_identity_is_the_data():
    t = pa.table({"a": [1, 2, 3]})
    one, same_object = ei.from_arrow(t), ei.from_arrow(t)
    assert one.plan == same_object.plan
    assert ei.from_pydict({"a": [1, 2, 3]}).plan == one.plan          # equal content, another table
    assert ei.from_arrow(t.slice(1)).plan == ei.from_pydict({"a": [2, 3]}).plan
    back = ei.Flow.from_json(one.to_json())
    assert back.plan == one.plan and hash(back.plan) == hash(one.plan)
    assert _source(back).label != _source(one).label                   # a name of its own
    for other in ({"a": [1, 2, 4]}, {"a": [1, 2]}, {"b": [1, 2, 3]}):
        assert ei.from_pydict(other).plan != one.plan
    assert ei.from_pydict({"a": [1, 2, None]}).plan != ei.from_pydict({"a": [1, 2, 0]}).plan


def test_bit_exact_floats_are_told_apart():
    # -0.0 == 0.0 as values, yet they are different data: a plan over one must not run on the other's
    pos, neg = ei.from_pydict({"x": [0.0]}), ei.from_pydict({"x": [-0.0]})
    assert pos.plan != neg.plan
    lane = "duckdb" if installed("duckdb") else "reference"
    for flow, sign in ((pos, 1.0), (neg, -1.0), (pos, 1.0)):
        (x,) = flow.filter(col("x") == 0.0).run(engine=lane).column("x").to_pylist()
        assert math.copysign(1.0, x) == sign


@pytest.mark.parametrize("lane", LANES)
def test_same_shape_different_data_each_get_their_own_answer(lane):
    _lane(lane)
    flows = [ei.from_pydict({"k": [1, 1, 2], "v": [i, i + 1, i + 2]}) for i in range(0, 30, 10)]
    plans = [f.group_by("k").agg(s=col("v").sum()).sort("k") for f in flows]
    for _ in range(2):   # the second round finds every translation kept
        for i, p in enumerate(plans):
            assert p.run(engine=lane).to_pydict() == {"k": [1, 2], "s": [20 * i + 1, 10 * i + 2]}


def test_plan_json_whose_data_does_not_match_its_schema_is_refused():
    doc = json.loads(ei.from_pydict({"a": [1, 2]}).to_json())
    other = json.loads(ei.from_pydict({"a": ["x", "y"]}).to_json())
    for s, o in zip(_arrow_sources(doc), _arrow_sources(other), strict=True):
        s["ipc"] = o["ipc"]
    with pytest.raises(PlanError, match="declared schema"):
        ei.Flow.from_json(json.dumps(doc))


def test_part_results_are_their_own_data():
    # a split plan hands each part's result on as in-memory data; two runs never share one
    t = pa.table({"a": [1, 2]})
    r1 = ArrowSource.of(t, ei.Schema([("a", ei.Int64)]), kind="part")
    r2 = ArrowSource.of(pa.table({"a": [1, 3]}), ei.Schema([("a", ei.Int64)]), kind="part")
    assert r1 != r2 and r1.label.startswith("part-") and r1.label != r2.label
