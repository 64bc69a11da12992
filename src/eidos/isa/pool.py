"""Pool: a fixed circular buffer, so a stream of any length runs in constant memory."""

from __future__ import annotations

from eidos.errors import BackendError


class Pool:
    """`capacity` bytes. write() appends, overwriting the oldest bytes once full; read(offset,
    length) reads from the oldest byte still held (offset 0)."""

    def __init__(self, capacity: int) -> None:
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
            raise BackendError(f"Pool: capacity must be a positive int, got {capacity!r}")
        self._buf = bytearray(capacity)
        self._cap = capacity
        self._head = 0  # index of the oldest byte
        self._size = 0

    def capacity(self) -> int:
        return self._cap

    def len(self) -> int:
        """Bytes held now (at most capacity())."""
        return self._size

    __len__ = len

    def write(self, data) -> None:
        mv = memoryview(data).cast("B")
        n, cap = len(mv), self._cap
        if n >= cap:
            self._buf[:] = mv[n - cap:]
            self._head, self._size = 0, cap
            return
        start = (self._head + self._size) % cap
        first = min(n, cap - start)
        self._buf[start:start + first] = mv[:first]
        self._buf[:n - first] = mv[first:]
        self._size += n
        if self._size > cap:
            self._head = (self._head + self._size - cap) % cap
            self._size = cap

    def read(self, offset: int, length: int) -> bytes:
        if offset < 0 or length < 0 or offset + length > self._size:
            raise BackendError(f"Pool.read: bytes {offset}..{offset + length} out of range; the pool holds {self._size}")
        start = (self._head + offset) % self._cap
        first = min(length, self._cap - start)
        return bytes(self._buf[start:start + first]) + bytes(self._buf[:length - first])

    def clear(self) -> None:
        self._head = self._size = 0
