"""The kernel-target protocol. A target only has to run programs; memory calls live here."""

from __future__ import annotations

import abc

from eidos.errors import BackendError

from .address import CLASS_BYTES, NUM_CLASSES
from .launch import ExecutionParams, LaunchConfig
from .memory import Memory
from .program import Program
from .types import Type


class Target(abc.ABC):
    """Runs Atlas ISA programs. Subclasses implement execute_program_with_params; the buffer,
    pool and class-memory calls are shared (one Memory per backend) so every backend checks
    handles and bounds the same way."""

    name: str = "backend"

    def __init__(self) -> None:
        self.memory = Memory()

    def join(self, group) -> None:
        """Run AllReduce, AllGather, Broadcast and ReduceScatter across `group`'s devices, this backend being
        one rank of it (eidos.isa.distributed); None leaves the group (they raise UnsupportedError again)."""
        self.memory.group = group

    # ---- execution -----------------------------------------------------------------------
    def execute_program(self, program, config: LaunchConfig) -> None:
        if not isinstance(config, LaunchConfig):
            raise BackendError(f"execute_program: config must be a LaunchConfig, got {type(config).__name__}")
        self.execute_program_with_params(program, ExecutionParams(config))

    @abc.abstractmethod
    def execute_program_with_params(self, program, params: ExecutionParams) -> None:
        """Run `program` on params.config's lanes, each starting with params.registers."""

    def check_params(self, params, program=None) -> None:
        """The checks every backend makes before running: `params` (one message), and `program`
        against the typed buffers it names (IsaError where it reads one as another type)."""
        if not isinstance(params, ExecutionParams):
            raise BackendError(f"execute: expected ExecutionParams, got {type(params).__name__}")
        if program is not None and self.memory.types and isinstance(program, Program):
            self.memory.check_types(program)

    # ---- buffers ---------------------------------------------------------------------------
    def allocate_buffer(self, size: int, ty: Type | None = None) -> int:
        """A zeroed buffer of `size` bytes: raw bytes, or with `ty` a typed buffer that programs
        must read as ty (docs/isa.md, Typed buffers)."""
        return self.memory.allocate_buffer(size, ty)

    def allocate_typed(self, count: int, ty: Type) -> int:
        """A zeroed buffer of `count` elements of `ty`."""
        if not isinstance(ty, Type):
            raise BackendError(f"allocate_typed: ty must be an eidos.isa.Type, got {ty!r}")
        return self.memory.allocate_buffer(Memory._size(count, "allocate_typed") * ty.size_bytes, ty)

    def buffer_type(self, handle: int) -> Type | None:
        """The element type a buffer was allocated with; None for a raw buffer."""
        return self.memory.buffer_type(handle)

    def buffer_length(self, handle: int) -> int:
        """Elements in a typed buffer; bytes in a raw one."""
        ty = self.memory.buffer_type(handle, "buffer_length")
        return len(self.memory.buffer(handle)) // (ty.size_bytes if ty is not None else 1)

    def free_buffer(self, handle: int) -> None:
        self.memory.free_buffer(handle)

    def copy_to_buffer(self, handle: int, data, offset: int = 0) -> None:
        """Copy bytes-like data or an array's bytes into the buffer at `offset`."""
        self.memory.check_host_array(handle, data, f"copy_to_buffer({handle})")
        self.memory.copy_in(self.memory.buffer(handle, "copy_to_buffer"), offset, data, f"copy_to_buffer({handle})")

    def copy_from_buffer(self, handle: int, out, offset: int = 0) -> None:
        """Fill every byte of `out` (bytearray, memoryview, ndarray) from the buffer at `offset`."""
        self.memory.check_host_array(handle, out, f"copy_from_buffer({handle})")
        self.memory.copy_out(self.memory.buffer(handle, "copy_from_buffer"), offset, out, f"copy_from_buffer({handle})")

    def buffer_size(self, handle: int) -> int:
        return len(self.memory.buffer(handle, "buffer_size"))

    # ---- pools -------------------------------------------------------------------------------
    def allocate_pool(self, size: int) -> int:
        return self.memory.allocate_pool(size)

    def free_pool(self, handle: int) -> None:
        self.memory.free_pool(handle)

    def copy_to_pool(self, handle: int, offset: int, data) -> None:
        self.memory.copy_in(self.memory.pool(handle, "copy_to_pool"), offset, data, f"copy_to_pool({handle})")

    def copy_from_pool(self, handle: int, offset: int, out) -> None:
        self.memory.copy_out(self.memory.pool(handle, "copy_from_pool"), offset, out, f"copy_from_pool({handle})")

    def pool_size(self, handle: int) -> int:
        return len(self.memory.pool(handle, "pool_size"))

    # ---- class memory (Atlas) ------------------------------------------------------------
    def _class_offset(self, class_id: int, offset: int, what: str) -> int:
        if not 0 <= class_id < NUM_CLASSES:
            raise BackendError(f"{what}: class {class_id} out of range 0..{NUM_CLASSES - 1}")
        if not 0 <= offset <= CLASS_BYTES:
            raise BackendError(f"{what}: offset {offset} out of range 0..{CLASS_BYTES}")
        return class_id * CLASS_BYTES + offset

    def copy_to_class(self, class_id: int, offset: int, data) -> None:
        """Write class memory from the host; a range may run on into the following classes."""
        self.memory.copy_in(self.memory.class_memory, self._class_offset(class_id, offset, "copy_to_class"), data, "copy_to_class")

    def copy_from_class(self, class_id: int, offset: int, out) -> None:
        self.memory.copy_out(self.memory.class_memory, self._class_offset(class_id, offset, "copy_from_class"), out, "copy_from_class")

    def accumulators(self) -> list[float]:
        """The 96 per-class resonance accumulators (ResAccum)."""
        return [float(x) for x in self.memory.accumulators]

    def phases(self) -> list[int]:
        """The 96 per-class phases (PhaseRead/PhaseWrite), each in 0..767."""
        return [int(x) for x in self.memory.phases]


# The name from the first API (`eidos.isa.Backend`); a kernel target is a Target.
Backend = Target
