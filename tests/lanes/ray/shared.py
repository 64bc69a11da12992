"""One local Ray for a whole pytest run, xdist workers included.

The first test that needs it starts a holder process (`python -m tests.lanes.ray.shared`) under a file
lock: it calls ray.init (a head on free ports, this machine's cores, a temp folder of its own) and keeps
it until pytest's controller stops it at the end of the session, or until the controller dies. Every
test process connects to it through the lane's own connect(address). Tests call `join()`; conftest.py
does it for tests parametrized with the ray lane, and `stop()` at the end.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from tests.processes import alive

RUN_ENV = "EIDOS_TEST_RAY_RUN"   # the pid of the pytest process that owns the run (xdist's controller)
ROOT = Path(__file__).resolve().parents[3]
START_TIMEOUT_S = 120


def _files(run: str) -> tuple[Path, Path, Path]:
    base = Path(tempfile.gettempdir()) / f"eidos-ray-{os.getuid()}-{run}"
    return base.with_suffix(".lock"), base.with_suffix(".json"), base


def claim() -> None:
    """Called in pytest_configure: the first pytest process of a run (the controller) owns it. Ray
    clusters started here use token authentication (Ray's default for a new local cluster, with the
    token in ~/.ray/auth_token); a process connecting by address uses it only when RAY_AUTH_MODE says so."""
    os.environ.setdefault(RUN_ENV, str(os.getpid()))
    os.environ.setdefault("RAY_AUTH_MODE", "token")


def join() -> str:
    """Connect this process to the run's Ray (starting it if no process has); returns its address."""
    from eidos.lanes.ray import connect

    address = _head()
    connect.connect(address)
    return address


def _head() -> str:
    lock, info, temp = _files(os.environ.setdefault(RUN_ENV, str(os.getpid())))
    with open(lock, "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        if info.exists():
            found = json.loads(info.read_text())
            if alive(found["pid"]):
                return found["address"]
        temp.mkdir(exist_ok=True)
        log = open(temp / "holder.log", "w")
        proc = subprocess.Popen([sys.executable, "-m", "tests.lanes.ray.shared", str(info), os.environ[RUN_ENV],
                                 str(temp)], cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + START_TIMEOUT_S
        while not info.exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError(f"the shared test Ray did not start: see {temp / 'holder.log'}")
            time.sleep(0.1)
        return json.loads(info.read_text())["address"]


def stop() -> None:
    """Called by the owner at the session's end: disconnect, stop the holder (and so Ray), remove its files."""
    run = os.environ.get(RUN_ENV)
    if run != str(os.getpid()):
        return
    from eidos.lanes.ray import connect

    if "ray" in sys.modules:
        connect.disconnect()
    lock, info, temp = _files(run)
    if info.exists():
        pid = json.loads(info.read_text())["pid"]
        if alive(pid):
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + 30
            while alive(pid) and time.monotonic() < deadline:
                time.sleep(0.1)
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        info.unlink()
    lock.unlink(missing_ok=True)
    shutil.rmtree(temp, ignore_errors=True)


def _hold(info: str, owner: int, temp: str) -> None:
    """The holder: a Ray head for the run, kept until SIGTERM or the owner's death."""
    import ray

    # Every pytest process is a Ray job of its own, and Ray keeps idle workers (each one an eidos
    # import) only up to the CPU count across jobs: with two xdist processes they took turns killing
    # each other's and starting new ones. Keep more, for longer.
    ray.init(num_cpus=os.cpu_count(), include_dashboard=False, _temp_dir=temp,
             _system_config={"num_workers_soft_limit": 4 * (os.cpu_count() or 1),
                             "idle_worker_killing_time_threshold_ms": 600_000})
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    tmp = Path(info).with_suffix(".tmp")
    tmp.write_text(json.dumps({"address": ray.get_runtime_context().gcs_address, "pid": os.getpid()}))
    tmp.rename(info)
    while not done.wait(1.0) and alive(owner):
        pass
    ray.shutdown()


if __name__ == "__main__":
    _hold(sys.argv[1], int(sys.argv[2]), sys.argv[3])
