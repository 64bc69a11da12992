"""The service's sessions and the results each keeps until its client fetches or releases them.

A session is one client: it opens with a control call (`open_session`), gets a secret ticket for its
data channel, and ends when that channel closes (the client is gone) or on `close()`. Everything a
session holds (buffers received into the pool, tables, results of its runs) lives in its `Store`
under an id, so a result can be the input of a later run without moving; closing the session cancels
its work and frees all of it.

Ids: the client names the buffers it sends (ids below `SERVER_IDS`, so a PUT needs no round trip
for its id); results made on the server take ids from `SERVER_IDS` up.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from eidos.errors import BackendError, EidosError, ExecutionError, ResourceError

SERVER_IDS = 1 << 62
TICKET_BYTES = 32
RELEASED_KEPT = 1 << 16


@dataclass
class Entry:
    """One thing a session keeps: a buffer received into the pool (`block`), or a value made on the
    server (`value`: an Arrow table, a NumPy array, a device tensor), with what a handle says of it."""

    id: int
    kind: str                       # "buffer", "array" or "table"
    nbytes: int
    block: Any = None               # a pool Block (eidos.remote.pool) while it holds pool memory
    value: Any = None
    meta: dict = field(default_factory=dict)
    ready: threading.Event = field(default_factory=threading.Event)
    error: EidosError | None = None

    def handle(self) -> dict:
        """The handle a client gets for this entry (JSON)."""
        return {"id": self.id, "kind": self.kind, "nbytes": self.nbytes, **self.meta}


class Store:
    """A session's entries by id. The pool memory they hold is charged to the session by the pool; what they
    hold outside it (tables, results made on the server, device tensors) is charged here, up to `limit`."""

    def __init__(self, pool, owner: str, limit: int | None = None):
        self.pool, self.owner, self.limit = pool, owner, limit
        self.held = 0                        # bytes of entries held outside the pool
        self._entries: dict[int, Entry] = {}
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        self._released: dict[int, None] = {}    # recent client ids let go of: an input naming one fails at once
        self._next = SERVER_IDS
        self._closed = False

    def _add(self, entry: Entry) -> Entry:
        with self._lock:
            refused = None
            if self._closed:
                refused = ExecutionError(f"session {self.owner} is closed; its results were released")
            elif entry.id in self._entries:
                refused = BackendError(f"id {entry.id} is already in use in this session; release it first "
                                       "or send under a new id")
            if refused is not None:
                if entry.block is not None:          # never counted in `held`: only its pool block goes back
                    self.pool.free(entry.block)
                raise refused
            self._entries[entry.id] = entry
            if entry.block is None:
                self.held += entry.nbytes
            self._released.pop(entry.id, None)
            self._arrived.notify_all()
        return entry

    def reserve(self, ident: int, kind: str, nbytes: int, **meta) -> Entry:
        """An entry for `nbytes` arriving from the client under `ident`, with pool memory to receive them
        into (ResourceError when the pool or the session's quota cannot hold them)."""
        _client_id(ident)
        block = self.pool.allocate(nbytes, self.owner)
        return self._add(Entry(ident, kind, nbytes, block=block, meta=meta))

    def put(self, kind: str, value: Any, nbytes: int, *, block: Any = None, ident: int | None = None,
            **meta) -> Entry:
        """A ready entry made on the server (a run's result, a table uploaded on the control plane)."""
        with self._lock:
            if ident is None:
                ident, self._next = self._next, self._next + 1
            else:
                _client_id(ident)
            if block is None:
                self.room(nbytes, f"a {kind} of {nbytes:,} bytes would pass")
        entry = self._add(Entry(ident, kind, nbytes, block=block, value=value, meta=meta))
        entry.ready.set()
        return entry

    def room(self, nbytes: int, what: str) -> None:
        """ResourceError (worded `what` + the limit) when `nbytes` more outside the pool pass the session's
        limit: a result made here, or a table still arriving, before it is kept."""
        if self.limit is not None and self.held + nbytes > self.limit:
            raise ResourceError(f"{what} this session's limit of {self.limit:,} bytes outside the pool "
                                f"({self.held:,} held); release results it no longer needs or send less")

    def complete(self, ident: int) -> None:
        self._entry(ident).ready.set()

    def fail(self, ident: int, error: EidosError) -> None:
        entry = self._entry(ident)
        entry.error = error
        entry.ready.set()

    def get(self, ident: int, *, wait: float | None = None) -> Entry:
        """The entry `ident`, waiting up to `wait` seconds for its bytes to arrive (a run may be sent
        before its inputs: it starts when they are in)."""
        entry = self._entry(ident)
        if not entry.ready.wait(wait):
            raise ExecutionError(f"input {ident} did not arrive within {wait:g} s")
        if entry.error is not None:
            raise ExecutionError(f"input {ident} failed to arrive: {entry.error}") from entry.error
        return entry

    def ready(self, ident: int) -> bool:
        """Whether `ident` has arrived (or failed); BackendError when the session holds no such id."""
        return self._entry(ident).ready.is_set()

    def input(self, ident: int, *, wait: float) -> Entry:
        """The input `ident` of a run, waiting up to `wait` seconds for it to be announced and arrive:
        a client may send a run before the bytes it reads (the data channel and the control plane are
        two connections), and the run starts as soon as they are in."""
        deadline = time.monotonic() + wait
        with self._arrived:
            while ident not in self._entries and ident < SERVER_IDS and ident not in self._released \
                    and not self._closed:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ExecutionError(f"input {ident} was not sent within {wait:g} s; send it first (put_buffer)")
                self._arrived.wait(left)
        return self.get(ident, wait=max(deadline - time.monotonic(), 0.0))

    def release(self, ident: int) -> None:
        with self._lock:
            entry = self._entries.pop(ident, None)
            if entry is not None and ident < SERVER_IDS:
                self._released[ident] = None
                if len(self._released) > RELEASED_KEPT:
                    del self._released[next(iter(self._released))]
        if entry is None:
            raise BackendError(f"release: no result or buffer {ident} in this session ({self._known()})")
        self._free(entry)

    def close(self) -> None:
        """Free every entry; later additions fail (the session is over)."""
        with self._lock:
            self._closed = True
            entries, self._entries = list(self._entries.values()), {}
            self._arrived.notify_all()
        for entry in entries:
            self._free(entry)

    def __len__(self) -> int:
        return len(self._entries)

    def _entry(self, ident: int) -> Entry:
        entry = self._entries.get(ident)
        if entry is None:
            raise BackendError(f"no result or buffer {ident} in this session ({self._known()}); "
                               "it was never sent, or was released")
        return entry

    def _known(self) -> str:
        ids = sorted(self._entries)
        return f"it holds {len(ids)}: {', '.join(map(str, ids[:8]))}{' ...' if len(ids) > 8 else ''}" \
            if ids else "it holds none"

    def _free(self, entry: Entry) -> None:
        if entry.block is None:
            with self._lock:
                self.held -= entry.nbytes
        block, entry.block, entry.value = entry.block, None, None
        if block is not None:
            self.pool.free(block)


class Session:
    """One client: its store, its ticket for the data channel, the work it has in flight."""

    def __init__(self, pool, *, on_close: Callable[[Session], None] | None = None, limit: int | None = None):
        self.id = secrets.token_hex(8)
        self.ticket = secrets.token_bytes(TICKET_BYTES)
        self.store = Store(pool, self.id, limit if limit is not None else pool.capacity)
        self.opened = time.monotonic()
        self.attached = threading.Event()       # its data channel has connected
        self.closed = threading.Event()
        self._work: dict[str, threading.Event] = {}   # plan id -> its cancel flag
        self.targets: dict[tuple[str, str], object] = {}  # (kernel target, instance) -> its target (jobs.py)
        self.programs: dict[str, object] = {}             # ISA programs sent, by digest, oldest first
        self._lock = threading.Lock()
        self._on_close = on_close

    def start(self, plan_id: str) -> threading.Event:
        """Register work `plan_id`; the event it returns is set when the work is cancelled."""
        with self._lock:
            if self.closed.is_set():
                raise ExecutionError(f"session {self.id} is closed")
            if plan_id in self._work:
                raise BackendError(f"plan id {plan_id!r} is already running in this session; "
                                   "give each run its own id")
            flag = self._work[plan_id] = threading.Event()
        return flag

    def finish(self, plan_id: str) -> None:
        with self._lock:
            self._work.pop(plan_id, None)

    def cancel(self, plan_id: str) -> bool:
        """Cancel work `plan_id`; False when no such work is running (finished, or never started)."""
        with self._lock:
            flag = self._work.get(plan_id)
        if flag is None:
            return False
        flag.set()
        return True

    def close(self) -> None:
        """The client is gone or said goodbye: cancel its work and free its memory (once)."""
        with self._lock:
            if self.closed.is_set():
                return
            self.closed.set()
            flags = list(self._work.values())
        for flag in flags:
            flag.set()
        self.store.close()
        if self._on_close is not None:
            self._on_close(self)


class Sessions:
    """Every open session, found by id (control calls) or by ticket (the data channel's hello)."""

    def __init__(self, pool, *, quota: int | None = None):
        self.pool, self.quota = pool, quota
        self._by_id: dict[str, Session] = {}
        self._by_ticket: dict[bytes, Session] = {}
        self._lock = threading.Lock()

    def open(self) -> Session:
        session = Session(self.pool, on_close=self._forget, limit=self.quota)
        self.pool.set_quota(session.id, self.quota)
        with self._lock:
            self._by_id[session.id] = session
            self._by_ticket[_digest(session.ticket)] = session
        return session

    def get(self, session_id: str) -> Session:
        session = self._by_id.get(session_id) if isinstance(session_id, str) else None
        if session is None:
            raise BackendError(f"no open session {session_id!r} on this service: it was closed (its data "
                               "channel ended) or never opened; connect again")
        return session

    def by_ticket(self, ticket: bytes) -> Session | None:
        """The session `ticket` was issued to, or None. The lookup goes by a digest of the ticket and the
        final comparison takes constant time, so timing tells nothing about a ticket's bytes."""
        session = self._by_ticket.get(_digest(ticket))
        if session is None or not hmac.compare_digest(session.ticket, ticket):
            return None
        return session

    def all(self) -> list[Session]:
        with self._lock:
            return list(self._by_id.values())

    def close(self) -> None:
        for session in self.all():
            session.close()

    def _forget(self, session: Session) -> None:
        with self._lock:
            self._by_id.pop(session.id, None)
            self._by_ticket.pop(_digest(session.ticket), None)
        self.pool.set_quota(session.id, None)


def _client_id(ident: int) -> int:
    """`ident` when it is one a client may choose (below SERVER_IDS), else BackendError."""
    if not 0 < ident < SERVER_IDS:
        raise BackendError(f"a client's id must be between 1 and {SERVER_IDS - 1}, got {ident}")
    return ident


def _digest(ticket: bytes) -> bytes:
    return hashlib.blake2b(bytes(ticket), digest_size=16).digest()
