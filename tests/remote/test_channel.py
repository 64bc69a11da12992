"""The server side of the data channel, spoken to frame by frame: hello, PUT into the pool, GET out of it,
errors that keep or close the connection, and a session that ends with its connection."""

from __future__ import annotations

import json
import threading
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eidos.remote.channel import listen
from eidos.remote.frames import HEADER_SIZE, Frame, Kind, pack, parse
from eidos.remote.pool import Pool
from eidos.remote.store import Sessions
from eidos.remote.transport import TcpTransport
from eidos.testing.strategies import examples

MiB = 1 << 20


@pytest.fixture
def service():
    pool = Pool(16 * MiB, pinned=False)
    sessions = Sessions(pool, quota=4 * MiB)
    listener = listen("127.0.0.1", 0, sessions, max_frame=8 * MiB, wait=5)
    yield listener, sessions, pool
    listener.close()
    sessions.close()


class Peer:
    """A raw client: frames in and out by hand."""

    def __init__(self, listener):
        self.t = TcpTransport.connect("127.0.0.1", listener.port, timeout=5)

    def send(self, *frames_and_payloads):
        self.t.send([pack(x) if isinstance(x, Frame) else x for x in frames_and_payloads])

    def read(self):
        header = bytearray(HEADER_SIZE)
        self.t.recv_into(memoryview(header))
        frame = parse(header, max_length=1 << 40)
        payload = bytearray(frame.length)
        self.t.recv_into(memoryview(payload))
        return frame, bytes(payload)

    def hello(self, session):
        self.send(Frame(Kind.HELLO, 0, length=32), session.ticket)
        assert self.read()[0] == Frame(Kind.ACK, 0)

    def closed(self):
        """Whether the server closed this connection (end of stream within 5 s)."""
        try:
            self.read()
        except Exception as e:  # noqa: BLE001 - any end (EOF, reset) means closed
            return "closed the connection after 0 of 32" in str(e) or "failed" in str(e)
        return False


def _eventually(condition):
    deadline = time.monotonic() + 5
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.01)
    return condition()


def test_put_lands_in_the_pool_and_get_sends_it_back(service):
    listener, sessions, pool = service
    session = sessions.open()
    peer = Peer(listener)
    peer.hello(session)
    assert session.attached.is_set()
    peer.send(Frame(Kind.PUT, 7, length=5), b"hello", Frame(Kind.PUT, 8, length=0))
    assert peer.read()[0] == Frame(Kind.ACK, 7, 5)
    assert peer.read()[0] == Frame(Kind.ACK, 8, 0)
    entry = session.store.get(7)
    assert entry.kind == "buffer" and bytes(entry.block.view) == b"hello" and pool.used(session.id) == 64
    peer.send(Frame(Kind.GET, 7))
    assert peer.read() == (Frame(Kind.DATA, 7, 0, 5), b"hello")
    peer.send(Frame(Kind.RELEASE, 7), Frame(Kind.GET, 7))
    assert peer.read()[0] == Frame(Kind.ACK, 7)
    frame, payload = peer.read()
    assert frame.kind is Kind.ERROR and frame.ident == 7 and json.loads(payload)["error"] == "BackendError"
    assert pool.used(session.id) == 0
    peer.send(Frame(Kind.BYE, 0))
    assert peer.closed() and _eventually(session.closed.is_set)


def test_unknown_id_is_an_error_frame_and_the_connection_stays(service):
    listener, sessions, _ = service
    session = sessions.open()
    peer = Peer(listener)
    peer.hello(session)
    peer.send(Frame(Kind.GET, 99))
    frame, payload = peer.read()
    assert frame.kind is Kind.ERROR and "no result or buffer 99" in json.loads(payload)["message"]
    peer.send(Frame(Kind.RELEASE, 98))
    assert peer.read()[0].kind is Kind.ERROR
    peer.send(Frame(Kind.PUT, 1, length=3), b"abc")
    assert peer.read()[0] == Frame(Kind.ACK, 1, 3)
    peer.send(Frame(Kind.PUT, 1, length=3), b"xyz", Frame(Kind.PUT, 2, length=1), b"!")   # id in use: dropped
    frame, payload = peer.read()
    assert frame.kind is Kind.ERROR and frame.ident == 1 and "already in use" in json.loads(payload)["message"]
    assert peer.read()[0] == Frame(Kind.ACK, 2, 1)
    assert bytes(session.store.get(1).block.view) == b"abc"


def test_a_bad_ticket_is_refused(service):
    listener, sessions, _ = service
    sessions.open()
    peer = Peer(listener)
    peer.send(Frame(Kind.HELLO, 0, length=32), bytes(32))
    frame, payload = peer.read()
    assert frame.kind is Kind.ERROR and "ticket" in json.loads(payload)["message"]
    assert peer.closed()


def test_the_first_frame_must_be_hello(service):
    listener, sessions, _ = service
    peer = Peer(listener)
    peer.send(Frame(Kind.PUT, 1, length=3), b"abc")
    frame, payload = peer.read()
    assert frame.kind is Kind.ERROR and "HELLO" in json.loads(payload)["message"]
    assert peer.closed()


def test_a_malformed_frame_closes_that_connection_only(service):
    listener, sessions, pool = service
    good, bad = sessions.open(), sessions.open()
    a, b = Peer(listener), Peer(listener)
    a.hello(good)
    b.hello(bad)
    b.send(Frame(Kind.PUT, 1, length=100), bytes(100))
    assert b.read()[0].kind is Kind.ACK and pool.used(bad.id) > 0
    b.send(b"EIDF" + bytes(28))                      # version 0
    frame, payload = b.read()
    assert frame.kind is Kind.ERROR and "version" in json.loads(payload)["message"]
    assert b.closed()
    assert _eventually(bad.closed.is_set) and pool.used(bad.id) == 0
    a.send(Frame(Kind.PUT, 1, length=3), b"abc")
    assert a.read()[0] == Frame(Kind.ACK, 1, 3)
    c = Peer(listener)                                # and the listener still accepts
    c.hello(sessions.open())


def test_over_quota_is_a_resource_error_and_closes(service):
    listener, sessions, pool = service
    session = sessions.open()
    peer = Peer(listener)
    peer.hello(session)
    peer.send(Frame(Kind.PUT, 1, length=3 * MiB), bytes(3 * MiB))
    assert peer.read()[0].kind is Kind.ACK
    peer.send(Frame(Kind.PUT, 2, length=2 * MiB))     # the payload never comes: the server must not wait for it
    frame, payload = peer.read()
    assert frame.kind is Kind.ERROR and json.loads(payload)["error"] == "ResourceError"
    assert peer.closed() and _eventually(session.closed.is_set) and pool.used() == 0


def test_over_the_frame_limit_closes(service):
    listener, sessions, _ = service
    peer = Peer(listener)
    peer.hello(sessions.open())
    peer.send(Frame(Kind.PUT, 1, length=9 * MiB))
    frame, payload = peer.read()
    assert frame.kind is Kind.ERROR and "limit" in json.loads(payload)["message"]
    assert peer.closed()


def test_client_gone_closes_its_session(service):
    listener, sessions, pool = service
    session = sessions.open()
    peer = Peer(listener)
    peer.hello(session)
    peer.send(Frame(Kind.PUT, 1, length=10), bytes(10), Frame(Kind.PUT, 2, length=1000), bytes(10))  # cut short
    assert peer.read()[0].kind is Kind.ACK
    peer.t.close()
    assert _eventually(session.closed.is_set) and pool.used() == 0
    assert sessions.by_ticket(session.ticket) is None


def test_get_waits_for_a_result_without_blocking_puts(service):
    listener, sessions, _ = service
    session = sessions.open()
    peer = Peer(listener)
    peer.hello(session)
    pending = session.store.reserve(50, "buffer", 4)   # a result still being made
    peer.send(Frame(Kind.GET, 50), Frame(Kind.PUT, 1, length=2), b"ok")
    assert peer.read()[0] == Frame(Kind.ACK, 1, 2)     # the PUT is served while the GET waits
    pending.block.view[:] = b"done"
    session.store.complete(50)
    assert peer.read() == (Frame(Kind.DATA, 50, 0, 4), b"done")


def test_close_ends_every_connection_and_joins(service):
    listener, sessions, _ = service
    others = {t for t in threading.enumerate()                              # other services of the run live on
              if t.name.startswith("eidos-channel") and t.name != f"eidos-channel-accept-{listener.port}"}
    peers = [Peer(listener) for _ in range(3)]
    opened = [sessions.open() for _ in peers]
    for p, s in zip(peers, opened):
        p.hello(s)
    listener.close()
    assert all(p.closed() for p in peers) and all(s.closed.is_set() for s in opened)
    assert not [t for t in threading.enumerate() if t.name.startswith("eidos-channel") and t not in others]


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(min_size=0, max_size=200))
def test_random_bytes_after_hello_never_hurt_the_service(service, garbage):
    listener, sessions, _ = service
    session = sessions.open()
    peer = Peer(listener)
    peer.hello(session)
    peer.send(garbage)
    peer.t.close()
    other = Peer(listener)
    other.hello(sessions.open())
    other.send(Frame(Kind.PUT, 1, length=1), b"x")
    assert other.read()[0] == Frame(Kind.ACK, 1, 1)
    other.t.close()
