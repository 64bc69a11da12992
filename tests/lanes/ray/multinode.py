"""A Ray cluster of several nodes on this machine for the fault tests, and the probe its tasks report to.

`Nodes` starts a holder process (`python -m tests.lanes.ray.multinode hold FOLDER`) that builds a
ray.cluster_utils.Cluster: a head with no CPUs (the driver's node: what the driver puts in the store stays
there) and worker nodes of one CPU each, on free ports, with a temp folder (RAY_TMPDIR) of its own so
that no other Ray on the machine finds it; it removes or adds nodes when told, and ends the cluster when
told or when its parent dies (its stdin closes). Drivers run in processes of their own (`Driver`): a
pytest process may already be connected to the run's shared Ray, and a process joins one Ray at a time.

The probe (`Probe`): every task execution appends a line to FOLDER/executions (task id, name, pid, node),
so redone work is counted (a retry or a lineage re-execution runs the same task id again); the first
execution whose task name starts with FOLDER/stop-at's text waits until the test writes FOLDER/go, after
FOLDER/stopped says which process and node it is in: the test injects its fault at exactly that point.
The cluster lane's tasks report through `watch`, a worker setup hook the driver names in its runtime_env.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
FOLDER_ENV = "EIDOS_TEST_FAULTS"
MiB = 1 << 20
# Node death noticed in about a second, not Ray's default 15 s (health checks every 3 s, 5 misses); task
# results over 1 KiB go to the object store, where losing a node loses them (smaller ones travel inline,
# to the driver's memory, and would never need re-executing).
SYSTEM_CONFIG = {
    "health_check_initial_delay_ms": 0,
    "health_check_period_ms": 200,
    "health_check_timeout_ms": 200,
    "health_check_failure_threshold": 5,
    "max_direct_call_object_size": 1024,
}
RESULT = "driver result: "
WAIT_S = 120   # the longest any step here waits for the cluster (a hang guard, not a speed check)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(folder: Path) -> dict[str, str]:
    """The environment of the holder and drivers: this checkout importable (workers too), Ray's temp
    folder our own."""
    paths = [str(ROOT), str(ROOT / "src")] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths), "RAY_TMPDIR": str(folder)}


def wait_for(condition, what: str, timeout: float = WAIT_S):
    """condition()'s first truthy value, polled every 20 ms; an AssertionError naming `what` past `timeout`."""
    end = time.monotonic() + timeout
    while True:
        got = condition()
        if got:
            return got
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(0.02)


@dataclass
class Node:
    id: str
    raylet: int   # the raylet's pid: the node's task workers are its children


class Nodes:
    """A head (0 CPUs) and `workers` worker nodes of 1 CPU each; use as a context manager."""

    def __init__(self, workers: int = 2, store_mib: int = 100):
        self.folder = Path(tempfile.mkdtemp(prefix="rf-", dir="/tmp"))   # short: Ray's socket paths must fit
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "tests.lanes.ray.multinode", "hold", str(self.folder), str(workers),
             str(store_mib)], cwd=ROOT, env=_env(self.folder), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=open(self.folder / "holder.log", "w"), text=True, start_new_session=True)
        try:
            info = self._answer()
        except BaseException:
            self.close()
            raise
        self.address: str = info["address"]
        self.head = Node(**info["head"])
        self.workers = [Node(**n) for n in info["workers"]]

    def _answer(self) -> dict:
        line = self._proc.stdout.readline()
        if not line:
            self._proc.wait(WAIT_S)
            raise RuntimeError(f"the test cluster's holder ended: {(self.folder / 'holder.log').read_text()[-3000:]}")
        return json.loads(line)

    def remove(self, node: Node) -> None:
        """Kill every process of `node` (raylet, object store, workers) at once, as a lost machine."""
        self._proc.stdin.write(f"remove {node.id}\n")
        self._proc.stdin.flush()
        assert self._answer() == {"removed": node.id}
        self.workers.remove(node)

    def add(self) -> Node:
        self._proc.stdin.write("add\n")
        self._proc.stdin.flush()
        node = Node(**self._answer())
        self.workers.append(node)
        return node

    def node_of(self, pid: int) -> Node:
        """The worker node whose raylet started process `pid`."""
        parent = _parent(pid)
        return next(n for n in self.workers if n.raylet == parent)

    def running(self, prefix: str) -> list[int]:
        """Pids of this cluster's workers now running a task whose name starts with `prefix` (Ray titles a
        worker process 'ray::<task name>' while it runs a task, 'ray::IDLE' between tasks)."""
        raylets = {n.raylet for n in [self.head, *self.workers]}
        found = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit() and _parent(int(entry.name)) in raylets:
                try:
                    title = (entry / "cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
                except OSError:
                    continue
                if title.startswith(f"ray::{prefix}"):
                    found.append(int(entry.name))
        return found

    def close(self) -> None:
        """End the cluster (the holder removes every node), and remove its folder."""
        if self._proc.poll() is None:
            try:
                self._proc.stdin.close()
                self._proc.wait(WAIT_S)
            except (OSError, subprocess.TimeoutExpired):
                os.killpg(self._proc.pid, signal.SIGKILL)
                self._proc.wait()
        shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> Nodes:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Driver:
    """A driver process: `target` ("module:function") called as function(address, folder) in a process of its
    own, its returned dict printed on a line of its own after RESULT. Use as a context manager (a driver still
    running at the end is killed)."""

    def __init__(self, nodes: Nodes, target: str, folder: Path):
        self.folder = folder
        self._out = open(folder / "driver.out", "w+")
        self._proc = subprocess.Popen([sys.executable, "-m", "tests.lanes.ray.multinode", "drive", target,
                                       nodes.address, str(folder)], cwd=ROOT, env=_env(nodes.folder),
                                      stdout=self._out, stderr=subprocess.STDOUT, text=True)

    @property
    def running(self) -> bool:
        return self._proc.poll() is None

    def result(self, timeout: float = WAIT_S) -> dict:
        """The function's returned dict (waits for the driver to end); an AssertionError with its output if it failed."""
        code = self._proc.wait(timeout)
        self._out.seek(0)
        text = self._out.read()
        found = [line for line in text.splitlines() if line.startswith(RESULT)]
        assert code == 0 and found, f"the driver ended with {code}:\n{text[-5000:]}"
        return json.loads(found[-1][len(RESULT):])

    def __enter__(self) -> Driver:
        return self

    def __exit__(self, *exc) -> None:
        if self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()
        self._out.close()


def _drive(target: str, address: str, folder: str) -> None:
    import importlib

    module, _, name = target.partition(":")
    got = getattr(importlib.import_module(module), name)(address, Path(folder))
    print(RESULT + json.dumps(got), flush=True)


def _parent(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


class Probe:
    """The test's side of the probe's files (see the module's docstring)."""

    def __init__(self, folder: Path):
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "executions").touch()

    def stop_at(self, prefix: str) -> None:
        """Hold the first execution of a task whose name starts with `prefix` until go()."""
        (self.folder / "stop-at").write_text(prefix)

    def stopped(self, driver: Driver) -> dict:
        """The held execution (waits for it while `driver` runs)."""
        path = self.folder / "stopped"

        def held():
            if path.exists():
                return json.loads(path.read_text())
            if not driver.running:
                driver.result()   # says how the driver failed
                raise AssertionError("the driver ended before any task reached the probe's stop")

        return wait_for(held, "a task to reach the probe's stop")

    def go(self) -> None:
        (self.folder / "go").touch()

    def executions(self) -> list[dict]:
        return [json.loads(line) for line in (self.folder / "executions").read_text().splitlines()]

    def redone(self) -> int:
        """Executions beyond one per task: retries and lineage re-executions."""
        runs = self.executions()
        return len(runs) - len({r["task"] for r in runs})


def execution(folder: str | None = None) -> None:
    """Called by a task as it starts (in a Ray worker): record it, and hold it if it is the stop."""
    import ray

    base = Path(folder or os.environ[FOLDER_ENV])
    context = ray.get_runtime_context()
    line = json.dumps({"task": context.get_task_id(), "name": context.get_task_name(), "pid": os.getpid(),
                       "node": context.get_node_id()}) + "\n"
    with open(base / "executions", "a") as f:
        f.write(line)
    stop = base / "stop-at"
    if not (stop.exists() and (context.get_task_name() or "").startswith(stop.read_text())):
        return
    try:
        fd = os.open(base / "stopped.tmp", os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return   # another execution was held already
    os.write(fd, line.encode())
    os.close(fd)
    os.rename(base / "stopped.tmp", base / "stopped")
    end = time.monotonic() + WAIT_S
    while not (base / "go").exists() and time.monotonic() < end:
        time.sleep(0.01)


def watch() -> None:
    """A worker setup hook (runtime_env worker_process_setup_hook): every task of the cluster lane reports to
    the probe as it starts. It wraps the lane's task function in this worker before Ray loads it (Ray loads
    a task's function by its module and name)."""
    import functools

    from eidos.lanes.ray import execute

    task = execute._task

    @functools.wraps(task)
    def reported(*args, **kwargs):
        execution()
        return task(*args, **kwargs)

    execute._task = reported


def _hold(folder: str, workers: int, store_mib: int) -> None:
    """The holder: builds the cluster, says where it is, then obeys 'remove ID' and 'add' until stdin ends."""
    from ray._private import ray_constants
    from ray.cluster_utils import Cluster

    def described(node) -> dict:
        raylet = node.all_processes[ray_constants.PROCESS_TYPE_RAYLET][0].process.pid
        return {"id": node.node_id, "raylet": raylet}

    def say(what: dict) -> None:
        print(json.dumps(what), flush=True)

    def add():
        return cluster.add_node(num_cpus=1, object_store_memory=store_mib * MiB)

    Path(folder, "ray").mkdir(exist_ok=True)   # where the head writes its address (RAY_TMPDIR/ray)
    cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 0, "object_store_memory": store_mib * MiB, "temp_dir": folder, "include_dashboard": False,
        "dashboard_agent_listen_port": _free_port(), "_system_config": SYSTEM_CONFIG})
    try:
        nodes = [add() for _ in range(workers)]
        cluster.wait_for_nodes()
        say({"address": cluster.address, "head": described(cluster.head_node),
             "workers": [described(n) for n in nodes]})
        for line in sys.stdin:
            command = line.split()
            if command[0] == "remove":
                node = next(n for n in cluster.worker_nodes if n.node_id == command[1])
                cluster.remove_node(node, allow_graceful=False)
                say({"removed": command[1]})
            elif command[0] == "add":
                node = add()
                cluster.wait_for_nodes()
                say(described(node))
    finally:
        cluster.shutdown()


if __name__ == "__main__":
    if sys.argv[1] == "hold":
        _hold(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    elif sys.argv[1] == "drive":
        _drive(*sys.argv[2:5])
