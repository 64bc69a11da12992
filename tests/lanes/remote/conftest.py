"""A real eidos service on loopback for the remote lane's tests, started by the remote service's own
helper (tests/remote/conftest.py: in this process, its own threads and ports): one per test module,
with one connection open to it (`ei.connect`), both closed at the module's end, so the rest of a run
plans with no connection open."""

from __future__ import annotations

import pytest

import eidos as ei
from tests.remote.conftest import TOKEN, start_service


@pytest.fixture(scope="module")
def service():
    running = start_service(pool_bytes=64 << 20, input_wait=10.0)
    try:
        yield running
    finally:
        running.shutdown()


@pytest.fixture(scope="module")
def remote(service):
    conn = ei.connect(service.address, token=TOKEN, timeout=60.0)
    try:
        yield conn
    finally:
        conn.close()


@pytest.fixture
def service_handles(service, remote):
    """service_handles() -> how many handles the service keeps for the connection's session."""
    return lambda: len(service.sessions.get(remote.session).store)


@pytest.fixture
def no_connection(monkeypatch):
    """No connection open, whatever other tests of the run left: the client's list of them is empty."""
    import sys

    client = sys.modules.get("eidos.remote.client")
    if client is not None:
        monkeypatch.setattr(client, "_open", [])
