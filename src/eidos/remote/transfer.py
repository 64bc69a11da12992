"""The client side of the data channel: buffers go out from the caller's memory, results come in to it.

`put` queues and returns at once: a small frame (a GET, a RELEASE, a small PUT) with nothing ahead of it
is written by the calling thread (no hand-off), anything else by a sender thread, with scatter-gather
sends (many small PUTs in one sendmsg) while at most `window` large ones wait for their ACK. A receiver
thread dispatches ACK, DATA and ERROR frames. Every wait has a deadline: a server that dies or stalls is
an ExecutionError within it, never a hang. A buffer given to `put` must stay alive and unchanged until
`wait` (or `flush`) returns for it.
"""

from __future__ import annotations

import collections
import threading
import time
from dataclasses import dataclass

from eidos.errors import BackendError, EidosError, ExecutionError

from .frames import HEADER_SIZE, TICKET_SIZE, Frame, FrameError, Kind, pack, parse
from .protocol import error_from
from .transport import Reader, Transport, bytes_view

CLIENT_IDS = 1 << 62          # ids the client picks stay below this (store.SERVER_IDS)
STAGING_CHUNK = 256 << 10     # the staged fallback's bounce buffer: received and copied a chunk at a time
_SMALL_IN_FLIGHT = 4096       # unacknowledged small PUTs allowed at once (bookkeeping bound)
_BATCH_IOVECS = 512


@dataclass(eq=False)
class _Get:
    ident: int
    out: memoryview | None         # where the bytes go (None: a fresh buffer)
    target: object = None          # a non-contiguous writable `out`, filled by a copy (staged)
    result: memoryview | None = None
    error: EidosError | None = None
    receiving: bool = False


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
        self._cv = threading.Condition()
        self._queue: collections.deque = collections.deque()      # (header, payload view or None, ident)
        self._sending = False                                        # a thread is writing to the socket
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
        header = self._reader.take(HEADER_SIZE)
        if header is None:
            raise ExecutionError("the server closed the data channel instead of answering HELLO")
        frame = parse(header, max_length=self.max_frame)
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
        with self._cv:
            self._check()
            if ident is None:
                ident, self._next = self._next, self._next + 1
            elif not 0 < ident < CLIENT_IDS or ident in self._unacked:
                raise BackendError(f"put: id {ident} is in use or out of range (1..{CLIENT_IDS - 1})")
            else:
                self._next = max(self._next, ident + 1)
            self._unacked.add(ident)
            self._sizes[ident] = view.nbytes
        self._submit(pack(Frame(Kind.PUT, ident, 0, view.nbytes)), view)
        return ident

    def wait(self, ident: int) -> None:
        """Until the server has stored PUT `ident` (or raise the error it sent for it)."""
        if not 0 < ident < self._next:
            raise BackendError(f"wait: no PUT {ident} was made on this connection")
        self._until(lambda: ident not in self._unacked or ident in self._errors, f"the ACK of PUT {ident}")
        with self._cv:
            error = self._errors.pop(ident, None)
        if error is not None:
            raise error

    def flush(self) -> None:
        """Until every queued PUT and RELEASE is ACKed; raises the first error the server sent for one."""
        self._until(lambda: not (self._unacked or self._releases) or self._errors,
                    f"the ACKs of {len(self._unacked)} PUTs and {sum(self._releases.values())} RELEASEs")
        with self._cv:
            if self._errors:
                raise self._errors.pop(min(self._errors))

    def get(self, ident: int, out=None) -> memoryview:
        """The bytes of handle `ident`, read-only; received straight into `out` when it is a writable
        contiguous buffer large enough (the result is then a view of it), else into a fresh buffer."""
        return self.get_many([ident], None if out is None else [out])[0]

    def get_many(self, idents, outs=None) -> list[memoryview]:
        """`get` for several handles with all their requests in flight at once (one round trip, not one
        each); `outs`, when given, holds one destination (or None) per handle."""
        idents = list(idents)
        outs = [None] * len(idents) if outs is None else list(outs)
        if len(outs) != len(idents) or len(set(idents)) != len(idents):
            raise BackendError(f"get_many: {len(idents)} handles (each once) and {len(outs)} destinations")
        states = [self._destination(ident, out) for ident, out in zip(idents, outs)]
        with self._cv:
            self._check()
            for state in states:
                if state.ident in self._gets:
                    raise BackendError(f"get: handle {state.ident} is already being fetched on this connection")
            self._gets.update((state.ident, state) for state in states)
        try:
            self._submit(b"".join(pack(Frame(Kind.GET, ident)) for ident in idents), None)
            for state in states:
                self._until(lambda s=state: s.result is not None or s.error is not None,
                            f"the data of handle {state.ident}", abandon=state)
        finally:
            with self._cv:
                for state in states:
                    self._gets.pop(state.ident, None)
        for state in states:
            if state.error is not None:
                raise state.error
        return [state.result for state in states]

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
        with self._cv:
            self._check()
            self._releases[ident] += 1
        self._submit(pack(Frame(Kind.RELEASE, ident)), None)

    def close(self) -> None:
        """Send what is queued and BYE (within the deadline), then close; waiters get an ExecutionError."""
        with self._cv:
            if self._closing:
                return
            if self._dead is None and self._threads:
                self._queue.append((pack(Frame(Kind.BYE, 0)), None, None))
                self._cv.notify_all()
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

    def _until(self, done, what: str, abandon: _Get | None = None) -> None:
        deadline = time.monotonic() + self.timeout
        with self._cv:
            while not done():
                if self._dead is not None:
                    raise ExecutionError(f"waiting for {what}: the data channel is down: {self._dead}") \
                        from self._dead
                left = deadline - time.monotonic()
                if left <= 0:
                    if abandon is not None and abandon.receiving:
                        # its bytes are half-read: the stream cannot be trusted after this
                        self._fail(ExecutionError(f"a fetch was abandoned mid-transfer after {self.timeout} s"))
                        self.transport.close()
                    peer = getattr(self.transport, "peer", "the server")
                    raise ExecutionError(f"waited {self.timeout} s for {what} from {peer} (the deadline); "
                                         "the server is slow, stalled or gone")
                self._cv.wait(left)

    # ---- sending -------------------------------------------------------------------------------------

    def _submit(self, header: bytes, view: memoryview | None) -> None:
        """Queue a frame; when it is small and nothing is ahead of it, send it from this thread."""
        with self._cv:
            self._check()
            self._queue.append((header, view, None))
            batch = None
            if len(self._queue) == 1 and not self._sending and self._threads and \
                    (view is None or view.nbytes < self.small):
                batch = self._pop_batch()
                self._sending = batch is not None
            if batch is None:
                self._cv.notify_all()
                return
        self._write(batch)

    def _sender(self) -> None:
        while True:
            with self._cv:
                while True:
                    if self._dead is not None or self._closing:
                        return
                    batch = None if self._sending else self._pop_batch()
                    if batch is not None:
                        self._sending = True
                        break
                    self._cv.wait()
            try:
                self._write(batch)
            except EidosError:
                return

    def _write(self, batch: list) -> None:
        try:
            self.transport.send(batch)
        except EidosError as e:
            with self._cv:
                self._sending = False
                self._fail(e)
            raise ExecutionError(f"the data channel is down: {e}") from e
        with self._cv:
            self._sending = False
            self._cv.notify_all()

    def _pop_batch(self) -> list | None:
        """The next buffers to send within the window (under the lock), or None."""
        batch: list = []
        while self._queue and len(batch) < _BATCH_IOVECS:
            header, view, _ = self._queue[0]
            large = view is not None and view.nbytes >= self.small
            if view is not None:
                if (self._large >= self.window) if large else (self._small_n >= _SMALL_IN_FLIGHT):
                    break
                if large:
                    self._large += 1
                else:
                    self._small_n += 1
            self._queue.popleft()
            batch.append(header)
            if view is not None and view.nbytes:
                batch.append(view)
            if large:
                break                                        # a large one goes out right after the smalls before it
        return batch or None

    # ---- receiving -----------------------------------------------------------------------------------

    def _receiver(self) -> None:
        try:
            while True:
                if self._reader.buffered() < HEADER_SIZE:
                    self.transport.wait_readable(None)
                    if self._closing:
                        return
                header = self._reader.take(HEADER_SIZE)
                if header is None:
                    raise ExecutionError(f"{getattr(self.transport, 'peer', 'the server')} closed the data channel")
                self._dispatch(parse(header, max_length=self.max_frame))
        except EidosError as e:
            with self._cv:
                self._fail(e if not self._closing else ExecutionError("the data channel was closed"))

    def _dispatch(self, frame: Frame) -> None:
        if frame.kind is Kind.ACK:
            with self._cv:
                self._acked(frame.ident)
        elif frame.kind is Kind.DATA:
            self._data(frame)
        elif frame.kind is Kind.ERROR:
            payload = memoryview(bytearray(frame.length))
            self._reader.read_into(payload)
            with self._cv:
                self._error(frame.ident, error_from(payload, f"the server sent an error about id {frame.ident} "
                                                                "and said nothing more"))
        else:
            raise FrameError(f"the server sent a {frame.kind.name} frame, which a client never receives")

    def _acked(self, ident: int) -> None:
        if ident in self._unacked:
            self._unacked.discard(ident)
            if self._sizes.pop(ident, 0) >= self.small:
                self._large -= 1
            else:
                self._small_n -= 1
        elif self._releases[ident] > 1:
            self._releases[ident] -= 1
        else:
            self._releases.pop(ident, None)
        self._cv.notify_all()

    def _error(self, ident: int, error: EidosError) -> None:
        state = self._gets.get(ident)
        if state is not None:
            state.error = error
        elif ident == 0:
            self._fail(error)                                # about the connection itself: the server closes it
        else:
            self._errors[ident] = error                      # a PUT's (its wait raises it) or a RELEASE's (flush)
            self._acked(ident)
        self._cv.notify_all()

    def _data(self, frame: Frame) -> None:
        with self._cv:
            state = self._gets.get(frame.ident)
            if state is not None:
                state.receiving = True
        if state is None:                                    # an abandoned fetch: drop its bytes
            self._reader.read_into(memoryview(bytearray(frame.length)))
            return
        error = None
        if state.out is not None and state.out.nbytes < frame.length:
            error = BackendError(f"get: `out` holds {state.out.nbytes} bytes; handle {frame.ident} has {frame.length}")
        if state.out is not None and error is None:
            buffer = state.out[:frame.length]
            if self._staging is not None:
                self._bounce(buffer)
            else:
                self._reader.read_into(buffer)
        else:
            buffer = memoryview(bytearray(frame.length))
            self._reader.read_into(buffer)
            if error is None and state.target is not None:
                error = _copy_into(state.target, buffer, frame.ident)
        with self._cv:
            state.receiving = False
            state.error, state.result = error, buffer.toreadonly()
            self._cv.notify_all()

    def _bounce(self, dest: memoryview) -> None:
        """The staged fallback: receive through the bounce buffer, copying each chunk into `dest`."""
        for start in range(0, dest.nbytes, STAGING_CHUNK):
            chunk = self._staging[:min(STAGING_CHUNK, dest.nbytes - start)]
            self._reader.read_into(chunk)
            dest[start:start + chunk.nbytes] = chunk

    def _fail(self, error: EidosError) -> None:
        """The connection is unusable: every waiter wakes with `error` (under the lock)."""
        if self._dead is None:
            self._dead = error
        self._cv.notify_all()


def _copy_into(target, staging: memoryview, ident: int) -> EidosError | None:
    """Copy into a destination that could not take the bytes directly (not contiguous)."""
    import numpy as np

    dest = np.asarray(target)
    if dest.nbytes != staging.nbytes:
        return BackendError(f"get: `out` holds {dest.nbytes} bytes; handle {ident} has {staging.nbytes}")
    np.copyto(dest, np.frombuffer(staging, dtype=dest.dtype).reshape(dest.shape))
    return None
