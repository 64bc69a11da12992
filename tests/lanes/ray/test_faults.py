"""Faults while the cluster lane runs a query on a Ray cluster of three nodes simulated on this machine
(tests/lanes/ray/multinode.py: a head with no CPUs, where the driver runs, and two worker nodes of one CPU).

The query is TPC-H-like (lineitem filtered, joined with orders, grouped, sorted) on a lane that shuffles
every exchange into 4 partitions (24 tasks in 5 stages). Each fault is injected while one task of the join
stage is held by the probe, so it lands mid-query at the same point every time; the answer must equal the
reference lane's, and the work redone (executions beyond one per task: retries and lineage re-executions)
is counted and printed. Those tests are slow (the cluster takes 10-25 s to start on a loaded 2-core machine,
each test 5-15 s): `pytest -m slow -s tests/lanes/ray/test_faults.py` (-s shows the measured figures).

An unreachable cluster (tests/lanes/ray/test_connect.py has a closed port and a port that never answers):
here a server that answers as gRPC but is not Ray, which ray.init alone would wait on without end.
"""

from __future__ import annotations

import _thread
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import eidos as ei
from eidos import col
from eidos.testing.compare import assert_tables_equal
from tests.lanes.ray.multinode import FOLDER_ENV, ROOT, Driver, Nodes, Probe, wait_for
from tests.processes import alive

pytest.importorskip("ray")

PARTITIONS = 4
NAME = "ray-faults"


def tables(orders: int = 15_000, items: int = 60_000) -> tuple[pa.Table, pa.Table]:
    r = np.random.default_rng(13)
    priorities = np.array(["1-URGENT", "2-HIGH", "3-MEDIUM", "4-NOT SPECIFIED", "5-LOW"])
    o = pa.table({"o_orderkey": np.arange(orders, dtype=np.int64), "o_custkey": r.integers(0, 1_000, orders),
                  "o_orderpriority": priorities[r.integers(0, 5, orders)]})
    li = pa.table({"l_orderkey": r.integers(0, orders, items), "l_quantity": r.integers(1, 51, items),
                   "l_extendedprice": np.round(r.uniform(900, 100_000, items), 2),
                   "l_discount": np.round(r.uniform(0, 0.1, items), 2)})
    return o, li


def query() -> ei.Flow:
    """Revenue per customer of the lines under 45 units (Q10's shape): a hash join, a hash aggregate, a range sort."""
    o, li = tables()
    return (ei.from_arrow(li).filter(col("l_quantity") < 45)
            .join(ei.from_arrow(o), left_on="l_orderkey", right_on="o_orderkey")
            .group_by("o_custkey")
            .agg(revenue=(col("l_extendedprice") * (1 - col("l_discount"))).sum(), lines=ei.count(),
                 quantity=col("l_quantity").sum())
            .sort("o_custkey"))


def lane():
    from eidos.lanes.ray import RayLane

    return RayLane(partitions=PARTITIONS, broadcast_bytes=0, gather_bytes=0)


def join_stage() -> str:
    """The task name of the join stage's tasks (the lane names a task 'eidos <stage key>')."""
    stage = next(s for s in lane().stages(query().plan, PARTITIONS).walk() if s.what == "join")
    return f"eidos {stage.key}"


def _connect(address: str, folder: Path) -> None:
    """In a driver: join the cluster with every task of the lane reporting to the probe in `folder`."""
    import ray

    ray.init(address=address, logging_level="WARNING", log_to_driver=False,
             runtime_env={"worker_process_setup_hook": "tests.lanes.ray.multinode.watch",
                          "env_vars": {FOLDER_ENV: str(folder)}})
    ei.register_backend(NAME, lane())


def _run(folder: Path) -> dict:
    start = time.monotonic()
    table = query().run(engine=NAME)
    seconds = time.monotonic() - start
    with pa.ipc.new_file(folder / "result.arrow", table.schema) as out:
        out.write_table(table)
    return {"seconds": seconds}


def run_query(address: str, folder: Path) -> dict:
    """A driver: the query on the lane, its result in folder/result.arrow."""
    _connect(address, folder)
    return _run(folder)


def interrupted_query(address: str, folder: Path) -> dict:
    """A driver: the query, Ctrl-C when the test says (while the probe holds a task); the test looks at the
    cluster while this waits for the probe's go, then the query runs again to the end."""
    _connect(address, folder)

    def interrupt() -> None:
        wait_for(lambda: (folder / "interrupt").exists(), "the test's word to interrupt")
        _thread.interrupt_main()

    threading.Thread(target=interrupt, daemon=True).start()
    raised = None
    try:
        query().run(engine=NAME)
    except KeyboardInterrupt:
        raised = "KeyboardInterrupt"
    (folder / "interrupted").touch()
    wait_for(lambda: (folder / "go").exists(), "the test's go")
    return {"raised": raised, **_run(folder)}


@pytest.fixture(scope="module")
def nodes():
    with Nodes(workers=2) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def expected() -> pa.Table:
    return query().run(engine="reference")


def _result(folder: Path) -> pa.Table:
    with pa.memory_map(str(folder / "result.arrow")) as source:
        return pa.ipc.open_file(source).read_all()


def _report(what: str, probe: Probe, got: dict) -> None:
    runs = probe.executions()
    names = [r["name"] for r in runs]
    tasks = {r["task"]: r["name"] for r in runs}
    redone = {n: names.count(n) - list(tasks.values()).count(n) for n in sorted(set(names))}
    print(f"\n{what}: {len(runs)} executions of {len(tasks)} tasks, {probe.redone()} redone "
          f"({', '.join(f'{n}: {k}' for n, k in redone.items() if k)}); query {got['seconds']:.1f} s")


@pytest.mark.slow
def test_a_worker_killed_mid_query_gives_the_right_answer(nodes, expected, tmp_path):
    """The join task's worker process dies (SIGKILL): Ray runs that task again, and only that task."""
    probe = Probe(tmp_path)
    probe.stop_at(join_stage())
    with Driver(nodes, "tests.lanes.ray.test_faults:run_query", tmp_path) as driver:
        held = probe.stopped(driver)
        assert held["pid"] in nodes.running(join_stage())   # what the Ctrl-C test looks for is seen
        os.kill(held["pid"], signal.SIGKILL)
        probe.go()
        got = driver.result()
    assert_tables_equal(_result(tmp_path), expected, ordered=True, float_rel=1e-9)
    _report("worker killed", probe, got)
    again = [r for r in probe.executions() if r["task"] == held["task"]]
    assert len(again) == 2 and again[1]["pid"] != held["pid"]
    assert probe.redone() == 1


@pytest.mark.slow
def test_a_node_removed_mid_query_gives_the_right_answer(nodes, expected, tmp_path):
    """The node running the held join task is lost with its object store: the task runs again on the other
    node, and the blocks the lost node held for it are made again by lineage re-execution."""
    probe = Probe(tmp_path)
    probe.stop_at(join_stage())
    try:
        with Driver(nodes, "tests.lanes.ray.test_faults:run_query", tmp_path) as driver:
            held = probe.stopped(driver)
            lost = nodes.node_of(held["pid"])
            nodes.remove(lost)
            probe.go()
            got = driver.result()
    finally:
        if len(nodes.workers) < 2:
            nodes.add()
    assert_tables_equal(_result(tmp_path), expected, ordered=True, float_rel=1e-9)
    _report("node removed", probe, got)
    runs = probe.executions()
    first = {}
    for r in runs:
        first.setdefault(r["task"], r)
    redone = {r["task"] for r in runs if r is not first[r["task"]]}
    assert held["task"] in redone and all(first[t]["node"] == lost.id for t in redone)   # only work the node lost
    assert all(r["node"] != lost.id for r in runs if r is not first[r["task"]])
    assert 1 <= probe.redone() < len(first)


@pytest.mark.slow
def test_ctrl_c_cancels_the_querys_tasks(nodes, expected, tmp_path):
    """KeyboardInterrupt in the driver while a task is held: the lane re-raises it, and soon no worker of the
    cluster runs a task of the lane, though the driver is still connected; the next query gives the answer."""
    probe = Probe(tmp_path)
    probe.stop_at(join_stage())
    with Driver(nodes, "tests.lanes.ray.test_faults:interrupted_query", tmp_path) as driver:
        held = probe.stopped(driver)
        assert held["pid"] in nodes.running(join_stage())
        (tmp_path / "interrupt").touch()
        wait_for(lambda: (tmp_path / "interrupted").exists(), "the driver's KeyboardInterrupt")
        start = time.monotonic()
        wait_for(lambda: not nodes.running("eidos") and not alive(held["pid"]), "the lane's tasks to end", 30)
        quiet = time.monotonic() - start
        probe.go()
        got = driver.result()
    assert got["raised"] == "KeyboardInterrupt"
    assert_tables_equal(_result(tmp_path), expected, ordered=True, float_rel=1e-9)
    print(f"\nCtrl-C: no task of the lane running {quiet:.2f} s after the driver caught KeyboardInterrupt")


def test_a_grpc_server_that_is_not_ray_is_named_within_the_deadline():
    """The lane's probe sees an HTTP/2 server's first frame and lets ray.init try; ray.init retries without end
    against a server that never answers its calls, so the lane's deadline (EIDOS_RAY_CONNECT_TIMEOUT) ends the
    wait with a BackendUnavailable naming the address; a second run in that process fails at once too. The
    driver's own timeout is the hang guard; the times are printed, not asserted."""
    server = socket.create_server(("0.0.0.0", 0))   # Ray dials this host's own address for 127.0.0.1
    port = server.getsockname()[1]
    held = []

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            held.append(conn)
            conn.sendall(b"\x00\x00\x00\x04\x00\x00\x00\x00\x00")   # an HTTP/2 SETTINGS frame, then silence

    threading.Thread(target=serve, daemon=True).start()
    code = textwrap.dedent(f"""
        import json, time
        import eidos as ei
        from eidos.errors import BackendUnavailable
        for _ in range(2):
            start = time.monotonic()
            try:
                ei.from_pydict({{"a": [1]}}).run(engine="ray", address="127.0.0.1:{port}")
                print(json.dumps({{"ran": True}}))
            except BackendUnavailable as e:
                print(json.dumps({{"error": str(e), "seconds": time.monotonic() - start}}), flush=True)
    """)
    env = {**os.environ, "EIDOS_RAY_CONNECT_TIMEOUT": "3", "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    try:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env,
                             timeout=120)
    finally:
        server.close()
        for conn in held:
            conn.close()
    got = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    assert len(got) == 2 and all("error" in g for g in got), out.stdout + out.stderr[-3000:]
    assert f"127.0.0.1:{port}" in got[0]["error"] and "within 3 s" in got[0]["error"], got[0]
    assert f"127.0.0.1:{port}" in got[1]["error"]
    print(f"\nnot Ray: BackendUnavailable after {got[0]['seconds']:.1f} s (deadline 3 s), then after "
          f"{got[1]['seconds']:.1f} s: {got[1]['error']}")
