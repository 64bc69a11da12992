"""Generated programs give the same bytes on every backend as on the reference interpreter."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eidos.isa.backends.reference import ReferenceBackend
from eidos.testing.strategies import examples
from tests.isa import strategies as S
from tests.isa.conftest import BACKENDS, NO_EXTENDED_INTEGERS, generated_shards, make_backend

SLOW_OK = [HealthCheck.too_slow, HealthCheck.function_scoped_fixture]


def _exact_programs(data, backend):
    """Exact generated programs; without the wide integers a backend has no form for (their
    UnsupportedError is asserted in that backend's own tests)."""
    return data.draw(S.programs(transcendentals=False, wide=backend.name not in NO_EXTENDED_INTEGERS))


def _sharded(n: int):
    """The test as generated_shards(n) items, each a Hypothesis search of its own size (on a GPU the
    items are run by several xdist workers at once; one item elsewhere)."""
    def wrap(test):
        def run(backend, shard, examples):
            settings(max_examples=examples, deadline=None, suppress_health_check=SLOW_OK)(
                given(data=st.data())(lambda data: test(backend, data)))()
        run.__name__, run.__doc__ = test.__name__, test.__doc__
        return pytest.mark.parametrize(("shard", "examples"), generated_shards(n))(run)
    return wrap


@_sharded(40)
def test_exact_programs_store_the_reference_bytes(backend, data):
    gp = _exact_programs(data, backend)
    assert S.run(backend, gp) == S.run(ReferenceBackend(), gp)


@_sharded(15)
def test_optimized_programs_on_each_backend(backend, data):
    gp = _exact_programs(data, backend)
    assert S.run(backend, gp, gp.program.optimize()) == S.run(ReferenceBackend(), gp)


@pytest.mark.parametrize("backend_name", BACKENDS)
@settings(max_examples=examples(40), deadline=None, suppress_health_check=SLOW_OK)
@given(g=S.array_programs())
def test_array_chains_store_the_reference_bytes_fused_or_not(backend_name, g):
    want = S.run_arrays(ReferenceBackend(), g)
    assert S.run_arrays(make_backend(backend_name), g) == want
    assert S.run_arrays(make_backend(backend_name), g, g.program.optimize()) == want
