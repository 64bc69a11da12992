"""How data-plane bytes move: a Transport sends lists of buffers and receives into a given buffer, no copies.

TcpTransport writes with `sendmsg` (scatter-gather straight from the caller's buffers) and reads with
`recv_into` (straight into the destination, e.g. a pool block). UcxTransport is the documented point for
RDMA hardware (InfiniBand, RoCE, NVLink through UCX).
"""

from __future__ import annotations

import fcntl
import select
import socket
import ssl
import struct
import termios
import time
from abc import ABC, abstractmethod
from collections.abc import Sequence

from eidos.errors import BackendUnavailable, ExecutionError

_IOV_MAX = 1024
# recv_into takes at most this much a call: measured on loopback (H100 host, 16 cores) 256 MiB arrived
# 10-20% faster in 256 KiB pieces than in one call for the whole buffer (the kernel copies into a
# destination a piece at a time either way; smaller calls keep the socket's window moving)
RECV_PIECE = 256 << 10
# what a header's receive may read ahead: many small frames in one call, yet little of a large payload
# (what was read ahead is copied into the payload's destination; 64 KiB of each 1 MiB cost a few percent)
READ_AHEAD = 8 << 10
DEADLINE_SLACK = 0.01        # how far past its deadline a receive may end (what saves a syscall a piece)


def bytes_view(buffer) -> memoryview:
    """A flat unsigned-byte view of any contiguous buffer (a NumPy array of floats, a 2-D view), no copy."""
    view = buffer if isinstance(buffer, memoryview) else memoryview(buffer)
    return view if view.format == "B" and view.ndim == 1 else view.cast("B")


def _timeval(seconds: float | None) -> bytes:
    """A struct timeval for SO_RCVTIMEO/SO_SNDTIMEO (0: no timeout; never 0 for a tiny positive time)."""
    whole = int(seconds or 0)
    micro = 0 if seconds is None else max(int((seconds - whole) * 1e6), 0 if whole else 1)
    return struct.pack("@ll", whole, micro)


class Transport(ABC):
    """A connected byte stream of the data plane."""

    name: str = "?"

    @abstractmethod
    def send(self, buffers: Sequence[bytes | memoryview]) -> None:
        """Send every byte of every buffer, in order."""

    @abstractmethod
    def recv_into(self, view: memoryview, deadline: float | None = None) -> None:
        """Fill `view` exactly; ExecutionError on end of stream, timeout, or past `deadline` (time.monotonic)."""

    @abstractmethod
    def settimeout(self, seconds: float | None) -> None: ...

    @abstractmethod
    def close(self) -> None: ...

    def available(self) -> int:
        """Bytes that have arrived and wait to be read (a lower bound; this default knows of none)."""
        return 0

    def recv_nowait(self, view: memoryview) -> int:
        """Whatever has arrived, up to `view.nbytes`, without waiting: 0 when nothing has (or the stream
        ended: the next blocking read says so). This default never reads."""
        return 0

    def wait_readable(self, seconds: float | None) -> bool:
        """Whether bytes are ready to read within `seconds` (lets a receiver idle without a half-read frame)."""
        return True

    def recv_some(self, view: memoryview, least: int) -> int:
        """Receive at least `least` bytes (and at most `view.nbytes`: whatever else has arrived); 0 only at end
        of stream before any byte. A stream transport reads ahead; this default reads exactly `least`."""
        self.recv_into(view[:least])
        return least


class TcpTransport(Transport):
    """TCP (or TLS over TCP) with sendmsg/recv_into; TCP_NODELAY so small frames leave at once."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.tls = isinstance(sock, ssl.SSLSocket)
        self.name = "tcp+tls" if self.tls else "tcp"
        if sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            peer = sock.getpeername()
        except OSError:
            peer = None
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else (peer or "a local socket")
        self._closed = False
        self._poll = select.poll()                        # cheaper than select.select: registered once
        self._poll.register(sock, select.POLLIN)
        self.settimeout(sock.gettimeout())

    @classmethod
    def connect(cls, host: str, port: int, *, timeout: float, ssl_context: ssl.SSLContext | None = None
                ) -> TcpTransport:
        """A connection to an eidos data channel; ExecutionError naming the address when it cannot be made."""
        try:
            sock = socket.create_connection((host, port), timeout=timeout)
        except OSError as e:
            raise ExecutionError(f"cannot connect to the data channel at {host}:{port} within {timeout} s: {e}") from e
        if ssl_context is not None:
            try:
                sock = ssl_context.wrap_socket(sock, server_hostname=host)
            except (OSError, ssl.SSLError) as e:
                sock.close()
                raise ExecutionError(f"TLS handshake with the data channel at {host}:{port} failed: {e}") from e
        return cls(sock)

    def send(self, buffers: Sequence[bytes | memoryview]) -> None:
        sent = 0
        if not self.tls and len(buffers) <= _IOV_MAX:
            # the usual case first: one sendmsg takes every byte (no views made, nothing counted twice)
            total = 0
            for buffer in buffers:
                total += len(buffer) if type(buffer) is bytes else bytes_view(buffer).nbytes
            try:
                sent = self.sock.sendmsg(buffers)
            except (TimeoutError, BlockingIOError) as e:
                raise ExecutionError(f"sending to {self.peer} timed out after {self._timeout} s "
                                     f"(0 of {total} bytes sent)") from e
            except OSError as e:
                raise ExecutionError(f"sending to {self.peer} failed after 0 of {total} bytes: {e}") from e
            if sent == total:
                return
        views = [v for v in map(bytes_view, buffers) if v.nbytes]
        total = sum(v.nbytes for v in views)
        skip = sent                                       # what the first sendmsg took: step past it
        while skip:
            if skip >= views[0].nbytes:
                skip -= views.pop(0).nbytes
            else:
                views[0], skip = views[0][skip:], 0
        try:
            if self.tls:                                 # an SSLSocket has no sendmsg
                for view in views:
                    self.sock.sendall(view)
                    sent += view.nbytes
                return
            while views:
                n = self.sock.sendmsg(views[:_IOV_MAX])
                sent += n
                while views and n >= views[0].nbytes:
                    n -= views[0].nbytes
                    views.pop(0)
                if n:
                    views[0] = views[0][n:]
        except (TimeoutError, BlockingIOError) as e:
            raise ExecutionError(f"sending to {self.peer} timed out after {self._timeout} s "
                                 f"({sent} of {total} bytes sent)") from e
        except OSError as e:
            raise ExecutionError(f"sending to {self.peer} failed after {sent} of {total} bytes: {e}") from e

    def recv_into(self, view: memoryview, deadline: float | None = None) -> None:
        view = bytes_view(view)
        want = view.nbytes
        got = 0
        lowered = None                                    # the receive timeout set to meet `deadline`, if any
        try:
            while got < want:
                if deadline is not None:
                    lowered = self._toward(deadline, lowered, got, want)
                n = self.sock.recv_into(view[got:], min(want - got, RECV_PIECE))
                if n == 0:
                    raise ExecutionError(f"{self.peer} closed the connection after {got} of {want} bytes")
                got += n
        except (TimeoutError, BlockingIOError) as e:
            if lowered is not None:
                raise ExecutionError(f"receiving from {self.peer}: the deadline passed after {got} of {want} "
                                     "bytes") from e
            raise ExecutionError(f"receiving from {self.peer} timed out after {self._timeout} s "
                                 f"({got} of {want} bytes received)") from e
        except OSError as e:
            raise ExecutionError(f"receiving from {self.peer} failed after {got} of {want} bytes: {e}") from e
        finally:
            if lowered is not None and not self._closed:
                self._set_recv_timeout(self._timeout)

    def _toward(self, deadline: float, lowered: float | None, got: int, want: int) -> float | None:
        """Before a receive bound by `deadline`: raise once it has passed; lower the socket's receive timeout
        when a receive started now could end more than DEADLINE_SLACK past it (plain TCP; TLS checks between
        pieces only). Returns the timeout now set (None: the socket's own)."""
        now = time.monotonic()
        left = deadline - now
        if left <= 0:
            raise ExecutionError(f"receiving from {self.peer}: the deadline passed after {got} of {want} bytes")
        current = lowered if lowered is not None else self._timeout
        if self.tls or (current is not None and current <= left + DEADLINE_SLACK):
            return lowered
        self._set_recv_timeout(left)
        return left

    def recv_some(self, view: memoryview, least: int) -> int:
        got = 0
        try:
            while got < least:
                n = self.sock.recv_into(view[got:])
                if n == 0:
                    if got == 0:
                        return 0
                    raise ExecutionError(f"{self.peer} closed the connection after {got} of {least} bytes")
                got += n
        except (TimeoutError, BlockingIOError) as e:
            raise ExecutionError(f"receiving from {self.peer} timed out after {self._timeout} s "
                                 f"({got} of {least} bytes received)") from e
        except OSError as e:
            raise ExecutionError(f"receiving from {self.peer} failed after {got} of {least} bytes: {e}") from e
        return got

    def available(self) -> int:
        if self.tls:
            return 0
        try:
            return struct.unpack("@i", fcntl.ioctl(self.sock.fileno(), termios.FIONREAD, b"\0\0\0\0"))[0]
        except (OSError, ValueError):
            return 0

    def recv_nowait(self, view: memoryview) -> int:
        if self.tls:
            return 0                                      # an SSLSocket takes no flags: the blocking path reads
        try:
            return self.sock.recv_into(view, 0, socket.MSG_DONTWAIT)
        except OSError:                                   # nothing yet (EAGAIN), or an error the next read names
            return 0

    def wait_readable(self, seconds: float | None) -> bool:
        if (self.tls and self.sock.pending()) or self._closed:
            return True                                   # closed: let the next read say so
        try:
            return bool(self._poll.poll(None if seconds is None else max(seconds, 0.0) * 1000))
        except (OSError, ValueError):                   # closed under us: let the next read say so
            return True

    def settimeout(self, seconds: float | None) -> None:
        """Plain TCP keeps the socket blocking and lets the kernel time out a send or receive that makes no
        progress (SO_SNDTIMEO/SO_RCVTIMEO): Python's own timeout polls before every call, which cost a
        quarter of the throughput of a stream of 1 MiB frames here. TLS keeps Python's timeout."""
        self._timeout = seconds
        if self.tls or self.sock.family not in (socket.AF_INET, socket.AF_INET6, socket.AF_UNIX):
            self.sock.settimeout(seconds)
            return
        self.sock.settimeout(None)
        self._set_recv_timeout(seconds)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, _timeval(seconds))

    def _set_recv_timeout(self, seconds: float | None) -> None:
        if self.tls:
            return                                        # Python's timeout, shared with sends: left alone
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, _timeval(seconds))
        except OSError:
            pass                                          # closed under us: the read says so

    def close(self) -> None:
        """Close; a thread blocked reading this socket wakes with end of stream."""
        if self._closed:
            return
        self._closed = True
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass                                          # not connected any more: nothing to shut down
        self.sock.close()


class UcxTransport(Transport):
    """The RDMA implementation point: UCX (through ucxx) moves the same frames over InfiniBand, RoCE or
    NVLink, and can receive into device memory directly. `endpoint` is a connected ucxx endpoint; its
    coroutines are driven on a private event loop so the four methods keep the blocking contract."""

    name = "ucx"

    def __init__(self, endpoint=None):
        try:
            import ucxx
        except ImportError as e:
            raise BackendUnavailable("the UCX transport needs the ucxx package (`pip install ucxx`, or "
                                     "ucxx-cu12 for CUDA 12); use TcpTransport where it is absent") from e
        import asyncio

        self._ucxx = ucxx
        self._endpoint = endpoint
        self._loop = asyncio.new_event_loop()
        self._timeout: float | None = None

    def _run(self, coroutine, what: str):
        import asyncio

        try:
            return self._loop.run_until_complete(asyncio.wait_for(coroutine, self._timeout))
        except TimeoutError as e:
            raise ExecutionError(f"UCX {what} timed out after {self._timeout} s") from e
        except Exception as e:                            # ucxx raises its own types: name them, keep the cause
            raise ExecutionError(f"UCX {what} failed: {type(e).__name__}: {e}") from e

    def send(self, buffers: Sequence[bytes | memoryview]) -> None:
        for view in map(bytes_view, buffers):
            if view.nbytes:
                self._run(self._endpoint.send(view), f"send of {view.nbytes} bytes")

    def recv_into(self, view: memoryview, deadline: float | None = None) -> None:
        view = bytes_view(view)
        if view.nbytes:
            self._run(self._endpoint.recv(view), f"receive of {view.nbytes} bytes")

    def settimeout(self, seconds: float | None) -> None:
        self._timeout = seconds

    def close(self) -> None:
        if self._endpoint is not None:
            self._run(self._endpoint.close(), "close")
            self._endpoint = None
        self._loop.close()


class Reader:
    """Read-ahead over a transport: many small frames come out of one receive call, while a large payload
    still lands straight in its destination (only the part already read ahead is copied, at most `size`)."""

    def __init__(self, transport: Transport, size: int = READ_AHEAD):
        self.transport = transport
        self._view = memoryview(bytearray(size))
        self._start = self._end = 0

    def buffered(self) -> int:
        return self._end - self._start

    def ready(self, nbytes: int) -> bool:
        """Whether `nbytes` (at most `size`) can be taken without waiting, reading what has arrived if need be."""
        have = self._end - self._start
        if have >= nbytes:
            return True
        if self._start + nbytes > self._view.nbytes:
            self._view[:have] = self._view[self._start:self._end]
            self._start, self._end = 0, have
        self._end += self.transport.recv_nowait(self._view[self._end:])
        return self._end - self._start >= nbytes

    def take(self, nbytes: int) -> memoryview | None:
        """The next `nbytes` (at most `size`) as a view valid until the next call; None at a clean end of
        stream (nothing read ahead and the peer closed)."""
        if self._end - self._start < nbytes:
            if self._start + nbytes > self._view.nbytes:          # not enough room after: move the rest down
                left = self._end - self._start
                self._view[:left] = self._view[self._start:self._end]
                self._start, self._end = 0, left
            got = self.transport.recv_some(self._view[self._end:], nbytes - (self._end - self._start))
            if got == 0:
                if self._end == self._start:
                    return None
                raise ExecutionError(f"{getattr(self.transport, 'peer', 'the peer')} closed the connection "
                                     f"after {self._end - self._start} of {nbytes} bytes")
            self._end += got
        view = self._view[self._start:self._start + nbytes]
        self._start += nbytes
        return view

    def read_into(self, view: memoryview, deadline: float | None = None) -> None:
        """Fill `view` exactly: first from what was read ahead, the rest straight from the transport (by
        `deadline`, a time.monotonic, when given)."""
        n = min(self._end - self._start, view.nbytes)
        if n:
            view[:n] = self._view[self._start:self._start + n]
            self._start += n
        if n < view.nbytes:
            self.transport.recv_into(view[n:], deadline)
