"""The server's pre-allocated buffer pool: incoming frames are received straight into its blocks.

One region is allocated once (an anonymous mmap, or torch pinned host memory when CUDA is present, so a
host-to-device copy from a block starts at once without a staging copy) and carved into blocks; frees
coalesce with their neighbours. Free extents are kept by offset (for coalescing) and in a list sorted by
size (best fit by bisection), so an allocation is a binary search plus a list insert.
"""

from __future__ import annotations

import bisect
import itertools
import mmap
import os
import threading
from dataclasses import dataclass, field
from typing import Any

from eidos.errors import BackendError, ResourceError

SMALL_ALIGN = 64
LARGE_ALIGN = 4096
LARGE = 1 << 20
_serials = itertools.count(1)


def cuda_present() -> bool:
    """Whether CUDA is usable, without importing torch on a machine with no NVIDIA driver (keeps a CPU server
    light); where the driver is there, torch decides."""
    if not (os.path.exists("/dev/nvidiactl") or os.path.exists("/proc/driver/nvidia")):
        return False
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


@dataclass(eq=False)
class Block:
    """A piece of the pool: `view` is writable and exactly `nbytes` long; it stays valid until freed."""

    offset: int
    nbytes: int
    owner: str
    view: memoryview
    size: int = field(default=0, repr=False)          # bytes reserved (nbytes rounded up to the alignment)
    pool: Any = field(default=None, repr=False)
    serial: int = field(default=0, repr=False)

    def array(self, dtype, shape):
        """A NumPy view on the block (no copy); the shape must cover exactly the block's bytes."""
        import numpy as np

        dtype = np.dtype(dtype)
        shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
        need = dtype.itemsize * int(np.prod(shape, dtype=np.int64))
        if need != self.nbytes:
            raise BackendError(f"an array of {shape} {dtype} needs {need} bytes; the block holds {self.nbytes}")
        return np.frombuffer(self.view, dtype=dtype).reshape(shape)

    def tensor(self):
        """A torch uint8 view of the block (pinned when the pool is, for an asynchronous host-to-device copy)."""
        if self.pool is not None and self.pool.pinned:
            return self.pool._tensor[self.offset:self.offset + self.nbytes]
        import torch

        if self.nbytes == 0:
            return torch.empty(0, dtype=torch.uint8)
        return torch.frombuffer(self.view, dtype=torch.uint8)


class Pool:
    """One pre-allocated region carved into blocks for incoming buffers; frees coalesce; per-owner quotas."""

    def __init__(self, capacity: int, *, pinned: bool | None = None):
        if capacity < 0:
            raise ResourceError(f"a pool's capacity is {capacity} bytes; it must be 0 or more")
        if pinned is None:
            pinned = cuda_present()
        self.capacity = capacity
        self.pinned = pinned
        self._tensor = None
        if pinned:
            import torch

            self._tensor = torch.empty(max(capacity, 1), dtype=torch.uint8, pin_memory=True)
            self._memory = memoryview(self._tensor.numpy())
        else:
            self._mmap = mmap.mmap(-1, max(capacity, 1))
            self._memory = memoryview(self._mmap)
        self._lock = threading.Lock()
        self._by_start: dict[int, int] = {0: capacity} if capacity else {}   # free extents: start -> size
        self._by_end: dict[int, int] = {capacity: 0} if capacity else {}     # free extents: end -> start
        self._by_size: list[tuple[int, int]] = [(capacity, 0)] if capacity else []
        self._live: dict[int, Block] = {}
        self._used: dict[str, int] = {}
        self._quota: dict[str, int] = {}
        self._free_bytes = capacity

    def allocate(self, nbytes: int, owner: str) -> Block:
        """A block of `nbytes` for `owner`; ResourceError when it does not fit the pool or the owner's quota."""
        if nbytes < 0:
            raise ResourceError(f"a block of {nbytes} bytes was asked for; the size must be 0 or more")
        align = LARGE_ALIGN if nbytes >= LARGE else SMALL_ALIGN
        size = -(-nbytes // align) * align
        with self._lock:
            quota = self._quota.get(owner)
            if quota is not None and self._used.get(owner, 0) + size > quota:
                raise ResourceError(
                    f"{owner!r} asked for {nbytes} bytes with {self._used.get(owner, 0)} in use; its quota is "
                    f"{quota} bytes (release handles it no longer needs, or raise the per-connection limit)")
            offset = self._take(size, align) if size else 0
            if offset is None:
                largest = self._by_size[-1][0] if self._by_size else 0
                raise ResourceError(
                    f"the pool cannot fit {nbytes} bytes for {owner!r}: {self._free_bytes} bytes free (largest free "
                    f"piece {largest}) of a capacity of {self.capacity} bytes; release handles, or start the "
                    f"service with a larger pool")
            if size:
                self._used[owner] = self._used.get(owner, 0) + size
            block = Block(offset, nbytes, owner, self._memory[offset:offset + nbytes], size, self, next(_serials))
            self._live[block.serial] = block
            return block

    def free(self, block: Block) -> None:
        """Return a block to the pool; BackendError for a block already freed or from another pool."""
        with self._lock:
            if block.pool is not self:
                raise BackendError(f"block at offset {block.offset} ({block.nbytes} bytes) is not from this pool")
            if self._live.pop(block.serial, None) is None:
                raise BackendError(f"block at offset {block.offset} ({block.nbytes} bytes, owner {block.owner!r}) "
                                   f"was already freed")
            left = self._used.get(block.owner, 0) - block.size
            if left:
                self._used[block.owner] = left
            else:
                self._used.pop(block.owner, None)
            if block.size:
                self._give(block.offset, block.size)

    def set_quota(self, owner: str, nbytes: int | None) -> None:
        """The most bytes `owner` may hold at once (None: no limit but the pool's capacity)."""
        with self._lock:
            if nbytes is None:
                self._quota.pop(owner, None)
            else:
                self._quota[owner] = nbytes

    def used(self, owner: str | None = None) -> int:
        """Bytes held (by `owner`, or by everyone), counted as reserved: sizes rounded up to the alignment."""
        with self._lock:
            return self.capacity - self._free_bytes if owner is None else self._used.get(owner, 0)

    def _take(self, size: int, align: int) -> int | None:
        """The offset of `size` aligned bytes cut from the smallest free extent that fits, or None."""
        i = bisect.bisect_left(self._by_size, (size, -1))
        while i < len(self._by_size):
            extent, start = self._by_size[i]
            pad = -start % align
            if extent >= size + pad:
                self._remove(start, extent)
                if pad:
                    self._add(start, pad)
                if extent > size + pad:
                    self._add(start + pad + size, extent - size - pad)
                self._free_bytes -= size
                return start + pad
            i += 1
        return None

    def _give(self, start: int, size: int) -> None:
        """Return an extent, merged with the free extents just before and after it."""
        self._free_bytes += size
        before = self._by_end.get(start)
        if before is not None:
            self._remove(before, start - before)
            size += start - before
            start = before
        after = self._by_start.get(start + size)
        if after is not None:
            self._remove(start + size, after)
            size += after
        self._add(start, size)

    def _add(self, start: int, size: int) -> None:
        self._by_start[start] = size
        self._by_end[start + size] = start
        bisect.insort(self._by_size, (size, start))

    def _remove(self, start: int, size: int) -> None:
        del self._by_start[start]
        del self._by_end[start + size]
        del self._by_size[bisect.bisect_left(self._by_size, (size, start))]
