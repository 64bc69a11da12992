"""Where the cluster lane runs: the cluster at an address (run(..., address=) or EIDOS_RAY_ADDRESS),
the Ray this process is already connected to, or a local Ray started on demand with this machine's cores.

An address is probed over TCP before Ray is asked to connect, so an unreachable cluster is a
BackendUnavailable naming it within the deadline instead of a hang in ray.init.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
import threading
import time
from dataclasses import dataclass

from eidos.errors import BackendUnavailable

ENV = "EIDOS_RAY_ADDRESS"
TIMEOUT_ENV = "EIDOS_RAY_CONNECT_TIMEOUT"
DEADLINE_S = 10.0
CLIENT_PORT = 10001   # Ray Client's default port (ray://host)

_lock = threading.Lock()
_ours: dict[str, str] = {}   # {"address": what eidos connected this process to ("" for a local Ray it started)}


@dataclass(frozen=True)
class Cluster:
    """The Ray cluster this process is connected to, as explain() and the partitioning see it."""

    address: str      # the GCS address
    started: bool     # a local Ray eidos started in this process
    cpus: int
    nodes: int
    memory: int       # the smallest node's memory resource, in bytes (a cap for per-task requests)

    def where(self) -> str:
        where = "a local Ray started by eidos" if self.started else f"the Ray cluster at {self.address}"
        return f"{where} ({self.nodes} node{'s' if self.nodes != 1 else ''}, {self.cpus} CPUs)"


def wanted(address: str | None) -> str | None:
    """The address asked for: `address` (run's keyword), else EIDOS_RAY_ADDRESS, else none."""
    return address or os.environ.get(ENV) or None


def deadline() -> float:
    text = os.environ.get(TIMEOUT_ENV)
    try:
        return float(text) if text else DEADLINE_S
    except ValueError:
        raise BackendUnavailable(f"{TIMEOUT_ENV}={text!r} is not a number of seconds") from None


def user_connected() -> bool:
    """Whether this process is connected to a Ray it (not eidos) initialised; never imports ray."""
    ray = sys.modules.get("ray")
    return ray is not None and hasattr(ray, "is_initialized") and ray.is_initialized() and not _ours


def connected() -> Cluster | None:
    """The cluster this process is connected to, or None; never connects or imports ray."""
    ray = sys.modules.get("ray")
    if ray is None or not hasattr(ray, "is_initialized") or not ray.is_initialized():
        return None
    return _describe(ray)


def connect(address: str | None = None) -> Cluster:
    """Connect to the cluster asked for (see the module's docstring) unless connected already."""
    want = wanted(address)
    import ray

    with _lock:
        if ray.is_initialized():
            current = ray.get_runtime_context().gcs_address
            if want and want != _ours.get("address") and not _same(want, current):
                raise BackendUnavailable(
                    f"this process is connected to the Ray cluster at {current}, not {want}; a process "
                    "connects to one Ray cluster at a time: call ray.shutdown() first, or run without address=")
            return _describe(ray)
        if want:
            limit = deadline()
            _probe(want, limit)
            _init_within(ray, want, limit)
        else:
            _init(ray, "", num_cpus=os.cpu_count() or 1, include_dashboard=False)
        return _describe(ray)


def _init(ray, key: str, **kwargs) -> None:
    try:
        ray.init(logging_level=logging.WARNING, **kwargs)
    except Exception as e:   # ray raises ConnectionError, RuntimeError, ValueError...: name the address
        where = f"the Ray cluster at {key}" if key else "a local Ray"
        raise BackendUnavailable(f"cannot connect to {where}: {type(e).__name__}: {e}") from e
    _ours["address"] = key


_pending: list[threading.Thread] = []   # a connection attempt that outlived its deadline, still in ray.init


def _init_within(ray, address: str, limit: float) -> None:
    """ray.init(address=...) given `limit` seconds: past it (a server that speaks gRPC but never says it
    is a Ray cluster) a BackendUnavailable names the address, and the attempt is left to end by itself."""
    if _pending and _pending[0].is_alive():
        raise BackendUnavailable(f"an earlier attempt to connect to a Ray cluster is still waiting; "
                                 f"connecting to {address} now would race it")
    _pending.clear()
    failed: list[BaseException] = []

    def attempt() -> None:
        try:
            _init(ray, address, address=address)
        except BaseException as e:   # handed to the caller's thread
            failed.append(e)

    thread = threading.Thread(target=attempt, name="eidos-ray-connect", daemon=True)
    quiet = logging.getLogger("ray._private.worker")
    quiet.addFilter(_not_main_thread)   # Ray's note that a thread does not set its SIGTERM handler
    try:
        thread.start()
        thread.join(limit)
    finally:
        quiet.removeFilter(_not_main_thread)
    if thread.is_alive():
        _pending.append(thread)
        raise BackendUnavailable(f"the Ray cluster at {address} did not accept this process within {limit:g} s "
                                 f"(set {TIMEOUT_ENV} for a longer deadline)")
    if failed:
        raise failed[0]


def _not_main_thread(record: logging.LogRecord) -> bool:
    return not str(record.msg).startswith("SIGTERM handler is not set")


def disconnect() -> None:
    """Let go of the Ray eidos connected this process to (a local one it started stops)."""
    import ray

    with _lock:
        if _ours:
            ray.shutdown()
            _ours.clear()


def _describe(ray) -> Cluster:
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    cpus = int(sum(n["Resources"].get("CPU", 0) for n in nodes))
    memory = min((int(n["Resources"].get("memory", 0)) for n in nodes), default=0)
    return Cluster(ray.get_runtime_context().gcs_address, _ours.get("address") == "", cpus, len(nodes), memory)


def _host_port(address: str) -> tuple[str, int] | None:
    """(host, port) of "host:port" or "ray://host[:port]"; None for what Ray resolves itself ("auto")."""
    rest = address
    client = rest.startswith("ray://")
    if client:
        rest = rest[len("ray://"):]
    if rest in ("auto", "local") or "/" in rest:
        return None
    host, sep, port = rest.rpartition(":")
    if not sep:
        return (rest, CLIENT_PORT) if client else None
    try:
        return host.strip("[]"), int(port)
    except ValueError:
        raise BackendUnavailable(f"Ray address {address!r} is not host:port or ray://host:port") from None


def _probe(address: str, timeout: float) -> None:
    """Within `timeout` seconds, a TCP connection to `address` and a gRPC (HTTP/2) server's first frame,
    which Ray's GCS and Ray Client send at once; else BackendUnavailable naming the address. A port that
    accepts but never answers (not Ray) would otherwise keep ray.init waiting without end."""
    target = _host_port(address)
    if target is None:
        return
    end = time.monotonic() + timeout
    try:
        with socket.create_connection(target, timeout=timeout) as s:
            if os.environ.get("RAY_USE_TLS", "0").lower() in ("1", "true"):
                return   # a TLS handshake comes first: the connection is what can be checked here
            s.settimeout(max(0.05, end - time.monotonic()))
            s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00")
            head = b""
            while len(head) < 9:
                more = s.recv(9 - len(head))
                if not more:
                    break
                head += more
    except TimeoutError:
        raise BackendUnavailable(f"the Ray cluster at {address} did not answer within {timeout:g} s "
                                 f"(set {TIMEOUT_ENV} for a longer deadline)") from None
    except OSError as e:
        raise BackendUnavailable(f"the Ray cluster at {address} is unreachable: {e.strerror or e}") from e
    if len(head) < 9 or head[3] != 4:   # an HTTP/2 SETTINGS frame
        raise BackendUnavailable(f"{address} answers, but not as a Ray cluster (no gRPC server there): give the "
                                 "head's GCS address (ray start --head --port) or ray://host:10001 for Ray Client")


def _same(a: str, b: str) -> bool:
    x, y = _host_port(a), _host_port(b)
    if x is None or y is None or x[1] != y[1]:
        return False
    try:
        return {i[4][0] for i in socket.getaddrinfo(x[0], x[1])} & {i[4][0] for i in socket.getaddrinfo(y[0], y[1])} != set()
    except OSError:
        return x[0] == y[0]
