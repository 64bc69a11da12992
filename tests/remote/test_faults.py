"""Faults on loopback (issue 14, item 4): the service killed mid-transfer and mid-run, a client killed mid-work,
cancel of a long program in flight, a malformed frame on one session's data channel, calls past their deadline.

Services that are killed run as `eidos serve` children; the others run in this process (tests/remote/conftest.py)
and clients that are killed run as children. To put a fault between a client and a service, the client connects
through tests/remote/netlink.py's proxies listening on 127.0.0.2 with the service's own port numbers (the data
port the service names then reaches the proxy too). Every test is bounded by `netlink.deadline`: a hang fails it.
The faults across two network namespaces are in test_netns.py.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time

import pytest

from eidos.errors import EidosError, ExecutionError
from tests.remote import netlink
from tests.remote.conftest import TOKEN, start_service

MiB = 1 << 20
DEADLINE = 5.0          # the clients' deadline per call, in seconds
LONG = 50               # instructions in the long program's loop body: minutes on the reference target


@pytest.fixture(autouse=True)
def bounded():
    with netlink.deadline(40, "a fault test"):
        yield


def connect(address: str, timeout: float = DEADLINE):
    from eidos.remote.client import connect

    return connect(address, token=TOKEN, timeout=timeout)


def long_fragment(plan_id: str) -> dict:
    """ISA work that runs for minutes on the reference target (a loop of LONG adds, until the step limit),
    which checks for cancellation as it goes."""
    from eidos import isa
    from eidos.isa import Label, Register, Type, serialize

    b = isa.ProgramBuilder()
    b.add(isa.MOV_IMM(Register(1), 1, Type.U32))
    b.label("top")
    b.add(*[isa.ADD(Register(0), Register(0), Register(1), Type.U32) for _ in range(LONG)])
    b.add(isa.BRA(Label("top")))
    return {"kind": "isa", "id": plan_id, "target": "reference",
            "ops": [{"op": "execute", "program": serialize.to_dict(b.build())}]}


def health(remote) -> tuple[int, int, int]:
    """(pool bytes used, runs in flight, open sessions) as the service reports them."""
    h = remote.health()
    return h.memory["pool_used"], h.load["running"], h.load["sessions"]


class Call:
    """A client call run in a thread: its result or its error, and how long it took."""

    def __init__(self, fn, *args, **kwargs):
        self.result = self.error = self.took = None
        self._thread = threading.Thread(target=self._run, args=(fn, args, kwargs), daemon=True)
        self._thread.start()

    def _run(self, fn, args, kwargs):
        start = time.monotonic()
        try:
            self.result = fn(*args, **kwargs)
        except BaseException as e:       # kept for the test to look at
            self.error = e
        self.took = time.monotonic() - start

    def join(self, timeout: float = 30.0) -> Call:
        self._thread.join(timeout)
        assert not self._thread.is_alive(), f"the call still runs after {timeout} s (a hang)"
        return self


# ---- in child processes: clients that are killed mid-work ----------------------------------------------------


def client_running(address: str, nbytes: int, plan_id: str) -> None:
    """A session holding `nbytes` of pool memory that starts a long program (and is killed while it runs)."""
    r = connect(address, timeout=60)
    r.put_buffer(bytes(nbytes))
    print(json.dumps({"session": r.session}), flush=True)
    r.run_subgraph(long_fragment(plan_id), timeout=120)


def client_putting(address: str, nbytes: int) -> None:
    """A session sending `nbytes` (and killed while they travel)."""
    r = connect(address, timeout=60)
    print(json.dumps({"session": r.session}), flush=True)
    r.put_buffer(bytes(nbytes))
    print(json.dumps({"put": nbytes}), flush=True)


# ---- the service killed ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("during", ["put", "fetch", "run"])
def test_the_service_killed_mid_work_is_an_error_within_the_deadline(during, token_file):
    """SIGKILL of `eidos serve` while a large buffer travels either way, or while a run is in flight: the call
    raises an EidosError within the client's deadline, and so does the next one; close() returns."""
    with netlink.served(token_file, pool_mb=512) as server, netlink.fronted(server) as (address, _, data):
        r = connect(address)
        if during == "put":
            data.rate = 32 * MiB                              # 256 MiB would take 8 s: it is mid-way when killed
            call = Call(r.put_buffer, bytes(256 * MiB))
            assert data.wait(up=8 * MiB), "the PUT never got going"
        elif during == "fetch":
            handle = r.put_buffer(os.urandom(64 * MiB))
            data.rate = 16 * MiB
            call = Call(r.fetch_result, handle)
            assert data.wait(down=8 * MiB), "the fetch never got going"
        else:
            call = Call(r.run_subgraph, long_fragment("long"), timeout=60)
            netlink.wait_for(lambda: health(r)[1] == 1, "the run is in flight")
        server.proc.kill()
        call.join(DEADLINE + 10)
        assert isinstance(call.error, EidosError), call.error
        print(f"\n{during}: {type(call.error).__name__} after the kill, {call.took:.2f} s into the call: "
              f"{call.error}")
        with pytest.raises(EidosError):
            r.health()
        r.close()


# ---- the client gone -------------------------------------------------------------------------------------------


def ports(service) -> netlink.Served:
    """Where a service in this process listens, as `netlink.fronted` takes it."""
    return netlink.Served(None, service.address, service.config.host, service.port, service.channel.port, None)


@pytest.fixture
def own_service():
    """A service in this process for one test (its pool and sessions are this test's alone)."""
    svc = start_service(pool_bytes=256 * MiB, input_wait=10.0)
    yield svc
    svc.shutdown()


def test_a_client_killed_mid_run_has_its_memory_freed_and_its_work_cancelled(own_service):
    me = connect(own_service.address)
    base, _, _ = health(me)
    proc, lines = netlink.child("tests.remote.test_faults:client_running", own_service.address, 16 * MiB, "work")
    try:
        lines.json()
        netlink.wait_for(lambda: health(me) == (base + 16 * MiB, 1, 2), "the child holds 16 MiB and runs")
        proc.kill()
        netlink.wait_for(lambda: health(me) == (base, 0, 1), "the child's memory freed and its run ended")
    finally:
        netlink.stop(proc, signal.SIGKILL)
        me.close()


def test_a_client_killed_mid_put_has_its_memory_freed(own_service):
    me = connect(own_service.address)
    base, _, _ = health(me)
    with netlink.fronted(ports(own_service), rate=32 * MiB) as (address, _, data):
        proc, lines = netlink.child("tests.remote.test_faults:client_putting", address, 128 * MiB)
        try:
            lines.json()
            assert data.wait(up=8 * MiB), "the PUT never got going"
            netlink.wait_for(lambda: health(me)[0] == base + 128 * MiB, "the block taken as the header arrived")
            proc.kill()
            netlink.wait_for(lambda: health(me) == (base, 0, 1), "the half-sent buffer freed, its session closed")
        finally:
            netlink.stop(proc, signal.SIGKILL)
            me.close()


# ---- cancel --------------------------------------------------------------------------------------------------


def test_cancel_stops_a_long_program_in_flight(own_service):
    r = connect(own_service.address)
    call = Call(r.run_subgraph, long_fragment("long-1"), timeout=120)
    netlink.wait_for(lambda: health(r)[1] == 1, "the run is in flight")
    asked = time.monotonic()
    assert r.cancel("long-1") is True
    call.join(DEADLINE)
    stopped = time.monotonic() - asked
    assert isinstance(call.error, ExecutionError) and "cancelled" in str(call.error), call.error
    assert health(r)[1] == 0
    assert r.cancel("long-1") is False                       # nothing by that id runs now
    handle = r.put_buffer(b"still here")                     # the session goes on
    assert bytes(r.fetch_result(handle)) == b"still here"
    print(f"\ncancel: the run ended {stopped * 1000:.0f} ms after cancel() was called")
    r.close()


# ---- a malformed frame ---------------------------------------------------------------------------------------


def test_a_malformed_frame_closes_only_that_connection(own_service):
    """Bytes that are no frame, sent on session A's live data channel (between two frames): the service closes
    A's connection and session (its memory freed, A's next call an error naming what was wrong), and B, on
    another connection, goes on with its buffers intact."""
    me = connect(own_service.address)
    with netlink.fronted(ports(own_service)) as (address, _, data):
        a, b = connect(address), connect(own_service.address)
        kept = b.put_buffer(b"B's bytes")
        a.put_buffer(bytes(MiB))
        base, _, _ = health(me)
        assert data.inject(b"GARBAGE!" * 4) == 1
        netlink.wait_for(lambda: health(me) == (base - MiB, 0, 2), "A's session closed and its memory freed")
        with pytest.raises(EidosError, match="magic"):
            a.put_buffer(b"more")
        assert bytes(b.fetch_result(kept)) == b"B's bytes"
        again = b.put_buffer(os.urandom(MiB))
        assert b.fetch_result(again).nbytes == MiB
        for r in (a, b, me):
            r.close()


# ---- deadlines -----------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_run_past_its_deadline_does_not_go_on_running(own_service):
    r = connect(own_service.address)
    with pytest.raises(ExecutionError, match="deadline"):
        r.run_subgraph(long_fragment("past"), timeout=1)
    try:
        netlink.wait_for(lambda: health(r)[1] == 0, "the run abandoned by its client stopped", timeout=4)
    finally:
        r.cancel("past")
        r.close()


@pytest.mark.slow
def test_a_put_past_its_deadline_leaves_nothing_held_on_the_service(own_service):
    me = connect(own_service.address)
    base, _, _ = health(me)
    with netlink.fronted(ports(own_service), rate=8 * MiB) as (address, _, data):
        r = connect(address, timeout=1)
        with pytest.raises(ExecutionError, match="deadline"):
            r.put_buffer(bytes(16 * MiB))                     # 2 s on this link, 1 s allowed
        try:
            netlink.wait_for(lambda: health(me)[0] == base, "nothing of the failed PUT held", timeout=5)
        finally:
            r.close()
            me.close()
