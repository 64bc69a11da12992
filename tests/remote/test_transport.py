"""TcpTransport: scatter-gather sends that survive partial writes, exact receives, errors naming the peer."""

from __future__ import annotations

import importlib.util
import socket
import threading
import time

import numpy as np
import pytest

from eidos.errors import BackendUnavailable, ExecutionError
from eidos.remote.transport import TcpTransport, UcxTransport


class Trickle:
    """A socket whose sendmsg takes at most `most` bytes a call, to force partial sends."""

    def __init__(self, sock, most):
        self._sock, self._most = sock, most

    def sendmsg(self, buffers):
        chunk, left = [], self._most
        for b in buffers:
            if left <= 0:
                break
            chunk.append(memoryview(b)[:left])
            left -= len(chunk[-1])
        return self._sock.sendmsg(chunk)

    def __getattr__(self, name):
        return getattr(self._sock, name)


@pytest.fixture
def pair():
    a, b = socket.socketpair()
    left, right = TcpTransport(a), TcpTransport(b)
    yield left, right
    left.close()
    right.close()


@pytest.fixture
def loopback():
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    accepted = []
    t = threading.Thread(target=lambda: accepted.append(server.accept()[0]))
    t.start()
    client = TcpTransport.connect("127.0.0.1", port, timeout=5)
    t.join()
    server.close()
    peer = TcpTransport(accepted[0])
    yield client, peer
    client.close()
    peer.close()


def _buffers(seed=0):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(0, 5000, size=1500)            # more than one sendmsg's iovec limit, some empty
    return [memoryview(rng.integers(0, 256, size=n, dtype=np.uint8).tobytes()) for n in sizes]


def _exchange(sender, receiver, buffers):
    total = sum(b.nbytes for b in buffers)
    out = bytearray(total)
    t = threading.Thread(target=receiver.recv_into, args=(memoryview(out),))
    t.start()
    sender.send(buffers)
    t.join(10)
    assert not t.is_alive()
    assert bytes(out) == b"".join(bytes(b) for b in buffers)


def test_send_many_views_over_a_socketpair(pair):
    _exchange(*pair, _buffers())


def test_send_many_views_over_loopback(loopback):
    client, server = loopback
    assert client.name == "tcp" and client.peer.startswith("127.0.0.1:")
    assert client.sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
    _exchange(client, server, _buffers(1))
    _exchange(server, client, [memoryview(np.arange(1 << 20, dtype=np.float64))])   # 8 MB, cast to bytes


def test_partial_sends_advance_through_the_views(pair):
    left, right = pair
    left.sock = Trickle(left.sock, 7)
    _exchange(left, right, _buffers(2)[:200])


def test_recv_into_fills_exactly_and_leaves_the_rest(pair):
    left, right = pair
    left.send([b"abc", b"defgh"])
    first, second = bytearray(2), bytearray(6)
    right.recv_into(memoryview(first))
    right.recv_into(memoryview(second))
    assert first == b"ab" and second == b"cdefgh"


def test_end_of_stream_names_the_peer_and_the_bytes(loopback):
    client, server = loopback
    client.send([b"abc"])
    client.close()
    with pytest.raises(ExecutionError) as info:
        server.recv_into(memoryview(bytearray(10)))
    assert "127.0.0.1:" in str(info.value) and "3 of 10 bytes" in str(info.value)


def test_timeout_names_the_peer_and_the_timeout(loopback):
    client, server = loopback
    server.settimeout(0.05)
    client.send([b"xy"])
    with pytest.raises(ExecutionError) as info:
        server.recv_into(memoryview(bytearray(4)))
    assert "timed out after 0.05 s" in str(info.value) and "2 of 4 bytes" in str(info.value)
    assert client.peer.split(":")[0] in str(info.value)


def test_a_receive_ends_at_its_deadline_before_the_sockets_timeout(loopback):
    client, server = loopback
    server.settimeout(30)
    client.send([b"xy"])
    with pytest.raises(ExecutionError, match=r"receiving from 127\.0\.0\.1:\d+: the deadline passed after 2 of 4"):
        server.recv_into(memoryview(bytearray(4)), deadline=time.monotonic() + 0.1)
    client.send([b"zw"])                              # the socket's own timeout is back afterwards
    server.recv_into(memoryview(bytearray(2)))


def test_send_to_a_closed_peer_is_an_execution_error(loopback):
    client, server = loopback
    server.close()
    with pytest.raises(ExecutionError, match="sending to 127.0.0.1"):
        for _ in range(200):                            # the reset shows on a later send
            client.send([bytes(1 << 16)])


def test_connect_refused_names_the_address():
    s = socket.create_server(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    with pytest.raises(ExecutionError, match=f"127.0.0.1:{port}"):
        TcpTransport.connect("127.0.0.1", port, timeout=2)


def test_close_wakes_a_blocked_reader(pair):
    left, right = pair
    errors = []

    def read():
        try:
            right.recv_into(memoryview(bytearray(4)))
        except ExecutionError as e:
            errors.append(e)

    t = threading.Thread(target=read)
    t.start()
    right.close()
    t.join(5)
    assert not t.is_alive() and errors


@pytest.mark.skipif(importlib.util.find_spec("ucxx") is not None, reason="ucxx is installed here")
def test_ucx_without_ucxx_says_how_to_install():
    with pytest.raises(BackendUnavailable, match="pip install ucxx"):
        UcxTransport()


def test_reader_reads_ahead_and_hands_large_payloads_straight_through(pair):
    from eidos.remote.transport import Reader

    left, right = pair
    reader = Reader(right, size=64)
    left.send([bytes(range(10)) * 3, b"x" * 200])
    assert bytes(reader.take(7)) == bytes(range(7))
    assert reader.buffered() > 0
    out = bytearray(223)
    reader.read_into(memoryview(out))                # part from the read-ahead, the rest straight in
    assert bytes(out) == (bytes(range(10)) * 3)[7:] + b"x" * 200 and reader.buffered() == 0
    left.send([b"abcdefgh" * 8])
    assert bytes(reader.take(60)) == (b"abcdefgh" * 8)[:60]
    left.send([b"ijkl"])
    assert bytes(reader.take(8)) == b"efghijkl"      # moved down to make room, then topped up
    left.send([b"tail"])
    left.close()
    with pytest.raises(ExecutionError, match="after 4 of 8 bytes"):
        reader.take(8)


def test_reader_returns_none_at_a_clean_end(pair):
    from eidos.remote.transport import Reader

    left, right = pair
    left.close()
    assert Reader(right).take(32) is None


def test_a_send_the_peer_never_reads_times_out(loopback):
    client, server = loopback                         # the server side never reads
    client.settimeout(0.2)
    with pytest.raises(ExecutionError) as info:
        client.send([bytes(64 << 20)])
    text = str(info.value)
    assert "timed out after 0.2 s" in text and "of 67108864 bytes sent" in text
