"""Data-parallel ISA programs: a large 1-D buffer split over the ranks, each rank running the program on its
part, partial reductions combined by AllReduce, parts gathered by AllGather.

`Split` is the buffer: rank r keeps its part in a buffer of its own target between calls (on its GPU with
NCCL ranks), so a chain of maps and a reduction move no data but the partials.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from eidos.errors import BackendError

from .. import instructions as I
from ..address import Address, Register
from ..builder import ProgramBuilder
from ..launch import LaunchConfig
from ..types import Type

_keys = itertools.count(1)
_POOL = 1 << 30  # the fused map+reduce's scratch pool: far above the handles a target hands out (1, 2, ...)


def parts(n: int, size: int) -> list[int]:
    """Elements per rank: near-equal, the first n % size ranks one more."""
    return [n // size + (r < n % size) for r in range(size)]


@dataclass
class Split:
    """n elements of ty over `ranks` (Ranks, SimulatedRanks or RayRanks): rank r holds counts[r] of them,
    from sum(counts[:r]) on, in a buffer of capacity max(counts) on its target (stored under `key`)."""

    ranks: object
    key: str
    n: int
    ty: Type
    counts: list[int]

    @classmethod
    def scatter(cls, ranks, x, ty: Type | None = None) -> Split:
        """x (1-D, NumPy) cut into the ranks' parts and sent to them."""
        x = np.ascontiguousarray(x).reshape(-1)
        ty = ty or _type_of(x.dtype)
        x = x.astype(ty.np_dtype, copy=False)
        counts = parts(len(x), ranks.size)
        starts = np.cumsum([0, *counts])
        s = cls(ranks, f"split-{next(_keys)}", len(x), ty, counts)
        ranks.run(_place, s.key, ty.name, max(counts), each=[(x[starts[r]:starts[r + 1]],) for r in range(ranks.size)])
        return s

    @classmethod
    def generate(cls, ranks, n: int, ty: Type, fill) -> Split:
        """Each rank makes its own part: fill(start, count) -> NumPy array, called on the rank (no copy
        through the driver)."""
        counts = parts(n, ranks.size)
        starts = np.cumsum([0, *counts])
        s = cls(ranks, f"split-{next(_keys)}", n, ty, counts)
        ranks.run(_make, s.key, ty.name, max(counts), fill, each=[(int(starts[r]), counts[r]) for r in range(ranks.size)])
        return s

    def map(self, *steps) -> Split:
        """Element-wise steps applied in order, into a new Split: a MapOperation, or (BinaryMapOperation,
        scalar) for x op scalar. One program per rank."""
        out = Split(self.ranks, f"split-{next(_keys)}", self.n, self.ty, self.counts)
        self.ranks.run(_program, self.key, out.key, _steps(steps), None, self.ty.name)
        return out

    def reduce(self, operation=I.ReduceOperation.Sum, *steps):
        """The reduction of the (mapped) elements: each rank reduces its part (after `steps`, not kept) and
        the partials are combined by AllReduce in the same program; the value every rank then holds."""
        got = self.ranks.run(_program, self.key, None, _steps(steps), operation, self.ty.name)
        return got[0]

    def sum(self, *steps):
        return self.reduce(I.ReduceOperation.Sum, *steps)

    def gather(self) -> np.ndarray:
        """Every element, in order: the parts meet on every rank by AllGather (padded to the largest part);
        rank 0's copy comes back."""
        width = max(self.counts)
        whole = self.ranks.run(_gather, self.key, self.ty.name, width)[0]
        return np.concatenate([whole[r * width:r * width + c] for r, c in enumerate(self.counts)])

    def free(self) -> None:
        """Release the parts' buffers on the ranks."""
        self.ranks.run(_free, self.key)


def _type_of(dtype) -> Type:
    for ty in (Type.F16, Type.BF16, Type.F32, Type.F64, Type.I8, Type.I16, Type.I32, Type.I64,
               Type.U8, Type.U16, Type.U32, Type.U64):
        if ty.np_dtype == np.dtype(dtype):
            return ty
    raise BackendError(f"Split: no ISA type for NumPy dtype {dtype}")


def _steps(steps) -> tuple:
    out = []
    for st in steps:
        if isinstance(st, I.MapOperation):
            out.append((st, None))
        elif isinstance(st, tuple) and len(st) == 2 and isinstance(st[0], I.BinaryMapOperation):
            out.append(st)
        else:
            raise BackendError(f"Split.map: a step is a MapOperation or (BinaryMapOperation, scalar), got {st!r}")
    return tuple(out)


# ---- on each rank --------------------------------------------------------------------------------

def _alloc(rank, key: str, ty: Type, width: int, count: int) -> int:
    h = rank.target.allocate_typed(max(width, 1), ty)
    rank.store[key] = (h, count)
    return h


def _place(rank, key, ty_name, width, part) -> None:
    ty = Type[ty_name]
    h = _alloc(rank, key, ty, width, len(part))
    if len(part):
        rank.target.copy_to_buffer(h, np.ascontiguousarray(part))


def _make(rank, key, ty_name, width, fill, start, count) -> None:
    _place(rank, key, ty_name, width, np.asarray(fill(start, count), dtype=Type[ty_name].np_dtype))


def _program(rank, key, out_key, steps, operation, ty_name):
    """The rank's program: the steps from its part into out_key's buffer (or a scratch one), then the
    reduction of that into a register, stored into a one-element buffer and combined by AllReduce."""
    ty, t = Type[ty_name], rank.target
    h, count = rank.store[key]
    src = Address.buffer(h)
    if steps and out_key is None and operation is not None:
        return fused_reduce(rank, key, src, count, steps, operation, ty)
    width = t.buffer_length(h)
    b = ProgramBuilder()
    dst = Address.buffer(_alloc(rank, out_key, ty, width, count) if out_key else _scratch(rank, ty, width)) \
        if steps else src
    for j, (op, scalar) in enumerate(steps):
        a = src if j == 0 else dst
        if scalar is None:
            b.add(I.ParallelMap(dst, a, count, op, ty))
        else:
            b.add(I.MOV_IMM(Register(1), scalar, ty))
            b.add(I.ParallelMapBinary(dst, a, Register(1), count, op, ty))
    if operation is None:
        t.execute_program(b.build(), LaunchConfig.linear(1))
        return None
    b.add(I.ParallelReduce(Register(0), dst, count, operation, ty))
    return _combine(rank, b, operation, ty)


def fused_reduce(rank, key, src: Address, count: int, steps, operation, ty: Type):
    """Mapped values nobody keeps: one FusedMap into a pool freed after the reduction, which the
    backends run as one pass that stores nothing (the tensor layer's map+sum), not a pass per step.
    The program and its partial's buffer are kept per (part, steps, operation) until the part is
    freed: a repeated reduction allocates nothing and hits the target's plan (and kernel bindings)."""
    t = rank.target
    memo = ("fused", key, steps, operation, ty)
    hit = rank.store.get(memo)
    if hit is None:
        b = ProgramBuilder()
        pool = Address.pool(_POOL)
        fused = []
        for j, (op, scalar) in enumerate(steps):
            a = src if j == 0 else pool
            if scalar is None:
                fused.append(I.MapStep(pool, op, a))
            else:
                b.add(I.MOV_IMM(Register(1 + j), scalar, ty))
                fused.append(I.MapStep(pool, op, a, Register(1 + j)))
        partial = t.allocate_typed(1, ty)
        b.add(I.PoolAlloc(_POOL, ty.size_bytes * max(count, 1)), I.FusedMap(count, tuple(fused), ty),
              I.ParallelReduce(Register(0), pool, count, operation, ty), I.PoolFree(_POOL),
              I.STG(Address.buffer(partial), Register(0), ty), I.AllReduce(Address.buffer(partial), 1, operation, ty=ty))
        hit = rank.store[memo] = (b.build(), partial)
    program, partial = hit
    t.execute_program(program, LaunchConfig.linear(1))
    out = np.empty(1, ty.np_dtype)
    t.copy_from_buffer(partial, out)
    return out[0]


def _combine(rank, b: ProgramBuilder, operation, ty: Type):
    """Register 0's partial stored and combined across the ranks by AllReduce; the value returned."""
    t = rank.target
    partial = t.allocate_typed(1, ty)
    b.add(I.STG(Address.buffer(partial), Register(0), ty))
    b.add(I.AllReduce(Address.buffer(partial), 1, operation, ty=ty))
    t.execute_program(b.build(), LaunchConfig.linear(1))
    out = np.empty(1, ty.np_dtype)
    t.copy_from_buffer(partial, out)
    t.free_buffer(partial)
    return out[0]


def _scratch(rank, ty: Type, width: int) -> int:
    """A buffer for mapped values nobody keeps, made once per type and width and reused."""
    key = ("scratch", ty, width)
    if key not in rank.store:
        rank.store[key] = (rank.target.allocate_typed(max(width, 1), ty), width)
    return rank.store[key][0]


def _gather(rank, key, ty_name, width):
    ty, t = Type[ty_name], rank.target
    h, _ = rank.store[key]
    whole = t.allocate_typed(max(width * rank.size, 1), ty)
    prog = ProgramBuilder().add(I.AllGather(Address.buffer(whole), Address.buffer(h), width, ty=ty)).build()
    t.execute_program(prog, LaunchConfig.linear(1))
    out = np.empty(width * rank.size, ty.np_dtype)
    if len(out):
        t.copy_from_buffer(whole, out)
    t.free_buffer(whole)
    return out if rank.rank == 0 else None


def _free(rank, key) -> None:
    h, _ = rank.store.pop(key)
    rank.target.free_buffer(h)
    forget(rank, key)


def forget(rank, key) -> None:
    """Free the programs and partial buffers fused_reduce kept for the part under key."""
    for memo in [m for m in rank.store if isinstance(m, tuple) and m[:2] == ("fused", key)]:
        rank.target.free_buffer(rank.store.pop(memo)[1])
