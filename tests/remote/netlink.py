"""A network to break on purpose: two network namespaces joined by a veth pair, and a TCP proxy with knobs.

The kernel here has no netem, so delay, loss-like stalls and cuts come from two places:
- `Proxy`: a threaded TCP forwarder (in the test process; its sockets may live in a namespace) that adds a
  delay per chunk, random stalls (the pauses a lost segment's retransmission makes), a bandwidth cap, and
  `cut()`, which resets both directions at once (SO_LINGER 0, so each peer reads ECONNRESET, not EOF);
- `Link`: the namespaces' veth pair, optionally rate-limited by `tc ... tbf` (a tbf queue that overflows drops
  packets, which TCP retransmits: real loss), and `down()`, which cuts the wire itself (no RST: the peers see
  silence until their own deadlines).

`link()` needs root and a usable `ip netns`; without them it skips the test, with the reason. Everything it
creates is removed on the way out, whatever happened inside; namespaces left by a killed run (their names
carry the pid that made them) are removed by the next run.

`deadline()` bounds a test's time (the repo has no pytest-timeout): past it, every thread's stack is printed
and the test fails with TimeoutError instead of hanging the run.
"""

from __future__ import annotations

import contextlib
import ctypes
import faulthandler
import itertools
import json
import os
import queue
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tests.processes import alive

PREFIX = "eidos-t"          # namespace names: eidos-t-<pid>-<n>-a / -b
SUBNET = "10.77.0"          # each namespace has its own stack, so parallel runs can share the addresses
_CLONE_NEWNET = 0x40000000
_counter = itertools.count()
_libc = None


# ---------------------------------------------------------------------------------------------- namespaces


def unavailable() -> str | None:
    """Why namespaces cannot be made here, or None when they can (root, `ip` and `tc` present, `ip netns add` works)."""
    if os.geteuid() != 0:
        return f"network namespaces need root; this test runs as uid {os.geteuid()}"
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            return f"`{tool}` (iproute2) is not on PATH"
    probe = f"{PREFIX}-{os.getpid()}-probe"
    made = _ip("netns", "add", probe, check=False)
    if made.returncode != 0:
        return f"`ip netns add` failed: {made.stderr.strip()}"
    _ip("netns", "del", probe, check=False)
    return None


@dataclass
class Side:
    """One end of the link: its namespace, its veth device and its address there."""

    netns: str
    dev: str
    address: str

    def command(self, args: Sequence[str]) -> list[str]:
        """`args` run inside this namespace (`ip netns exec` execs them: the pid is the command's own)."""
        return ["ip", "netns", "exec", self.netns, *args]


@dataclass
class Link:
    """Two namespaces, `a` and `b`, joined by a veth pair (a.address <-> b.address); see `link()`."""

    a: Side
    b: Side
    procs: list[subprocess.Popen] = field(default_factory=list)

    def ip(self, side: Side, *args: str) -> str:
        """`ip` run in `side`'s namespace; raises CalledProcessError with ip's message when it fails."""
        return _ip("-n", side.netns, *args).stdout

    def popen(self, side: Side, args: Sequence[str], **kwargs) -> subprocess.Popen:
        """A process in `side`'s namespace, killed (SIGKILL) when the link goes if it is still running."""
        proc = subprocess.Popen(side.command(args), **kwargs)
        self.procs.append(proc)
        return proc

    def socket(self, side: Side, kind: int = socket.SOCK_STREAM) -> socket.socket:
        """An IPv4 socket that lives in `side`'s namespace (usable from any thread of this process)."""
        return in_netns(side.netns, lambda: socket.socket(socket.AF_INET, kind))

    def down(self) -> None:
        """Cut the wire: both veth ends down. Packets vanish; no peer is told (no RST, no FIN)."""
        for side in (self.a, self.b):
            self.ip(side, "link", "set", side.dev, "down")

    def up(self) -> None:
        """Mend the wire (`down()` undone); connections that outlived the cut carry on."""
        for side in (self.a, self.b):
            self.ip(side, "link", "set", side.dev, "up")

    def shape(self, rate: str | None, *, burst: str = "64kb", limit: str = "256kb") -> None:
        """Rate-limit both directions with tbf (`rate` in tc's units, "50mbit"); None removes it. A burst beyond
        `limit` bytes queued is dropped: TCP sees loss and retransmits."""
        for side in (self.a, self.b):
            if rate is None:
                _ip("-n", side.netns, "link", "show", side.dev)          # the device must exist; tc del may not
                subprocess.run(["tc", "-n", side.netns, "qdisc", "del", "dev", side.dev, "root"],
                               capture_output=True, text=True)
            else:
                _run(["tc", "-n", side.netns, "qdisc", "replace", "dev", side.dev, "root", "tbf",
                      "rate", rate, "burst", burst, "limit", limit])

    def qdisc(self, side: Side) -> str:
        """What `tc qdisc show` says of `side`'s veth (to check a shape took)."""
        return _run(["tc", "-n", side.netns, "qdisc", "show", "dev", side.dev]).stdout


@contextlib.contextmanager
def link(rate: str | None = None, *, skip: bool = True) -> Iterator[Link]:
    """Two fresh namespaces joined by a veth pair with SUBNET.1/24 (a) and SUBNET.2/24 (b), lo up in both,
    optionally shaped (`Link.shape`). Skips the test (skip=False: raises RuntimeError) where namespaces cannot be
    made. Removed on exit, always: processes started with `Link.popen` are killed, then both namespaces (their
    veth ends go with them)."""
    reason = unavailable()
    if reason is not None:
        if skip:
            import pytest

            pytest.skip(reason)
        raise RuntimeError(reason)
    sweep()
    n = next(_counter)
    tag = f"{os.getpid():x}{n:x}"[-10:]          # veth names: at most 15 characters
    a = Side(f"{PREFIX}-{os.getpid()}-{n}-a", f"ev{tag}a", f"{SUBNET}.1")
    b = Side(f"{PREFIX}-{os.getpid()}-{n}-b", f"ev{tag}b", f"{SUBNET}.2")
    made: list[str] = []
    net = Link(a, b)
    try:
        for side in (a, b):
            _ip("netns", "add", side.netns)
            made.append(side.netns)
        _ip("-n", a.netns, "link", "add", a.dev, "type", "veth", "peer", "name", b.dev, "netns", b.netns)
        for side in (a, b):
            _ip("-n", side.netns, "addr", "add", f"{side.address}/24", "dev", side.dev)
            _ip("-n", side.netns, "link", "set", side.dev, "up")
            _ip("-n", side.netns, "link", "set", "lo", "up")
        if rate is not None:
            net.shape(rate)
        yield net
    finally:
        for proc in net.procs:
            if proc.poll() is None:
                proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=10)
        for name in made:
            _remove(name)


def sweep() -> list[str]:
    """Remove the namespaces a killed run left behind (ours by name, made by a pid that no longer runs)."""
    removed = []
    listed = _ip("netns", "list", check=False).stdout
    for line in listed.splitlines():
        name = line.split(" ", 1)[0]
        parts = name.split("-")
        if not name.startswith(PREFIX + "-") or len(parts) != 5 or not parts[2].isdigit():
            continue
        if not alive(int(parts[2])):
            _remove(name)
            removed.append(name)
    return removed


def ours() -> list[str]:
    """The namespaces this process has now (for tests that check the clean-up)."""
    mine = f"{PREFIX}-{os.getpid()}-"
    return [line.split(" ", 1)[0] for line in _ip("netns", "list", check=False).stdout.splitlines()
            if line.startswith(mine)]


def in_netns(netns: str, make: Callable[[], object]):
    """`make()` called in a thread that has entered `netns`; a socket made there stays in that namespace.
    (A network namespace belongs to a thread, so the rest of the process is not moved.)"""
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    out: dict[str, object] = {}

    def enter():
        try:
            with open(f"/run/netns/{netns}", "rb") as f:
                if _libc.setns(f.fileno(), _CLONE_NEWNET) != 0:
                    err = ctypes.get_errno()
                    raise OSError(err, f"setns into {netns}: {os.strerror(err)}")
            out["value"] = make()
        except BaseException as e:        # handed to the caller below, re-raised there
            out["error"] = e

    t = threading.Thread(target=enter, name=f"netns {netns}")
    t.start()
    t.join()
    if "error" in out:
        raise out["error"]
    return out["value"]


def _remove(netns: str) -> None:
    """Kill what still runs in `netns` (only our test's processes run there), then delete it."""
    pids = _ip("netns", "pids", netns, check=False).stdout.split()
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(pid), signal.SIGKILL)
    for _ in range(50):
        if _ip("netns", "del", netns, check=False).returncode == 0 or not Path(f"/run/netns/{netns}").exists():
            return
        time.sleep(0.1)
    raise RuntimeError(f"network namespace {netns} could not be removed: {_ip('netns', 'del', netns, check=False)}")


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return _run(["ip", *args], check=check)


def _run(args: list[str], check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(args, capture_output=True, text=True, timeout=30)
    if check and done.returncode != 0:
        raise subprocess.CalledProcessError(done.returncode, args, done.stdout, done.stderr.strip())
    return done


# ---------------------------------------------------------------------------------------------------- proxy


class Proxy:
    """Forwards each connection made to `address` to `target`, one thread per direction, through the knobs:

    delay      seconds slept before each chunk goes on (per direction)
    stall      chance per chunk of a pause of `stall_for` seconds (a lost segment's retransmit, seen from above)
    rate       bytes per second at most, per direction of each connection (None: no cap)
    chunk      bytes read at a time

    The knobs are plain attributes and may change while it runs. `inject()` writes bytes of the test's own into
    the open connections. `cut()` resets every open connection on both
    sides at once; `cut_after_up` / `cut_after_down` do it when exactly that many bytes have gone towards the
    target / back from it (summed over connections), so a test cuts mid-transfer without guessing when.
    `listen_in` / `target_in` put the listening / outgoing sockets in a namespace (a `Side`).
    """

    def __init__(self, target: tuple[str, int], *, listen: tuple[str, int] = ("127.0.0.1", 0),
                 listen_in: Side | None = None, target_in: Side | None = None, delay: float = 0.0,
                 stall: float = 0.0, stall_for: float = 0.0, rate: float | None = None, chunk: int = 64 * 1024,
                 cut_after_up: int | None = None, cut_after_down: int | None = None, seed: int = 0):
        self.target, self.target_in = target, target_in
        self.delay, self.stall, self.stall_for, self.rate, self.chunk = delay, stall, stall_for, rate, chunk
        self.cut_after_up, self.cut_after_down = cut_after_up, cut_after_down
        self.up = self.down = 0                    # bytes forwarded towards the target / back from it
        self.accepted = 0                          # connections accepted
        self.cuts = 0                              # connections reset by cut()
        self.errors: list[str] = []               # what went wrong reaching the target
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._moved = threading.Condition(self._lock)
        self._pairs: list[_Pair] = []
        self._closed = threading.Event()
        self._listener = _make(listen_in)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(listen)
        self._listener.listen(64)
        self._listener.settimeout(0.05)
        self.address: tuple[str, int] = self._listener.getsockname()[:2]
        self._thread = threading.Thread(target=self._accept, name=f"proxy {self.address}", daemon=True)
        self._thread.start()

    def __enter__(self) -> Proxy:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def port(self) -> int:
        return self.address[1]

    def cut(self, *, refuse: bool = False) -> int:
        """Reset every open connection, both sides (each peer reads ECONNRESET). refuse=True also stops listening,
        so new connections are refused. Returns how many connections were cut."""
        if refuse:
            self._closed.set()
            self._thread.join(timeout=5)
            with contextlib.suppress(OSError):
                self._listener.close()
        with self._lock:
            pairs, self._pairs = [p for p in self._pairs if not p.gone.is_set()], []
        for pair in pairs:
            pair.reset()
        with self._lock:
            self.cuts += len(pairs)
            self._moved.notify_all()
        return len(pairs)

    def inject(self, data: bytes, *, way: str = "up") -> int:
        """Write `data` into every open connection towards the target ("up") or the client ("down"), between two
        forwarded chunks (a forged or malformed message on a live connection). Returns how many got it."""
        with self._lock:
            pairs = [p for p in self._pairs if not p.gone.is_set()]
        done = 0
        for pair in pairs:
            with pair.sending[way]:
                done += _send(pair.upstream if way == "up" else pair.client, memoryview(data), pair.gone)
        return done

    def wait(self, *, up: int = 0, down: int = 0, timeout: float = 10.0) -> bool:
        """Wait until at least `up` bytes went towards the target and `down` came back; False at the timeout."""
        end = time.monotonic() + timeout
        with self._lock:
            while self.up < up or self.down < down:
                left = end - time.monotonic()
                if left <= 0:
                    return False
                self._moved.wait(left)
        return True

    def close(self) -> None:
        """Stop listening and reset what is still open (a proxy left behind would keep ports and threads)."""
        self.cut(refuse=True)

    # -- inside

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with self._lock:
                self.accepted += 1
            upstream = _make(self.target_in)
            try:
                upstream.settimeout(5.0)
                upstream.connect(self.target)
            except OSError as e:
                self.errors.append(f"connecting to {self.target}: {e}")
                upstream.close()
                _reset(client)
                continue
            pair = _Pair(client, upstream)
            with self._lock:
                if self._closed.is_set():
                    pair.reset()
                    return
                self._pairs.append(pair)
            for src, dst, way in ((client, upstream, "up"), (upstream, client, "down")):
                threading.Thread(target=self._pump, args=(pair, src, dst, way), daemon=True,
                                 name=f"proxy {way} {self.address}").start()

    def _pump(self, pair: _Pair, src: socket.socket, dst: socket.socket, way: str) -> None:
        try:
            while not pair.gone.is_set():
                try:
                    data = src.recv(self.chunk)
                except TimeoutError:
                    continue
                if not data:                                  # an orderly close: pass the FIN on
                    with contextlib.suppress(OSError):
                        dst.shutdown(socket.SHUT_WR)
                    pair.half_closed(way)
                    return
                with self._lock:
                    limit = self.cut_after_up if way == "up" else self.cut_after_down
                    moved = self.up if way == "up" else self.down
                    allowed = len(data) if limit is None else max(0, min(len(data), limit - moved))
                    stall = self.stall and self._rng.random() < self.stall
                if self.delay and pair.gone.wait(self.delay):
                    return
                if stall and pair.gone.wait(self.stall_for):
                    return
                if self.rate and pair.gone.wait(len(data) / self.rate):
                    return
                with pair.sending[way]:
                    if allowed and not _send(dst, memoryview(data)[:allowed], pair.gone):
                        return
                with self._lock:
                    if way == "up":
                        self.up += allowed
                    else:
                        self.down += allowed
                    self._moved.notify_all()
                if allowed < len(data):
                    self.cut()
                    return
        except OSError:                                       # one side reset or failed: so does the other
            with self._lock:
                if pair in self._pairs:
                    self._pairs.remove(pair)
            pair.reset()


class _Pair:
    """A client connection and its upstream: reset together, closed once both directions have ended."""

    def __init__(self, client: socket.socket, upstream: socket.socket):
        self.client, self.upstream = client, upstream
        for s in (client, upstream):
            s.settimeout(0.05)
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.gone = threading.Event()
        self.sending = {"up": threading.Lock(), "down": threading.Lock()}     # a chunk or an injection at a time
        self._ended: set[str] = set()
        self._lock = threading.Lock()

    def reset(self) -> None:
        if self.gone.is_set():
            return
        self.gone.set()
        _reset(self.client)
        _reset(self.upstream)

    def half_closed(self, way: str) -> None:
        with self._lock:
            self._ended.add(way)
            both = len(self._ended) == 2
        if both and not self.gone.is_set():
            self.gone.set()
            self.client.close()
            self.upstream.close()


def _make(side: Side | None) -> socket.socket:
    if side is None:
        return socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    return in_netns(side.netns, lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM))


def _send(dst: socket.socket, view: memoryview, gone: threading.Event) -> bool:
    """Send all of `view` unless the pair goes first (False then)."""
    while view.nbytes:
        if gone.is_set():
            return False
        try:
            sent = dst.send(view)
        except TimeoutError:
            continue
        view = view[sent:]
    return True


def _reset(s: socket.socket) -> None:
    """Close so the peer gets a RST, not a FIN: SO_LINGER on with a zero timeout."""
    with contextlib.suppress(OSError):
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    with contextlib.suppress(OSError):
        s.close()


# ------------------------------------------------------------------------------------------------- deadline


@contextlib.contextmanager
def deadline(seconds: float, what: str = "the test") -> Iterator[None]:
    """Fail with TimeoutError (every thread's stack printed to stderr first) if the block runs past `seconds`.
    Main thread only (SIGALRM); a blocking call there is interrupted."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(signum, frame):
        faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
        raise TimeoutError(f"{what} still ran after {seconds} s (a hang); the stacks above show where")

    old = signal.signal(signal.SIGALRM, expire)
    outer, _ = signal.setitimer(signal.ITIMER_REAL, seconds)      # a deadline around this one keeps running
    start = time.monotonic()
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
        if outer:
            signal.setitimer(signal.ITIMER_REAL, max(outer - (time.monotonic() - start), 0.001))


# ------------------------------------------------------------------------------------ processes of the test


ROOT = Path(__file__).resolve().parents[2]
_SERVING = re.compile(r"eidos service at (eidos(?:\+tls)?://(\S+):(\d+)) \(data channel port (\d+)")


def env() -> dict[str, str]:
    """The environment for a child Python: this checkout's src/ and its tests package importable."""
    paths = [str(ROOT / "src"), str(ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(dict.fromkeys(paths)), "PYTHONUNBUFFERED": "1"}


class Lines:
    """A child's stdout, line by line, each read with a deadline (a reader thread feeds a queue)."""

    def __init__(self, proc: subprocess.Popen):
        self.proc, self._queue, self.seen = proc, queue.Queue(), []
        threading.Thread(target=self._read, daemon=True, name=f"lines of {proc.pid}").start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def next(self, timeout: float = 30.0) -> str:
        """The next line; RuntimeError (with what came before) at the end of output or past `timeout`."""
        try:
            line = self._queue.get(timeout=timeout)
        except queue.Empty:
            raise RuntimeError(f"process {self.proc.pid} wrote no line within {timeout} s; before: {self.seen}") from None
        if line is None:
            self._queue.put(None)
            raise RuntimeError(f"process {self.proc.pid} ended (exit {self.proc.poll()}); it wrote: {self.seen}")
        self.seen.append(line)
        return line

    def json(self, timeout: float = 30.0) -> dict:
        """The next line that is a JSON object (other lines, such as warnings, are skipped)."""
        end = time.monotonic() + timeout
        while True:
            line = self.next(max(end - time.monotonic(), 0.01))
            if line.startswith("{"):
                return json.loads(line)


def child(target: str, *args, net: Link | None = None, side: Side | None = None, **kwargs) -> tuple[subprocess.Popen, Lines]:
    """`module:function` called with `args` (JSON-able) in a child Python, in `side`'s namespace when given; its
    stdout as `Lines`, its stderr passed through. A child in a namespace is killed with the link; otherwise the
    caller kills it (`stop`)."""
    module, function = target.split(":")
    code = f"import json, sys; from {module} import {function} as f; f(*json.loads(sys.argv[1]))"
    args_ = [sys.executable, "-c", code, json.dumps(list(args))]
    kw = dict(stdout=subprocess.PIPE, text=True, env=env(), cwd=ROOT, **kwargs)
    proc = net.popen(side, args_, **kw) if side is not None else subprocess.Popen(args_, **kw)
    return proc, Lines(proc)


def stop(proc: subprocess.Popen, sig: int = signal.SIGTERM, timeout: float = 10.0) -> int:
    """Stop a child this test started: `sig`, then SIGKILL if it outlives `timeout`; its exit status."""
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=timeout)
    return proc.returncode


@dataclass
class Served:
    """`eidos serve` in a child process: where it listens, and the process (to kill mid-work)."""

    proc: subprocess.Popen
    address: str
    host: str
    port: int
    data_port: int
    log: Path


@contextlib.contextmanager
def served(token_file: Path, *, host: str = "127.0.0.1", pool_mb: int = 64, args: Sequence[str] = (),
           net: Link | None = None, side: Side | None = None) -> Iterator[Served]:
    """`eidos serve` in a child (in `side`'s namespace when given) on any free ports; stopped on the way out
    (SIGTERM, then SIGKILL), if a test has not killed it already. Its stderr goes to a log beside the token."""
    log = token_file.with_name(f"serve-{next(_counter)}.log")
    cmd = [sys.executable, "-m", "eidos", "serve", "--host", host, "--port", "0", "--token-file", str(token_file),
           "--pool-mb", str(pool_mb), *args]
    with open(log, "w") as err:
        kw = dict(stdout=subprocess.PIPE, stderr=err, text=True, env=env(), cwd=ROOT)
        proc = net.popen(side, cmd, **kw) if side is not None else subprocess.Popen(cmd, **kw)
    try:
        lines = Lines(proc)
        try:
            first = lines.next(timeout=60)
        except RuntimeError as e:
            raise RuntimeError(f"{e}; its log: {log.read_text()[-2000:]}") from None
        m = _SERVING.search(first)
        if m is None:
            raise RuntimeError(f"`eidos serve` said {first!r}, not where it listens")
        yield Served(proc, m.group(1), m.group(2), int(m.group(3)), int(m.group(4)), log)
    finally:
        stop(proc)


@contextlib.contextmanager
def fronted(server: Served, *, host: str = "127.0.0.2", target_host: str | None = None, side: Side | None = None,
            **knobs) -> Iterator[tuple[str, Proxy, Proxy]]:
    """Proxies in front of both of a service's ports, listening on `host` with the service's own port numbers
    (so the data port the service names reaches the proxy too): the address to connect to, the control
    plane's proxy (plain) and the data channel's (with `knobs`). On loopback any 127.x address will do; with
    `side`, the proxies' sockets live in that namespace and reach the service at `target_host`."""
    target_host = target_host or server.host
    made = dict(listen_in=side, target_in=side)
    with Proxy((target_host, server.port), listen=(host, server.port), **made) as control, \
            Proxy((target_host, server.data_port), listen=(host, server.data_port), **made, **knobs) as data:
        yield f"eidos://{host}:{server.port}", control, data


def wait_for(condition: Callable[[], object], what: str, timeout: float = 20.0, every: float = 0.05):
    """Poll `condition` until it is truthy (its value) or fail naming `what` after `timeout` s."""
    end = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > end:
            raise AssertionError(f"{what}: not so after {timeout} s (last: {value!r})")
        time.sleep(every)
