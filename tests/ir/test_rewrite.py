"""The shared rewrites move work, never change it: structure here, answers in the cross-lane suite."""

from __future__ import annotations

import pyarrow as pa

import eidos as ei
from eidos import col, lit
from eidos.ir import nodes as N
from eidos.ir.render import tree
from eidos.ir.rewrite import conjuncts, fold, optimize, prune, push_filters


def left():
    return ei.from_pydict({"k": [1, 2], "a": [1, 2], "d": [1.0, 2.0], "unused": ["x", "y"]})


def right():
    return ei.from_pydict({"k": [1], "q": [1], "d": [2.0]})


def find(plan, kind):
    return [n for n in plan.walk() if isinstance(n, kind)]


def test_filter_splits_across_join_sides():
    f = (left().join(right(), on="k")
         .filter((col("q") > 0) & (col("a") > 1) & (col("d_right") > col("d"))))
    opt = optimize(f.plan)
    join = find(opt, N.Join)[0]
    assert str(join.left).startswith("Project") or isinstance(join.left, N.Filter)
    assert "Filter(a > 1)" in tree(join.left)
    assert "Filter(q > 0)" in tree(join.right)
    assert isinstance(opt, N.Filter) and str(opt.predicate) == "d_right > d"


def test_filter_does_not_cross_the_outer_side_of_a_join():
    f = left().join(right(), on="k", how="left").filter(col("q") > 0)
    opt = push_filters(f.plan)
    assert isinstance(opt, N.Filter) and "Filter" not in tree(opt.inputs[0])


def test_filter_through_rename_and_group_keys():
    f = (left().rename({"a": "b"}).group_by("b").agg(s=col("d").sum())
         .filter((col("b") > 1) & (col("s") > 0)))
    opt = push_filters(f.plan)
    assert isinstance(opt, N.Filter) and str(opt.predicate) == "s > 0"
    assert "Filter(a > 1)" in tree(opt)


def test_filter_not_pushed_below_limit():
    f = left().limit(1).filter(col("a") > 1)
    assert isinstance(push_filters(f.plan), N.Filter)


def test_filter_pushed_into_every_union_input():
    f = left().union(left()).filter(col("a") > 1)
    opt = push_filters(f.plan)
    assert isinstance(opt, N.Union) and all(isinstance(i, N.Filter) for i in opt.inputs)


def test_adjacent_filters_merge():
    f = left().filter(col("a") > 0).filter(col("d") > 0)
    opt = push_filters(f.plan)
    assert isinstance(opt, N.Filter) and len(conjuncts(opt.predicate)) == 2
    assert isinstance(opt.input, N.Scan)


def test_pruning_reads_only_needed_columns():
    f = left().with_columns(x=col("a") * 2).group_by("k").agg(s=col("x").sum())
    scan = find(optimize(f.plan), N.Scan)[0]
    assert scan.columns == ("k", "a")


def test_pruning_count_only_keeps_one_column():
    f = left().agg(n=ei.count())
    scan = find(optimize(f.plan), N.Scan)[0]
    assert scan.columns is not None and len(scan.columns) == 1


def test_pruning_keeps_clashing_left_column_so_suffix_is_stable():
    f = left().join(right(), on="k").select("d_right")
    opt = optimize(f.plan)
    assert opt.schema.names == ("d_right",)
    join = find(opt, N.Join)[0]
    assert "d" in join.left.schema.names


def test_distinct_keeps_all_its_columns():
    f = left().distinct().select("a")
    scan = find(prune(f.plan), N.Scan)[0]
    assert scan.columns is None


def test_folding_constants_keeps_types():
    f = ei.from_arrow(pa.table({"a": pa.array([1], pa.int8())}))
    g = f.with_columns(b=col("a") + (lit(1) + lit(2)), c=lit(7) // lit(2))
    opt = fold(g.plan)
    assert str(opt).endswith("b=a + 3, c=3]")
    assert opt.schema == g.schema


def test_folding_leaves_failing_constants_for_run_time():
    g = left().with_columns(big=lit(2**62) * lit(4))
    assert "4611686018427387904 * 4" in str(fold(g.plan))


def test_folding_logic_is_kleene_safe():
    g = left().filter((col("a") > 1) & lit(True))
    assert str(fold(g.plan).predicate) == "a > 1"
    g = left().filter((col("a") > 1) | lit(True))
    assert isinstance(fold(g.plan), N.Scan)
    g = left().filter(lit(None, ei.Boolean) & lit(False))
    assert str(fold(g.plan).predicate) == "False"


def test_optimize_keeps_schema_of_every_plan_shape():
    shapes = [
        left().join(right(), on="k", how=how) for how in ("inner", "left", "right", "full", "semi", "anti")
    ] + [left().join(right(), how="cross"), left().sort("a", descending=True).limit(1), left().distinct()]
    for f in shapes:
        assert optimize(f.plan).schema == f.schema
