"""A pytest plugin for the Array API conformance suite as tests/tensor/test_array_api_suite.py runs it: Hypothesis
without its shrink phase and without its example database, so a run is the same every time (fixed seed) and a
failing test ends at its first failing example instead of minutes of shrinking (CI wants the verdict; rerun the
test alone to shrink it). Loaded with `-p eidos_suite_settings` after the suite's conftest made its profile."""

import pytest
from hypothesis import Phase, settings


@pytest.hookimpl(trylast=True)
def pytest_configure(config):
    settings.register_profile("array-api-tests", parent=settings.get_profile("array-api-tests"),
                              phases=[Phase.explicit, Phase.generate], database=None)
    settings.load_profile("array-api-tests")
