"""Buffer, pool and class-memory bookkeeping shared by every kernel backend.

Each backend owns one Memory. Handles are small positive ints, unique across buffers and
pools (handle 0 names class memory in register-held pointers). Every access is checked;
a bad handle, a freed one, or an out-of-bounds range raises BackendError before any byte
moves, so no memory is ever corrupted. A buffer may carry an element type (allocate_buffer's
ty): programs that read it as another type fail before they run (validate.check_buffer_types).
"""

from __future__ import annotations

import weakref

import numpy as np

from eidos.errors import BackendError

from .address import CLASS_MEMORY_BYTES, NUM_CLASSES
from .types import Type

PHASE_MODULUS = 768
ALIGNMENT = 64  # bytes: every host allocation starts on a cache line (and a 512-bit vector)


POOLED_MAX = 1 << 20   # bytes: a freed block up to this size waits for reuse; larger ones go back to the system
POOLED_KEEP = 64 << 20  # bytes of freed blocks one Memory keeps at most


def aligned_bytes(size: int, *, zeroed: bool = True) -> np.ndarray:
    """`size` uint8 bytes whose first byte sits at a multiple of ALIGNMENT (NumPy itself promises 16).

    A slice of a slightly larger array, so zeroed memory still comes from calloc's lazily zeroed
    pages and costs nothing until touched."""
    raw = (np.zeros if zeroed else np.empty)(size + ALIGNMENT - 1, dtype=np.uint8)
    start = -raw.ctypes.data % ALIGNMENT
    return raw[start:start + size]


class HostBlocks:
    """The host targets' allocations: 64-byte-aligned blocks, pooled by size. A freed block of at most
    POOLED_MAX bytes serves the next allocation of its size (zeroed again when asked), so a program that
    allocates and frees a pool on every launch reuses one block and its bound kernels stay bound.
    Only blocks handed out here come back: an array a caller put in a Memory itself is never reused."""

    def __init__(self) -> None:
        self._free: dict[int, list[np.ndarray]] = {}
        self._kept = 0
        self._out: dict[int, np.ndarray] = {}  # id -> block handed out and not yet given back

    def take(self, size: int, *, zeroed: bool = True) -> np.ndarray:
        free = self._free.get(size)
        if free:
            block = free.pop()
            self._kept -= size
            if zeroed:
                block.fill(0)
        else:
            block = aligned_bytes(size, zeroed=zeroed)
        self._out[id(block)] = block
        return block

    def give(self, block) -> None:
        size = len(block)
        if self._out.pop(id(block), None) is not block or size > POOLED_MAX or self._kept + size > POOLED_KEEP:
            return
        self._free.setdefault(size, []).append(block)
        self._kept += size


def _as_bytes(data, what: str) -> np.ndarray:
    """A read-only uint8 view of any bytes-like object or array (C-contiguous copy if needed)."""
    if isinstance(data, np.ndarray):
        arr = np.ascontiguousarray(data)
        return arr.reshape(-1).view(np.uint8)
    try:
        return np.frombuffer(memoryview(data).cast("B"), dtype=np.uint8)
    except TypeError as e:
        raise BackendError(f"{what}: expected bytes, bytearray, memoryview or ndarray, got {type(data).__name__}") from e


def _writable_bytes(out, what: str) -> np.ndarray:
    """A writable uint8 view of `out`; BackendError when it is read-only or not a buffer."""
    if isinstance(out, np.ndarray):
        if not out.flags.writeable:
            raise BackendError(f"{what}: the output array is read-only")
        if not out.flags.c_contiguous:
            raise BackendError(f"{what}: the output array must be C-contiguous")
        return out.reshape(-1).view(np.uint8)
    try:
        mv = memoryview(out)
    except TypeError as e:
        raise BackendError(f"{what}: expected a writable buffer (bytearray, memoryview, ndarray), got {type(out).__name__}") from e
    if mv.readonly:
        raise BackendError(f"{what}: the output buffer is read-only ({type(out).__name__})")
    return np.frombuffer(mv.cast("B") if mv.ndim != 1 or mv.format != "B" else mv, dtype=np.uint8)


class Memory:
    """The allocations of one backend: buffers, pools, class memory, accumulators and phases."""

    group = None   # the device group its collectives run across (Target.join; eidos.isa.distributed)

    def __init__(self) -> None:
        self.buffers: dict[int, np.ndarray] = {}
        self.pools: dict[int, np.ndarray] = {}
        self._freed: dict[int, str] = {}
        self._next = 1
        self.blocks = HostBlocks()
        self.types: dict[int, Type] = {}  # buffer handle -> element type, for typed buffers only
        self._types_checked: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # program -> generation
        self.class_memory = aligned_bytes(CLASS_MEMORY_BYTES)
        self.accumulators = np.zeros(NUM_CLASSES, dtype=np.float64)
        self.phases = np.zeros(NUM_CLASSES, dtype=np.int64)
        self.generation = 0  # bumped by every allocation and free, so decoded programs know when to redo

    # ---- allocation --------------------------------------------------------------------
    def zeros(self, size: int):
        """Zeroed, 64-byte-aligned bytes for a buffer or pool, from the pooled host blocks (a device
        backend overrides this, and scratch, to allocate there)."""
        return self.blocks.take(size)

    def scratch(self, size: int):
        """Bytes nobody will read before writing (a backend's unzeroed pool; see allocate_pool)."""
        return self.blocks.take(size, zeroed=False)

    def _new_handle(self) -> int:
        while self._next in self.buffers or self._next in self.pools or self._next in self._freed:
            self._next += 1
        h = self._next
        self._next += 1
        return h

    @staticmethod
    def _size(size, what: str) -> int:
        if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 0:
            raise BackendError(f"{what}: size must be a non-negative int, got {size!r}")
        return int(size)

    def allocate_buffer(self, size: int, ty: Type | None = None) -> int:
        """A zeroed buffer of `size` bytes; with `ty`, a typed buffer of size // ty.size_bytes elements."""
        size = self._size(size, "allocate_buffer")
        if ty is not None:
            if not isinstance(ty, Type):
                raise BackendError(f"allocate_buffer: ty must be an eidos.isa.Type or None, got {ty!r}")
            if size % ty.size_bytes:
                raise BackendError(f"allocate_buffer: {size} bytes is not a whole number of {ty.name} elements "
                                   f"({ty.size_bytes} bytes each); allocate_typed(count, ty) takes a count")
        h = self._new_handle()
        self.buffers[h] = self.zeros(size)
        if ty is not None:
            self.types[h] = ty
        self.generation += 1
        return h

    def buffer_type(self, handle: int, what: str = "buffer_type") -> Type | None:
        """The element type a buffer was allocated with; None for a raw (untyped) buffer."""
        self.buffer(handle, what)
        return self.types.get(handle)

    def check_types(self, program) -> None:
        """IsaError where `program` reads or writes a typed buffer as another type without asking to
        reinterpret it; checked once per program and memory generation, free when no buffer is typed."""
        if not self.types:
            return
        if self._types_checked.get(program) == self.generation:
            return
        from .validate import check_buffer_types

        check_buffer_types(program.validate(), self.types)
        self._types_checked[program] = self.generation

    def allocate_pool(self, size: int, handle: int | None = None, *, zeroed: bool = True) -> int:
        """A pool of size bytes. zeroed=False only where the caller has proved that no byte is read
        before it is written (a pool only a kernel's own registers use): it skips the memset."""
        size = self._size(size, "allocate_pool")
        if handle is None:
            handle = self._new_handle()
        elif handle < 1 or handle in self.buffers or handle in self.pools:
            raise BackendError(f"PoolAlloc: handle {handle} is {'in use' if handle >= 1 else 'reserved (handles start at 1)'}")
        self._freed.pop(handle, None)
        self.pools[handle] = self.zeros(size) if zeroed else self.scratch(size)
        self.generation += 1
        return handle

    def free_buffer(self, handle: int) -> None:
        self.buffer(handle, "free_buffer")
        self.blocks.give(self.buffers.pop(handle))
        self.types.pop(handle, None)
        self.generation += 1
        self._freed[handle] = "buffer"

    def free_pool(self, handle: int) -> None:
        self.pool(handle, "free_pool")
        self.blocks.give(self.pools.pop(handle))
        self.generation += 1
        self._freed[handle] = "pool"

    # ---- lookup --------------------------------------------------------------------------
    def _missing(self, handle, kind: str, what: str) -> BackendError:
        if not isinstance(handle, (int, np.integer)) or isinstance(handle, bool):
            return BackendError(f"{what}: a {kind} handle must be an int, got {type(handle).__name__}")
        if self._freed.get(handle) == kind:
            return BackendError(f"{what}: {kind} {handle} was freed (use after free)")
        other = "pool" if kind == "buffer" else "buffer"
        if handle in (self.pools if kind == "buffer" else self.buffers):
            return BackendError(f"{what}: handle {handle} is a {other}, not a {kind}")
        live = sorted(self.buffers if kind == "buffer" else self.pools)
        return BackendError(f"{what}: no {kind} with handle {handle}; live {kind}s: {live or 'none'}")

    def buffer(self, handle: int, what: str = "buffer") -> np.ndarray:
        try:
            return self.buffers[handle]
        except (KeyError, TypeError):
            raise self._missing(handle, "buffer", what) from None

    def pool(self, handle: int, what: str = "pool") -> np.ndarray:
        try:
            return self.pools[handle]
        except (KeyError, TypeError):
            raise self._missing(handle, "pool", what) from None

    def global_memory(self, handle: int, what: str) -> np.ndarray:
        """The bytes a register-held pointer names: class memory (0), a buffer or a pool."""
        if handle == 0:
            return self.class_memory
        if handle in self.buffers:
            return self.buffers[handle]
        if handle in self.pools:
            return self.pools[handle]
        raise BackendError(f"{what}: pointer names handle {handle}, which is no live buffer or pool"
                           + (" (it was freed)" if handle in self._freed else ""))

    @staticmethod
    def check_range(mem, offset: int, nbytes: int, what: str) -> None:
        size = len(mem)  # one-dimensional bytes: a NumPy array here, a torch tensor on a device backend
        if offset < 0 or nbytes < 0 or offset + nbytes > size:
            raise BackendError(f"{what}: bytes {offset}..{offset + nbytes} out of bounds of {size} bytes")

    # ---- copies ----------------------------------------------------------------------------
    def check_host_array(self, handle: int, data, what: str) -> None:
        """BackendError when a NumPy array of another element type meets a typed buffer (uint8 arrays and
        bytes-like objects are raw bytes and always fit)."""
        ty = self.types.get(handle)
        if ty is None or not isinstance(data, np.ndarray) or data.dtype == np.uint8:
            return
        want = None if ty.is_extended else ty.np_dtype
        if data.dtype != want:
            convert = f"convert it (.astype('{want.name}')) or " if want is not None else ""
            raise BackendError(f"{what}: buffer {handle} holds {ty.name} elements, the array is {data.dtype}; "
                               f"{convert}pass its raw bytes (.view(np.uint8))")
    def copy_in(self, mem: np.ndarray, offset: int, data, what: str) -> None:
        src = _as_bytes(data, what)
        self.check_range(mem, int(offset), src.size, what)
        mem[offset:offset + src.size] = src

    def copy_out(self, mem: np.ndarray, offset: int, out, what: str) -> None:
        dst = _writable_bytes(out, what)
        self.check_range(mem, int(offset), dst.size, what)
        dst[:] = mem[offset:offset + dst.size]
