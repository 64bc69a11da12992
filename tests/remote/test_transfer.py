"""TransferManager against the real channel (and against stubs that stall or die): puts in flight, gets into
the caller's buffers, the staged fallback, server errors as eidos errors, and deadlines that always hold."""

from __future__ import annotations

import socket
import threading

import numpy as np
import pytest

from eidos.errors import BackendError, ExecutionError, PlanError, ResourceError
from eidos.remote.channel import listen
from eidos.remote.frames import HEADER_SIZE, Frame, Kind, pack, parse
from eidos.remote.pool import Pool
from eidos.remote.protocol import error_from
from eidos.remote.store import Sessions
from eidos.remote.transfer import TransferManager
from eidos.remote.transport import TcpTransport

MiB = 1 << 20


@pytest.fixture(params=[False, True], ids=["direct", "staged server"])
def service(request):
    pool = Pool(64 * MiB, pinned=False)
    sessions = Sessions(pool, quota=32 * MiB)
    listener = listen("127.0.0.1", 0, sessions, max_frame=32 * MiB, wait=5, staged=request.param)
    yield listener, sessions, pool
    listener.close()
    sessions.close()


def _manager(listener, session, **options):
    tm = TransferManager(TcpTransport.connect("127.0.0.1", listener.port, timeout=5), timeout=5, **options)
    tm.hello(session.ticket)
    return tm


@pytest.mark.parametrize("staged", [False, True])
def test_put_wait_get_round_trip(service, staged):
    listener, sessions, _ = service
    session = sessions.open()
    data = [b"", b"x", np.arange(1000, dtype=np.float32), np.random.default_rng(0).bytes(3 * MiB + 5)]
    with _manager(listener, session, staged=staged) as tm:
        ids = [tm.put(d) for d in data]
        for ident in ids:
            tm.wait(ident)
        for ident, d in zip(ids, data):
            got = tm.get(ident)
            assert got.readonly and bytes(got) == bytes(memoryview(d).cast("B"))
            out = bytearray(memoryview(d).nbytes)
            tm.get(ident, out=out)                   # staged: through the bounce buffer, chunk by chunk
            assert out == bytes(memoryview(d).cast("B"))
        assert bytes(session.store.get(ids[2]).block.view) == data[2].tobytes()


def test_many_small_puts_then_flush(service):
    listener, sessions, _ = service
    session = sessions.open()
    with _manager(listener, session) as tm:
        ids = [tm.put(i.to_bytes(2, "little")) for i in range(2000)]
        tm.flush()
        assert len(session.store) == 2000
        assert bytes(tm.get(ids[1234])) == (1234).to_bytes(2, "little")


def test_small_puts_share_one_sendmsg(service):
    listener, sessions, _ = service
    session = sessions.open()
    transport = TcpTransport.connect("127.0.0.1", listener.port, timeout=5)
    sends = []
    real = transport.send
    transport.send = lambda buffers: (sends.append(len(buffers)), real(buffers))[1]
    tm = TransferManager(transport, timeout=5)
    for i in range(100):                       # queued before hello: the sender finds them all at once
        tm.put(bytes([i]) * 10)
    tm.hello(session.ticket)
    tm.flush()
    assert sends[1] == 200                      # after HELLO: 100 headers and 100 payloads in one send
    tm.close()


def test_get_into_out_is_direct_and_staged_for_a_strided_out(service):
    listener, sessions, _ = service
    session = sessions.open()
    values = np.arange(64, dtype=np.int64)
    with _manager(listener, session) as tm:
        ident = tm.put(values)
        out = np.zeros(64, dtype=np.int64)
        got = tm.get(ident, out=out)
        assert np.array_equal(out, values) and np.frombuffer(got, np.int64).base is not None
        wide = np.zeros((64, 2), dtype=np.int64)
        tm.get(ident, out=wide[:, 0])          # not contiguous: received into a staging buffer, then copied
        assert np.array_equal(wide[:, 0], values) and not wide[:, 1].any()
        with pytest.raises(BackendError, match="read-only"):
            tm.get(ident, out=b"x" * 512)
        with pytest.raises(BackendError, match="holds 8 bytes"):
            tm.get(ident, out=bytearray(8))
        assert bytes(tm.get(ident)) == values.tobytes()   # the connection is still in step


def test_server_errors_become_eidos_errors(service):
    listener, sessions, _ = service
    session = sessions.open()
    with _manager(listener, session) as tm:
        with pytest.raises(BackendError, match="no result or buffer 4242"):
            tm.get(4242)
        tm.release(4243)
        with pytest.raises(BackendError, match="4243"):
            tm.flush()
        assert bytes(tm.get(tm.put(b"still fine"))) == b"still fine"


def test_error_from_builds_only_eidos_errors():
    assert type(error_from(b'{"error": "PlanError", "message": "m"}', "x")) is PlanError
    assert type(error_from(b'{"error": "SystemExit", "message": "m"}', "x")) is ExecutionError
    assert type(error_from(b'{"error": "FallbackWarning", "message": "m"}', "x")) is ExecutionError
    assert type(error_from(b"\xff not json", "x")) is ExecutionError


def test_over_quota_raises_resource_error_from_wait(service):
    listener, sessions, _ = service
    session = sessions.open()
    tm = _manager(listener, session)
    ident = tm.put(bytes(40 * MiB))
    with pytest.raises((ResourceError, ExecutionError)) as info:
        tm.wait(ident)
    assert "quota" in str(info.value) or "down" in str(info.value)
    with pytest.raises(ExecutionError):
        tm.put(b"x")                             # the server closed the connection: later calls fail at once
    tm.close()


def test_bad_ticket_is_refused(service):
    listener, sessions, _ = service
    tm = TransferManager(TcpTransport.connect("127.0.0.1", listener.port, timeout=5), timeout=5)
    with pytest.raises(ExecutionError, match="ticket"):
        tm.hello(bytes(32))
    tm.close()


class Stub:
    """A server that acks HELLO, then follows `script(transport)`: to stall, or to die mid-transfer."""

    def __init__(self, script):
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(script,), daemon=True)
        self.thread.start()

    def _run(self, script):
        sock, _ = self.server.accept()
        t = TcpTransport(sock)
        header = bytearray(HEADER_SIZE)
        t.recv_into(memoryview(header))
        t.recv_into(memoryview(bytearray(parse(header, max_length=64).length)))
        t.send([pack(Frame(Kind.ACK, 0))])
        try:
            script(t)
        finally:
            self.done.wait(10)
            t.close()
            self.server.close()


def _stub_manager(stub, **options):
    tm = TransferManager(TcpTransport.connect("127.0.0.1", stub.port, timeout=0.5), timeout=0.5, **options)
    tm.hello(bytes(32))
    return tm


def test_a_stalled_server_is_an_error_at_the_deadline():
    stub = Stub(lambda t: None)                   # reads nothing more, answers nothing
    tm = _stub_manager(stub)
    ident = tm.put(b"abc")
    with pytest.raises(ExecutionError, match=r"waited 0.5 s for the ACK of PUT 1 .*deadline"):
        tm.wait(ident)
    with pytest.raises(ExecutionError, match="data of handle 9"):
        tm.get(9)
    stub.done.set()
    tm.close()


def test_a_server_killed_mid_transfer_is_an_error_not_a_hang():
    def die(t):
        header = bytearray(HEADER_SIZE)
        t.recv_into(memoryview(header))
        frame = parse(header, max_length=1 << 30)
        t.recv_into(memoryview(bytearray(frame.length // 2)))
        t.send([pack(Frame(Kind.DATA, 5, 0, 100)), bytes(10)])   # and a reply cut short
        stub.done.set()

    stub = Stub(die)
    tm = _stub_manager(stub)
    ident = tm.put(bytes(MiB))
    with pytest.raises(ExecutionError):
        tm.wait(ident)
    with pytest.raises(ExecutionError, match="down"):
        tm.get(5)
    tm.close()


def test_the_window_bounds_unacknowledged_large_puts():
    received = []

    def count(t):
        header = bytearray(HEADER_SIZE)
        for _ in range(3):
            t.recv_into(memoryview(header))
            frame = parse(header, max_length=1 << 30)
            t.recv_into(memoryview(bytearray(frame.length)))
            received.append(frame.ident)
        t.sock.settimeout(0.3)
        try:                                     # nothing more comes until an ACK frees the window
            received.append(t.sock.recv(1))
        except TimeoutError:
            pass
        t.send([pack(Frame(Kind.ACK, 1, 100_000))])
        t.recv_into(memoryview(header))
        received.append(parse(header, max_length=1 << 30).ident)
        stub.done.set()

    stub = Stub(count)
    tm = _stub_manager(stub, window=3, small=1000)
    for _ in range(5):
        tm.put(bytes(100_000))
    tm.wait(1)
    stub.done.wait(5)
    assert received == [1, 2, 3, 4]
    tm.close()


def test_close_says_bye_and_the_session_closes(service):
    listener, sessions, pool = service
    session = sessions.open()
    tm = _manager(listener, session)
    tm.wait(tm.put(bytes(1000)))
    tm.close()
    assert session.closed.wait(5) and pool.used() == 0
    with pytest.raises(ExecutionError, match="closed"):
        tm.put(b"x")


def test_get_many_has_every_request_in_flight(service):
    listener, sessions, _ = service
    session = sessions.open()
    with _manager(listener, session) as tm:
        ids = [tm.put(bytes([i]) * (i * 1000)) for i in range(1, 6)]
        tm.flush()
        outs = [bytearray(i * 1000) for i in range(1, 6)]
        got = tm.get_many(ids, [outs[0], None, outs[2], None, outs[4]])
        assert [bytes(g) for g in got] == [bytes([i]) * (i * 1000) for i in range(1, 6)]
        assert outs[0] == bytes([1]) * 1000 and outs[1] == bytes(2000)
        with pytest.raises(BackendError, match="no result or buffer 77"):
            tm.get_many([ids[0], 77])
        with pytest.raises(BackendError, match="each once"):
            tm.get_many([ids[0], ids[0]])


def test_threads_sharing_a_manager_each_get_their_own_replies(service):
    """Four threads at once on one connection (puts large and small, waits, gets, releases): whichever thread
    has the read side dispatches every reply to its waiter, and each transfer ends with its own bytes."""
    listener, sessions, _ = service
    session = sessions.open()
    failures: list[BaseException] = []

    def work(seed: int) -> None:
        rng = np.random.default_rng(seed)
        try:
            for _ in range(25):
                size = int(rng.choice([0, 1, 700, 70_000, 300_000]))
                data = rng.integers(0, 256, size, dtype=np.uint8)
                ident = tm.put(data)
                if rng.random() < 0.5:
                    tm.wait(ident)
                out = np.empty(size, dtype=np.uint8)
                got = tm.get(ident, out=out)
                assert bytes(got) == data.tobytes() and np.array_equal(out, data)
                tm.release(ident)
        except BaseException as e:  # noqa: BLE001 - handed to the test, which raises it
            failures.append(e)

    with _manager(listener, session) as tm:
        threads = [threading.Thread(target=work, args=(seed,)) for seed in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        tm.flush()
        assert not failures, failures
        assert len(session.store) == 0
