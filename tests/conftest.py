"""Session-wide test set-up: one local Ray for the whole run (tests/lanes/ray/shared.py), joined by the
tests that run the ray lane (parametrized with it, or using the `ray_cluster` fixture) and stopped at the end;
likewise one eidos service in this process, connected for the tests that run the remote lane."""

from __future__ import annotations

import importlib.util
import os
import sys
import tempfile

import pytest

# Compiled kernels go to a folder of the machine's temporary space, never the user's home: one per user, kept
# between runs (a later run loads what an earlier one compiled; the cache bounds its size), unless CI or the user
# names another. No ahead-of-time build in the background (tests/isa/test_kernel_cache.py builds what it checks).
os.environ.setdefault("EIDOS_CACHE_DIR", os.path.join(tempfile.gettempdir(), f"eidos-test-cache-{os.getuid()}"))
os.environ.setdefault("EIDOS_CACHE_WARM", "0")

from hypothesis import settings  # noqa: E402

from eidos.testing.strategies import PROFILE_ENV  # noqa: E402
from tests.lanes.ray import shared  # noqa: E402

# Every generated test runs under the profile $EIDOS_HYPOTHESIS_PROFILE names, 'ci' by default (derandomized, few
# examples; counts a test sets itself go through eidos.testing.strategies.examples): 'deep' is the slow tier.
settings.load_profile(os.environ.get(PROFILE_ENV, "ci"))


def pytest_configure(config):
    shared.claim()


def pytest_runtest_setup(item):
    params = getattr(item, "callspec", None)
    if params is not None and any(isinstance(v, str) and v == "ray" for v in params.params.values()):
        if importlib.util.find_spec("ray") is not None:   # else the lane is unavailable and its tests skip
            shared.join()
    if params is not None and any(isinstance(v, str) and v == "remote" for v in params.params.values()):
        _remote_service()


_service: list = []


def _remote_service():
    """A loopback service and a connection to it (the current one), made once for the run."""
    if not _service:
        from eidos.remote.client import connect
        from tests.remote.conftest import TOKEN, start_service

        service = start_service(pool_bytes=256 << 20, isa_targets=("cpu", "reference"))   # remote: cpu there
        _service.extend([service, connect(service.address, token=TOKEN)])
    return _service[1]


def pytest_sessionfinish(session):
    shared.stop()
    if _service:
        _service[1].close()
        _service[0].shutdown()


@pytest.fixture(autouse=True)
def no_connection_outlives_its_test():
    """A test's connections to eidos services close with it: one left open (its service shut down or killed)
    would stay the current connection, and later tests of the remote lane would meet a dead service."""
    client = sys.modules.get("eidos.remote.client")
    before = {id(r) for r in client.connections()} if client else set()
    yield
    client = sys.modules.get("eidos.remote.client")
    for r in client.connections() if client else ():
        if id(r) not in before and (not _service or r is not _service[1]):
            r.close()



@pytest.fixture(scope="session")
def ray_cluster() -> str:
    """The address of the run's Ray, this process connected to it."""
    return shared.join()


def pytest_unconfigure(config):
    from tests.isa import distributed

    distributed.close()


@pytest.fixture(scope="session")
def made_once(tmp_path_factory):
    """made_once(name, build) -> (path, what build returned): build(path) writes a data file the tests only
    read, once for the whole run; the xdist workers share it (a lock, the value kept beside it as JSON)."""
    import fcntl
    import json
    from pathlib import Path

    root = Path(tmp_path_factory.getbasetemp())
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent        # the run's folder, above each worker's own

    def made(name: str, build):
        folder = root / "made-once"
        folder.mkdir(exist_ok=True)
        path, told = folder / name, folder / f"{name}.json"
        with open(folder / f"{name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not told.exists():
                told.write_text(json.dumps(build(path)))
        return path, json.loads(told.read_text())

    return made
