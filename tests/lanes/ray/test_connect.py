"""Where the cluster lane runs: availability, address=, unreachable clusters, workers importing eidos."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import eidos as ei
from eidos.errors import BackendUnavailable, PlanError
from eidos.hal import registry

pytest.importorskip("ray")

ROOT = Path(__file__).resolve().parents[3]


def test_the_planner_takes_it_only_when_a_cluster_is_configured(monkeypatch):
    from eidos.lanes.ray import connect
    from eidos.lanes.ray.local import in_task

    monkeypatch.delenv(connect.ENV, raising=False)
    lane = registry.get("ray")
    if connect.user_connected():
        pytest.skip("this process was connected to Ray by someone else")
    got = lane.is_available()
    assert not got and "EIDOS_RAY_ADDRESS" in got.reason and lane.is_available_when_named()
    monkeypatch.setenv(connect.ENV, "127.0.0.1:1")   # configured: no connection is tried to say so
    assert lane.is_available()
    token = in_task.set(True)
    try:
        assert "own tasks" in lane.is_available().reason
    finally:
        in_task.reset(token)


def test_rule_3_sends_an_input_over_the_budget_to_a_configured_cluster(monkeypatch):
    from eidos.hal import planner
    from eidos.lanes.ray import connect

    if connect.user_connected():
        pytest.skip("this process was connected to Ray by someone else")
    flow = ei.from_pydict({"a": list(range(10_000))}).filter(ei.col("a") > 5)
    monkeypatch.setenv("EIDOS_MEMORY_BUDGET", "1KiB")
    monkeypatch.delenv(connect.ENV, raising=False)
    assert planner.decide(flow.plan).lane.name != "ray"   # out of core on this machine instead
    monkeypatch.setenv(connect.ENV, "127.0.0.1:1")
    decision = planner.decide(flow.plan)
    assert (decision.lane.name, decision.rule) == ("ray", 3)
    assert "exceeds the memory budget" in decision.reason


def test_import_and_planning_do_not_import_ray():
    code = ("import sys, eidos as ei; ei.backends(); ei.from_pydict({'a': [1]}).explain(); "
            "print('ray' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.stdout.strip() == "False", out.stderr


def test_address_is_for_a_lane_that_runs_elsewhere():
    flow = ei.from_pydict({"a": [1]})
    with pytest.raises(PlanError, match="runs in this process"):
        flow.run(engine="polars", address="127.0.0.1:1")
    with pytest.raises(PlanError, match="engine="):
        flow.run(address="127.0.0.1:1")


def test_an_unreachable_cluster_is_named_within_the_deadline():
    """A closed port, and a port that accepts but never answers (not Ray: ray.init alone would wait
    without end), each a BackendUnavailable naming the address; the subprocess's timeout is the hang check."""
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    closed_port = closed.getsockname()[1]
    closed.close()
    code = textwrap.dedent(f"""
        import eidos as ei
        from eidos.errors import BackendUnavailable
        for address in ("127.0.0.1:{closed_port}", "127.0.0.1:{silent.getsockname()[1]}"):
            try:
                ei.from_pydict({{"a": [1]}}).run(engine="ray", address=address)
            except BackendUnavailable as e:
                print("BackendUnavailable:", e)
    """)
    env = {**os.environ, "EIDOS_RAY_CONNECT_TIMEOUT": "2"}
    try:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env,
                             timeout=90)
    finally:
        silent.close()
    lines = [line for line in out.stdout.splitlines() if line.startswith("BackendUnavailable")]
    assert len(lines) == 2, out.stdout + out.stderr
    assert f"127.0.0.1:{closed_port} is unreachable" in lines[0]
    assert "did not answer within 2 s" in lines[1]


def test_a_process_connects_to_one_cluster(ray_cluster):
    with pytest.raises(BackendUnavailable, match="connected to the Ray cluster at .*not 127.0.0.1:1"):
        ei.from_pydict({"a": [1]}).run(engine="ray", address="127.0.0.1:1")


def test_workers_import_the_drivers_eidos(ray_cluster):
    import ray

    @ray.remote
    def where():
        import eidos

        return eidos.__file__

    assert ray.get(where.remote()) == ei.__file__
