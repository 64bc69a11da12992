"""The server side of the data channel: buffers arrive in frames straight into pool blocks and leave from them.

One thread accepts; each connection gets its own thread. A connection first says HELLO with its
session's ticket (store.Sessions.by_ticket; answered by ACK 0); then PUT frames are received with
`recv_into` into a block the session's store reserves, GET frames are answered with the header and the
block's bytes in one scatter-gather send (no copy out of the pool), RELEASE frames free a handle and are
ACKed. Many small frames are read in one receive (transport.Reader) and their ACKs sent in one send.
A malformed frame closes that connection and nothing else; whenever a connection ends (end of stream,
error, BYE) its session closes: the client is gone, so its memory is freed and its work cancelled.
"""

from __future__ import annotations

import logging
import socket
import ssl
import threading

from eidos.errors import EidosError, ExecutionError, ResourceError, UnsupportedError

from .frames import HEADER_SIZE, TICKET_SIZE, Frame, FrameError, Kind, header, pack, parse
from .protocol import error_body
from .transport import Reader, TcpTransport

STAGING_CHUNK = 256 << 10    # the staged fallback's bounce buffer (fits a core's L2: the copy reads from cache)
_ACKS = 64                   # ACKs held back at most while more frames are already read ahead
# ACKs held back (at most this many) while the next frame has already come, payload and all: it is read
# without waiting, so no ACK waits on bytes still to come. One send, and one wake of the client, per few
# large PUTs instead of one each; the client's window (8 by default) keeps the rest in flight meanwhile.
# Whatever is held goes as soon as the server would wait for bytes.
_ACKS_BEFORE_PAYLOAD = 4

_PUT, _GET, _RELEASE, _BYE, _ACK, _DATA = Kind.PUT, Kind.GET, Kind.RELEASE, Kind.BYE, Kind.ACK, Kind.DATA

log = logging.getLogger("eidos.remote.channel")


class Listener:
    """The accepting thread and its connections; `close()` ends them all and joins their threads."""

    def __init__(self, server: socket.socket, sessions, *, max_frame: int, ssl_context, wait: float,
                 timeout: float, staged: bool = False):
        self.sessions, self.max_frame, self.ssl_context, self.staged = sessions, max_frame, ssl_context, staged
        self.wait, self.timeout = wait, timeout
        self.port = server.getsockname()[1]
        self._server = server
        self._wake_r, self._wake_w = socket.socketpair()
        self._lock = threading.Lock()
        self._connections: set[Connection] = set()
        self._closed = False
        self._thread = threading.Thread(target=self._accept, name=f"eidos-channel-accept-{self.port}", daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        import select

        while True:
            ready, _, _ = select.select([self._server, self._wake_r], [], [])
            if self._wake_r in ready:
                return
            try:
                sock, _ = self._server.accept()
            except OSError:
                continue                                  # the peer gave up before we accepted it
            with self._lock:
                if self._closed:
                    sock.close()
                    return
                connection = Connection(self, sock)
                self._connections.add(connection)
            connection.thread.start()

    def _gone(self, connection: Connection) -> None:
        with self._lock:
            self._connections.discard(connection)

    def close(self) -> None:
        """Stop accepting, close every connection (their sessions close) and join the threads."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            connections = list(self._connections)
        self._wake_w.send(b"x")
        self._thread.join()
        self._server.close()
        self._wake_r.close()
        self._wake_w.close()
        for connection in connections:
            connection.transport.close()
        for connection in connections:
            connection.thread.join()

    def __enter__(self) -> Listener:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def listen(host: str, port: int, sessions, *, max_frame: int, ssl_context: ssl.SSLContext | None = None,
           wait: float = 60.0, timeout: float = 30.0, staged: bool = False) -> Listener:
    """Accept data-channel connections on host:port (port 0: any free one, see `Listener.port`).

    `max_frame`: the largest payload one frame may carry; `wait`: how long a GET waits for its result to be
    ready; `timeout`: how long the rest of a frame may take once its first byte arrived (a stalled peer);
    `staged`: receive each PUT into a staging buffer and copy it into its block (the fallback where memory
    cannot take the bytes directly, kept as an option so its cost can be measured)."""
    try:
        server = socket.create_server((host, port), reuse_port=False)
    except OSError as e:
        raise ExecutionError(f"cannot listen for the data channel on {host}:{port}: {e}") from e
    return Listener(server, sessions, max_frame=max_frame, ssl_context=ssl_context, wait=wait, timeout=timeout,
                    staged=staged)


def _keepalive(sock: socket.socket) -> None:
    """Notice a peer that vanished without closing (a cut link) within about a minute."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for name, value in (("TCP_KEEPIDLE", 30), ("TCP_KEEPINTVL", 10), ("TCP_KEEPCNT", 3)):
        if hasattr(socket, name):
            sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, name), value)


class Connection:
    """One client's data channel, served by one thread."""

    def __init__(self, listener: Listener, sock: socket.socket):
        self.listener = listener
        _keepalive(sock)
        sock.settimeout(listener.timeout)
        self.transport = TcpTransport(sock)
        self.session = None
        self._send_lock = threading.Lock()
        self.reader = Reader(self.transport)
        self._acks: list[bytes] = []                      # ACKs not yet sent (sent with the next write)
        self._staging = memoryview(bytearray(STAGING_CHUNK)) if listener.staged else None
        self.thread = threading.Thread(target=self._serve, name=f"eidos-channel-{self.transport.peer}", daemon=True)

    def _serve(self) -> None:
        try:
            if self.listener.ssl_context is not None:
                self._tls()
            self._hello()
            while self._frame():
                pass
        except FrameError as e:
            log.warning("data channel %s: malformed frame, closing the connection: %s", self.transport.peer, e)
            self._error(0, e)
        except EidosError as e:
            log.info("data channel %s ended: %s", self.transport.peer, e)
        finally:
            self.transport.close()
            if self.session is not None:
                self.session.close()
            self.listener._gone(self)

    def _tls(self) -> None:
        try:
            sock = self.listener.ssl_context.wrap_socket(self.transport.sock, server_side=True)
        except (OSError, ssl.SSLError) as e:
            raise ExecutionError(f"TLS handshake with {self.transport.peer} failed: {e}") from e
        self.transport = TcpTransport(sock)
        self.transport.settimeout(self.listener.timeout)
        self.reader = Reader(self.transport)

    def _read(self) -> Frame | None:
        """The next frame's header; None at a clean end of stream between frames. Before waiting for more
        bytes, the ACKs held back go out (many PUTs read ahead in one receive are ACKed in one send)."""
        if self.reader.buffered() < HEADER_SIZE:
            if self._acks and (len(self._acks) >= _ACKS_BEFORE_PAYLOAD or not self.reader.ready(HEADER_SIZE)):
                self._send([])                             # about to wait (or enough held back): they go now
            if self.reader.buffered() < HEADER_SIZE:
                self.transport.wait_readable(None)         # no deadline between frames: a client may idle
        head = self.reader.take(HEADER_SIZE)
        return None if head is None else parse(head, max_length=self.listener.max_frame)

    def _hello(self) -> None:
        frame = self._read()
        if frame is None or frame.kind is not Kind.HELLO:
            raise FrameError(f"the first frame must be HELLO with the session's ticket, got "
                             f"{frame.kind.name if frame else 'end of stream'}")
        ticket = bytearray(TICKET_SIZE)
        self.reader.read_into(memoryview(ticket))
        session = self.listener.sessions.by_ticket(bytes(ticket))
        if session is None or session.closed.is_set():
            self._error(0, ExecutionError("the data channel's ticket names no open session on this service "
                                          "(it expired, was closed, or is wrong); open a new session"))
            raise ExecutionError("unknown ticket")
        self.session = session
        session.attached.set()
        self._send([pack(Frame(Kind.ACK, 0))])

    def _frame(self) -> bool:
        """Serve one frame; False when the connection should end."""
        frame = self._read()
        if frame is None:
            return False
        kind = frame.kind
        if kind is _BYE:
            return False
        store = self.session.store
        if kind is _PUT:
            try:
                entry = store.reserve(frame.ident, "buffer", frame.length)
            except ResourceError as e:
                self._error(frame.ident, e)               # its payload cannot be skipped safely: close
                return False
            except EidosError as e:
                self._error(frame.ident, e)
                self._discard(frame.length)
                return True
            if self._acks and self.reader.buffered() < frame.length and (
                    len(self._acks) >= _ACKS_BEFORE_PAYLOAD or
                    self.reader.buffered() + self.transport.available() < frame.length):
                self._send([])                            # the payload is not all here (or enough are held back)
            if self._staging is not None:
                self._bounce(entry.block.view)
            else:
                self.reader.read_into(entry.block.view)
            store.complete(frame.ident)
            self._ack(header(_ACK, frame.ident, frame.length))
        elif kind is _GET:
            try:
                ready = store.ready(frame.ident)
            except EidosError as e:
                self._error(frame.ident, e)
            else:
                if ready:
                    self._get(frame.ident)
                else:                                     # not ready yet: wait in a thread, don't block PUTs
                    threading.Thread(target=self._get, args=(frame.ident,), daemon=True).start()
        elif kind is _RELEASE:
            try:
                store.release(frame.ident)
            except EidosError as e:
                self._error(frame.ident, e)
            else:
                self._ack(header(_ACK, frame.ident))
        else:
            raise FrameError(f"a client does not send {frame.kind.name} frames on the data channel")
        return True

    def _get(self, ident: int) -> None:
        try:
            entry = self.session.store.get(ident, wait=self.listener.wait)
        except EidosError as e:
            self._error(ident, e)
            return
        try:
            self._send_entry(ident, entry)
        except EidosError:
            self.transport.close()                        # the connection's own thread sees it end

    def _send_entry(self, ident: int, entry) -> None:
        """DATA: the header and the bytes in one scatter-gather send, straight from the pool block."""
        try:
            view = _bytes_of(entry)
        except EidosError as e:
            self._error(ident, e)
            return
        self._send([header(_DATA, ident, 0, view.nbytes), view])

    def _bounce(self, dest: memoryview) -> None:
        """The staged fallback: receive through a bounce buffer, copying each chunk into `dest`."""
        for start in range(0, dest.nbytes, STAGING_CHUNK):
            chunk = self._staging[:min(STAGING_CHUNK, dest.nbytes - start)]
            self.reader.read_into(chunk)
            dest[start:start + chunk.nbytes] = chunk

    def _discard(self, nbytes: int) -> None:
        """Read and drop a payload that has nowhere to go (a refused PUT), keeping the stream in step."""
        scratch = memoryview(bytearray(min(nbytes, 1 << 20)))
        while nbytes:
            take = min(nbytes, scratch.nbytes)
            self.reader.read_into(scratch[:take])
            nbytes -= take

    def _ack(self, head: bytes) -> None:
        with self._send_lock:
            self._acks.append(head)
            if len(self._acks) < _ACKS:
                return
        self._send([])

    def _send(self, buffers) -> None:
        """Write the ACKs held back, then `buffers`, in one scatter-gather send."""
        with self._send_lock:
            if self._acks:
                buffers, self._acks = self._acks + buffers, []
            if buffers:
                self.transport.send(buffers)

    def _error(self, ident: int, error: BaseException) -> None:
        """Tell the client (best effort: the connection may already be gone)."""
        payload = error_body(error)
        try:
            self._send([pack(Frame(Kind.ERROR, ident, 0, len(payload))), payload])
        except ExecutionError:
            pass                                          # the peer is gone; the caller ends the connection


def _bytes_of(entry) -> memoryview:
    """The bytes a GET sends for an entry: its pool block, or a host array made on the server."""
    if entry.block is not None:
        return entry.block.view
    value = entry.value
    if hasattr(value, "device") and hasattr(value, "cpu") and str(getattr(value, "device", "cpu")) != "cpu":
        value = value.cpu()                               # a device tensor: one device-to-host copy
    if hasattr(value, "numpy") and not hasattr(value, "__array_interface__"):
        value = value.numpy()
    try:
        view = memoryview(value)
    except TypeError:
        raise UnsupportedError(f"result {entry.id} is a {entry.kind}; the data channel sends buffers and arrays "
                               "(fetch tables with do_get on the control plane)") from None
    if not view.c_contiguous:
        raise UnsupportedError(f"result {entry.id} is not contiguous; the data channel sends contiguous buffers")
    return view.cast("B") if view.ndim != 1 or view.format != "B" else view
