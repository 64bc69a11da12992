"""Split plans: cut into parts (by locality, then by device), each part decided by the rules, results
handed between parts only through eidos.hal.results."""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass

import pyarrow as pa
import pytest

import eidos as ei
from eidos import col
from eidos.errors import FallbackWarning, UnsupportedError
from eidos.hal import devices, runner
from eidos.hal.coverage import Coverage
from eidos.hal.parts import DEVICE, LOCALITY
from eidos.hal.planner import decide
from eidos.hal.results import DriverResults, PartResult, Results
from eidos.ir import nodes as N
from eidos.ir.schema import Schema
from eidos.ir.sources import PartSource, Source, SqlSource
from tests.hal import test_planner
from tests.hal.test_planner import Recording

lanes = test_planner.lanes   # the planner tests' fixture: registers lanes for one test

PG = "postgresql://u:pw@h/db"
GPU_LACKS = Coverage.everything().without(nodes=["Join", "Sort"], dtypes=["String"])


def database(uri: str = PG) -> ei.Flow:
    src = SqlSource(Schema([("k", ei.Int64), ("v", ei.Int64)]), uri=uri, table="t")
    return ei.Flow(N.Scan(src)).filter(col("v") > 1).group_by("k").agg(s=col("v").sum())


def names() -> ei.Flow:
    return ei.from_pydict({"k": [1, 2], "name": ["a", "b"]})


@pytest.fixture
def gpu_machine(monkeypatch):
    fake = devices.DeviceInfo(2, 2**30, True, False, False, 1, ("NVIDIA H100",), (80 * 2**30,), "Linux", None)
    monkeypatch.setattr("eidos.hal.planner.detect_devices", lambda: fake)


def numeric_then_strings() -> ei.Flow:
    """A numeric aggregation (the GPU's part) under a join and a sort over strings (the CPU lane's)."""
    return (ei.from_pydict({"k": [1, 2, 2], "a": [1.0, 2.0, 3.0]}).filter(col("a") > 1.0)
            .group_by("k").agg(s=col("a").sum()).join(names(), on="k").sort("name"))


def numeric_over_a_join() -> ei.Flow:
    """A numeric aggregation over a join the GPU lane lacks: a GPU part with a CPU part inside it."""
    weights = ei.from_pydict({"k": [1, 2], "w": [0.5, 2.0]})
    return (ei.from_pydict({"k": [1, 2, 2], "a": [1.0, 2.0, 3.0]}).join(weights, on="k")
            .with_columns(v=col("w") * col("a")).group_by("k").agg(s=col("v").sum()).sort("k"))


def test_locality_parts_are_each_decided_by_rule_2(lanes):
    pg = lanes(Recording("pg", kind="pushdown", reads=frozenset({"postgresql"})))
    lite = lanes(Recording("lite", kind="pushdown", reads=frozenset({"sqlite"})))
    lanes(Recording("vec"))
    f = names().join(database(), on="k").join(database("sqlite:///x.db"), on="k", suffix="_l")
    d = decide(f.plan)
    assert d.rule == 2 and d.lane_name == "vec"
    assert [(p.key, p.by, p.place, p.lane) for p in d.parts] == [
        ("1", LOCALITY, "postgresql://u@h/db", pg), ("2", LOCALITY, "sqlite:///x.db", lite)]
    for part in d.parts:
        assert part.decision.rule == 2 and "the whole part runs there; only the result moves" in part.decision.reason
        assert isinstance(part.plan, N.Aggregate) and part.inputs == []
    assert ("2 parts pushed down to pg (postgresql://u@h/db), lite (sqlite:///x.db), streamed back as Arrow; "
            "vec finishes the plan (rule 5, logic type") in d.reason
    assert sorted(n.source.key for n in d.plan.walk() if isinstance(n.source if isinstance(n, N.Scan) else None,
                                                                      PartSource)) == ["1", "2"]


def test_device_parts_are_decided_by_rules_4_and_5(lanes, gpu_machine):
    vec = lanes(Recording("vec", seconds=0.1))
    gpu = lanes(Recording("gpu", kind="gpu", seconds=0.01, coverage=GPU_LACKS))
    d = decide(numeric_then_strings().plan)
    assert d.rule == 4 and d.lane is vec
    (part,) = d.parts
    assert (part.by, part.place, part.lane, part.decision.rule) == (DEVICE, "gpu", gpu, 4)
    assert part.decision.reason.startswith("a GPU (NVIDIA H100); no input to speak of (cost model: gpu 0.01 s, vec 0.1 s)")
    assert "gpu runs Aggregate [k] s=sum(a) (no input to speak of" in d.reason

    nested = decide(numeric_over_a_join().plan)
    outer, inner = nested.parts
    assert (outer.key, outer.place, outer.lane, outer.inputs) == ("2", "gpu", gpu, ["1"])
    assert (inner.key, inner.place, inner.lane, inner.decision.rule) == ("1", "cpu", vec, 5)
    assert isinstance(inner.plan, N.Join)
    assert "gpu runs Aggregate [k] s=sum(v) (over 1 part on vec)" in nested.reason


def test_a_part_that_does_not_pay_leaves_no_gap_in_the_numbers(lanes, gpu_machine):
    lanes(Recording("vec", seconds=0.1))
    lanes(Recording("gpu", kind="gpu", seconds=0.5, coverage=GPU_LACKS))
    d = decide(numeric_over_a_join().plan)
    assert d.rule == 5 and d.parts == ()
    assert any("gpu could run the numeric part Aggregate [k] s=sum(v)" in n for n in d.notes), d.notes


def test_forced_lane_finishes_and_each_part_keeps_its_own_decision(lanes):
    pg = lanes(Recording("pg", kind="pushdown", reads=frozenset({"postgresql"})))
    lanes(Recording("vec"))
    d = decide(names().join(database(), on="k").plan, engine="vec")
    assert d.lane_name == "vec" and d.rule == 2 and "(rule 1, explicit override: engine='vec')" in d.reason
    (part,) = d.parts
    assert part.lane is pg and part.decision.rule == 2


def test_explain_shows_the_part_tree_with_each_parts_lane_and_reason(lanes, gpu_machine):
    lanes(Recording("pg", kind="pushdown", reads=frozenset({"postgresql"})))
    lanes(Recording("vec", seconds=0.1))
    lanes(Recording("gpu", kind="gpu", seconds=0.01, coverage=GPU_LACKS))
    text = numeric_over_a_join().explain()
    tree = text.split("parts:\n", 1)[1].split("\nplan:", 1)[0].splitlines()
    assert tree[0] == "  finish: vec"
    assert re.fullmatch(r"    part 2: gpu   \(rule 4, hardware: a GPU \(NVIDIA H100\); no input to speak of .*\)", tree[1])
    assert re.fullmatch(r"      part 1: vec   \(rule 5, logic type: relational plan: the vector lane\)", tree[2])
    assert "Scan result of part 2\n" in text and "Scan result of part 1\n" in text
    text = names().join(database(), on="k").explain()
    assert "    part 1: pg   (rule 2, data locality: every source lives in postgresql://u@h/db" in text
    assert "pw@" not in text
    assert "parts:" not in names().explain()


@dataclass(frozen=True)
class Held(Source):
    """What the store below hands a reading lane: a name, no data."""

    slot: int = 0

    def describe(self) -> str:
        return f"held result #{self.slot}"


class DictResults(Results):
    """Results kept in a dict keyed by the handle's id, handed on as `Held` sources: the runner must
    work with any store, never reading a table out of a handle itself."""

    def __init__(self):
        self.kept: dict[int, pa.Table] = {}
        self.releases = 0

    def run(self, lane, plan, key):
        handle = PartResult(key, plan.schema)    # no rows: a store need not count them
        self.kept[id(handle)] = lane.execute(plan)
        return handle

    def source(self, result, reader):
        assert id(result) in self.kept
        return Held(result.schema, slot=id(result))

    def release(self):
        self.kept.clear()
        self.releases += 1


def test_results_are_handed_on_only_through_the_store(lanes, gpu_machine):
    vec = lanes(Recording("vec", seconds=0.1))
    gpu = lanes(Recording("gpu", kind="gpu", seconds=0.01, coverage=GPU_LACKS))
    store = DictResults()
    plan = numeric_over_a_join().plan
    runner.run(plan, results=store)
    assert store.kept == {} and store.releases == 1
    (gpu_plan,) = gpu.ran                   # the GPU part read the CPU part's result as the store gave it
    assert [type(n.source) for n in gpu_plan.walk() if isinstance(n, N.Scan)] == [Held]
    cpu_part, finish = vec.ran
    assert isinstance(cpu_part, N.Join) and [type(n.source) for n in finish.walk() if isinstance(n, N.Scan)] == [Held]
    attempts = ei.last_run().attempts
    assert attempts == [("vec", "part: handed on"), ("gpu", "part: handed on"), ("vec", "ok")]

    batches = list(runner.stream(plan, results=store))
    assert store.releases == 2 and store.kept == {} and sum(b.num_rows for b in batches) == 0


def test_driver_results_keep_tables_and_count_rows(lanes):
    lanes(Recording("pg", kind="pushdown", reads=frozenset({"postgresql"})))
    vec = lanes(Recording("vec"))
    names().join(database(), on="k").run()
    (finish,) = vec.ran
    assert [type(n.source).__name__ for n in finish.walk() if isinstance(n, N.Scan)] == ["ArrowSource"] * 2
    assert dict(ei.last_run().attempts)["pg"] == "pushed-down part: 0 rows fetched"
    with pytest.raises(ei.errors.BackendError, match="part 1's result .* is not one kept in the driver"):
        DriverResults().source(PartResult("1", Schema([("k", ei.Int64)])), vec)


def test_a_part_its_lane_cannot_run_falls_back_to_the_finishing_lane(lanes, gpu_machine):
    vec = lanes(Recording("vec", seconds=0.1))
    lanes(Recording("gpu", kind="gpu", seconds=0.01, coverage=GPU_LACKS, unsupported=True))
    f = numeric_then_strings()
    with pytest.warns(FallbackWarning, match="lane 'gpu' cannot run its part of this plan .*; vec runs it"):
        f.run()
    assert len(vec.ran) == 2   # the GPU's part, then the rest
    attempts = ei.last_run().attempts
    assert attempts[0] == ("gpu", "part unsupported: gpu cannot do this today")
    assert attempts[1:] == [("vec", "part: 0 rows handed on"), ("vec", "ok")]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(UnsupportedError, match="gpu cannot do this today"):
            f.run(strict=True)


def test_a_database_part_the_finishing_lane_cannot_read_is_not_moved(lanes):
    lanes(Recording("pg", kind="pushdown", reads=frozenset({"postgresql"}), unsupported=True))
    vec = lanes(Recording("vec"))
    with pytest.raises(UnsupportedError, match="pg cannot do this today"):
        names().join(database(), on="k").run()
    assert vec.ran == []
