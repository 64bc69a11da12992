"""Device memory for the Triton backend: buffers, pools and class memory as torch uint8 tensors.

The bookkeeping (handles, use-after-free, bounds and their messages) is the shared isa.Memory;
only where the bytes live differs. Allocation goes through torch's caching allocator, so a
buffer allocated in a loop costs no cudaMalloc; host copies go through pinned staging buffers
in chunks, so a large copy overlaps the host memcpy with the DMA. Under TRITON_INTERPRET=1 the
device is the CPU and every tensor is ordinary host memory.
"""

from __future__ import annotations

import os

import numpy as np

from eidos.errors import BackendError, BackendUnavailable, UnsupportedError

from ...address import CLASS_BYTES, CLASS_MEMORY_BYTES, NUM_CLASSES, POINTER_SHIFT, Space
from ...memory import Memory, _as_bytes, _writable_bytes
from ...types import Type

STAGING_CHUNK = 32 << 20  # bytes per pinned staging buffer (two alternate)
_LOW = (1 << POINTER_SHIFT) - 1
INSTALL = "pip install 'eidos[gpu]'"


def interpreting() -> bool:
    """Whether Triton runs kernels in its interpreter (TRITON_INTERPRET=1): then tensors live on the CPU."""
    return os.environ.get("TRITON_INTERPRET", "0").strip().lower() in ("1", "true", "yes", "on")


def default_device():
    """cpu under the interpreter, else the current CUDA device; BackendUnavailable naming why not."""
    try:
        import torch
        import triton  # noqa: F401
    except ImportError as e:
        raise BackendUnavailable(f"the triton backend needs torch and triton ({e}); {INSTALL}") from e
    if interpreting():
        return torch.device("cpu")
    if torch.cuda.is_available():
        return torch.device("cuda", torch.cuda.current_device())
    raise BackendUnavailable("the triton backend needs a CUDA device (torch.cuda.is_available() is False) "
                             f"or Triton's interpreter (set TRITON_INTERPRET=1 before defining kernels); {INSTALL}")


def torch_dtype(ty: Type):
    """The torch dtype of one element of ty; UnsupportedError for integers wider than 64 bits."""
    import torch

    if ty.is_extended:
        raise UnsupportedError(f"type {ty.name}: the triton backend has no {ty.bits}-bit integers "
                               "(GPU types stop at 64 bits); the reference and cpu backends run it exactly")
    return {Type.F16: torch.float16, Type.BF16: torch.bfloat16, Type.F32: torch.float32, Type.F64: torch.float64,
            Type.I8: torch.int8, Type.I16: torch.int16, Type.I32: torch.int32, Type.I64: torch.int64,
            Type.U8: torch.uint8, Type.U16: torch.uint16, Type.U32: torch.uint32, Type.U64: torch.uint64}[ty]


class DeviceMemory(Memory):
    """One backend's allocations on `device`; the contract the thread kernels, arrays and extensions share."""

    def __init__(self, device=None) -> None:
        import torch

        self.torch = torch
        self.device = torch.device(device) if device is not None else default_device()
        self.cuda = self.device.type == "cuda"
        super().__init__()
        self.class_memory = self.zeros(CLASS_MEMORY_BYTES)
        self.accumulators = torch.zeros(NUM_CLASSES, dtype=torch.float64, device=self.device)
        self.phases = torch.zeros(NUM_CLASSES, dtype=torch.int64, device=self.device)
        self._staging: list = []   # [(pinned tensor, event or None)] x 2, made on the first host copy
        self._turn = 0

    def zeros(self, size: int):
        return self.torch.zeros(size, dtype=self.torch.uint8, device=self.device)

    def scratch(self, size: int):
        return self.torch.empty(size, dtype=self.torch.uint8, device=self.device)

    # ---- the contract ----------------------------------------------------------------------
    def tensor(self, handle: int, what: str = "tensor"):
        """The whole uint8 tensor of a buffer or pool (handle 0: class memory)."""
        if isinstance(handle, bool) or not isinstance(handle, (int, np.integer)):
            raise BackendError(f"{what}: a handle must be an int, got {type(handle).__name__}")
        return self.global_memory(int(handle), what)

    def locate(self, address, what: str = "view"):
        """(uint8 tensor, byte offset) an address names; register and shared addresses need a thread."""
        space = address.space
        if space is Space.BUFFER:
            return self.buffer(address.handle, what), address.offset
        if space is Space.POOL:
            return self.pool(address.handle, what), address.offset
        if space is Space.CLASS:
            return self.class_memory, address.class_id * CLASS_BYTES + address.offset
        if space is Space.REGISTER:
            raise BackendError(f"{what}: {address} is read from a register at run time; resolve its pointer "
                               "value with locate_pointer()")
        raise BackendError(f"{what}: shared memory cannot be addressed by a collective")

    def locate_pointer(self, ptr: int, what: str = "view"):
        """(uint8 tensor, byte offset) of a register-held global pointer ((handle << 32) | offset)."""
        if not isinstance(ptr, int) or ptr < 0:
            raise BackendError(f"{what}: {ptr!r} is not a pointer")
        return self.global_memory(ptr >> POINTER_SHIFT, what), ptr & _LOW

    def view(self, address, ty: Type, count: int, *, what: str = "view", name: str = "array", skip: int = 0):
        """count elements of ty at address (+ skip bytes) as a typed tensor sharing the memory.

        Bounds are checked with the reference backend's message; an offset that is not a multiple
        of the element size cannot be a typed view and raises UnsupportedError (arrays.py stages
        such operands through an aligned copy instead)."""
        mem, off = self.locate(address, what)
        return self.typed(mem, off + skip, ty, count, what=what, name=name)

    def typed(self, mem, off: int, ty: Type, count: int, *, what: str = "view", name: str = "array"):
        dtype = torch_dtype(ty)
        size = ty.size_bytes
        nbytes = count * size
        if off < 0 or nbytes < 0 or off + nbytes > len(mem):
            raise BackendError(f"{what}: {name} needs bytes {off}..{off + nbytes} but its memory has {len(mem)}")
        if (mem.storage_offset() + off) % size:
            raise UnsupportedError(f"{what}: {name} starts at byte {off}, not a multiple of {ty.name}'s {size} bytes; "
                                   "a typed device view needs element-aligned offsets")
        return mem[off:off + nbytes].view(dtype)

    def adopt(self, tensor, *, pool: bool = False) -> int:
        """Make a caller's contiguous device tensor a buffer (or pool) without copying: the memory is
        shared, so kernels write where the caller reads. The caller keeps the tensor alive or not."""
        torch = self.torch
        if not isinstance(tensor, torch.Tensor):
            raise BackendError(f"adopt: expected a torch.Tensor, got {type(tensor).__name__}")
        if tensor.device != self.device and not (tensor.device.type == self.device.type == "cuda"
                                                 and self.device.index is None):
            raise BackendError(f"adopt: the tensor is on {tensor.device}, this backend's memory is on {self.device}; "
                               f"move it first (tensor.to('{self.device}'))")
        if not tensor.is_contiguous():
            raise BackendError("adopt: the tensor is not contiguous; pass tensor.contiguous() (a copy)")
        data = tensor.detach().reshape(-1).view(torch.uint8)
        h = self._new_handle()
        (self.pools if pool else self.buffers)[h] = data
        self.generation += 1
        return h

    # ---- host copies -------------------------------------------------------------------------
    def copy_in(self, mem, offset: int, data, what: str) -> None:
        torch = self.torch
        if isinstance(data, torch.Tensor):  # device or host tensor: one torch copy, no staging
            src = data.detach().contiguous().reshape(-1).view(torch.uint8)
            self.check_range(mem, int(offset), src.numel(), what)
            mem[offset:offset + src.numel()].copy_(src)
            return
        src = _as_bytes(data, what)
        self.check_range(mem, int(offset), src.size, what)
        if not self.cuda:
            mem[offset:offset + src.size] = torch.from_numpy(src.copy() if not src.flags.writeable else src)
            return
        for start in range(0, src.size, STAGING_CHUNK):
            part = src[start:start + STAGING_CHUNK]
            pinned, done = self._stage(part.size)
            pinned.numpy()[:part.size] = part
            mem[offset + start:offset + start + part.size].copy_(pinned[:part.size], non_blocking=True)
            done.record()
        # no wait: `data` is already copied into pinned memory (the caller may reuse it), and whatever
        # runs next on this stream (kernels, copy_out) sees the bytes in stream order

    def copy_out(self, mem, offset: int, out, what: str) -> None:
        torch = self.torch
        if isinstance(out, torch.Tensor):
            dst = out.reshape(-1).view(torch.uint8) if out.is_contiguous() else None
            if dst is None:
                raise BackendError(f"{what}: the output tensor must be contiguous")
            self.check_range(mem, int(offset), dst.numel(), what)
            dst.copy_(mem[offset:offset + dst.numel()])
            return
        dst = _writable_bytes(out, what)
        self.check_range(mem, int(offset), dst.size, what)
        if not self.cuda:
            dst[:] = mem[offset:offset + dst.size].numpy()
            return
        for start in range(0, dst.size, STAGING_CHUNK):
            n = min(STAGING_CHUNK, dst.size - start)
            pinned, done = self._stage(n)
            pinned[:n].copy_(mem[offset + start:offset + start + n], non_blocking=True)
            done.record()
            done.synchronize()
            dst[start:start + n] = pinned.numpy()[:n]

    def _stage(self, n: int):
        """The next pinned staging buffer, once the copy that last used it has finished."""
        torch = self.torch
        if not self._staging:
            self._staging = [[torch.empty(STAGING_CHUNK, dtype=torch.uint8, pin_memory=True), torch.cuda.Event()]
                             for _ in range(2)]
        slot = self._staging[self._turn]
        self._turn ^= 1
        slot[1].synchronize()
        return slot[0], slot[1]

    def synchronize(self) -> None:
        """Wait for every kernel queued on this memory's device (a no-op on the CPU)."""
        if self.cuda:
            self.torch.cuda.synchronize(self.device)


__all__ = ["DeviceMemory", "default_device", "interpreting", "torch_dtype", "INSTALL"]
