"""Generated plans: the reference lane runs them to the plan's schema, and optimizing never changes the answer."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from eidos.errors import EidosError
from eidos.ir.rewrite import optimize
from eidos.testing.compare import assert_tables_equal
from eidos.testing.strategies import flows, profile
from tests.reference.helpers import LANE


@profile()
@given(st.data())
def test_generated_plans_run_and_optimizing_keeps_the_answer(data):
    gen = data.draw(flows())
    plan = gen.flow.plan
    try:
        expected = LANE.execute(plan)
    except EidosError as e:
        # a value-dependent failure must fail the same way after optimization
        try:
            LANE.execute(optimize(plan))
        except EidosError as again:
            assert type(again) is type(e)
            return
        raise AssertionError(f"the plan raised {e!r} but its optimized form did not") from e
    assert expected.schema == plan.schema.to_arrow()
    assert_tables_equal(LANE.execute(optimize(plan)), expected, ordered=gen.ordered)
