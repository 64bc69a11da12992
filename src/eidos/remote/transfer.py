"""The client side of the data channel: buffers go out from the caller's memory, results come in to it.

`put` queues and returns at once: a small frame (a GET, a RELEASE, a small PUT) with nothing ahead of it
is written by the calling thread (no hand-off), anything else by a sender thread, with scatter-gather
sends (many small PUTs in one sendmsg) while at most `window` large ones wait for their ACK.

Replies (ACK, DATA, ERROR) are read by whoever waits for one: a caller in `wait`, `flush` or `get`
takes the read side when no other thread has it and dispatches every frame it reads until its own has
come, so a GET's bytes land in its buffer from the thread that asked, with no hand-off between threads
(one costs tens of microseconds in CPython). A receiver thread reads when no caller waits and the
sender waits for the window, or many replies are unread (after a short grace). Every wait has a
deadline: a server that dies or stalls is an ExecutionError within it, never a hang. A buffer given to
`put` must stay alive and unchanged until `wait` (or `flush`) returns for it.
"""

from __future__ import annotations

import collections
import threading
import time
from dataclasses import dataclass

from eidos.errors import BackendError, EidosError, ExecutionError

from .frames import HEADER_SIZE, TICKET_SIZE, Frame, FrameError, Kind, header, pack, parse
from .protocol import error_from
from .transport import Reader, Transport, bytes_view

CLIENT_IDS = 1 << 62          # ids the client picks stay below this (store.SERVER_IDS)
STAGING_CHUNK = 256 << 10     # the staged fallback's bounce buffer: received and copied a chunk at a time
_SMALL_IN_FLIGHT = 4096       # unacknowledged small PUTs allowed at once (bookkeeping bound)
_BATCH_IOVECS = 512
_GRACE = 0.002                # how long the receiver thread leaves outstanding replies to a caller about to wait
_UNREAD = 256                 # replies outstanding that wake the receiver though no caller waits (8 KiB of ACKs)
_ACK, _DATA, _ERROR, _PUT, _GET, _RELEASE, _BYE = (Kind.ACK, Kind.DATA, Kind.ERROR, Kind.PUT, Kind.GET, Kind.RELEASE,
                                                  Kind.BYE)


@dataclass(eq=False)
class _Get:
    ident: int
    out: memoryview | None         # where the bytes go (None: a fresh buffer)
    target: object = None          # a non-contiguous writable `out`, filled by a copy (staged)
    result: memoryview | None = None
    error: EidosError | None = None
    receiving: bool = False
    deadline: float | None = None  # its bytes are read by then (time.monotonic), whoever reads them
    left: list | None = None       # [fetches of its get_many not yet answered], shared by them


class TransferManager:
    """Several transfers in flight on one data-channel connection (see the module's docstring).

    `staged=True` takes the fallback path on purpose (what a client does when the memory it must fill
    cannot be written directly): PUT payloads are copied once before sending, GET payloads arrive in a
    bounce buffer and are copied into their destination chunk by chunk."""

    def __init__(self, transport: Transport, *, window: int = 8, small: int = 64 * 1024, timeout: float,
                 staged: bool = False, max_frame: int = 1 << 40):
        self.transport, self.window, self.small, self.timeout = transport, window, small, timeout
        self.staged, self.max_frame = staged, max_frame
        transport.settimeout(timeout)
        self._reader = Reader(transport)
        # one lock, a condition per kind of waiter, so a notify wakes only a thread that has work
        self._lock = threading.Lock()
        self._cv = threading.Condition(self._lock)                   # callers: wait, flush, get, close
        self._send_cv = threading.Condition(self._lock)              # the sender thread
        self._recv_cv = threading.Condition(self._lock)              # the receiver thread
        self._queue: collections.deque = collections.deque()      # (header, payload view or None)
        self._sending = False                                        # a thread is writing to the socket
        self._reading = False                                        # a thread has the read side
        self._waiting = 0                                            # callers waiting for a reply
        self._sender_idle = False                                    # the sender waits for frames
        self._window_full = False                                    # the sender waits for ACKs
        self._receiver_parked = False                                # the receiver waits for work
        self._draining = False                                       # close() waits for the queue
        self._unacked: set[int] = set()                              # PUTs queued or sent, not yet ACKed
        self._large, self._small_n = 0, 0                            # of those, sent and not ACKed
        self._sizes: dict[int, int] = {}
        self._releases: collections.Counter = collections.Counter()   # RELEASEs sent, not yet ACKed
        self._errors: dict[int, EidosError] = {}
        self._gets: dict[int, _Get] = {}
        self._next = 1
        self._dead: EidosError | None = None
        self._closing = False
        self._threads: list[threading.Thread] = []
        self._staging = memoryview(bytearray(STAGING_CHUNK)) if staged else None

    # ---- the caller's side ---------------------------------------------------------------------------

    def hello(self, ticket: bytes) -> None:
        """Attach to the session `ticket` names, then start the sender and receiver threads."""
        if len(ticket) != TICKET_SIZE:
            raise BackendError(f"a data-channel ticket is {TICKET_SIZE} bytes, got {len(ticket)}")
        self.transport.send([pack(Frame(Kind.HELLO, 0, length=TICKET_SIZE)), ticket])
        first = self._reader.take(HEADER_SIZE)
        if first is None:
            raise ExecutionError("the server closed the data channel instead of answering HELLO")
        frame = parse(first, max_length=self.max_frame)
        if frame.kind is Kind.ERROR:
            payload = memoryview(bytearray(frame.length))
            self._reader.read_into(payload)
            raise error_from(payload, "HELLO: the server refused the ticket and said nothing more")
        if frame.kind is not Kind.ACK:
            raise ExecutionError(f"the server answered HELLO with {frame.kind.name}; expected ACK")
        for name, target in (("send", self._sender), ("receive", self._receiver)):
            thread = threading.Thread(target=target, name=f"eidos-transfer-{name}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def put(self, buffer, *, ident: int | None = None) -> int:
        """Queue `buffer` (any contiguous buffer: bytes, NumPy array, memoryview) for the server; its id."""
        view = bytes_view(buffer)
        if self.staged:
            view = memoryview(bytes(view))                   # the staged path: one copy before sending
        with self._lock:
            self._check()
            if ident is None:
                ident, self._next = self._next, self._next + 1
            elif not 0 < ident < CLIENT_IDS or ident in self._unacked:
                raise BackendError(f"put: id {ident} is in use or out of range (1..{CLIENT_IDS - 1})")
            else:
                self._next = max(self._next, ident + 1)
            self._unacked.add(ident)
            self._sizes[ident] = view.nbytes
            self._outstanding_added()
        self._submit(header(_PUT, ident, 0, view.nbytes), view)
        return ident

    def wait(self, ident: int) -> None:
        """Until the server has stored PUT `ident` (or raise the error it sent for it)."""
        if not 0 < ident < self._next:
            raise BackendError(f"wait: no PUT {ident} was made on this connection")
        self._until(lambda: ident not in self._unacked or ident in self._errors, f"the ACK of PUT {ident}")
        with self._lock:
            error = self._errors.pop(ident, None)
        if error is not None:
            raise error

    def flush(self) -> None:
        """Until every queued PUT and RELEASE is ACKed; raises the first error the server sent for one."""
        self._until(lambda: not (self._unacked or self._releases) or self._errors,
                    lambda: f"the ACKs of {len(self._unacked)} PUTs and {sum(self._releases.values())} RELEASEs")
        with self._lock:
            if self._errors:
                raise self._errors.pop(min(self._errors))

    def get(self, ident: int, out=None) -> memoryview:
        """The bytes of handle `ident`, read-only; received straight into `out` when it is a writable
        contiguous buffer large enough (the result is then a view of it), else into a fresh buffer."""
        state = self._destination(ident, out)
        self._fetch([state], header(_GET, ident),
                    lambda: state.result is not None or state.error is not None, f"the data of handle {ident}")
        if state.error is not None:
            raise state.error
        return state.result

    def get_many(self, idents, outs=None) -> list[memoryview]:
        """`get` for several handles with all their requests in flight at once (one round trip, not one
        each); `outs`, when given, holds one destination (or None) per handle."""
        idents = list(idents)
        outs = [None] * len(idents) if outs is None else list(outs)
        if len(outs) != len(idents) or len(set(idents)) != len(idents):
            raise BackendError(f"get_many: {len(idents)} handles (each once) and {len(outs)} destinations")
        states = [self._destination(ident, out) for ident, out in zip(idents, outs)]
        left = [len(states)]
        for state in states:
            state.left = left

        def what() -> str:
            waiting = [s.ident for s in states if s.result is None and s.error is None]
            return f"the data of handle {waiting[0] if waiting else states[-1].ident}"

        self._fetch(states, b"".join([header(_GET, ident) for ident in idents]), lambda: not left[0], what)
        for state in states:
            if state.error is not None:
                raise state.error
        return [state.result for state in states]

    def _fetch(self, states: list[_Get], requests: bytes, done, what) -> None:
        """Register `states`, send their GETs, wait until done() by one deadline for all of them."""
        deadline = time.monotonic() + self.timeout
        with self._lock:
            self._check()
            for state in states:
                if state.ident in self._gets:
                    raise BackendError(f"get: handle {state.ident} is already being fetched on this connection")
            for state in states:
                state.deadline = deadline
                self._gets[state.ident] = state
        try:
            self._submit(requests, None)
            self._until(done, what, abandon=states, deadline=deadline)
        finally:
            with self._lock:
                for state in states:
                    self._gets.pop(state.ident, None)

    @staticmethod
    def _destination(ident: int, out) -> _Get:
        state = _Get(ident, None)
        if out is not None:
            view = memoryview(out)
            if view.readonly:
                raise BackendError(f"get: `out` for handle {ident} is read-only; pass a writable buffer or none")
            if view.c_contiguous:
                state.out = view.cast("B") if view.ndim != 1 or view.format != "B" else view
            else:
                state.target = out                           # received into a fresh buffer, then copied in
        return state

    def release(self, ident: int) -> None:
        """Tell the server to free handle `ident`; returns at once (flush waits for it and raises its error)."""
        with self._lock:
            self._check()
            self._releases[ident] += 1
            self._outstanding_added()
        self._submit(header(_RELEASE, ident), None)

    def close(self) -> None:
        """Send what is queued and BYE (within the deadline), then close; waiters get an ExecutionError."""
        with self._lock:
            if self._closing:
                return
            if self._dead is None and self._threads:
                self._queue.append((header(_BYE, 0), None))
                self._draining = True
                self._send_cv.notify()
                deadline = time.monotonic() + self.timeout
                while (self._queue or self._sending) and self._dead is None and time.monotonic() < deadline:
                    self._cv.wait(deadline - time.monotonic())
            self._closing = True
            self._fail(ExecutionError("the data channel was closed"))
        self.transport.close()
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(self.timeout)

    def __enter__(self) -> TransferManager:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _check(self) -> None:
        if self._dead is not None:
            raise ExecutionError(f"the data channel is down: {self._dead}") from self._dead

    def _outstanding_added(self) -> None:
        """Under the lock, after a PUT or RELEASE was queued. Its reply is read by a caller that waits for it;
        the receiver is woken only once many replies are unread (waking it for each cost a put+wait a third
        of its time): the window wakes it too, when the sender waits for ACKs."""
        if self._receiver_parked and not self._waiting and not self._reading and \
                len(self._unacked) + len(self._releases) >= _UNREAD:
            self._recv_cv.notify()

    def _until(self, done, what, abandon: list[_Get] | None = None, deadline: float | None = None) -> None:
        """Until done() (checked under the lock): this thread reads and dispatches frames itself while no
        other thread has the read side, else waits to be told; an ExecutionError at the deadline."""
        if deadline is None:
            deadline = time.monotonic() + self.timeout
        with self._lock:
            self._waiting += 1
            try:
                while not done():
                    if self._dead is not None:
                        raise ExecutionError(f"waiting for {_say(what)}: the data channel is down: {self._dead}") \
                            from self._dead
                    left = deadline - time.monotonic()
                    if left <= 0:
                        if abandon is not None and any(state.receiving for state in abandon):
                            # its bytes are half-read: the stream cannot be trusted after this
                            self._fail(ExecutionError(f"a fetch was abandoned mid-transfer after {self.timeout} s"))
                            self.transport.close()
                        peer = getattr(self.transport, "peer", "the server")
                        raise ExecutionError(f"waited {self.timeout} s for {_say(what)} from {peer} (the deadline); "
                                             "the server is slow, stalled or gone")
                    if self._reading:
                        self._cv.wait(left)
                        continue
                    self._reading = True
                    self._lock.release()
                    try:
                        self._read(done, deadline)
                    except EidosError as e:                  # the stream is broken (or half-read): done with it
                        with self._lock:
                            self._fail(e)
                        self.transport.close()
                    finally:
                        self._lock.acquire()
                        self._reading = False
                        if self._waiting > 1:
                            self._cv.notify_all()                # another caller may take the read side
            finally:
                self._waiting -= 1
                if not self._waiting and not self._reading and (self._unacked or self._releases):
                    self._recv_cv.notify()

    def _read(self, done, deadline: float) -> None:
        """With the read side: frames until done() or the deadline (between frames, so nothing is left
        half-read). The caller has just found done() false."""
        reader, lock = self._reader, self._lock
        while True:
            if reader.buffered() < HEADER_SIZE and \
                    not self.transport.wait_readable(deadline - time.monotonic()):
                return                                       # the deadline: the caller's loop says so
            self._frame(deadline)
            with lock:
                if done() or self._dead is not None:
                    return

    # ---- sending -------------------------------------------------------------------------------------

    def _submit(self, head: bytes, view: memoryview | None) -> None:
        """Queue a frame; when it is small and nothing is ahead of it, send it from this thread."""
        with self._lock:
            self._check()
            self._queue.append((head, view))
            if len(self._queue) == 1 and not self._sending and self._threads and \
                    (view is None or view.nbytes < self.small):
                batch = self._pop_batch()
                if batch is not None:
                    self._sending = True
                    self._lock.release()
                    try:
                        self._write(batch)
                    finally:
                        self._lock.acquire()
                        self._sent()
                    return
            if self._sender_idle:
                self._send_cv.notify()

    def _sender(self) -> None:
        while True:
            with self._lock:
                while True:
                    if self._dead is not None or self._closing:
                        return
                    batch = None if self._sending else self._pop_batch()
                    if batch is not None:
                        self._sending = True
                        break
                    self._window_full = bool(self._queue) and not self._sending
                    if self._window_full and self._receiver_parked and not self._waiting and not self._reading:
                        self._recv_cv.notify()               # ACKs must be read for the window to open
                    self._sender_idle = not self._queue
                    self._send_cv.wait()
                self._window_full = self._sender_idle = False
            try:
                self._write(batch)
            except EidosError:
                return
            finally:
                with self._lock:
                    self._sent()

    def _sent(self) -> None:
        """Under the lock, after a write: the next writer (or close) may go on."""
        self._sending = False
        if self._queue and not self._window_full:
            self._send_cv.notify()
        if self._draining:
            self._cv.notify_all()

    def _write(self, batch: list) -> None:
        try:
            self.transport.send(batch)
        except EidosError as e:
            with self._lock:
                self._fail(e)
            raise ExecutionError(f"the data channel is down: {e}") from e

    def _pop_batch(self) -> list | None:
        """The next buffers to send within the window (under the lock), or None."""
        batch: list = []
        while self._queue and len(batch) < _BATCH_IOVECS:
            head, view = self._queue[0]
            large = view is not None and view.nbytes >= self.small
            if view is not None:
                if (self._large >= self.window) if large else (self._small_n >= _SMALL_IN_FLIGHT):
                    break
                if large:
                    self._large += 1
                else:
                    self._small_n += 1
            self._queue.popleft()
            batch.append(head)
            if view is not None and view.nbytes:
                batch.append(view)
            if large:
                break                                        # a large one goes out right after the smalls before it
        return batch or None

    # ---- receiving -----------------------------------------------------------------------------------

    def _receiver(self) -> None:
        """Reads when replies are outstanding and no caller waits for one (so no caller would read them):
        after a grace that lets a caller about to wait read its own, at once when the window is full."""
        lock = self._lock
        while True:
            with lock:
                grace_until = None
                while True:
                    if self._dead is not None or self._closing:
                        return
                    if self._reading or self._waiting or not (self._unacked or self._releases):
                        grace_until = None
                        self._receiver_parked = True
                        self._recv_cv.wait()
                        self._receiver_parked = False
                        continue
                    if self._window_full:
                        break
                    now = time.monotonic()
                    if grace_until is None:
                        grace_until = now + _GRACE
                    elif now >= grace_until:
                        break
                    self._recv_cv.wait(grace_until - now)
                self._reading = True
            try:
                while True:
                    if self._reader.buffered() < HEADER_SIZE:
                        self.transport.wait_readable(None)
                        if self._closing:
                            return
                    self._frame(None)
                    with lock:
                        if self._waiting or self._dead is not None or not (self._unacked or self._releases):
                            break                            # a caller reads its own from here on
            except EidosError as e:
                with lock:
                    self._fail(e if not self._closing else ExecutionError("the data channel was closed"))
                return
            finally:
                with lock:
                    self._reading = False
                    if self._waiting:
                        self._cv.notify_all()

    def _frame(self, deadline: float | None) -> None:
        """Read one frame and dispatch it (with the read side)."""
        head = self._reader.take(HEADER_SIZE)
        if head is None:
            raise ExecutionError(f"{getattr(self.transport, 'peer', 'the server')} closed the data channel")
        frame = parse(head, max_length=self.max_frame)
        kind = frame.kind
        if kind is _ACK:
            with self._lock:
                self._acked(frame.ident)
        elif kind is _DATA:
            self._data(frame, deadline)
        elif kind is _ERROR:
            payload = memoryview(bytearray(frame.length))
            self._reader.read_into(payload, deadline)
            with self._lock:
                self._error(frame.ident, error_from(payload, f"the server sent an error about id {frame.ident} "
                                                             "and said nothing more"))
        else:
            raise FrameError(f"the server sent a {kind.name} frame, which a client never receives")

    def _acked(self, ident: int) -> None:
        """Under the lock: PUT or RELEASE `ident` is done; wake whoever that may concern."""
        if ident in self._unacked:
            self._unacked.discard(ident)
            if self._sizes.pop(ident, 0) >= self.small:
                self._large -= 1
            else:
                self._small_n -= 1
            if self._window_full:
                self._window_full = False
                self._send_cv.notify()
        elif self._releases[ident] > 1:
            self._releases[ident] -= 1
        else:
            self._releases.pop(ident, None)
        if self._waiting:
            self._cv.notify_all()

    def _error(self, ident: int, error: EidosError) -> None:
        state = self._gets.get(ident)
        if state is not None:
            if state.result is None and state.error is None and state.left is not None:
                state.left[0] -= 1
            state.error = error
        elif ident == 0:
            self._fail(error)                                # about the connection itself: the server closes it
        else:
            self._errors[ident] = error                      # a PUT's (its wait raises it) or a RELEASE's (flush)
            self._acked(ident)
        self._cv.notify_all()

    def _data(self, frame: Frame, deadline: float | None) -> None:
        with self._lock:
            state = self._gets.get(frame.ident)
            if state is not None:
                state.receiving = True
        if state is None:                                    # an abandoned fetch: drop its bytes
            self._reader.read_into(memoryview(bytearray(frame.length)), deadline)
            return
        deadline = state.deadline                            # read by the deadline of the fetch it belongs to
        error = None
        if state.out is not None and state.out.nbytes < frame.length:
            error = BackendError(f"get: `out` holds {state.out.nbytes} bytes; handle {frame.ident} has {frame.length}")
        if state.out is not None and error is None:
            buffer = state.out[:frame.length]
            if self._staging is not None:
                self._bounce(buffer, deadline)
            else:
                self._reader.read_into(buffer, deadline)
        else:
            buffer = memoryview(bytearray(frame.length))
            self._reader.read_into(buffer, deadline)
            if error is None and state.target is not None:
                error = _copy_into(state.target, buffer, frame.ident)
        with self._lock:
            state.receiving = False
            if state.left is not None and state.error is None:
                state.left[0] -= 1
            state.error, state.result = error, buffer.toreadonly()
            if self._waiting:
                self._cv.notify_all()

    def _bounce(self, dest: memoryview, deadline: float | None) -> None:
        """The staged fallback: receive through the bounce buffer, copying each chunk into `dest`."""
        for start in range(0, dest.nbytes, STAGING_CHUNK):
            chunk = self._staging[:min(STAGING_CHUNK, dest.nbytes - start)]
            self._reader.read_into(chunk, deadline)
            dest[start:start + chunk.nbytes] = chunk

    def _fail(self, error: EidosError) -> None:
        """The connection is unusable: every waiter wakes with `error` (under the lock)."""
        if self._dead is None:
            self._dead = error
        self._cv.notify_all()
        self._send_cv.notify_all()
        self._recv_cv.notify_all()


def _say(what) -> str:
    """What a wait was for (a callable builds the words only when they are needed)."""
    return what() if callable(what) else what


def _copy_into(target, staging: memoryview, ident: int) -> EidosError | None:
    """Copy into a destination that could not take the bytes directly (not contiguous)."""
    import numpy as np

    dest = np.asarray(target)
    if dest.nbytes != staging.nbytes:
        return BackendError(f"get: `out` holds {dest.nbytes} bytes; handle {ident} has {staging.nbytes}")
    np.copyto(dest, np.frombuffer(staging, dtype=dest.dtype).reshape(dest.shape))
    return None
