"""The planner's five rules, overrides, rejected lanes, fallback and strict mode."""

from __future__ import annotations

import re
import warnings

import pyarrow as pa
import pytest

import eidos as ei
from eidos import col
from eidos.errors import BackendUnavailable, FallbackWarning, UnsupportedError
from eidos.hal import devices, planner, registry
from eidos.hal.coverage import Coverage
from eidos.hal.lane import Availability, Backend, Estimate
from eidos.hal.planner import decide
from eidos.ir import nodes as N
from eidos.ir.schema import Schema
from eidos.ir.sources import SqlSource


class Recording(Backend):
    """A lane that answers every plan with a fixed table and records what it ran."""

    def __init__(self, name, kind="vector", *, seconds=None, available=True, unsupported=False,
                 coverage=None, reads=frozenset({"local"}), out_of_core_ok=False):
        self.name, self.kind = name, kind
        self.seconds, self.available, self.unsupported = seconds, available, unsupported
        self.coverage = coverage or Coverage.everything()
        self.reads = reads
        self.out_of_core_ok = out_of_core_ok
        self.ran: list[N.Node] = []

    def is_available(self):
        return Availability(self.available, "" if self.available else "needs the moon: pip install moon")

    def estimate(self, plan):
        return None if self.seconds is None else Estimate(self.seconds, f"{self.name} model")

    def out_of_core(self, budget_bytes):
        return self if self.out_of_core_ok else None

    def execute(self, plan):
        if self.unsupported:
            raise UnsupportedError(f"{self.name} cannot do this today")
        self.ran.append(plan)
        return pa.table({n: pa.array([], t.to_arrow()) for n, t in plan.schema.items()})


@pytest.fixture
def lanes():
    """Only the lanes a test registers (plus the entry-point lanes, made unavailable)."""
    registry._load_entry_points()
    saved = dict(registry._lanes)
    for lane in list(registry._lanes.values()):
        registry._lanes[lane.name] = Recording(lane.name, lane.kind, available=False)
    added = []

    def add(lane):
        registry.register_backend(lane.name, lane)
        added.append(lane)
        return lane

    yield add
    registry._lanes.clear()
    registry._lanes.update(saved)


@pytest.fixture
def flow():
    return ei.from_pydict({"a": [1, 2, 3], "b": ["x", "y", "z"]}).filter(col("a") > 1)


def rejected(decision):
    return dict(decision.rejected)


def test_rule1_explicit_engine_wins(lanes, flow):
    lanes(Recording("fast", seconds=0.1))
    slow = lanes(Recording("slow", seconds=9.0))
    d = decide(flow.plan, engine="slow")
    assert d.lane is slow and d.rule == 1
    assert "engine='slow'" in d.reason
    flow.run(engine="slow")
    assert len(slow.ran) == 1


def test_rule1_environment_forces_a_lane(lanes, flow, monkeypatch):
    lanes(Recording("fast", seconds=0.1))
    slow = lanes(Recording("slow", seconds=9.0))
    monkeypatch.setenv("EIDOS_BACKEND", "slow")
    d = decide(flow.plan)
    assert d.lane is slow and d.rule == 1 and "EIDOS_BACKEND=slow" in d.reason


def test_unknown_engine_lists_lanes_and_suggests(lanes, flow):
    lanes(Recording("polarsish"))
    with pytest.raises(BackendUnavailable) as e:
        flow.run(engine="polarish")
    assert "no lane called 'polarish'" in str(e.value)
    assert "did you mean 'polarsish'" in str(e.value)


def test_forced_unavailable_lane_says_why(lanes, flow):
    lanes(Recording("moonlane", available=False))
    with pytest.raises(BackendUnavailable, match="needs the moon: pip install moon"):
        flow.run(engine="moonlane")


def test_forced_lane_lacking_a_function_names_it(lanes, flow):
    lanes(Recording("nogt", coverage=Coverage.everything().without(functions=["gt"])))
    with pytest.raises(UnsupportedError, match="function gt"):
        flow.run(engine="nogt")


def test_rule5_cost_model_picks_cheapest_vector_lane(lanes, flow):
    lanes(Recording("pricey", seconds=2.0))
    cheap = lanes(Recording("cheap", seconds=0.5))
    d = decide(flow.plan)
    assert d.lane is cheap and d.rule == 5
    assert "cost model" in d.reason
    assert "cost model: 2 s vs 0.5 s for cheap" in rejected(d)["pricey"]


def test_rejected_lanes_name_every_gap(lanes):
    lanes(Recording("ok"))
    lanes(Recording("narrow", coverage=Coverage.everything().without(functions=["gt", "mul"],
                                                                   dtypes=["String"])))
    f = ei.from_pydict({"a": [1], "s": ["x"]}).with_columns(m=col("a") * 2).filter(col("a") > 0)
    why = rejected(decide(f.plan))["narrow"]
    assert "function mul" in why and "function gt" in why and "dtype String" in why


def test_unavailable_lane_is_rejected_with_reason(lanes, flow):
    lanes(Recording("ok"))
    lanes(Recording("absent", available=False))
    assert rejected(decide(flow.plan))["absent"] == "needs the moon: pip install moon"


def test_reference_lane_is_last_resort(lanes, flow):
    ref = lanes(Recording("oracle", kind="reference"))
    d = decide(flow.plan)
    assert d.lane is ref and "reference lane" in d.reason
    vec = lanes(Recording("vec"))
    d = decide(flow.plan)
    assert d.lane is vec and "oracle" in rejected(d)["oracle"]


def test_rule2_database_sources_run_where_they_live(lanes):
    pg = lanes(Recording("pg", kind="pushdown", reads=frozenset({"postgresql"})))
    lanes(Recording("vec"))
    src = SqlSource(Schema([("a", ei.Int64)]), uri="postgresql://u:secret@h:5432/db", table="t")
    d = decide(N.Scan(src))
    assert d.lane is pg and d.rule == 2
    assert "postgresql://u@h:5432/db" in d.reason and "secret" not in ei.Flow(N.Scan(src)).explain()
    assert "cannot read" in rejected(d)["vec"]


def test_rule3_over_budget_goes_out_of_core(lanes, flow, monkeypatch):
    lanes(Recording("inmem", seconds=0.1))
    spill = lanes(Recording("spill", seconds=1.0, out_of_core_ok=True))
    monkeypatch.setenv("EIDOS_MEMORY_BUDGET", "10B")
    d = decide(flow.plan)
    assert d.lane is spill and d.rule == 3 and "exceeds the memory budget" in d.reason


def test_rule3_prefers_a_cluster_lane(lanes, flow, monkeypatch):
    lanes(Recording("spill", out_of_core_ok=True))
    cluster = lanes(Recording("ray", kind="cluster"))
    monkeypatch.setenv("EIDOS_MEMORY_BUDGET", "10B")
    assert decide(flow.plan).lane is cluster


def test_a_lane_running_pieces_here_plans_them_without_its_kind(lanes, flow, monkeypatch):
    """Inside `without("cluster")` (the cluster lane's workers) rule 3 cannot hand a piece back to it."""
    monkeypatch.setattr("eidos.hal.planner.memory_budget", lambda: 1)
    lanes(Recording("ray", kind="cluster"))
    vec = lanes(Recording("vec", out_of_core_ok=True))
    with planner.without("cluster"):
        d = decide(flow.plan)
    assert d.lane is vec
    assert rejected(d)["ray"] == "a cluster lane is running this plan's pieces here"
    assert decide(flow.plan).lane.name == "ray"   # outside, as before


def test_rule3_without_capable_lane_notes_it(lanes, flow, monkeypatch):
    vec = lanes(Recording("vec"))
    monkeypatch.setenv("EIDOS_MEMORY_BUDGET", "10B")
    d = decide(flow.plan)
    assert d.lane is vec and any("no cluster or out-of-core lane" in n for n in d.notes)


def test_rule4_gpu_for_numeric_maps(lanes, monkeypatch):
    lanes(Recording("vec"))
    gpu = lanes(Recording("gpu", kind="gpu"))
    fake = devices.DeviceInfo(2, 2**30, True, False, False, 1, ("NVIDIA H100",), (80 * 2**30,), "Linux", None)
    monkeypatch.setattr("eidos.hal.planner.detect_devices", lambda: fake)
    numeric = ei.from_pydict({"a": [1.0, 2.0]}).with_columns(b=col("a") * 2)
    d = decide(numeric.plan)
    assert d.lane is gpu and d.rule == 4 and "NVIDIA H100" in d.reason
    strings = ei.from_pydict({"a": [1.0], "s": ["x"]})
    assert decide(strings.plan).lane.name == "vec"


def test_rule4_gpu_only_where_its_estimate_beats_the_cpu_lane(lanes, monkeypatch):
    fake = devices.DeviceInfo(2, 2**30, True, False, False, 1, ("NVIDIA H100",), (80 * 2**30,), "Linux", None)
    monkeypatch.setattr("eidos.hal.planner.detect_devices", lambda: fake)
    vec = lanes(Recording("vec", seconds=0.1))
    gpu = lanes(Recording("gpu", kind="gpu", seconds=0.2))
    numeric = ei.from_pydict({"a": [1.0, 2.0]}).with_columns(b=col("a") * 2)
    d = decide(numeric.plan)
    assert d.lane is vec and d.rule == 5
    assert rejected(d)["gpu"].endswith("stays on vec (cost model: gpu 0.2 s, vec 0.1 s)")
    gpu.seconds = 0.05
    d = decide(numeric.plan)
    assert d.lane is gpu and d.rule == 4 and "cost model: gpu 0.05 s, vec 0.1 s" in d.reason


def test_rule5_opaque_functions_go_to_the_free_lane(lanes):
    lanes(Recording("vec"))
    free = lanes(Recording("threads", kind="free"))
    f = ei.from_pydict({"a": [1]}).with_columns(b=ei.udf(abs, ei.Int64)(col("a")))
    assert decide(f.plan).lane is free


def test_fallback_on_unsupported_warns_and_records(lanes, flow):
    lanes(Recording("first", seconds=0.1, unsupported=True))
    second = lanes(Recording("second", seconds=0.2))
    with pytest.warns(FallbackWarning, match="first"):
        flow.run()
    assert len(second.ran) == 1
    record = ei.last_run()
    assert record.lane == "second"
    assert record.attempts[0][0] == "first" and "unsupported" in record.attempts[0][1]


def test_strict_raises_instead_of_falling_back(lanes, flow):
    lanes(Recording("first", seconds=0.1, unsupported=True))
    lanes(Recording("second", seconds=0.2))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(UnsupportedError, match="first cannot do this today"):
            flow.run(strict=True)


def test_other_errors_are_never_swallowed(lanes, flow):
    class Broken(Recording):
        def execute(self, plan):
            raise ZeroDivisionError("engine bug")

    lanes(Broken("broken", seconds=0.1))
    other = lanes(Recording("other", seconds=0.2))
    with pytest.raises(ei.errors.ExecutionError, match="lane 'broken' failed: ZeroDivisionError") as e:
        flow.run()
    assert isinstance(e.value.__cause__, ZeroDivisionError)
    assert other.ran == []


def test_explain_shows_lane_rule_rejections_and_plan(lanes, flow):
    lanes(Recording("vec", seconds=0.3))
    lanes(Recording("absent", available=False))
    text = flow.explain()
    assert text.startswith("lane: vec")
    assert "rule 5, logic type" in text
    assert re.search(r"absent +needs the moon", text)
    assert "Filter(a > 1)" in text


def test_user_registered_lane_in_backends_list(lanes):
    lanes(Recording("mine", kind="free"))
    info = {b.name: b for b in ei.backends()}
    assert info["mine"].kind == "free" and info["mine"].available


def test_register_rejects_non_backends():
    with pytest.raises(ei.errors.PlanError, match="must be an eidos.hal.lane.Lane"):
        ei.register_backend("bogus", object())


def test_entry_point_lane_is_loaded(monkeypatch):
    """A third-party lane arrives through the entry point group eidos.backends."""
    from importlib.metadata import EntryPoint

    ep = EntryPoint(name="thirdparty", value="tests.hal.thirdparty:ThirdPartyLane", group="eidos.backends")
    broken = EntryPoint(name="broken", value="tests.hal.no_such_module:Lane", group="eidos.backends")
    saved = dict(registry._lanes)
    monkeypatch.setattr(registry, "entry_points", lambda group: [ep, broken])
    monkeypatch.setattr(registry, "_loaded", False)
    registry._lanes.clear()
    try:
        info = {b.name: b for b in ei.backends()}
        assert info["thirdparty"].available and info["thirdparty"].kind == "vector"
        assert not info["broken"].available and "failed to load: ModuleNotFoundError" in info["broken"].reason
    finally:
        registry._lanes.clear()
        registry._lanes.update(saved)


def test_rule2_mixed_sources_split_and_push_down_the_database_part(lanes):
    from eidos.ir.sources import ArrowSource

    pg = lanes(Recording("pg", kind="pushdown", reads=frozenset({"postgresql"})))
    vec = lanes(Recording("vec"))
    src = SqlSource(Schema([("k", ei.Int64), ("v", ei.Int64)]), uri="postgresql://u:pw@h/db", table="t")
    remote = ei.Flow(N.Scan(src)).filter(col("v") > 1).group_by("k").agg(s=col("v").sum())
    local = ei.from_pydict({"k": [1, 2], "name": ["a", "b"]})
    f = local.join(remote, on="k")
    d = decide(f.plan)
    assert d.lane is vec and d.rule == 2 and len(d.parts) == 1
    assert "1 part pushed down to pg" in d.reason and "vec finishes the plan" in d.reason
    text = f.explain()
    assert "Scan result of part 1" in text   # the plan reads the part by its key; the part tree names its lane
    assert re.search(r"parts:\n  finish: vec\n    part 1: pg   \(rule 2, data locality: every source lives in "
                     r"postgresql://u@h/db: the whole part runs there", text), text
    assert "Aggregate [k] s=sum(v)" in text and "pw" not in text
    f.run()
    (part,) = pg.ran
    assert isinstance(part, N.Aggregate)  # the filter and aggregate ran in the database
    (local_plan,) = vec.ran
    scans = [n.source for n in local_plan.walk() if isinstance(n, N.Scan)]
    assert all(isinstance(s, ArrowSource) for s in scans)
    assert "pushed-down part: 0 rows fetched" in dict(ei.last_run().attempts)["pg"]


def test_forced_local_lane_still_pushes_database_parts_down(lanes):
    pg = lanes(Recording("pg", kind="pushdown", reads=frozenset({"postgresql"})))
    lanes(Recording("vec"))
    src = SqlSource(Schema([("k", ei.Int64)]), uri="postgresql://h/db", table="t")
    f = ei.from_pydict({"k": [1]}).join(ei.Flow(N.Scan(src)), on="k")
    d = decide(f.plan, engine="vec")
    assert d.lane.name == "vec" and d.rule == 2 and len(d.parts) == 1 and d.parts[0].lane_name == "pg"
    f.run(engine="vec")
    assert len(pg.ran) == 1
