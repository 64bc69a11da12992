"""Cost constants as data: the calibration file (measured, damaged, foreign), the defaults scaled to the
machine, `eidos calibrate`, and distinct-count estimates for the planner's group counts."""

from __future__ import annotations

import json
import math

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import eidos as ei
from eidos import col
from eidos.cli import main
from eidos.hal import constants as K
from eidos.hal.distinct import SAMPLE, distinct, groups
from eidos.hal.planner import decide
from eidos.ir.sources import ArrowSource


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A cache folder of the test's own: no costs.json until the test writes one."""
    monkeypatch.setenv("EIDOS_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("EIDOS_BACKEND", raising=False)
    return tmp_path


@pytest.fixture
def both():
    for lane in ("polars", "duckdb"):
        if not [l for l in ei.backends() if l.name == lane and l.available]:
            pytest.skip(f"needs the {lane} lane (pip install 'eidos[all]')")


def grouped() -> ei.Flow:
    t = pa.table({"k": np.arange(10_000) % 16, "x": np.arange(10_000, dtype=np.int64)})
    return ei.from_arrow(t).group_by("k").agg(s=col("x").sum())


def write(lanes: dict, machine: K.Machine | None = None) -> None:
    K.save(lanes, machine or K.here(), {}, 1.0)


def test_a_decision_follows_the_constants_measured_here(cache, both):
    flow = grouped()
    before = decide(flow.plan)
    assert "no `eidos calibrate` run here" in before.reason
    write({"polars": {"setup_s": 1.0}, "duckdb": {"setup_s": 1e-4}})
    slow_polars = decide(flow.plan)
    write({"polars": {"setup_s": 1e-4}, "duckdb": {"setup_s": 1.0}})
    slow_duckdb = decide(flow.plan)
    assert (slow_polars.lane_name, slow_duckdb.lane_name) == ("duckdb", "polars")
    for d in (slow_polars, slow_duckdb):
        assert "constants: measured here by `eidos calibrate`" in d.reason, d.reason
    assert "cost model: 1 s vs" in dict(slow_duckdb.rejected)["duckdb"]
    assert "constants: measured here by `eidos calibrate`" in flow.explain()


def test_a_damaged_file_is_treated_as_absent_and_explain_says_so(cache, both):
    flow = grouped()
    expected = decide(flow.plan).lane_name
    for text in ("{not json", json.dumps({"machine": {"cores": 2}}), "[]", ""):
        (cache / K.FILE).write_text(text)
        d = decide(flow.plan)
        assert d.lane_name == expected
        assert f"{cache / K.FILE} is unreadable" in d.reason and "run `eidos calibrate`" in d.reason, d.reason
    write({"polars": {"setup_s": -1.0}})
    assert "not a positive number" in decide(flow.plan).reason


def test_a_file_for_another_machine_or_version_is_ignored(cache, both):
    flow = grouped()
    expected = decide(flow.plan).lane_name
    there = K.Machine(999, 2**40, "a CPU elsewhere", 1e10)
    write({"polars": {"setup_s": 9.0}, "duckdb": {"setup_s": 9.0}}, there)
    d = decide(flow.plan)
    assert d.lane_name == expected and "measured on another machine (999 cores" in d.reason, d.reason
    write({"polars": {"setup_s": 9.0}})
    data = json.loads((cache / K.FILE).read_text())
    (cache / K.FILE).write_text(json.dumps({**data, "eidos": "0.0.1"}))
    assert "measured by eidos 0.0.1" in decide(flow.plan).reason


def test_defaults_scale_with_the_cores_and_bandwidth_here():
    from eidos.lanes.polars.cost import DEFAULTS

    big = K.Machine(16, 2**37, "x", 2 * K.DEV_VM.bandwidth)
    scaled = DEFAULTS.scaled(big)
    assert scaled.values["row_op_s"] == pytest.approx(DEFAULTS.values["row_op_s"] * math.sqrt(2 / 16))
    assert scaled.values["scan_parquet_bytes_per_s"] == pytest.approx(2 * DEFAULTS.values["scan_parquet_bytes_per_s"])
    assert scaled.values["setup_s"] == DEFAULTS.values["setup_s"]          # not per row: not scaled
    assert scaled.values["exact_group_s"] == DEFAULTS.values["exact_group_s"]   # a Python loop: one core
    assert "for 16 cores" in scaled.source and "2-vCPU development VM" in scaled.source


def test_calibrate_measures_stores_and_shows(cache, capsys):
    if not [l for l in ei.backends() if l.name == "polars" and l.available]:
        pytest.skip("needs the polars lane")
    result = ei.calibrate(lanes=["polars"], rows=20_000, repeats=1)
    values = result["lanes"]["polars"]
    unmeasured = {k.split(".", 1)[1] for k in result["skipped"] if k.startswith("polars.")}
    assert values and set(values) | unmeasured == set(ei.cost_constants()["polars"].probes.values())
    assert all("not measurable here" in result["skipped"][f"polars.{k}"] for k in unmeasured)
    assert all(v > 0 and math.isfinite(v) for v in values.values())
    assert result["path"] == str(cache / K.FILE) and "triton" not in result["lanes"]
    used = ei.cost_constants()["polars"]
    assert used.source.startswith("measured here by `eidos calibrate`")
    assert all(used.values[k] == pytest.approx(v) for k, v in values.items())
    assert main(["calibrate", "--show"]) == 0
    out = capsys.readouterr().out
    assert "polars: measured here by `eidos calibrate`" in out and "exact_row_s" in out
    assert main(["calibrate", "--show", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)["polars"]["values"]
    assert all(shown[k] == pytest.approx(v) for k, v in values.items())


# ---------------------------------------------------------------- distinct counts

def _cases(rng, rows):
    return {
        "16 values": rng.integers(0, 16, rows),
        "1,000 values": rng.integers(0, 1000, rows),
        "rows / 4 values": rng.integers(0, rows // 4, rows),
        "zipf": rng.zipf(1.5, rows),
        "unique, shuffled": rng.permutation(rows),
        "unique, sorted": np.arange(rows),
        "500 values, sorted": np.sort(rng.integers(0, 500, rows)),
        "strings": rng.integers(0, 3000, rows).astype(str),
        "floats with nulls": pa.array(rng.integers(0, 2000, rows) / 7.0, mask=rng.random(rows) < 0.1),
    }


def test_distinct_estimates_are_within_the_stated_bound(tmp_path):
    """GEE's worst case is a ratio of sqrt(rows / sample); on these distributions the estimates are within 2x
    (exact where statistics or a sample with no singletons decide it)."""
    rows = 4 * SAMPLE
    bound = math.sqrt(rows / SAMPLE)
    rng = np.random.default_rng(7)
    for name, keys in _cases(rng, rows).items():
        table = pa.table({"k": keys, "v": np.ones(rows)})
        path = tmp_path / f"{len(list(tmp_path.iterdir()))}.parquet"
        pq.write_table(table, path, row_group_size=32_768)
        true = len(table.group_by("k").aggregate([]))
        for where, source in (("parquet", ei.read_parquet(path).plan.source), ("arrow", ArrowSource.of(table))):
            got = distinct(source, ("k",))
            ratio = max(got / true, true / got)
            assert ratio <= min(2.0, bound), f"{name} ({where}): estimated {got:,.0f}, true {true:,}"
            if name in ("16 values", "1,000 values", "unique, sorted", "500 values, sorted", "strings"):
                assert got == true, f"{name} ({where}): estimated {got:,.0f}, true {true:,}"


def test_two_keys_and_renamed_keys(tmp_path):
    rng = np.random.default_rng(3)
    a, b = rng.integers(0, 8, 50_000), rng.integers(0, 5, 50_000)
    path = tmp_path / "two.parquet"
    pq.write_table(pa.table({"a": a, "b": b, "x": np.ones(50_000)}), path)
    flow = ei.read_parquet(path).filter(col("x") > 0).select(k=col("a"), j=col("b"), x=col("x"))
    assert groups(flow.group_by("k", "j").agg(s=col("x").sum()).plan) == 40
    assert groups(flow.group_by((col("k") + 1).alias("m")).agg(s=col("x").sum()).plan) is None   # computed: no estimate
    # one column under two key names (k and its copy c) counts once, in parquet and in memory alike
    assert groups(flow.with_columns(c=col("k")).group_by("k", "c").agg(s=col("x").sum()).plan) == 8
    copied = ei.from_pydict({"k": [1, 2, 2]}).with_columns(c=col("k"))
    assert groups(copied.group_by("k", "c").agg(n=ei.count()).plan) == 2


def test_a_grouped_estimate_counts_the_groups_not_a_tenth_of_the_rows():
    """bench/gpu_flow.py's grouped case (16 groups): the triton lane's model said 1.08 s at 10M rows where the
    H100 measured 82.4 ms, having guessed 1M groups; with 16 groups it is within 20% of each measurement."""
    from eidos.lanes.triton import cost

    rng = np.random.default_rng(0)
    for rows, measured in ((100_000, 8.49e-3), (1_000_000, 14.97e-3)):
        t = pa.table({"x": rng.random(rows), "k": rng.integers(0, 16, rows, dtype=np.int32)})
        plan = ei.from_arrow(t).with_columns(u=(col("x") * 2 + 1).exp()).filter(col("u") > 1.5) \
            .group_by("k").agg(s=col("u").sum(), n=ei.count()).plan.optimized
        est = cost.estimate(plan, cost.COSTS)
        assert "~16 rows out" in est.basis, est.basis
        assert 0.5 < est.seconds / measured < 2.0, (rows, est.seconds)


def test_groups_never_exceed_the_rows_in():
    from eidos.hal.cost import rows_out
    from eidos.lanes.polars.cost import MODEL

    flow = ei.from_arrow(pa.table({"k": np.arange(100_000)}))
    assert rows_out(flow.limit(10).group_by("k").agg(n=ei.count()).plan, MODEL) == 10


def test_libm_functions_cost_what_a_libm_call_costs_on_the_cpu_and_nothing_extra_on_the_gpu():
    """An exp, a tanh, a pow is a libm call per value on a CPU (20-75 times an add), near free on a GPU's
    special-function units: the CPU lanes charge each by its weight, the triton lane does not."""
    from eidos.hal.cost import LIBM_WEIGHT
    from eidos.lanes.polars import cost as polars_cost
    from eidos.lanes.sql import cost as duckdb_cost
    from eidos.lanes.triton import cost as triton_cost

    rows = 1_000_000
    flow = ei.from_arrow(pa.table({"x": np.random.default_rng(0).random(rows)}))
    plain, heavy = (flow.select(y=(-(col("x") * 2.0).abs()) + 1.0).plan,
                    flow.select(y=(col("x") * 2.0).exp().tanh() + 1.0).plan)   # as many nodes, two of them libm
    for lane in (polars_cost, duckdb_cost):
        values = dict(lane.DEFAULTS.values)
        extra = lane.estimate(heavy, values).seconds - lane.estimate(plain, values).seconds
        expected = rows * values["libm_row_s"] * (LIBM_WEIGHT["exp"] + LIBM_WEIGHT["tanh"])
        assert extra == pytest.approx(expected, rel=1e-9), lane.__name__
    gpu = triton_cost.estimate(heavy, triton_cost.COSTS).seconds - triton_cost.estimate(plain, triton_cost.COSTS).seconds
    assert gpu == pytest.approx(0.0, abs=1e-9)


def test_the_constants_in_use_follow_the_machine_they_are_scaled_to(monkeypatch):
    """The scaled defaults are kept per machine: a planner shown another machine (as the GPU tests show a
    16-core one) must not get the constants scaled to the first machine it saw."""
    import dataclasses

    from eidos.hal import devices
    from eidos.lanes.polars.cost import DEFAULTS

    real = devices.detect_devices()
    seen = []
    for cores in (2, 16):
        info = dataclasses.replace(real, cpu_cores=cores)
        monkeypatch.setattr(devices, "detect_devices", lambda info=info: info)
        seen.append(K.in_use(DEFAULTS).values["row_op_s"])
    assert seen[1] < seen[0], seen
