"""The kernel target the lane runs its ISA programs on, and columns as torch tensors on its device.

On a GPU the target is `eidos.isa.backends.triton.TritonBackend`: a column is a torch tensor on the
CUDA device, adopted as an ISA buffer without a copy. `EIDOS_TRITON_KERNELS=reference` (or `cpu`)
runs the same programs on that ISA backend instead, with the columns as CPU tensors sharing the
backend's buffers: the lowering is backend-independent, and tests check it on the reference
interpreter. Nothing falls back silently: an unavailable target is BackendUnavailable naming why.
"""

from __future__ import annotations

import os

from eidos.errors import BackendUnavailable
from eidos.isa import ExecutionParams, LaunchConfig, registry

KERNELS_ENV = "EIDOS_TRITON_KERNELS"
INSTALL = "pip install 'eidos[gpu]'"
BLOCK = 256   # rows are padded to a multiple of this, so every launch is whole blocks
STAGING = True   # columns to and from a CUDA device through pinned memory (Device.to_device, to_host)


def target_name() -> str:
    name = os.environ.get(KERNELS_ENV, "triton").strip() or "triton"
    if name not in registry.names():
        raise BackendUnavailable(f"{KERNELS_ENV}={name!r} names no kernel target; use one of "
                                 f"{', '.join(registry.names())}")
    return name


def target_class(name: str):
    try:
        return registry.target_class(name)
    except BackendUnavailable as e:
        raise BackendUnavailable(f"{e}; {INSTALL}" + (f", or set {KERNELS_ENV}=reference" if name == "triton" else "")) from e


class Device:
    """One run's kernel target: columns as torch tensors it can run programs on."""

    def __init__(self, name: str | None = None, index: int | None = None):
        import torch

        self.torch = torch
        self.name = name or target_name()
        on = {"device": torch.device("cuda", index)} if index is not None and self.name == "triton" else {}
        self.backend = target_class(self.name)(**on)   # index: the GPU of a split part's slice (split.py)
        memory = self.backend.memory
        self.adopts = hasattr(memory, "adopt")
        self.device = memory.device if self.adopts else torch.device("cpu")
        self.handles: list[int] = []
        self.owned: dict[tuple[int, int], int] = {}   # (data_ptr, bytes) of a tensor that is a whole buffer
        self.stream = None                                # staged host-to-device copies (to_device)

    @property
    def staged(self) -> bool:
        """Whether copies between the host and this device go through pinned staging (a CUDA device and
        `STAGING` on: the switch is for the before/after in bench/gpu_staging.py)."""
        return STAGING and self.device.type == "cuda"

    def to_device(self, host, out=None):
        """A host tensor on this device (into `out` where given). Staged: the CPU copies it into pinned
        memory and the copy engine moves it on the run's copy stream, so the CPU's copy of the next
        column and the kernels of this one overlap this transfer; `settle()` makes later kernels wait."""
        torch = self.torch
        if out is None:
            out = torch.empty(host.shape, dtype=host.dtype, device=self.device)
        if not self.staged or host.device.type != "cpu":
            out.copy_(host)
            return out
        pinned = torch.empty(host.shape, dtype=host.dtype, pin_memory=True)
        pinned.copy_(host)
        if self.stream is None:
            self.stream = torch.cuda.Stream(self.device)
        self.stream.wait_stream(torch.cuda.current_stream(self.device))   # out was allocated there
        with torch.cuda.stream(self.stream):
            out.copy_(pinned, non_blocking=True)   # the pinned block is kept until the copy is done
        out.record_stream(self.stream)
        return out

    def settle(self) -> None:
        """The device's current stream waits for every staged copy made so far (no host wait)."""
        if self.stream is not None:
            self.torch.cuda.current_stream(self.device).wait_stream(self.stream)

    def to_host(self, tensors: list) -> list:
        """Device tensors as NumPy arrays: staged, each copied into pinned memory (the bus's speed;
        pageable device-to-host copies ran at a sixth of it) with one wait for all of them; the arrays
        are views of the pinned blocks, which return to torch's pinned cache once the arrays are gone."""
        if not self.staged:
            return [t.cpu().numpy() for t in tensors]
        torch = self.torch
        out = []
        for t in tensors:
            pinned = torch.empty(t.shape, dtype=t.dtype, pin_memory=True)
            pinned.copy_(t, non_blocking=True)
            out.append(pinned)
        torch.cuda.current_stream(self.device).synchronize()
        return [p.numpy() for p in out]

    def rows(self, n: int) -> int:
        """Padded length of a frame of n rows (at least one block)."""
        return max(BLOCK, -(-n // BLOCK) * BLOCK)

    def empty(self, n: int, dtype):
        """A new tensor of n elements and its buffer handle."""
        torch = self.torch
        itemsize = torch.empty((), dtype=dtype).element_size()
        if self.adopts:
            t = torch.empty(n, dtype=dtype, device=self.device)
            return t, self._keep(self.backend.memory.adopt(t))
        h = self._keep(self.backend.allocate_buffer(n * itemsize))
        t = torch.from_numpy(self.backend.memory.buffer(h)).view(dtype)
        self.owned[(t.data_ptr(), n * itemsize)] = h
        return t, h

    def bind(self, tensor) -> int:
        """A buffer handle for a tensor on this device (a copy only where the target cannot adopt it)."""
        if self.adopts:
            return self._keep(self.backend.memory.adopt(tensor.contiguous()))
        whole = self.owned.get((tensor.data_ptr(), tensor.numel() * tensor.element_size()))
        if whole is not None and tensor.is_contiguous():
            return whole
        t, h = self.empty(tensor.numel(), tensor.dtype)
        t.copy_(tensor)
        return h

    def run(self, program, pointers: dict[int, int], rows: int) -> None:
        """Run a lane-form program on `rows` lanes with the pointer registers set to the buffers."""
        from eidos.isa import pointer

        registers = {reg: pointer(h, 0) for reg, h in pointers.items()}
        self.backend.execute_program_with_params(program, ExecutionParams(LaunchConfig.linear(rows), registers))

    def _keep(self, h: int) -> int:
        self.handles.append(h)
        return h

    def release(self) -> None:
        """Free every buffer this run made (adopted tensors stay with their owners)."""
        for h in self.handles:
            self.backend.free_buffer(h)
        self.handles.clear()
        self.owned.clear()
