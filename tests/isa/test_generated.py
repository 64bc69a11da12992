"""Generated programs give the same bytes on every backend as on the reference interpreter."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eidos.isa.backends.reference import ReferenceBackend
from tests.isa import strategies as S
from tests.isa.conftest import BACKENDS, NO_EXTENDED_INTEGERS, generated_examples, make_backend

SLOW_OK = [HealthCheck.too_slow, HealthCheck.function_scoped_fixture]


def _exact_programs(data, backend):
    """Exact generated programs; without the wide integers a backend has no form for (their
    UnsupportedError is asserted in that backend's own tests)."""
    return data.draw(S.programs(transcendentals=False, wide=backend.name not in NO_EXTENDED_INTEGERS))


@settings(max_examples=generated_examples(40), deadline=None, suppress_health_check=SLOW_OK)
@given(data=st.data())
def test_exact_programs_store_the_reference_bytes(backend, data):
    gp = _exact_programs(data, backend)
    assert S.run(backend, gp) == S.run(ReferenceBackend(), gp)


@settings(max_examples=generated_examples(15), deadline=None, suppress_health_check=SLOW_OK)
@given(data=st.data())
def test_optimized_programs_on_each_backend(backend, data):
    gp = _exact_programs(data, backend)
    assert S.run(backend, gp, gp.program.optimize()) == S.run(ReferenceBackend(), gp)


@pytest.mark.parametrize("backend_name", BACKENDS)
@settings(max_examples=40, deadline=None, suppress_health_check=SLOW_OK)
@given(g=S.array_programs())
def test_array_chains_store_the_reference_bytes_fused_or_not(backend_name, g):
    want = S.run_arrays(ReferenceBackend(), g)
    assert S.run_arrays(make_backend(backend_name), g) == want
    assert S.run_arrays(make_backend(backend_name), g, g.program.optimize()) == want
