"""Session-wide test set-up: one local Ray for the whole run (tests/lanes/ray/shared.py), joined by the
tests that run the ray lane (parametrized with it, or using the `ray_cluster` fixture) and stopped at the end."""

from __future__ import annotations

import importlib.util

import pytest

from tests.lanes.ray import shared


def pytest_configure(config):
    shared.claim()


def pytest_runtest_setup(item):
    params = getattr(item, "callspec", None)
    if params is not None and any(isinstance(v, str) and v == "ray" for v in params.params.values()):
        if importlib.util.find_spec("ray") is not None:   # else the lane is unavailable and its tests skip
            shared.join()


def pytest_sessionfinish(session):
    shared.stop()


@pytest.fixture(scope="session")
def ray_cluster() -> str:
    """The address of the run's Ray, this process connected to it."""
    return shared.join()
