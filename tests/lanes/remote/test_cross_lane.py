"""The shared cross-lane plans (tests/lanes/test_cross_lane.py) on a service: each plan, with its tables
put there first (the planner runs it there, rule 2) or sent by engine='remote', must give the reference
lane's answer on the same tables here; value errors come back as the reference lane's ExecutionError,
word for word. Generated plans (Hypothesis, few examples) with their tables on the service likewise.
The shared suite itself runs the remote lane only while a connection is open (else it skips, saying
so); these run it against this module's own service: about 200 runs, 6 s on a 2-core machine."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import eidos as ei
import tests.lanes.test_cross_lane as shared
from eidos.errors import ExecutionError
from eidos.ir import nodes as N
from eidos.ir.sources import ArrowSource, RemoteSource
from eidos.testing.compare import assert_tables_equal
from eidos.testing.strategies import examples, flows
from tests.lanes.helpers import replace_scans


@pytest.fixture(scope="module")
def there(remote):
    """there(flow) -> the flow with each in-memory table put on the service once (by identity)."""
    from eidos.flow.read import from_remote_handle

    kept: dict[int, N.Node] = {}

    def move(flow: ei.Flow) -> ei.Flow:
        def swap(scan: N.Scan) -> N.Node:
            if not isinstance(scan.source, ArrowSource):
                return scan
            key = id(scan.source.table)
            if key not in kept:
                table = scan.source.table
                kept[key] = (table, from_remote_handle(remote, remote.put_table(table), schema=table.schema).plan)
            return N.Scan(kept[key][1].source, scan.columns)
        return ei.Flow(replace_scans(flow.plan, swap))

    return move


def _on_service(flow: ei.Flow) -> bool:
    return all(isinstance(n.source, RemoteSource) for n in flow.plan.walk() if isinstance(n, N.Scan))


@pytest.mark.parametrize("how", ["on the service", "sent"])
@pytest.mark.parametrize("case", shared.CASES, ids=[c.id for c in shared.CASES])
def test_hand_written(case, how, there):
    """Each plan with its tables on the service (the planner runs it there, rule 2), or with its tables
    here, sent by engine='remote'."""
    flow = case.build(shared.src)
    if how == "on the service":
        moved = there(flow)
        assert _on_service(moved)
        got = moved.run()
    else:
        got = flow.run(engine="remote", strict=True)
    assert ei.last_run().lane == "remote"
    assert_tables_equal(got, flow.run(engine="reference"), ordered=case.ordered, float_rel=1e-9)


@pytest.mark.parametrize("build", [b for _, b in shared.ERRORS], ids=[n for n, _ in shared.ERRORS])
def test_value_errors_are_the_reference_lanes(build, there, remote):
    if remote.health().devices["gpus"]:
        pytest.skip("a service with a GPU runs numeric plans on its triton lane, which words its own run-time "
                    "errors (as engine='triton' does here)")
    flow = build()
    with pytest.raises(ExecutionError) as ref:
        flow.run(engine="reference")
    with pytest.raises(ExecutionError) as got:
        there(flow).run()
    assert str(got.value) == str(ref.value)


@settings(max_examples=examples(15), deadline=None, derandomize=True)
@given(data=st.data())
def test_generated(data, there):
    from eidos.hal import registry

    gen = data.draw(flows(coverage=registry.get("remote").coverage), label="generated")
    try:
        expected = gen.flow.run(engine="reference")
    except ExecutionError as e:
        with pytest.raises(type(e)):
            there(gen.flow).run()
        return
    assert_tables_equal(there(gen.flow).run(), expected, ordered=gen.ordered, float_rel=1e-6)
