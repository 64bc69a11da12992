"""Operands: registers, predicates, labels, the special lane values, and memory addresses."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

NUM_REGISTERS = 256
NUM_PREDICATES = 16
NUM_CLASSES = 96
PAGES_PER_CLASS = 48
PAGE_BYTES = 256
CLASS_BYTES = PAGES_PER_CLASS * PAGE_BYTES  # 12,288
CLASS_MEMORY_BYTES = NUM_CLASSES * CLASS_BYTES  # 1,179,648
POINTER_SHIFT = 32  # a register-held global pointer is (handle << 32) | byte offset


@dataclass(frozen=True, slots=True)
class Register:
    """A general register r0..r255 of a lane. Range is checked by Program.validate()."""

    index: int

    def __str__(self) -> str:
        return f"r{self.index}"


@dataclass(frozen=True, slots=True)
class Predicate:
    """A one-bit predicate register p0..p15 of a lane, written by SETcc and UnityTest."""

    index: int

    def __str__(self) -> str:
        return f"p{self.index}"


@dataclass(frozen=True, slots=True)
class Label:
    """A named position in a program; ProgramBuilder.label() binds it to the next instruction."""

    name: str

    def __str__(self) -> str:
        return f"@{self.name}"


class Special(enum.Enum):
    """Read-only per-lane values, read with MOV(dst, src=Special.X, ty=<integer type>).

    Lanes are numbered x fastest: thread_index = tx + bx*(ty + by*tz) within a block,
    block_index likewise within the grid, global_id = block_index * block_threads + thread_index.
    """

    GLOBAL_ID = "global_id"
    THREAD_INDEX = "thread_index"
    BLOCK_INDEX = "block_index"
    LANE_COUNT = "lane_count"
    BLOCK_THREADS = "block_threads"
    THREAD_X = "thread_x"
    THREAD_Y = "thread_y"
    THREAD_Z = "thread_z"
    BLOCK_X = "block_x"
    BLOCK_Y = "block_y"
    BLOCK_Z = "block_z"
    BLOCK_DIM_X = "block_dim_x"
    BLOCK_DIM_Y = "block_dim_y"
    BLOCK_DIM_Z = "block_dim_z"
    GRID_DIM_X = "grid_dim_x"
    GRID_DIM_Y = "grid_dim_y"
    GRID_DIM_Z = "grid_dim_z"

    def __str__(self) -> str:
        return f"%{self.value}"


class Space(enum.Enum):
    """Where an Address points."""

    BUFFER = "buffer"
    POOL = "pool"
    SHARED = "shared"
    CLASS = "class"
    REGISTER = "register"


@dataclass(frozen=True, slots=True)
class Address:
    """A memory operand. Build with the constructors, not directly.

    buffer(h, off) and pool(h, off) are global memory; shared(off) is the block's shared
    memory; cls(c, off) is byte `off` of class c in class memory (96 x 12,288 bytes);
    register(r) reads the address from r at run time: for LDG/STG and array instructions
    r holds a global pointer (see pointer()), for LDS/STS a shared byte offset.

    reinterpret=True (buffers only) marks an access that reads or writes a typed buffer's bytes
    as another type on purpose; it takes no part in equality, so it never changes what two
    addresses name.
    """

    space: Space
    handle: int = 0
    offset: int = 0
    reg: Register | None = None
    reinterpret: bool = field(default=False, compare=False)

    @classmethod
    def buffer(cls, handle: int, offset: int = 0, *, reinterpret: bool = False) -> Address:
        return cls(Space.BUFFER, int(handle), int(offset), None, bool(reinterpret))

    @classmethod
    def pool(cls, handle: int, offset: int = 0) -> Address:
        return cls(Space.POOL, int(handle), int(offset))

    @classmethod
    def shared(cls, offset: int = 0) -> Address:
        return cls(Space.SHARED, 0, int(offset))

    @classmethod
    def cls(cls, class_id: int, offset: int = 0) -> Address:
        return cls(Space.CLASS, int(class_id), int(offset))

    @classmethod
    def register(cls, reg: Register | int) -> Address:
        return cls(Space.REGISTER, 0, 0, reg if isinstance(reg, Register) else Register(int(reg)))

    @property
    def class_id(self) -> int:
        return self.handle

    def __str__(self) -> str:
        if self.space is Space.REGISTER:
            return f"[{self.reg}]"
        if self.space is Space.SHARED:
            return f"[shared+{self.offset}]"
        name = {Space.BUFFER: "buf", Space.POOL: "pool", Space.CLASS: "cls"}[self.space]
        return f"[{name}{self.handle}+{self.offset}{' reinterpret' if self.reinterpret else ''}]"


def pointer(handle: int, offset: int = 0) -> int:
    """The global pointer value a register holds for Address.register(): (handle << 32) | offset.

    Handles are global across buffers, pools and class memory (CLASS_MEMORY_HANDLE), so one
    pointer names its memory unambiguously.
    """
    return (int(handle) << POINTER_SHIFT) | int(offset)


CLASS_MEMORY_HANDLE = 0  # pointer(0, off) addresses class memory byte `off`; real handles start at 1
