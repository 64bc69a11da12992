"""The cluster lane with every exchange a shuffle (joins hash both sides, sorts are range-partitioned, three
partitions), on the cross-lane suite's hand-written plans with a join or a sort and on generated plans,
against the reference lane.

The registered ray lane broadcasts small join sides and gathers small sorts, which is all the suite's
small tables ever need; this lane takes the other paths on the same plans."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import eidos as ei
from eidos.errors import ExecutionError
from eidos.hal.registry import unregister_backend
from eidos.ir import nodes as N
from eidos.testing.compare import assert_tables_equal
from eidos.testing.strategies import flows, profile
from tests.lanes.test_cross_lane import CASES, src

pytest.importorskip("ray")

NAME = "ray-shuffle"


@pytest.fixture(scope="module")
def shuffle():
    from eidos.lanes.ray import RayLane

    ei.register_backend(NAME, RayLane(partitions=3, broadcast_bytes=0, gather_bytes=0))
    yield NAME
    unregister_backend(NAME)


# The plans where this lane cuts other stages than the registered one: those with a join or a sort.
SHUFFLED = [c for c in CASES if any(isinstance(n, (N.Join, N.Sort)) for n in c.build(src).plan.walk())]


@pytest.mark.parametrize("case", SHUFFLED, ids=[c.id for c in SHUFFLED])
def test_hand_written(case, shuffle, ray_cluster):
    flow = case.build(src)
    assert_tables_equal(flow.run(engine=shuffle, strict=True), flow.run(engine="reference"),
                        ordered=case.ordered, float_rel=1e-9)


@settings(parent=profile(), max_examples=max(5, profile().max_examples // 2))
@given(data=st.data())
def test_generated(data, shuffle, ray_cluster):
    gen = data.draw(flows(), label="generated")
    try:
        expected = gen.flow.run(engine="reference")
    except ExecutionError:
        with pytest.raises(ExecutionError):
            gen.flow.run(engine=shuffle, strict=True)
        return
    assert_tables_equal(gen.flow.run(engine=shuffle, strict=True), expected, ordered=gen.ordered, float_rel=1e-6)


def test_sums_near_overflow_combine_their_states(shuffle, ray_cluster):
    """Floats adding up past 1.5 * 2**1023 combine as exact partial states, bit for bit the reference's
    (an infinity where the exact total passes the float range)."""
    from eidos.lanes.ray import stages

    big = 1.7976931348623157e308
    flow = ei.from_pydict({"k": [1, 2, 1, 2, 1, 2, 1, 3], "x": [big, big, big, -big, -big, 1.0, 5e-324, big]}) \
        .group_by("k").agg(s=ei.col("x").sum(), m=ei.col("x").mean()).sort("k")
    cut = stages.cut(flow.plan.optimized, 3, broadcast_bytes=0, gather_bytes=0)
    assert any(e.how == stages.PARTIAL for s in cut.walk() for _, e in s.inputs)
    assert_tables_equal(flow.run(engine=shuffle, strict=True), flow.run(engine="reference"),
                        ordered=True, float_rel=0.0, float_abs=0.0)
