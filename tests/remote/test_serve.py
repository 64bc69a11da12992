"""`eidos serve` as a user starts it, the token file's rules, and TLS on both planes."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import eidos as ei
from eidos.errors import BackendUnavailable, PlanError
from eidos.remote.auth import Tls, read_token
from eidos.remote.client import connect

from .conftest import TOKEN, start_service


def _token_file(tmp_path: Path, token: str = TOKEN, mode: int = 0o600) -> Path:
    path = tmp_path / "token"
    path.write_text(token + "\n")
    path.chmod(mode)
    return path


def test_the_token_file_must_be_private_and_long_enough(tmp_path):
    assert read_token(_token_file(tmp_path)) == TOKEN
    with pytest.raises(PlanError, match="chmod 600") as e:
        read_token(_token_file(tmp_path, mode=0o644))
    assert TOKEN not in str(e.value)
    with pytest.raises(PlanError, match="at least 16"):
        read_token(_token_file(tmp_path, token="short"))
    with pytest.raises(PlanError, match="cannot read the token file"):
        read_token(tmp_path / "absent")


def test_eidos_serve_starts_answers_and_stops_on_sigterm(tmp_path):
    token = _token_file(tmp_path)
    proc = subprocess.Popen([sys.executable, "-m", "eidos", "serve", "--port", "0", "--token-file", str(token),
                             "--pool-mb", "16"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    try:
        line = proc.stdout.readline()
        assert line.startswith("eidos service at eidos://127.0.0.1:"), line + proc.stderr.read()
        address = line.split()[3]
        with connect(address, token=TOKEN) as r:
            assert r.health().memory["pool_bytes"] == 16 << 20
            flow = ei.from_pydict({"a": [2, 1]}).sort("a")
            (h,) = r.run_subgraph({"kind": "plan", "plan": flow.to_json()})
            assert r.fetch_result(h).to_pydict() == {"a": [1, 2]}
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
    finally:
        proc.kill()
        proc.wait()


def test_eidos_serve_refuses_a_readable_token_file(tmp_path):
    token = _token_file(tmp_path, mode=0o644)
    done = subprocess.run([sys.executable, "-m", "eidos", "serve", "--port", "0", "--token-file", str(token)],
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert done.returncode == 1 and "chmod 600" in done.stderr and TOKEN not in done.stderr


@pytest.fixture(scope="module")
def certificate(tmp_path_factory):
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed: it makes the test's certificate")
    d = tmp_path_factory.mktemp("tls")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
                    "-keyout", str(d / "key.pem"), "-out", str(d / "cert.pem")], check=True, capture_output=True)
    return d / "cert.pem", d / "key.pem"


def test_tls_carries_both_planes(certificate):
    cert, key = certificate
    svc = start_service(pool_bytes=8 << 20, tls=Tls(cert, key))
    try:
        address = svc.address.replace("eidos://", "eidos+tls://")
        with connect(address, token=TOKEN, tls_ca=str(cert)) as r:
            data = np.arange(300_000, dtype=np.int32)
            assert bytes(r.fetch_result(r.put_buffer(data))) == data.tobytes()
            table = pa.table({"x": [1.5, None]})
            assert r.fetch_result(r.put_table(table)).equals(table)
        with pytest.raises((BackendUnavailable, PlanError)):
            connect(svc.address, token=TOKEN, timeout=3)          # plain TCP to a TLS service
    finally:
        svc.shutdown()
