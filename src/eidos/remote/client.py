"""A connection to an eidos service: `ei.connect("eidos://host:port", token=...)` returns a `Remote`.

    remote.health() -> HealthStatus                  devices, memory, load, version
    remote.put_buffer(data) -> Handle                 bytes on the data channel, into the service's pool
    remote.put_table(table) -> Handle                 an Arrow table (Flight do_put)
    remote.table(data) -> Flow                        a table sent there, as a Flow whose plans run there
    remote.run_subgraph(fragment) -> [Handle]         run a plan, ISA operations or a tensor graph there
    remote.fetch_result(handle) -> memoryview | pa.Table   read-only bytes, or the table
    remote.release(*handles); remote.cancel(plan_id); remote.close()

Results stay on the service until fetched or released, and a handle can be the input of a later run
without moving its data. Every call has a deadline (`timeout`, default 30 s, or the call's own): a
service that dies or stalls is an EidosError within it, never a hang. The token is sent with every call
and never shown in a message.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import threading
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import pyarrow as pa

from eidos.errors import BackendError, BackendUnavailable, EidosError, ExecutionError, PlanError, ResourceError

from . import protocol
from .auth import bearer, check_token, client_context

if TYPE_CHECKING:
    from eidos.flow.frame import Flow

TOKEN_ENV = "EIDOS_TOKEN"
DEFAULT_TIMEOUT = 30.0          # a control call (health, release, cancel, a transfer's stall)
DEFAULT_RUN_TIMEOUT = 600.0     # a run: it may compile and compute for a while
TABLE_IDS = 1 << 61

_lock = threading.Lock()
_open: list[weakref.ref] = []


@dataclass(frozen=True)
class Handle:
    """A result or buffer the service keeps for this connection: its id there, what it is, its size."""

    id: int
    kind: str
    nbytes: int = 0
    meta: dict = field(default_factory=dict, compare=False, hash=False)

    @classmethod
    def of(cls, j: dict) -> Handle:
        if not isinstance(j, dict) or not isinstance(j.get("id"), int) or not isinstance(j.get("kind"), str):
            raise ExecutionError(f"the service answered with a malformed handle: {str(j)[:80]}")
        meta = {k: v for k, v in j.items() if k not in ("id", "kind", "nbytes")}
        return cls(j["id"], j["kind"], int(j.get("nbytes", 0)), meta)

    def __getitem__(self, key: str) -> Any:     # the handle's JSON fields, as the service sent them
        return {"id": self.id, "kind": self.kind, "nbytes": self.nbytes, **self.meta}[key]


@dataclass(frozen=True)
class HealthStatus:
    """What a service says of itself: its devices, its memory, its load and its version."""

    version: str
    protocol: int
    devices: dict
    memory: dict
    load: dict
    uptime_s: float


def connect(address: str, token: str | None = None, *, tls_ca: str | None = None,
            timeout: float = DEFAULT_TIMEOUT, run_timeout: float = DEFAULT_RUN_TIMEOUT) -> Remote:
    """Connect to the eidos service at `address` ("eidos://host:port", or "eidos+tls://host:port" with TLS,
    checked against the CA certificate `tls_ca`). `token` defaults to the EIDOS_TOKEN environment variable.
    The connection becomes the current one (`current()`): engine="remote" and 'remote:gpu' tensors use it.
    Every call has a deadline: `timeout` seconds for control calls and for a transfer that stalls,
    `run_timeout` for a run (run_subgraph, and what the remote lane and remote tensors run there).

    Examples:
        >>> from eidos.remote.service import Config, ExecutionService
        >>> service = ExecutionService(Config(token="doctest-token-0123456789")).start()  # `eidos serve`
        >>> remote = ei.connect(service.address, token="doctest-token-0123456789")
        >>> remote.health().memory["pinned"]          # the pool is pinned where CUDA is present
        False
        >>> h = remote.put_buffer(b"hello")            # kept there, in the service's pool
        >>> bytes(remote.fetch_result(h))
        b'hello'
        >>> (r,) = remote.run_subgraph({"kind": "plan", "plan": ei.from_pydict({"a": [2, 1]}).sort("a").to_json()})
        >>> remote.fetch_result(r).to_pydict()
        {'a': [1, 2]}
        >>> remote.release(h, r)
        >>> remote.close(); service.shutdown()
    """
    return Remote(address, token, tls_ca=tls_ca, timeout=timeout, run_timeout=run_timeout)


def current() -> Remote | None:
    """The most recently opened connection still open, or None."""
    with _lock:
        for ref in reversed(_open):
            remote = ref()
            if remote is not None and not remote.closed:
                return remote
    return None


def connections() -> list[Remote]:
    with _lock:
        return [r for ref in _open if (r := ref()) is not None and not r.closed]


def _parse(address: str) -> tuple[str, str, int]:
    parts = urlsplit(address) if isinstance(address, str) else None
    if parts is None or parts.scheme not in ("eidos", "eidos+tls") or not parts.hostname or parts.path not in ("", "/"):
        raise PlanError(f"a service address looks like 'eidos://host:port' (or 'eidos+tls://host:port'), got "
                        f"{address!r}")
    try:
        port = parts.port
    except ValueError:
        port = None
    if port is None:
        raise PlanError(f"the address {address!r} names no port: 'eidos://{parts.hostname}:PORT'")
    return parts.scheme, parts.hostname, port


class Remote:
    """An open connection to one service (see the module's docstring)."""

    def __init__(self, address: str, token: str | None = None, *, tls_ca: str | None = None,
                 timeout: float = DEFAULT_TIMEOUT, run_timeout: float = DEFAULT_RUN_TIMEOUT):
        import pyarrow.flight as flight

        from .transfer import TransferManager
        from .transport import TcpTransport

        scheme, self.host, self.port = _parse(address)
        self.address = f"{scheme}://{self.host}:{self.port}"
        token = token if token is not None else os.environ.get(TOKEN_ENV)
        if token is None:
            raise PlanError(f"connecting to {self.address} needs its token: ei.connect(address, token=...) or the "
                            f"{TOKEN_ENV} environment variable")
        check_token(token)
        self.timeout, self.run_timeout = float(timeout), float(run_timeout)
        self.closed = False
        self._flight = flight
        self._header = [bearer(token)]
        tls = scheme == "eidos+tls"
        location = f"{'grpc+tls' if tls else 'grpc+tcp'}://{self.host}:{self.port}"
        kw = {}
        if tls and tls_ca is not None:
            try:
                kw["tls_root_certs"] = open(tls_ca, "rb").read()
            except OSError as e:
                raise BackendUnavailable(f"cannot read the CA certificate {tls_ca!r}: {e.strerror}") from e
        self._client = flight.FlightClient(location, **kw)
        self._ids = itertools.count(1)
        self._plans = itertools.count(1)
        try:
            opened = self._action("open_session", {"protocol": protocol.PROTOCOL})
            self.session = opened["session"]
            self.limits = opened.get("limits", {})
            transport = TcpTransport.connect(self.host, opened["data_port"], timeout=self.timeout,
                                             ssl_context=client_context(tls_ca) if tls else None)
            self._data = TransferManager(transport, timeout=self.timeout,
                                         max_frame=int(self.limits.get("max_frame", 1 << 40)))
            self._data.hello(bytes.fromhex(opened["ticket"]))
        except BaseException:
            self._client.close()
            raise
        with _lock:
            _open.append(weakref.ref(self))

    def __repr__(self) -> str:
        return f"<Remote {self.address} session {self.session}{' (closed)' if self.closed else ''}>"

    # ---- control plane ----------------------------------------------------------------------------------

    def _options(self, timeout: float | None):
        return self._flight.FlightCallOptions(timeout=self.timeout if timeout is None else timeout,
                                              headers=self._header)

    def _action(self, name: str, body: dict, timeout: float | None = None) -> dict:
        if self.closed:
            raise BackendError(f"the connection to {self.address} is closed; connect again")
        options = self._options(timeout)
        try:
            results = list(self._client.do_action(self._flight.Action(name, protocol.encode(body)), options))
        except self._flight.FlightError as e:
            raise self._error(e, name, options.timeout) from None
        return protocol.load(results[0].body.to_pybytes(), name) if results else {}

    def _error(self, e, what: str, timeout) -> EidosError:
        f = self._flight
        if isinstance(e, f.FlightUnauthenticatedError):
            return PlanError(f"{self.address} refused the token ({what}); check the token the service was "
                             "started with (its --token-file)")
        if isinstance(e, f.FlightTimedOutError):
            return ExecutionError(f"{what} on {self.address} did not answer within its deadline of {timeout:g} s")
        if isinstance(e, f.FlightUnavailableError):
            return BackendUnavailable(f"the eidos service at {self.address} cannot be reached ({what}): "
                                      f"{str(e).splitlines()[0][:200]}")
        return protocol.error_from(getattr(e, "extra_info", None), f"{what} failed on {self.address}: {e}")

    def health(self) -> HealthStatus:
        h = self._action("health", {})
        return HealthStatus(h["version"], h["protocol"], h["devices"], h["memory"], h["load"], h["uptime_s"])

    def run_subgraph(self, fragment: dict, *, timeout: float | None = None) -> list[Handle]:
        """Run `fragment` on the service; the handles of what it made (kept there until released). A run
        that passes its deadline is cancelled on the service too, so it does not run on unseen."""
        if isinstance(fragment, dict) and "id" not in fragment:
            fragment = {**fragment, "id": self.new_plan_id()}
        body = {"session": self.session, "fragment": fragment}
        try:
            answer = self._action("run_subgraph", body, self.run_timeout if timeout is None else timeout)
        except ExecutionError as e:
            if "deadline" in str(e) and isinstance(fragment, dict) and isinstance(fragment.get("id"), str):
                with contextlib.suppress(EidosError):
                    self.cancel(fragment["id"])
            raise
        return [Handle.of(h) for h in answer.get("handles", [])]

    def new_plan_id(self) -> str:
        """An id for a run, unique in this session, to cancel it by."""
        return f"{os.getpid()}-{next(self._plans)}"

    def cancel(self, plan_id: str) -> bool:
        """Cancel the run `plan_id` (the fragment's "id"); False when it is not running."""
        return bool(self._action("cancel", {"session": self.session, "plan_id": plan_id}).get("cancelled"))

    def release(self, *handles: Handle | int) -> None:
        """Let the service free these results and buffers."""
        ids = [h if isinstance(h, int) else h.id for h in handles]
        if ids and not self.closed:
            self._action("release", {"session": self.session, "handles": ids})

    # ---- data ---------------------------------------------------------------------------------------------

    def put_buffer(self, data, *, wait: bool = True) -> Handle:
        """Send `data` (any buffer: bytes, a NumPy array, a memoryview) into the service's pool. With
        wait=False the bytes are still in flight when this returns: `data` must stay unchanged until a
        run that reads them returns (the run waits for them to arrive)."""
        view = memoryview(data)
        limit = self.limits.get("session_bytes")
        if isinstance(limit, int) and view.nbytes > limit:     # refused here: over the wire it ends the session
            raise ResourceError(f"a buffer of {view.nbytes:,} bytes is over the service's limit of {limit:,} bytes "
                                f"per connection ({self.address}); send it in parts or raise the service's "
                                "--session-mb")
        ident = self._data.put(view)
        if wait:
            try:
                self._data.wait(ident)
            except ExecutionError:
                # past its deadline the bytes may still go out (a frame cannot stop halfway): free them
                # on the service once stored, since no handle to them was given
                with contextlib.suppress(EidosError):
                    self._data.release(ident)
                raise
        return Handle(ident, "buffer", view.nbytes)

    def put_table(self, table: pa.Table, *, timeout: float | None = None) -> Handle:
        """Send an Arrow table (an IPC stream on the control plane)."""
        ident = TABLE_IDS | next(self._ids)     # apart from the data channel's ids, which count from 1
        command = protocol.encode({"session": self.session, "id": ident})
        options = self._options(timeout)
        try:
            writer, _ = self._client.do_put(self._flight.FlightDescriptor.for_command(command), table.schema, options)
            writer.write_table(table)
            writer.close()
        except self._flight.FlightError as e:
            raise self._error(e, "put_table", options.timeout) from None
        return Handle(ident, "table", table.nbytes, {"rows": table.num_rows, "schema": table.schema})

    def table(self, data) -> Flow:
        """Send `data` (a pyarrow Table, or anything ei.from_arrow takes) to the service and return a Flow
        over it there: plans over it run on the service (rule 2) and only their results come back."""
        from eidos.flow.read import from_remote_handle
        from eidos.ir.sources import ArrowSource

        if not isinstance(data, pa.Table):                # a Flow runs here first; other data is read as Arrow
            from eidos.flow.frame import Flow as _Flow
            from eidos.flow.read import from_arrow

            data = (data if isinstance(data, _Flow) else from_arrow(data)).run()
        source = ArrowSource.of(data)             # eidos's Arrow types, the ones the service reads it as
        return from_remote_handle(self, self.put_table(source.table), schema=source.schema)

    def fetch_result(self, handle: Handle, out=None) -> memoryview | pa.Table:
        """A table for a table handle; otherwise the bytes, read-only (into `out` when given)."""
        if handle.kind == "table":
            return self._read_table(handle)
        return self._data.get(handle.id, out).toreadonly()

    def fetch_stream(self, handle: Handle) -> Iterator[pa.RecordBatch]:
        """A table result's batches as they arrive."""
        reader = self._table_reader(handle)
        try:
            for chunk in reader:
                yield chunk.data
        except self._flight.FlightError as e:
            raise self._error(e, "fetch_stream", self.timeout) from None

    def _table_reader(self, handle: Handle):
        ticket = self._flight.Ticket(protocol.encode({"session": self.session, "id": handle.id}))
        try:
            return self._client.do_get(ticket, self._options(None))
        except self._flight.FlightError as e:
            raise self._error(e, "fetch_result", self.timeout) from None

    def _read_table(self, handle: Handle) -> pa.Table:
        reader = self._table_reader(handle)
        try:
            return reader.read_all()
        except self._flight.FlightError as e:
            raise self._error(e, "fetch_result", self.timeout) from None

    # ---- lifetime -----------------------------------------------------------------------------------------

    def close(self) -> None:
        """End the session: the service frees everything it kept for it."""
        if self.closed:
            return
        try:
            self._data.close()
        finally:
            self.closed = True
            self._client.close()

    def __enter__(self) -> Remote:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
