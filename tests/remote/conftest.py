"""A running eidos service for the remote tests: one per test session, in this process, on loopback.

`service` is the ExecutionService; `remote` a fresh connection to it per test (closed after, so each
test's results are freed); `TOKEN` is what both use, and `token_file` a file holding it as `eidos serve`
wants it. Tests that need a service of their own (killed, cut off, configured otherwise) start one with
`start_service(**config)`.
"""

from __future__ import annotations

import pytest

TOKEN = "test-token-0123456789abcdef"


def start_service(**config):
    from eidos.remote.service import Config, ExecutionService

    return ExecutionService(Config(token=config.pop("token", TOKEN), **config)).start()


@pytest.fixture(scope="session")
def service():
    svc = start_service(pool_bytes=256 << 20, input_wait=10.0)
    yield svc
    svc.shutdown()


@pytest.fixture
def remote(service):
    from eidos.remote.client import connect

    conn = connect(service.address, token=TOKEN, timeout=20.0)
    yield conn
    conn.close()


@pytest.fixture
def token_file(tmp_path):
    """TOKEN in a file only its owner can read, for `eidos serve --token-file`."""
    path = tmp_path / "token"
    path.write_text(TOKEN + "\n")
    path.chmod(0o600)
    return path
