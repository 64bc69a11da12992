"""Which plans define their row order (eidos.ir.order), the rule order-reading operations build on."""

import pyarrow as pa
import pytest

import eidos as ei
from eidos.errors import PlanError
from eidos.ir.order import has_row_order, require_row_order


@pytest.fixture
def t():
    return ei.from_arrow(pa.table({"k": [1, 2, 1], "x": [1.0, 2.0, 3.0]}))


def test_scans_filters_projections_sorts_and_unions_keep_an_order(t):
    kept = [t, t.filter(ei.col("x") > 1), t.with_columns(y=ei.col("x") * 2), t.head(2),
            t.union(t), t.group_by("k").agg(s=ei.col("x").sum()).sort("k"),
            t.join(t, on="k", how="semi"), t.join(t.select("x"), how="cross")]
    for flow in kept:
        assert has_row_order(flow.plan), flow.explain()


def test_groups_joins_and_distinct_leave_it_open(t):
    for flow in [t.group_by("k").agg(s=ei.col("x").sum()), t.join(t, on="k"), t.distinct(),
                 t.group_by("k").agg(s=ei.col("x").sum()).filter(ei.col("s") > 0)]:
        assert not has_row_order(flow.plan)
        with pytest.raises(PlanError, match=r"cum_sum depends on the order of the rows.*sort the flow"):
            require_row_order(flow.plan, "cum_sum")
