"""The execution service: what `eidos serve` runs on an accelerator node.

Two planes. The control plane is Arrow Flight: actions (open_session, run_subgraph, cancel, release,
close_session, health) whose bodies are JSON checked by protocol.py, and Arrow IPC streams for tables
(do_put uploads one, do_get streams one back). The data plane is the framed TCP channel (channel.py):
buffers go straight into the pre-allocated pool (pool.py), pinned when CUDA is present. Every call
needs the token; a session lives as long as its data channel (the client gone, its memory is freed
and its work cancelled).
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.flight as flight

from eidos.errors import BackendError, EidosError, PlanError

from . import jobs, protocol
from .auth import Tls, valid
from .channel import listen
from .pool import Pool
from .store import Sessions


def _default_targets() -> tuple[str, ...]:
    from eidos.isa import registry

    return tuple(name for name in ("triton", "cpu", "reference") if name in registry.names() and not registry.reason(name))


@dataclass(frozen=True)
class Config:
    """How a service runs and what it opens to its clients (every limit in bytes or seconds)."""

    token: str
    host: str = "127.0.0.1"
    port: int = 0                       # the control plane (Flight); 0: any free port
    data_port: int = 0                  # the data channel; 0: any free port
    tls: Tls | None = None
    pool_bytes: int = 1 << 30           # the pre-allocated pool buffers are received into
    session_bytes: int | None = None    # one session's share of the pool and of tables (None: all of it)
    max_frame: int = 1 << 40            # the largest payload one data frame may carry
    trusted_modules: tuple[str, ...] = ()     # modules whose functions remote plans may call
    allowed_paths: tuple[str, ...] = ()       # folders remote plans may read files from
    allowed_databases: tuple[str, ...] = ()   # database URIs remote plans may read
    isa_targets: tuple[str, ...] = field(default_factory=_default_targets)
    input_wait: float = 60.0            # how long a run waits for an input still arriving
    attach_wait: float = 30.0           # how long a new session may go without its data channel

    @property
    def isa_target(self) -> str:
        return self.isa_targets[0] if self.isa_targets else "reference"

    @property
    def max_buffer(self) -> int:
        return self.session_bytes if self.session_bytes is not None else self.pool_bytes


class ExecutionService:
    """A running service, serving from the moment it is made: keep it in your process (tests, notebooks) and
    `shutdown()` it, or `serve()` in the foreground as `eidos serve` does."""

    def __init__(self, config: Config):
        self.config = config
        self.pool = Pool(config.pool_bytes)
        self.sessions = Sessions(self.pool, quota=config.session_bytes)
        self.started = time.time()
        self._running: dict[tuple[str, str], str] = {}   # (session, plan id) -> fragment kind
        ssl_context = config.tls.server_context() if config.tls else None
        self.channel = listen(config.host, config.data_port, self.sessions, max_frame=config.max_frame,
                              ssl_context=ssl_context, wait=config.input_wait)
        try:
            self.flight = _Flight(self, config)
        except BaseException:
            self.channel.close()
            raise
        self.port = self.flight.port
        self._reaper = threading.Thread(target=self._reap, name="eidos-serve-reaper", daemon=True)
        self._stop = threading.Event()
        self._reaper.start()

    @property
    def address(self) -> str:
        return f"eidos://{self.config.host}:{self.port}"

    def serve(self) -> None:
        """Wait in the foreground until shutdown() (from another thread, or SIGTERM in `eidos serve`); Ctrl-C
        raises KeyboardInterrupt here. Not Flight's serve(): it stops the server on any signal the process
        gets, and a process that hosts a service (a notebook, a test run) may get SIGINT for other work."""
        while not self._stop.wait(0.5):
            pass

    def start(self) -> ExecutionService:
        """The service is serving from the moment it is made (Flight and the data channel listen at once):
        this returns it, for `ExecutionService(config).start()` and `with ExecutionService(config):`."""
        return self

    def shutdown(self) -> None:
        """Stop both planes and free every session (once; later calls return at once)."""
        if self._stop.is_set():
            return
        self._stop.set()
        self.flight.shutdown()
        self.channel.close()
        self.sessions.close()
        self._reaper.join()

    def __enter__(self) -> ExecutionService:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.shutdown()

    def _reap(self) -> None:
        """Close sessions whose data channel never came: a client that opened one and went away."""
        while not self._stop.wait(1.0):
            now = time.monotonic()
            for session in self.sessions.all():
                if not session.attached.is_set() and now - session.opened > self.config.attach_wait:
                    session.close()

    # ---- actions ------------------------------------------------------------------------------------------

    def open_session(self, message: dict) -> dict:
        if message["protocol"] != protocol.PROTOCOL:
            raise PlanError(f"this service speaks protocol {protocol.PROTOCOL}, the client {message['protocol']}; "
                            "install the same eidos version on both")
        session = self.sessions.open()
        return {"session": session.id, "ticket": session.ticket.hex(), "data_port": self.channel.port,
                "limits": {"max_message": protocol.MAX_MESSAGE, "max_frame": self.config.max_frame,
                           "session_bytes": self.config.max_buffer}}

    def run_subgraph(self, message: dict) -> dict:
        session = self.sessions.get(message["session"])
        fragment = message["fragment"]
        plan_id = protocol.field(fragment, "id", str, "fragment", default=None) or os.urandom(8).hex()
        cancelled = session.start(plan_id)
        kind = fragment.get("kind")
        self._running[(session.id, plan_id)] = kind
        try:
            entries = jobs.run(fragment, session, self.config, cancelled)
        finally:
            session.finish(plan_id)
            self._running.pop((session.id, plan_id), None)
        if session.closed.is_set():
            raise BackendError(f"session {session.id} closed while its {kind} fragment ran; its results were freed")
        return {"handles": [e.handle() for e in entries]}

    def cancel(self, message: dict) -> dict:
        return {"cancelled": self.sessions.get(message["session"]).cancel(message["plan_id"])}

    def release(self, message: dict) -> dict:
        session = self.sessions.get(message["session"])
        for ident in message["handles"]:
            if isinstance(ident, bool) or not isinstance(ident, int):
                raise PlanError(f"release: handles are integer ids, got {ident!r}")
            session.store.release(ident)
        return {}

    def close_session(self, message: dict) -> dict:
        self.sessions.get(message["session"]).close()
        return {}

    def health(self, message: dict | None = None) -> dict:
        from eidos import __version__
        from eidos.hal.devices import detect_devices

        info = detect_devices()
        return {"version": __version__, "protocol": protocol.PROTOCOL,
                "devices": {"cpu_cores": info.cpu_cores, "memory_bytes": info.memory_limit_bytes,
                            "gpus": [{"name": n, "memory_bytes": m} for n, m in zip(info.gpu_names,
                                                                                     info.gpu_memory_bytes)],
                            "targets": list(self.config.isa_targets)},
                "memory": {"pool_bytes": self.pool.capacity, "pool_used": self.pool.used(),
                           "pinned": self.pool.pinned},
                "load": {"sessions": len(self.sessions.all()), "running": len(self._running),
                         "loadavg": list(os.getloadavg())},
                "uptime_s": time.time() - self.started}

    # ---- tables ------------------------------------------------------------------------------------------

    def put_table(self, command: bytes, reader) -> None:
        message = protocol.load(command, "do_put")
        session = self.sessions.get(protocol.field(message, "session", str, "do_put"))
        ident = protocol.field(message, "id", int, "do_put")
        batches, nbytes = [], 0
        for chunk in reader:
            nbytes += chunk.data.nbytes
            session.store.room(nbytes, f"the table sent as id {ident} passes")     # refused as it comes
            batches.append(chunk.data)
        table = pa.Table.from_batches(batches, schema=reader.schema)
        session.store.put("table", table, nbytes, ident=ident, rows=table.num_rows)

    def get_table(self, ticket: bytes) -> pa.Table:
        message = protocol.load(ticket, "do_get")
        session = self.sessions.get(protocol.field(message, "session", str, "do_get"))
        entry = session.store.get(protocol.field(message, "id", int, "do_get"), wait=self.config.input_wait)
        if entry.kind != "table":
            raise PlanError(f"handle {entry.id} holds a {entry.kind}; fetch it on the data channel, not as a table")
        return entry.value


class _Auth(flight.ServerMiddlewareFactory):
    """Every call carries the token, or nothing runs."""

    def __init__(self, token: str):
        self.token = token

    def start_call(self, info, headers):
        if not valid(headers, self.token):
            raise flight.FlightUnauthenticatedError("a valid token is required (ei.connect(..., token=...))")
        return None


class _Flight(flight.FlightServerBase):
    """Flight's side of the service: decode, call the service, encode; eidos errors travel as JSON."""

    def __init__(self, service: ExecutionService, config: Config):
        scheme = "grpc+tls" if config.tls else "grpc+tcp"
        certs = [flight.CertKeyPair(*config.tls.read())] if config.tls else None
        super().__init__(f"{scheme}://{config.host}:{config.port}", tls_certificates=certs,
                         middleware={"auth": _Auth(config.token)})
        self.service = service

    def list_actions(self, context):
        return [(name, "") for name in protocol.ACTIONS]

    def do_action(self, context, action):
        body = action.body.to_pybytes() if action.body is not None else b""
        result = _answer(lambda: self._act(action.type, body))
        return iter([flight.Result(protocol.encode(result))])

    def _act(self, name: str, body: bytes) -> dict:
        message = protocol.decode(name, body)       # first: only the actions protocol.ACTIONS names get further
        return getattr(self.service, name)(message)

    def do_put(self, context, descriptor, reader, writer):
        _answer(lambda: self.service.put_table(descriptor.command, reader))

    def do_get(self, context, ticket):
        return flight.RecordBatchStream(_answer(lambda: self.service.get_table(ticket.ticket)))


def _answer(call):
    """Run a call; any failure goes back as a Flight error whose extra info names the eidos error."""
    try:
        return call()
    except flight.FlightError:
        raise
    except EidosError as e:
        raise flight.FlightServerError(str(e), extra_info=protocol.error_body(e)) from None
    except Exception as e:  # noqa: BLE001 - reported to the client as an ExecutionError naming it
        raise flight.FlightServerError(str(e), extra_info=protocol.error_body(jobs.failure(e))) from None
