"""Rule 5's split: each Python function of a plan is a part on the python lane, over a part that
computes its arguments on the vector lane; the rest of the plan runs there too. The result is the
reference lane's, and a function is called only on the rows where the reference lane calls it."""

from __future__ import annotations

import pytest

import eidos as ei
from eidos import col, when
from eidos.errors import UnsupportedError
from eidos.hal.parts import OPAQUE
from eidos.hal.planner import decide
from eidos.ir import expr as E
from eidos.ir import nodes as N
from eidos.testing.compare import assert_tables_equal
from tests.lanes.python_native.udfs import divide, double, identity

DATA = {"k": [1, 2, 1, 3, 2, 1, None], "a": [10, 7, 0, -4, None, 3, 5], "b": [2, 0, 3, 0, 1, None, 2],
        "s": ["x", "yy", None, "zzz", "", "w", "vv"]}


def flow() -> ei.Flow:
    return ei.from_pydict(DATA)


def udf(fn, dtype=ei.Int64):
    return ei.udf(fn, dtype)


PLANS = {
    "project": lambda: flow().select("k", d=udf(double)(col("a") + 1) * 3),
    "filter": lambda: flow().filter(udf(double)(col("a")) > 5),
    "guarded": lambda: flow().select("a", "b", q=when(col("b") != 0).then(udf(divide)(col("a"), col("b")))
                                     .otherwise(-1)),
    "guard_after_a_branch": lambda: flow().select(q=when(col("b") == 0).then(0).when(udf(divide)(col("a"), col("b"))
                                                                                    > 1).then(1).otherwise(2)),
    # a row that does not reach a call computes none of its arguments, nor a condition it does not reach:
    # a * 2**62 overflows Int64 (an error) for |a| > 1
    "argument_of_a_branch_not_taken": lambda: flow().select(
        q=when(col("a").abs() <= 1).then(udf(identity)(col("a") * 2**62)).otherwise(-1)),
    "argument_of_a_condition_not_reached": lambda: flow().select(
        q=when(col("a").abs() > 1).then(0).when(udf(identity)(col("a") * 2**62) == 0).then(1).otherwise(2)),
    "condition_not_reached_before_a_call": lambda: flow().select(
        q=when(col("a").abs() > 1).then(0).when(col("a") * 2**62 == 0).then(udf(double)(col("a"))).otherwise(2)),
    # one call in three branches, the later ones behind a condition that calls a udf: each place gets its rows
    "one_call_in_branches_behind_a_udf_condition": lambda: flow().select(
        q=when(col("a").is_null()).then(udf(double)(col("a"))).when(udf(identity)(col("b")) == 0)
        .then(udf(double)(col("a"))).otherwise(udf(double)(col("a")))),
    "a_condition_call_again_in_a_later_branch": lambda: flow().select(
        q=when(udf(identity)(col("b")) == 0).then(0).when(udf(double)(col("b")) > 2)
        .then(udf(identity)(col("b"))).otherwise(-1)),
    "nested": lambda: flow().select(n=udf(double)(udf(double)(col("a")) + col("b"))),
    "condition_is_a_udf": lambda: flow().select(q=when(udf(identity)(col("b")) != 0).then(udf(divide)(col("a"), col("b")))),
    "sort": lambda: flow().sort(udf(identity)(col("a")), "s", nulls_last=True),
    "group_key_and_argument": lambda: flow().group_by(udf(identity)(col("k")).alias("g")).agg(
        s=udf(double)(col("a")).sum(), n=ei.count()).sort("g"),
    "over_aggregates": lambda: flow().group_by("k").agg(t=udf(double)(col("a").sum()) + col("b").max(),
                                                        m=col("a").min()).sort("k"),
    "argument_reads_a_computed_key": lambda: flow().group_by((col("k") * 2).alias("g")).agg(
        s=udf(double)(col("g")).sum()).sort("g"),
    "map_batches_over_a_join": lambda: flow().join(ei.from_pydict({"k": [1, 2], "w": [0.5, 2.0]}), on="k")
    .select("k", "a").map_batches(identity, schema={"k": ei.Int64, "a": ei.Int64}).sort("k", "a", nulls_last=True),
}


@pytest.mark.parametrize("name", PLANS)
def test_the_split_plan_gives_the_reference_answer(name, free):
    free(workers=2, batch_rows=2)
    f = PLANS[name]()
    got = f.run()
    assert ei.last_run().decision.parts, "the plan was split"
    assert_tables_equal(got, f.run(engine="reference"), ordered=True)
    assert_tables_equal(f.run(engine="python", strict=True), got, ordered=True)


def test_each_function_is_a_part_on_the_python_lane_over_its_arguments(free):
    free()
    d = decide(PLANS["nested"]().plan)   # n = double(double(a) + b): the outer call is the plan's last step
    assert d.lane_name == "python" and d.rule == 5
    steps = [p.plan for p in d.parts if p.place == "free"] + [d.plan]
    assert len(steps) == 2 and all(p.by == OPAQUE for p in d.parts)
    for step in steps:   # a step the lane runs: udf calls over the columns of a scan
        assert isinstance(step, N.Project) and isinstance(step.input, N.Scan)
        calls = [e for _, e in step.columns if not isinstance(e, E.Column)]
        assert len(calls) == 1 and all(isinstance(a, E.Column) for a in calls[0].args)
    # the rest goes to the vector lane; where none runs (a free-threaded CPython: no polars or duckdb wheel), the reference
    kind = "vector" if any(b.kind == "vector" and b.available for b in ei.backends()) else "reference"
    cpu = [p for p in d.parts if p.place == "cpu"]
    assert cpu and all(p.lane.kind == kind for p in cpu)
    rest = decide(PLANS["project"]().plan)   # d = double(a + 1) * 3: the product runs after the step
    assert rest.lane.kind == kind and rest.rule == 5
    assert rest.reason.startswith("opaque Python functions: 1 part on the free lane python, handed on as Arrow; ")
    assert not any(isinstance(x, E.Udf) for n in rest.plan.walk() for e in n.expressions() for x in e.walk())


def test_a_plan_that_only_adds_udf_columns_is_one_step():
    d = decide(flow().with_columns(d=udf(double)(col("a")), e=udf(identity, ei.String)(col("s"))).plan)
    assert d.lane_name == "python" and d.parts == () and list(d.plan.schema.names) == [*DATA, "d", "e"]


def test_a_guarded_call_gets_a_guard_column(free):
    free()
    d = decide(PLANS["guarded"]().plan)
    (step,) = [p for p in d.parts if p.place == "free"]
    (call,) = [e for _, e in step.plan.columns if isinstance(e, E.Case)]
    (guard, udf_call), = call.branches
    assert isinstance(guard, E.Column) and isinstance(udf_call, E.Udf)


def test_explain_shows_the_parts_tree(free):
    free()
    text = PLANS["filter"]().explain()
    tree = text.split("parts:\n", 1)[1].split("\nplan:", 1)[0].splitlines()
    assert tree[0].startswith("  finish: ")
    assert tree[1].startswith("    part 1: python   (rule 5, logic type: opaque Python")
    assert "udf:double" in text and "Scan result of part 1" in text


def test_forced_python_runs_the_functions_and_the_rule_says_so(free):
    free()
    d = decide(PLANS["project"]().plan, engine="python")
    assert d.rule == 1 and d.reason.startswith("engine='python': python runs the plan's opaque Python functions; ")
    assert [p.decision.rule for p in d.parts if p.place == "free"] == [1]


def test_forced_python_without_a_function_is_unsupported(free):
    free()
    with pytest.raises(UnsupportedError, match="lane 'python' .* a Python function to run"):
        flow().select("a").run(engine="python")
    unread = PLANS["project"]().select("k")   # its udf's column is read by nothing: the optimizer drops it
    with pytest.raises(UnsupportedError, match="calls none once optimized .a udf whose result nothing reads is "
                                               "dropped with its column.; run with engine=None"):
        unread.run(engine="python")
    assert unread.run().column("k") == flow().run().column("k")


def test_hidden_columns_never_reach_the_result(free):
    free(workers=2, batch_rows=3)
    for name in ("filter", "sort"):
        f = PLANS[name]()
        assert f.run().schema.names == list(DATA)
