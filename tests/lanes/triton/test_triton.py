"""The Triton lane: nulls, filters, aggregates, value errors, split plans and explain, each against the
reference lane. Runs on CUDA when there is one, else under Triton's interpreter (tests/lanes/helpers.py).
The cross-lane suite (tests/lanes) runs the generated plans on this lane too."""

from __future__ import annotations

import dataclasses
import math
import re

import pyarrow as pa
import pytest

import eidos as ei
from eidos import col, when
from eidos.errors import BackendUnavailable, ExecutionError, PlanError
from eidos.hal import devices, planner
from eidos.ir import nodes as N
from eidos.ir.schema import Schema
from eidos.ir.sources import ParquetSource
from eidos.lanes.triton import cost
from eidos.testing.compare import assert_tables_equal
from tests.lanes.helpers import lane_or_skip, triton_lane_setup

triton_lane_setup()

NAN, INF = math.nan, math.inf
DATA = pa.table({
    "a": pa.array([1, 2, None, 4, 127, -5], pa.int64()),
    "b": pa.array([0.5, None, 2.0, NAN, -1.0, -0.0]),
    "k": pa.array([1, 1, 2, None, 2, None], pa.int32()),
    "f": pa.array([True, None, False, True, None, False]),
    "s": pa.array(["x", "y", "z", "x", None, "y"], pa.large_string()),
    "i8": pa.array([100, 27, None, -128, 1, 0], pa.int8()),
})


@pytest.fixture(scope="module")
def lane():
    return lane_or_skip("triton")


def same(flow: ei.Flow, ordered: bool = False) -> pa.Table:
    """Run on the triton lane and on the reference lane; they must agree."""
    got = flow.run(engine="triton", strict=True)
    assert_tables_equal(got, flow.run(engine="reference"), ordered=ordered, float_rel=0)
    return got


def src() -> ei.Flow:
    return ei.from_arrow(DATA.drop(["s"])).with_columns(z=col("b") * col("a"))


FLOWS = {
    "arithmetic_nulls": lambda: src().with_columns(c=col("a") * 2 + col("b"), d=col("a") // 0, g=col("a") % -3,
                                                   h=col("a") / 4, m=col("b") % 0.75, q=col("b") // -0.5),
    "kleene": lambda: src().select(x=(col("b") > 0.0) & col("f"), y=(col("b") > 0.0) | col("f"), z=~col("f"),
                                   n=col("f").is_null(), v=col("a").is_between(2, col("k"))),
    "nan_comparisons": lambda: src().select(e=col("b") == col("b"), lt=col("b") < INF, g=col("b") >= NAN),
    "math": lambda: src().select(x=col("b").exp(), y=col("a").sqrt(), z=col("b").log(), t=col("b").tanh(),
                                 fl=col("b").floor(), c=col("b").ceil(), ab=col("a").abs(), ng=-col("b")),
    "filter_then_map": lambda: src().filter((col("b") < 3.0) & col("a").is_not_null()).select(
        "a", x=col("b").sin(), w=col("i8") + 1),
    "case_and_membership": lambda: src().select(
        w=when(col("a") > 2).then(col("a")).when(col("f")).then(0).otherwise(None),
        z=col("a").is_in([1, 4, None]), y=col("k").is_in([2]), fill=col("b").fill_null(9.5)),
    "casts": lambda: src().select(i=col("b").fill_null(0.0).cast(ei.Float32), t=col("a").cast(ei.Float64),
                                  u=col("k").cast(ei.UInt16), flag=col("b").cast(ei.Boolean),
                                  n=col("f").cast(ei.Int8)),
    "global_aggregates": lambda: src().agg(s=col("a").sum(), m=col("b").mean(), mn=col("b").min(),
                                           mx=col("b").max(), n=ei.count(), c=col("a").count(),
                                           r=col("a").sum() / ei.count(), bm=col("f").max()),
    "grouped_with_null_keys": lambda: src().group_by("k", "f").agg(s=col("a").sum(), n=ei.count(),
                                                                   m=col("b").mean(), lo=col("i8").min()),
    "grouped_computed_key": lambda: src().group_by((col("a") % 2).alias("g")).agg(s=(col("a") * col("a")).sum(),
                                                                       top=col("b").max()),
    "float_keys_nan_and_signed_zero": lambda: ei.from_pydict(
        {"x": [NAN, -0.0, 0.0, NAN, 1.5, None], "v": [1, 2, 3, 4, 5, 6]}).group_by("x").agg(s=col("v").sum()),
    "n_unique_std_var": lambda: src().group_by("k").agg(u=col("b").n_unique(), ua=col("a").n_unique(),
                                                        sd=col("b").std(), v=col("z").var(), vi=col("a").var(),
                                                        si=col("i8").std()).filter(col("k") > 0),
    "int_var_extremes": lambda: ei.from_arrow(pa.table({
        "a": pa.array([2 ** 63 - 1, -(2 ** 63), 12345678901234, -7, None], pa.int64()),
        "u": pa.array([2 ** 64 - 1, 0, 3, 2 ** 40, 1], pa.uint64())})).agg(
        v=col("a").var(), s=col("a").std(), vu=col("u").var(), su=col("u").std()),
    "round": lambda: ei.from_pydict({"x": [2.675, -2.5, 0.5, -0.4, 1e300, 15.0, None],
                                     "n": [1, -25, 3, None, 5, 6, 7]}).select(
        r=col("x").round(2), z=col("x").round(0), t=col("x").round(-1), i=col("n").round(1)),
    "unsigned": lambda: ei.from_arrow(pa.table({
        "u": pa.array([2 ** 64 - 1, 2 ** 63, 5, None], pa.uint64()), "w": pa.array([65535, 1, None, 7], pa.uint16()),
        "v": pa.array([4_000_000_000, 3, 3, None], pa.uint32())})).group_by("v").agg(
        lo=col("u").min(), hi=col("u").max(), s=col("w").sum(), m=col("w").max(), n=col("u").n_unique(),
        big=col("v").sum(), d=(col("w") - col("w")).max()),
    "many_groups_float_sums": lambda: ei.from_pydict({
        "k": [i % 41 for i in range(400)],
        "x": [(-1) ** i * (1.1 ** (i % 97)) * 10.0 ** ((i * 37) % 41 - 20) for i in range(400)]}).group_by("k").agg(
        s=col("x").sum(), m=col("x").mean(), v=col("x").var(), lo=col("x").min()),
    "powers": lambda: src().select(p=col("b") ** 2, q=(col("a") ** 0.5) ** col("b") + 1, r=col("i8") ** -1,
                                   f=col("b").fill_null(1.0).cast(ei.Float32) ** col("b").cast(ei.Float32),
                                   z=ei.lit(0.0) ** col("a"), a="a").filter(col("a") ** 2 > 1.0),
    "aggregate_then_power": lambda: src().group_by("k").agg(s=col("a").sum() ** 2, m=(col("b") ** 3).max()),
    "distinct_and_union": lambda: src().select("k", "f", x=col("b") + 0.0).union(
        ei.from_pydict({"k": [2, None, 7], "f": [False, None, True], "x": [NAN, -0.0, 0.0]}).select(
            col("k").cast(ei.Int32), "f", "x")).distinct(),
    "union_of_filtered": lambda: src().filter(col("a") > 1).union(src().filter(col("b") < 1.0)).select(
        "a", y=col("b") * 2),
    "aggregate_of_nothing": lambda: src().filter(col("a") > 1000).agg(s=col("a").sum(), n=ei.count(),
                                                                       m=col("b").min()),
}


@pytest.mark.parametrize("name", list(FLOWS))
def test_against_reference(lane, name):
    flow = FLOWS[name]()
    assert not lane.supports(flow.plan), lane.supports(flow.plan)
    same(flow)


def test_float_sum_is_correctly_rounded(lane):
    t = ei.from_pydict({"x": [1e100, 1.0, -1e100, 1e-300, 3.0, 2.0 ** -1074], "g": [1, 1, 1, 2, 2, 2]})
    got = same(t.agg(s=col("x").sum(), m=col("x").mean()))
    assert got.to_pydict()["s"] == [1.0 + 1e-300 + 3.0 + 2.0 ** -1074]
    got = same(t.group_by("g").agg(s=col("x").sum()))
    assert dict(zip(got.column("g").to_pylist(), got.column("s").to_pylist())) == {1: 1.0, 2: 3.0}
    same(ei.from_pydict({"x": [INF, 1.0, -INF]}).agg(s=col("x").sum()))
    same(ei.from_pydict({"x": [1.7e308, 1.7e308]}).agg(s=col("x").sum()))


@pytest.mark.parametrize("build", [
    lambda: ei.from_arrow(pa.table({"a": pa.array([127, 1], pa.int8())})).select(b=col("a") + 1),
    lambda: ei.from_pydict({"a": [2 ** 62, 3]}).select(b=col("a") * col("a")),
    lambda: ei.from_pydict({"a": [-(2 ** 63)]}).select(b=-col("a")),
    lambda: ei.from_pydict({"a": [2 ** 62, 2 ** 62]}).agg(s=col("a").sum()),
    lambda: ei.from_pydict({"a": [300]}).select(n=col("a").cast(ei.Int8)),
    lambda: ei.from_pydict({"x": [1.0, NAN]}).select(n=col("x").cast(ei.Int64)),
    lambda: ei.from_pydict({"a": [-(2 ** 63)], "b": [-1]}).select(q=col("a") // col("b")),
    lambda: ei.from_arrow(pa.table({"v": pa.array([4_000_000_000, 1], pa.uint32())})).select(w=col("v") + col("v")),
    lambda: ei.from_arrow(pa.table({"v": pa.array([2, 1], pa.uint64())})).select(w=col("v") - 2),
], ids=["int8_add", "int64_mul", "neg_min", "sum", "cast_range", "cast_nan", "min_floordiv", "uint32_add",
        "uint64_below_zero"])
def test_value_errors_raise_naming_the_row(lane, build):
    flow = build()
    with pytest.raises(ExecutionError):
        flow.run(engine="reference")
    with pytest.raises(ExecutionError, match="overflow|cast"):
        flow.run(engine="triton", strict=True)


def test_errors_count_only_on_rows_kept_and_branches_taken(lane):
    t = ei.from_arrow(pa.table({"a": pa.array([100, 2, -3], pa.int8())}))
    same(t.filter(col("a") < 50).select(b=col("a") * 2))                          # 100 * 2 is filtered out
    same(t.select(b=when(col("a") < 50).then(col("a") * 2).otherwise(col("a"))))  # and not computed here
    with pytest.raises(ExecutionError, match="a=100"):
        t.select(b=col("a") * 2).run(engine="triton")
    with pytest.raises(ExecutionError, match="v=4000000000"):
        ei.from_arrow(pa.table({"v": pa.array([4_000_000_000], pa.uint32())})).select(w=col("v") * 2).run(
            engine="triton")


def test_coverage_names_what_the_lane_lacks(lane):
    flow = ei.from_arrow(DATA).select(n=col("s").str.len(), p=when(col("a") > 0).then(col("b") ** 2))
    gaps = lane.supports(flow.plan)
    assert "function str_len" in gaps and "pow inside when/then" in gaps and "dtype String" in gaps
    assert "round of integers to negative places" in lane.supports(src().select(r=col("a").round(-1)).plan)
    with pytest.raises(ei.errors.UnsupportedError, match="str_len"):
        flow.run(engine="triton")


def test_no_gpu_means_not_chosen_with_the_reason(lane, monkeypatch):
    info = dataclasses.replace(devices.detect_devices(), gpu_count=0, gpu_names=(), gpu_memory_bytes=())
    monkeypatch.setattr(devices, "detect_devices", lambda: info)
    monkeypatch.setattr(planner, "detect_devices", lambda: info)
    assert "no GPU" in lane.is_available().reason
    text = src().select(x=col("b") * 2).explain()
    assert "triton" in text and "no GPU" in text and not text.startswith("lane: triton")


# The GPU machine the planner is shown, whatever runs the tests: the lead's H100 host (16 cores, 128 GiB)
FAKE_MACHINE = dict(cpu_cores=16, memory_limit_bytes=128 << 30, gpu_count=1, gpu_names=("Fake H100",),
                    gpu_memory_bytes=(80 << 30,), forced_backend=None)


@pytest.fixture
def fake_gpu(lane, monkeypatch):
    """A machine that reports a GPU: rule 4 applies (the programs still run where the lane runs them).
    Every part of the machine the planner reads is fixed, and the environment that would override it
    is cleared, so a real GPU, core count or memory size (or a measured EIDOS_TRITON_COST) does not leak in."""
    info = dataclasses.replace(devices.detect_devices(), **FAKE_MACHINE)
    monkeypatch.setattr(devices, "detect_devices", lambda: info)
    monkeypatch.setattr(planner, "detect_devices", lambda: info)
    for name in (cost.ENV, "EIDOS_BACKEND", "EIDOS_MEMORY_BUDGET"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def cpu_cost_model(fake_gpu):
    """Rule 4 weighs the GPU against a CPU lane's cost model: polars' or duckdb's (the reference lane has
    none, and with only it the GPU is taken whenever the plan fits the device)."""
    lanes = {b.name: b for b in ei.backends()}
    if not any(lanes.get(n) and lanes[n].available for n in ("polars", "duckdb")):
        pytest.skip("needs the polars or duckdb lane (a CPU cost model to weigh the GPU against): "
                    "pip install polars duckdb")


# EIDOS_TRITON_COST making the GPU cost nothing but its row work: rule 4 then takes it for this file's tiny tables
FREE_GPU = "setup_s=0,step_s=0,agg_s=0,h2d_bytes_per_s=1e18,d2h_bytes_per_s=1e18"


@pytest.fixture
def gpu_pays(fake_gpu, monkeypatch):
    monkeypatch.setenv(cost.ENV, FREE_GPU)


def test_rule_4_chooses_the_lane_for_numeric_work(gpu_pays):
    flow = src().filter(col("a") > 1).agg(s=(col("a") * col("b")).sum())
    text = flow.explain()
    assert text.startswith("lane: triton") and "rule 4" in text and "Fake H100" in text
    same(flow)
    both = src().select("a", "k").union(src().select("a", "k").filter(col("a") > 2)).distinct()
    assert both.explain().startswith("lane: triton")


def test_split_plan_runs_numeric_parts_on_the_gpu_lane(gpu_pays):
    pytest.importorskip("polars")
    other = ei.from_pydict({"k": [1, 2], "name": ["one", "two"]})
    flow = (ei.from_arrow(DATA).filter(col("b") > -2.0).group_by("k").agg(t=(col("a") * 3).sum(), n=ei.count())
            .join(other, on="k").sort("name"))
    text = flow.explain()
    assert "rule 4" in text and "triton runs" in text and "Scan result of part 1" in text, text
    assert "\n    part 1: triton   (rule 4, hardware: a GPU (Fake H100); numeric" in text, text
    got = flow.run()
    assert ei.last_run().lane != "triton"
    assert any(name == "triton" for name, _ in ei.last_run().attempts)
    assert_tables_equal(got, flow.run(engine="reference"), ordered=True)


def test_gpu_part_over_a_cpu_part(gpu_pays):
    pytest.importorskip("polars")
    other = ei.from_pydict({"k": [1, 2], "w": [0.5, 2.0]})
    flow = (ei.from_arrow(DATA).join(other, on="k").with_columns(v=col("w") * col("a") + 1)
            .group_by("k").agg(s=col("v").sum()).sort("k"))
    text = flow.explain()
    assert "triton runs" in text and "(over 1 part on" in text, text
    assert re.search(r"\n    part 2: triton   \(rule 4, .*\n      part 1: (polars|duckdb)   \(rule 5, ", text), text
    assert_tables_equal(flow.run(), flow.run(engine="reference"), ordered=True)


def heavy(rows: int) -> ei.Flow:
    """bench/gpu_flow.py's kind of plan (heavy maps, a filter, exact float sums) over a parquet source said to
    hold `rows` rows; only explained, never run."""
    schema = Schema([("x", ei.Float64), ("y", ei.Float64), ("k", ei.Int32)])
    base = ei.Flow(N.Scan(ParquetSource(schema, path="big.parquet", files=("big.parquet",), rows=rows, nbytes=rows * 20)))
    return (base.with_columns(u=(col("x") * 2 + 1).exp() * col("y"), v=(col("x") - col("y")).tanh() * (col("y") + 0.5).log(),
                              w=(col("x") * col("x") + col("y") * col("y")).sqrt())
            .filter((col("u") > 1.5) & (col("v") < 0.25)).agg(s=col("u").sum(), m=col("v").mean(), top=col("w").max()))


def test_small_numeric_plan_stays_on_a_cpu_lane(fake_gpu):
    pytest.importorskip("polars")
    flow = src().filter(col("a") > 1).agg(s=(col("a") * col("b")).sum())
    d = planner.decide(flow.plan)
    assert d.lane.kind == "vector" and d.rule == 5
    why = dict(d.rejected)["triton"]
    # polars' float sum without keys costs 3 ns a row since the compiled exact sum: less than the copy to the
    # device, so the GPU pays at no size for this plan; with a dearer CPU lane it pays above a crossover
    assert why.startswith("numeric but") and f"stays on {d.lane_name}" in why
    assert "below the GPU crossover" in why or "the GPU does not pay at any size" in why, why
    assert "cost model: " in why and any("rule 4: a GPU (Fake H100) is present" in n for n in d.notes)
    text = flow.explain()
    assert why in text and not text.startswith("lane: triton")
    got = flow.run()
    assert ei.last_run().lane == d.lane_name and not any(name == "triton" for name, _ in ei.last_run().attempts)
    assert_tables_equal(got, flow.run(engine="reference"), ordered=True)


def test_large_numeric_plan_goes_to_the_gpu_and_explain_says_from_what_size(cpu_cost_model):
    big, small = planner.decide(heavy(10**8).plan), planner.decide(heavy(10**3).plan)
    assert big.lane_name == "triton" and big.rule == 4, big
    assert re.search(r"Fake H100.*numeric, 1\.2 GiB estimated input: the GPU (pays above [0-9.]+ [KMG]?i?B|beats \w+ at any size) "
                     r"for this plan \(cost model: triton [0-9.e-]+ s, (polars|duckdb) [0-9.e-]+ s\)", big.reason), big.reason
    assert small.lane_name != "triton"   # the CPU lane it compares with may differ by size: the cheapest one for each
    assert re.search(r"numeric but 13\.0 KiB estimated input: below the GPU crossover [0-9.]+ [KMG]?i?B for this plan; "
                     f"stays on {small.lane_name}", dict(small.rejected)["triton"]), small


def test_input_larger_than_the_gpu_memory_stays_on_the_cpu(fake_gpu, monkeypatch):
    info = dataclasses.replace(devices.detect_devices(), gpu_memory_bytes=(1 << 30,))   # a 1 GiB card
    monkeypatch.setattr(planner, "detect_devices", lambda: info)
    d = planner.decide(heavy(10**8).plan)
    assert d.lane_name != "triton"
    assert "it would need about 2.5 GiB on the device, more than the GPU's 1.0 GiB" in dict(d.rejected)["triton"]


def test_plan_the_gpu_cannot_hold_stays_on_the_reference_without_a_vector_lane(fake_gpu, monkeypatch):
    """A GPU machine without polars or duckdb (the lead's H100): the reference lane has no cost model, but a
    plan that does not fit the device still stays on the CPU, and rule 5 does not take the GPU it turned down."""
    from eidos.hal import registry

    lanes = [lane for lane in registry.lanes() if lane.kind != "vector"]
    monkeypatch.setattr(registry, "lanes", lambda: lanes)
    info = dataclasses.replace(devices.detect_devices(), gpu_memory_bytes=(1 << 30,))   # a 1 GiB card
    monkeypatch.setattr(planner, "detect_devices", lambda: info)
    d = planner.decide(heavy(10**8).plan)
    assert d.lane.kind == "reference", d
    assert "more than the GPU's 1.0 GiB; stays on reference" in dict(d.rejected)["triton"], d.rejected
    assert not any(lane.kind == "gpu" for lane in d.fallbacks)
    fits = planner.decide(heavy(10**6).plan)    # one that fits: no cost model to weigh, so the GPU
    assert fits.lane_name == "triton" and fits.rule == 4 and "no cost estimate from reference" in fits.reason


def test_gpu_cost_overrides_move_the_decision(cpu_cost_model, monkeypatch):
    assert planner.decide(heavy(10**8).plan).lane_name == "triton"
    # a slow bus (1.2 GiB at 1 MB/s: 20 minutes) keeps even 10^8 rows on the CPU, whichever CPU lane is
    # there to weigh (the polars lane's exact float sums alone model some 30 s; 100 MB/s was not slow enough)
    monkeypatch.setenv(cost.ENV, "h2d_bytes_per_s=1MB/s")
    assert planner.decide(heavy(10**8).plan).lane_name != "triton"
    assert cost.costs().h2d_bytes_per_s == 1e6
    tiny = src().agg(s=col("b").sum()).plan
    assert planner.decide(tiny).lane_name != "triton"
    monkeypatch.setenv(cost.ENV, FREE_GPU)                    # no fixed costs: a tiny plan goes to the GPU
    assert planner.decide(tiny).lane_name == "triton"


def test_gpu_costs_can_be_overridden(fake_gpu, monkeypatch, tmp_path):
    monkeypatch.setenv(cost.ENV, "setup_s=2ms, step_s=60us")
    assert cost.costs().setup_s == 2e-3 and cost.costs().step_s == pytest.approx(60e-6)
    measured = tmp_path / "triton_cost.json"
    measured.write_text('{"constants": {"setup_s": 0.004, "h2d_bytes_per_s": 2.5e10}}')
    monkeypatch.setenv(cost.ENV, str(measured))
    assert (cost.costs().setup_s, cost.costs().h2d_bytes_per_s) == (0.004, 2.5e10)
    for bad, says in (("warp_s=1ms", "unknown constant 'warp_s'; the constants are setup_s"),
                      ("setup_s=fast", "give seconds such as 2ms"), ("h2d_bytes_per_s=0", "give a rate such as 12GB/s"),
                      (str(tmp_path / "absent.json"), "not a readable JSON file")):
        monkeypatch.setenv(cost.ENV, bad)
        with pytest.raises(PlanError, match=re.escape(says)):
            planner.decide(heavy(10**8).plan)
    measured.write_text('{"smoke": true, "constants": {"setup_s": 1}}')
    monkeypatch.setenv(cost.ENV, str(measured))
    with pytest.raises(PlanError, match="--smoke run"):
        cost.costs()


def test_small_numeric_part_of_a_split_plan_stays_on_the_cpu(fake_gpu, monkeypatch):
    pytest.importorskip("polars")
    other = ei.from_pydict({"k": [1, 2], "name": ["one", "two"]})
    flow = (ei.from_arrow(DATA).filter(col("b") > -2.0).group_by("k").agg(t=(col("a") * 3).sum(), n=ei.count())
            .join(other, on="k").sort("name"))
    d = planner.decide(flow.plan)
    assert d.rule == 5 and not any(p.place == "gpu" for p in d.parts)
    assert any(re.search(r"triton could run the numeric part Aggregate \[k\] .*: numeric but 93 B estimated input: .*; "
                         f"stays on {d.lane_name} \\(cost model", n) for n in d.notes), d.notes
    monkeypatch.setenv(cost.ENV, FREE_GPU)
    d = planner.decide(flow.plan)
    assert d.rule == 4 and [p.place for p in d.parts] == ["gpu"] and "(numeric, 93 B estimated input: the GPU pays" in d.reason


def test_unknown_kernel_target_is_named(monkeypatch, lane):
    monkeypatch.setenv("EIDOS_TRITON_KERNELS", "nope")
    with pytest.raises(BackendUnavailable, match="EIDOS_TRITON_KERNELS"):
        src().select(x=col("a") + 1).run(engine="triton")


def test_the_same_programs_run_on_the_compiled_cpu_target(lane, monkeypatch):
    """The lowering is backend-independent: the ISA CPU backend (numba) runs the same programs."""
    pytest.importorskip("numba")
    monkeypatch.setenv("EIDOS_TRITON_KERNELS", "cpu")
    same(src().select(x=col("a") * 3 + col("i8"), y=col("b") // 0.5, z=(col("b") > 0.0) | col("f")))


def test_sliced_and_chunked_arrow_columns(lane):
    """Arrow buffers go to the device as they are: offsets into bitmaps and values, several chunks."""
    t = pa.table({"f": pa.array([True, None, False, True, False, None, True, True, False, True, None]),
                  "x": pa.array([1.5, None, 3.0, -1.0, None, 2.0, 0.5, 8.0, None, 1.0, 4.0], pa.float32()),
                  "i": pa.array([1, 2, None, 4, 5, 6, None, 8, 9, 10, 11], pa.int8())})
    for part in (t.slice(3), t.slice(5, 4), pa.concat_tables([t.slice(1, 5), t.slice(7)])):
        same(ei.from_arrow(part).select(a=col("f") & (col("x") > 1.0), b=col("i") * 2, c=col("f").is_null(),
                                        d=col("x").fill_null(-1.0)))


EDGES = {
    pa.int64(): [0, 1, -1, 2, -2, 3, 2 ** 31, -(2 ** 31), 2 ** 32 + 1, 2 ** 62, -(2 ** 62), 2 ** 63 - 1, -(2 ** 63),
                 3037000499, 3037000500, -3037000500],
    pa.uint64(): [0, 1, 2, 3, 2 ** 32, 2 ** 32 - 1, 2 ** 63, 2 ** 64 - 1, 4294967296, 4294967297],
    pa.int8(): [0, 1, -1, 2, 11, 12, -12, 64, 127, -128],
    pa.uint32(): [0, 1, 2, 65536, 65535, 2 ** 31, 2 ** 32 - 1],
}


@pytest.mark.parametrize("arrow_type", list(EDGES), ids=str)
def test_integer_overflow_at_the_edges(lane, arrow_type, monkeypatch):
    """Every pair of edge values through + - * // % and unary -: each row gets the reference's value,
    or an error code exactly where the reference raises (the codes are read instead of raised)."""
    from eidos.ir import evaluate as V
    from eidos.lanes.triton import execute as X

    codes = {}
    monkeypatch.setattr(X, "_raise_errors", lambda errors, frame, step, dev, where: codes.update(
        errors=errors[:frame.n].tolist()))
    values = EDGES[arrow_type]
    pairs = [(a, b) for a in values for b in values]
    t = pa.table({"a": pa.array([a for a, _ in pairs], arrow_type), "b": pa.array([b for _, b in pairs], arrow_type)})
    dtype = ei.from_arrow(t).schema["a"]
    for op in ("add", "sub", "mul", "floordiv", "mod", "neg"):
        if op == "neg" and dtype.is_unsigned_integer:
            continue
        expr = -col("a") if op == "neg" else getattr(col("a"), f"__{op}__")(col("b"))
        k = V.kernel(op, (), (dtype,) if op == "neg" else (dtype, dtype), dtype)
        codes.clear()
        got = ei.from_arrow(t).select(r=expr).run(engine="triton", strict=True).column("r").to_pylist()
        for row, (a, b) in enumerate(pairs):
            try:
                want = k(a) if op == "neg" else k(a, b)
            except ExecutionError:
                assert codes["errors"][row] != 0, (op, a, b)
                continue
            assert not codes.get("errors") or codes["errors"][row] == 0, (op, a, b)
            assert got[row] == want, (op, a, b, got[row], want)


CAST_EDGES = [
    (pa.float64(), [NAN, INF, -INF, 2.0 ** 63, -(2.0 ** 63), 2.0 ** 63 - 1024, -(2.0 ** 63) - 2048, 2.0 ** 64,
                    127.9, 128.0, -128.9, -129.0, 255.5, 256.0, -0.5, -1.0, 0.0, -0.0, 1e300]),
    (pa.float32(), [NAN, 2.0 ** 31, -(2.0 ** 31), 2.0 ** 32, 65535.5, -1.0, 3.5]),
    (pa.int64(), [2 ** 63 - 1, -(2 ** 63), 2 ** 31, -(2 ** 31) - 1, 255, 256, -1, 0, 127, -128, 65535]),
    (pa.uint64(), [2 ** 64 - 1, 2 ** 63, 2 ** 63 - 1, 2 ** 32, 255, 0]),
    (pa.int8(), [-128, -1, 0, 127]),
]


@pytest.mark.parametrize("arrow_type,values", CAST_EDGES, ids=[str(t) for t, _ in CAST_EDGES])
def test_casts_at_the_edges(lane, arrow_type, values, monkeypatch):
    """Casts to every integer type (and floats, Boolean): the reference's value, or an error code exactly
    where the reference raises."""
    from eidos.ir import evaluate as V
    from eidos.lanes.triton import execute as X

    codes = {}
    monkeypatch.setattr(X, "_raise_errors", lambda errors, frame, step, dev, where: codes.update(
        errors=errors[:frame.n].tolist()))
    t = pa.table({"x": pa.array(values, arrow_type)})
    src_type = ei.from_arrow(t).schema["x"]
    for target in (ei.Int8, ei.UInt8, ei.Int16, ei.Int32, ei.UInt32, ei.Int64, ei.UInt64, ei.Float32, ei.Boolean):
        codes.clear()
        got = ei.from_arrow(t).select(r=col("x").cast(target)).run(engine="triton", strict=True).column("r")
        caster = V.caster(src_type, target)
        for row, v in enumerate(values):
            v = t.column("x")[row].as_py()
            try:
                want = caster(v)
            except ExecutionError:
                assert codes["errors"][row] != 0, (target, v)
                continue
            assert not codes.get("errors") or codes["errors"][row] == 0, (target, v)
            w = got[row].as_py()
            assert w == want or (w != w and want != want), (target, v, w, want)


@pytest.mark.parametrize("pieces", [2, 3])
def test_a_rowwise_part_split_by_rows_equals_one_device(lane, pieces):
    """A Filter/Project part split by rows over several kernel targets (one per GPU on a host with several:
    split.py) gives the unsplit result, rows in order; parts that are not row-wise are never split."""
    from eidos.lanes.triton import execute as X
    from eidos.lanes.triton import split
    from eidos.lanes.triton.target import Device

    flow = src().filter(col("b") > -2.0).select(x=col("a") * 2 + col("i8"), y=col("z").abs(), f=~col("f"))
    plan = flow.plan.optimized
    assert split.rowwise(plan) and not split.rowwise(src().agg(n=col("a").sum()).plan)
    got = X.execute(plan, devices=[Device() for _ in range(pieces)])
    assert_tables_equal(got, flow.run(engine="reference"), ordered=True, float_rel=0)


def test_calibrate_measures_the_gpu_lanes_constants(fake_gpu, monkeypatch, tmp_path):
    """`eidos calibrate` runs the triton lane's probes where a GPU is (here under Triton's interpreter: tiny
    sizes, figures that mean nothing) and the lane's model uses what they gave."""
    monkeypatch.setenv("EIDOS_CACHE_DIR", str(tmp_path))
    result = ei.calibrate(lanes=["triton"], rows=500, repeats=1)
    values = result["lanes"]["triton"]
    unmeasured = {k.split(".", 1)[1] for k in result["skipped"] if k.startswith("triton.")}
    assert values and set(values) | unmeasured == set(cost.DEFAULTS.probes.values())
    assert all(v > 0 and math.isfinite(v) for v in values.values())
    assert all(getattr(cost.costs(), k) == pytest.approx(v) for k, v in values.items())
    assert "measured here by `eidos calibrate`" in cost.estimate(src().agg(s=col("a").sum()).plan).basis


def test_pinned_staging_moves_the_same_bytes(lane, monkeypatch):
    """Columns in through pinned memory on a copy stream and results back through pinned buffers give
    the bytes the plain copies give (every type with nulls, a bitmap at an offset, a filter, an
    aggregate); without a CUDA device both are the plain copies."""
    import torch

    from eidos.lanes.triton import target

    if not torch.cuda.is_available():
        pytest.skip("pinned staging is for a CUDA device; here the columns stay on the CPU")
    data = pa.concat_tables([DATA.drop(["s"])] * 500).slice(3)   # chunks, and a bitmap from bit 3
    flows = [ei.from_arrow(data).with_columns(c=col("a") * 2 + col("i8"), d=col("b").exp()),
             ei.from_arrow(data).filter(col("a") > 1).group_by("k").agg(s=col("b").sum(), n=ei.count())]
    for flow in flows:
        staged = flow.run(engine="triton")
        monkeypatch.setattr(target, "STAGING", False)
        plain = flow.run(engine="triton")
        monkeypatch.setattr(target, "STAGING", True)
        assert_tables_equal(staged, plain, ordered=False, float_rel=0, float_abs=0)
        assert_tables_equal(staged, flow.run(engine="reference"), ordered=False)
