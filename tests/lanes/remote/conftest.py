"""A real eidos service on loopback for the remote lane's tests: started in this process (its own
threads, its own ports), one per test module, with a connection open to it; both closed at the end,
so the rest of a run plans with no connection open."""

from __future__ import annotations

import secrets

import pytest


@pytest.fixture(scope="module")
def service():
    service = pytest.importorskip("eidos.remote.service", reason="the service (eidos.remote.service) is not here yet")
    Config, ExecutionService = service.Config, service.ExecutionService

    config = Config(token=secrets.token_urlsafe(32), pool_bytes=64 << 20, input_wait=10.0)
    with ExecutionService(config) as running:
        yield running


@pytest.fixture(scope="module")
def remote(service):
    from eidos.remote.client import connect

    conn = connect(service.address, token=service.config.token, timeout=60.0)
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
