"""The eidos service across two network namespaces (issue 14, item 4), and first the fault harness
(tests/remote/netlink.py) checked by itself with plain sockets.

The harness: the proxy delivers every byte through its delay, stalls and rate cap; a cut mid-transfer gives both
peers an error, not a hang; the namespaces carry a transfer over their veth (shaped by tbf), run processes,
survive a cut of the wire, and are gone afterwards whatever happened inside.

The service: `eidos serve` runs in namespace b, the client in namespace a (both `ip netns exec` children); the
traffic crosses the veth, shaped by tbf, and where a test needs to watch or disturb it, through a proxy whose
sockets live in a. Over a slow, lossy (stalling) link transfers complete with every byte; where the deadline is
shorter than the link needs, or the link is cut mid-transfer (the wire down, or both ends reset), the client
gets an EidosError within its deadline and the service frees the session's memory. Those tests are marked slow
(`pytest -m slow -s tests/remote/test_netns.py` shows the figures); they need root (CI runs as root) and skip
without it, as the namespace tests of the harness do.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys
import threading
import time

import pytest

from tests.remote import netlink
from tests.remote.conftest import TOKEN

MiB = 1 << 20


@pytest.fixture(autouse=True)
def bounded():
    with netlink.deadline(45, "a harness test"):
        yield


class Sink:
    """A listener that takes one connection and reads it to the end (or an error): how much, its digest, the error.
    echo=True sends every byte back."""

    def __init__(self, sock: socket.socket, *, echo: bool = False, timeout: float = 10.0):
        self.sock, self.echo, self.timeout = sock, echo, timeout
        self.got, self.error, self.digest = 0, None, hashlib.sha256()
        sock.listen(1)
        self.address = sock.getsockname()[:2]
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        conn, _ = self.sock.accept()
        conn.settimeout(self.timeout)
        buf = bytearray(256 * 1024)
        try:
            while True:
                n = conn.recv_into(buf)
                if n == 0:
                    break
                self.got += n
                self.digest.update(buf[:n])
                if self.echo:
                    conn.sendall(buf[:n])
        except OSError as e:
            self.error = e
        finally:
            conn.close()
            self.sock.close()

    def join(self) -> None:
        self.thread.join(timeout=30)
        assert not self.thread.is_alive(), "the receiver never finished"


def listener(host: str = "127.0.0.1", sock: socket.socket | None = None) -> socket.socket:
    sock = sock or socket.socket()
    sock.bind((host, 0))
    return sock


def read_exactly(sock: socket.socket, n: int) -> bytes:
    buf = bytearray(n)
    view, got = memoryview(buf), 0
    while got < n:
        k = sock.recv_into(view[got:])
        if k == 0:
            raise ConnectionError(f"EOF after {got} of {n} bytes")
        got += k
    return bytes(buf)


# ----------------------------------------------------------------------------------------- the proxy, loopback


def test_proxy_delivers_every_byte_through_delay_stalls_and_a_rate_cap():
    payload = os.urandom(2 * MiB)
    echo = Sink(listener(), echo=True)
    with netlink.Proxy(echo.address, delay=0.001, stall=0.2, stall_for=0.02, rate=64 * MiB, chunk=16 * 1024,
                       seed=7) as proxy:
        with socket.create_connection(proxy.address, timeout=10) as c:
            sender = threading.Thread(target=c.sendall, args=(payload,))
            sender.start()
            back = read_exactly(c, len(payload))
            sender.join()
            c.shutdown(socket.SHUT_WR)
            assert c.recv(1) == b""                  # the FIN went through the proxy and back
        echo.join()
    assert back == payload
    assert echo.error is None and echo.got == len(payload)
    assert proxy.up == proxy.down == len(payload) and proxy.accepted == 1 and proxy.cuts == 0


def test_a_cut_after_some_bytes_resets_both_peers_mid_transfer():
    sink = Sink(listener())
    with netlink.Proxy(sink.address, cut_after_up=1 * MiB) as proxy:
        with socket.create_connection(proxy.address, timeout=10) as c:
            with pytest.raises((ConnectionResetError, BrokenPipeError)):
                for _ in range(64):                   # 64 MiB: far more than the socket buffers hold
                    c.sendall(bytes(MiB))
        sink.join()
    assert isinstance(sink.error, ConnectionResetError), sink.error      # an error, and not a timeout (a hang)
    assert sink.got <= 1 * MiB and proxy.up == 1 * MiB and proxy.cuts == 1


def test_cut_by_hand_mid_download_and_refuse_new_connections():
    server = listener()
    server.listen(1)
    target = server.getsockname()

    def serve():
        conn, _ = server.accept()
        conn.settimeout(10)
        try:
            while True:
                conn.sendall(bytes(MiB))
        except OSError:
            pass
        finally:
            conn.close()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    with netlink.Proxy(target, rate=32 * MiB) as proxy:
        with socket.create_connection(proxy.address, timeout=10) as c:
            assert proxy.wait(down=512 * 1024)
            assert proxy.cut(refuse=True) == 1
            with pytest.raises(ConnectionResetError):
                while c.recv(1 << 16):
                    pass
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(proxy.address, timeout=5)
    t.join(timeout=10)
    server.close()
    assert not t.is_alive()


def test_inject_puts_bytes_between_forwarded_chunks():
    echo = Sink(listener(), echo=True)
    with netlink.Proxy(echo.address) as proxy:
        with socket.create_connection(proxy.address, timeout=10) as c:
            c.sendall(b"first ")
            assert read_exactly(c, 6) == b"first "
            assert proxy.inject(b"forged ") == 1
            assert read_exactly(c, 7) == b"forged "
            c.sendall(b"last")
            c.shutdown(socket.SHUT_WR)
            assert read_exactly(c, 4) == b"last"
        echo.join()
    assert echo.got == 17 and proxy.up == 10        # the injected bytes are the proxy's, not forwarded


# --------------------------------------------------------------------------------------------- the namespaces


def test_link_carries_a_shaped_transfer_between_namespaces_and_goes_away():
    payload = os.urandom(4 * MiB)
    with netlink.link(rate="200mbit") as net:
        assert "tbf" in net.qdisc(net.a) and "tbf" in net.qdisc(net.b)
        names = (net.a.dev, net.b.dev)
        sink = Sink(listener(net.b.address, net.socket(net.b)))
        c = net.socket(net.a)
        c.settimeout(10)
        c.connect(sink.address)
        c.sendall(payload)
        c.close()
        sink.join()
        assert sink.error is None and sink.digest.digest() == hashlib.sha256(payload).digest()
        with pytest.raises(OSError):              # the namespace's address is not this namespace's
            socket.create_connection(sink.address, timeout=1)
        assert len(netlink.ours()) == 2
    assert netlink.ours() == []
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, check=True).stdout
    assert not any(name in links for name in names)


def test_link_is_removed_when_the_block_raises():
    with pytest.raises(RuntimeError, match="inside"):
        with netlink.link() as net:
            assert len(netlink.ours()) == 2
            sleeper = net.popen(net.b, [sys.executable, "-c", "import time; time.sleep(60)"])
            raise RuntimeError("inside the block")
    assert netlink.ours() == []
    assert sleeper.poll() is not None             # killed with its namespace


def test_a_process_in_one_namespace_serves_a_socket_in_the_other_through_a_proxy():
    """The server is a subprocess in b (`ip netns exec`); the proxy listens in a and reaches b over the veth."""
    code = ("import socket,sys; s=socket.create_server((sys.argv[1],0)); print(s.getsockname()[1], flush=True);"
            "c,_=s.accept(); d=c.recv(100); c.sendall(d.upper()); c.close()")
    with netlink.link() as net:
        server = net.popen(net.b, [sys.executable, "-c", code, net.b.address], stdout=subprocess.PIPE, text=True)
        port = int(server.stdout.readline())
        with netlink.Proxy((net.b.address, port), listen_in=net.a, target_in=net.a, delay=0.01) as proxy:
            c = net.socket(net.a)
            c.settimeout(10)
            c.connect(proxy.address)
            c.sendall(b"through the veth")
            c.shutdown(socket.SHUT_WR)
            assert read_exactly(c, 16) == b"THROUGH THE VETH"
            c.close()
        assert server.wait(timeout=10) == 0


def test_the_wire_cut_mid_transfer_stalls_until_the_readers_deadline_and_mended_carries_on():
    """`down()` tells nobody: the reader's own timeout ends the wait (no RST, no EOF); after `up()` TCP resends."""
    with netlink.link() as net:
        server = net.socket(net.b)
        server.bind((net.b.address, 0))
        server.listen(1)
        sent = threading.Event()

        def serve():
            conn, _ = server.accept()
            conn.settimeout(20)
            try:
                conn.sendall(bytes(512 * 1024))
                sent.wait(20)
                conn.sendall(bytes(4 * MiB))
            except OSError:
                pass
            finally:
                conn.close()

        t = threading.Thread(target=serve, daemon=True)
        t.start()
        c = net.socket(net.a)
        c.settimeout(10)
        c.connect(server.getsockname())
        read_exactly(c, 512 * 1024)
        net.down()
        sent.set()
        c.settimeout(1.0)
        with pytest.raises(TimeoutError):
            read_exactly(c, 4 * MiB)
        net.up()
        c.settimeout(20)
        rest = 0
        while True:                               # what the timeout interrupted is lost to this reader; count on
            k = len(c.recv(1 << 20))
            if k == 0:
                break
            rest += k
        assert 0 < rest <= 4 * MiB
        c.close()
        t.join(timeout=20)
        server.close()


def test_namespaces_left_by_a_killed_run_are_swept():
    if netlink.unavailable():
        pytest.skip(netlink.unavailable())
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    name = f"{netlink.PREFIX}-{int(gone.stdout)}-0-a"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        assert name in netlink.sweep()
    finally:
        subprocess.run(["ip", "netns", "del", name], capture_output=True)
    assert name not in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout


def test_a_deadline_ends_a_hang_and_keeps_the_one_around_it():
    import signal
    import time

    with pytest.raises(TimeoutError, match="still ran after 0.2 s"):
        with netlink.deadline(0.2, "the sleep"):
            time.sleep(5)
    left, _ = signal.getitimer(signal.ITIMER_REAL)
    assert 0 < left <= 45                          # the autouse fixture's deadline is armed again


# ------------------------------------------------------------------------------------------ the eidos service



def say(**what) -> None:
    print(json.dumps(what), flush=True)


def pool_used(address: str, timeout: float) -> int:
    from eidos.remote.client import connect

    with connect(address, token=TOKEN, timeout=timeout) as r:
        return r.health().memory["pool_used"]


def client_roundtrip(address: str, nbytes: int, timeout: float) -> None:
    """In namespace a: random bytes there and back as a buffer on the data channel, and as a table on the control
    plane; says whether every byte came back, and how long each way took."""
    import numpy as np
    import pyarrow as pa

    from eidos.remote.client import connect

    payload = np.random.default_rng(5).integers(0, 256, nbytes, dtype=np.uint8)
    table = pa.table({"x": np.arange(nbytes // 64, dtype=np.int64)})
    with connect(address, token=TOKEN, timeout=timeout) as r:
        t0 = time.monotonic()
        handle = r.put_buffer(payload)
        t1 = time.monotonic()
        back = r.fetch_result(handle)
        t2 = time.monotonic()
        same = hashlib.sha256(back).digest() == hashlib.sha256(payload).digest()
        got = r.fetch_result(r.put_table(table))
        t3 = time.monotonic()
        say(same=same, table=got.equals(table), put_s=t1 - t0, fetch_s=t2 - t1, table_s=t3 - t2)


def client_cut(address: str, nbytes: int, timeout: float, way: str = "put") -> None:
    """In namespace a: moves `nbytes` (`way`: "put" sends them, "fetch" sends them first and then fetches them
    back) when the test says go (a line on stdin), which the test cuts off; says what the client raised and when,
    waits for the test's word, closes, then says what the service holds once that has settled."""
    from eidos.remote.client import connect

    r = connect(address, token=TOKEN, timeout=timeout)
    handle = r.put_buffer(bytes(nbytes)) if way == "fetch" else None
    say(ready=True)
    sys.stdin.readline()
    t0 = time.monotonic()
    try:
        r.put_buffer(bytes(nbytes)) if way == "put" else r.fetch_result(handle)
        say(error=None)
    except Exception as e:        # reported to the test, which judges it
        say(error=type(e).__name__, eidos=type(e).__module__ == "eidos.errors", message=str(e),
            took=time.monotonic() - t0)
    sys.stdin.readline()
    r.close()
    end = time.monotonic() + 20
    while (used := pool_used(address, timeout)) and time.monotonic() < end:
        time.sleep(0.1)
    say(pool_used=used)


def tell(proc: subprocess.Popen, word: str = "go") -> None:
    proc.stdin.write(word + "\n")
    proc.stdin.flush()


def tcp_counters(net) -> dict:
    """Segments retransmitted by each namespace's TCP, and packets tbf dropped on each veth."""
    out = {}
    for side in (net.a, net.b):
        snmp = subprocess.run(side.command(["cat", "/proc/net/snmp"]), capture_output=True, text=True).stdout
        names, values = [line.split()[1:] for line in snmp.splitlines() if line.startswith("Tcp:")][:2]
        stats = subprocess.run(["tc", "-s", "-n", side.netns, "qdisc", "show", "dev", side.dev],
                               capture_output=True, text=True).stdout
        dropped = stats.split("dropped ", 1)[1].split(",", 1)[0] if "dropped " in stats else "?"
        out[side.netns[-1]] = {"retransmitted": int(dict(zip(names, values))["RetransSegs"]),
                               "tbf_dropped": int(dropped) if dropped.isdigit() else dropped}
    return out


@pytest.mark.slow
def test_a_slow_lossy_link_carries_every_byte_within_the_deadline(token_file):
    """40 Mbit/s with a small tbf queue (bursts past it are dropped: real loss, retransmitted) and a proxy that
    adds 2 ms a chunk and stalls 5% of chunks for 0.1 s (a lost segment's pause, seen from above)."""
    with netlink.link() as net:
        net.shape("40mbit", burst="16kb", limit="32kb")
        with netlink.served(token_file, host=net.b.address, net=net, side=net.b) as server, \
                netlink.fronted(server, host="127.0.0.1", target_host=net.b.address, side=net.a, delay=0.002,
                                stall=0.05, stall_for=0.1, chunk=32 * 1024, seed=3) as (address, _, data):
            _, lines = netlink.child("tests.remote.test_netns:client_roundtrip", address, 4 * MiB, 20.0,
                                     net=net, side=net.a)
            said = lines.json(timeout=40)
            print(f"\nslow lossy link: {said}, proxy moved {data.up:,} up / {data.down:,} down, {tcp_counters(net)}")
            assert said["same"] and said["table"]


@pytest.mark.slow
def test_a_link_too_slow_for_the_deadline_fails_cleanly(token_file):
    """8 Mbit/s (1 MB/s) and a 2 s deadline for a PUT of 8 MiB: the client raises within the deadline, and
    once it closes, the service holds nothing of it."""
    with netlink.link(rate="8mbit") as net, \
            netlink.served(token_file, host=net.b.address, net=net, side=net.b) as server:
        proc, lines = netlink.child("tests.remote.test_netns:client_cut", server.address, 8 * MiB, 2.0,
                                    net=net, side=net.a, stdin=subprocess.PIPE)
        assert lines.json()["ready"]
        tell(proc)
        said = lines.json(timeout=20)
        tell(proc)
        print(f"\ntoo slow: {said}")
        assert said["eidos"] and "deadline" in said["message"], said
        assert lines.json(timeout=30) == {"pool_used": 0}


@pytest.mark.slow
@pytest.mark.parametrize("way", ["put", "fetch"])
@pytest.mark.parametrize("cut", ["wire", "reset"])
def test_a_link_cut_mid_transfer_fails_within_the_deadline_and_the_service_frees_the_session(cut, way, token_file):
    """64 MiB either way at 8 MiB/s (the proxy's cap), cut after 4 MiB: the wire itself (both veth ends down:
    silence, the client's 3 s deadline ends the wait) or both ends reset by the proxy. The client raises an
    EidosError within its deadline; with the wire mended and the client closed, the service frees the session."""
    with netlink.link() as net, \
            netlink.served(token_file, host=net.b.address, net=net, side=net.b) as server, \
            netlink.fronted(server, host="127.0.0.1", target_host=net.b.address, side=net.a) as (address, _, data):
        proc, lines = netlink.child("tests.remote.test_netns:client_cut", address, 64 * MiB, 3.0, way,
                                    net=net, side=net.a, stdin=subprocess.PIPE)
        assert lines.json()["ready"]
        data.rate = 8 * MiB
        moved = data.up if way == "put" else data.down
        tell(proc)
        got = data.wait(up=moved + 4 * MiB, timeout=20) if way == "put" else \
            data.wait(down=moved + 4 * MiB, timeout=20)
        assert got, "the transfer never got going"
        if cut == "wire":
            net.down()
        else:
            data.cut()
        said = lines.json(timeout=20)
        if cut == "wire":
            net.up()
        tell(proc)
        print(f"\ncut ({cut}, {way}) after {data.up:,} bytes up, {data.down:,} down: {said}")
        assert said["eidos"], said
        assert lines.json(timeout=30) == {"pool_used": 0}
