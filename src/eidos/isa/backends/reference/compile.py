"""Instruction -> closure, once per launch: the reference interpreter's whole dispatch.

Each closure is `step(R, P, L) -> next pc`: R the thread's 256 registers, P its 16 predicates,
L the thread. A negative return stops the thread, with L.state saying why (exit, barrier,
collective) and L.pc where it resumes.
"""

from __future__ import annotations

import functools
import struct

import numpy as np

from eidos.errors import BackendError

from ... import cancel
from ... import instructions as I
from ... import semantics as S
from ...address import CLASS_BYTES, CLASS_MEMORY_BYTES, NUM_CLASSES, PAGE_BYTES, POINTER_SHIFT, Space, Special
from ...codegen.state import AT_BARRIER, AT_COLLECTIVE, EXITED
from ...faults import MAX_CALL_DEPTH, stack_overflow_error, step_limit_error, store_error
from ...memory import PHASE_MODULUS
from ...types import Type

_LOW = (1 << POINTER_SHIFT) - 1
_FORMATS = {Type.F16: "<e", Type.F32: "<f", Type.F64: "<d", Type.I8: "<b", Type.U8: "<B", Type.I16: "<h",
            Type.U16: "<H", Type.I32: "<i", Type.U32: "<I", Type.I64: "<q", Type.U64: "<Q"}


def codec(ty: Type):
    """(size, load(mem, off) -> value, store(mem, off, value)) for one element of ty; no bounds checks."""
    n = ty.size_bytes
    if ty in _FORMATS:
        s = struct.Struct(_FORMATS[ty])
        unpack_from = s.unpack_from
        return n, (lambda mv, off: unpack_from(mv, off)[0]), s.pack_into
    if ty is Type.BF16:
        dt = ty.np_dtype

        def load(mv, off):
            return float(np.frombuffer(mv, dtype=dt, count=1, offset=off)[0])

        def store(mv, off, v):
            mv[off:off + 2] = np.asarray([v], dtype=np.float32).astype(dt).tobytes()
        return n, load, store
    signed = ty.is_signed

    def load(mv, off):
        return int.from_bytes(mv[off:off + n], "little", signed=signed)

    def store(mv, off, v):
        mv[off:off + n] = int(v).to_bytes(n, "little", signed=signed)
    return n, load, store


class Context:
    """What decoding needs: the backend memory, the labels, and where each thread may go."""

    def __init__(self, memory, program, max_steps: int, config) -> None:
        self.memory = memory
        self.config = config
        self.program = program
        self.labels = program.labels
        self.class_mv = memoryview(memory.class_memory)
        self.max_steps = max_steps
        self._views: dict[int, memoryview] = {0: self.class_mv}  # handle -> view; buffers and class memory

    def buffer_view(self, handle: int, what: str) -> memoryview:
        mv = self._views.get(handle)
        if mv is None:
            mv = self._views[handle] = memoryview(self.memory.buffer(handle, what))
        return mv

    def pointer_view(self, ptr: int, what: str):
        """(memory, byte offset) for a register-held global pointer."""
        if type(ptr) is not int or ptr < 0:
            raise BackendError(f"{what}: the address register holds {ptr!r}, not a pointer")
        handle, off = ptr >> POINTER_SHIFT, ptr & _LOW
        if handle == 0:
            return self.class_mv, off
        if handle in self.memory.buffers:  # buffers live through a launch; pools may not (PoolFree)
            return self.buffer_view(handle, what), off
        return memoryview(self.memory.global_memory(handle, what)), off


def _oob(what: str, off: int, n: int, size: int) -> BackendError:
    return BackendError(f"{what}: bytes {off}..{off + n} out of bounds of {size} bytes")


def _fail_closure(err: BackendError):
    def step(R, P, L):
        raise err
    return step


def _memory_access(ins, i: int, ctx: Context, addr, ty: Type, *, load: bool, reg: int):
    """A closure for one load (R[reg] <- mem) or store (mem <- R[reg]) through any address mode."""
    n, ld, st = codec(ty)
    nxt = i + 1
    what = f"instruction {i} ({ins.name})"
    space = addr.space

    def make_const(mv, off):
        if off < 0 or off + n > len(mv):
            return _fail_closure(_oob(what, off, n, len(mv)))
        if load:
            def step(R, P, L):
                R[reg] = ld(mv, off)
                return nxt
        else:
            def step(R, P, L):
                try:
                    st(mv, off, R[reg])
                except (struct.error, OverflowError, TypeError, ValueError) as e:
                    raise store_error(what, R[reg], ty, e) from None
                return nxt
        return step

    if space is Space.BUFFER:
        try:
            return make_const(ctx.buffer_view(addr.handle, what), addr.offset)
        except BackendError as e:
            return _fail_closure(e)
    if space is Space.CLASS:
        return make_const(ctx.class_mv, addr.class_id * CLASS_BYTES + addr.offset)

    # Resolved per access: pools (PoolAlloc/PoolFree may run mid-program), shared, register-indirect.
    if space is Space.POOL:
        pools, handle, const = ctx.memory.pools, addr.handle, addr.offset

        def where(R, L):
            mem = pools.get(handle)
            if mem is None:
                ctx.memory.pool(handle, what)  # raises the precise error
            return memoryview(mem), const
    elif space is Space.SHARED:
        const = addr.offset

        def where(R, L):
            return L.shared, const
    elif isinstance(ins, (I.LDS, I.STS)):
        r = addr.reg.index

        def where(R, L):
            off = R[r]
            if type(off) is not int:
                raise BackendError(f"{what}: the address register holds {off!r}, not a shared offset")
            return L.shared, off
    else:
        r, views = addr.reg.index, ctx._views

        def where(R, L):
            ptr = R[r]
            if type(ptr) is int and ptr >= 0:
                mv = views.get(ptr >> POINTER_SHIFT)
                if mv is not None:
                    return mv, ptr & _LOW
            return ctx.pointer_view(ptr, what)

    if load:
        def step(R, P, L):
            mem, off = where(R, L)
            if off < 0 or off + n > len(mem):
                raise _oob(what, off, n, len(mem))
            R[reg] = ld(mem, off)
            return nxt
    else:
        def step(R, P, L):
            mem, off = where(R, L)
            if off < 0 or off + n > len(mem):
                raise _oob(what, off, n, len(mem))
            try:
                st(mem, off, R[reg])
            except (struct.error, OverflowError, TypeError, ValueError) as e:
                raise store_error(what, R[reg], ty, e) from None
            return nxt
    return step


# ---- the per-class decoders ------------------------------------------------------------------

@functools.singledispatch
def decoder(ins, i: int, ctx: Context):
    """The closure for instruction i; one registered function per instruction class."""
    raise BackendError(f"instruction {i}: the reference backend cannot run {ins.name}")


DECODERS = decoder.registry  # a live, read-only view: instruction class -> its decoding function


def decodes(*classes):
    def reg(fn):
        for c in classes:
            decoder.register(c, fn)
        return fn
    return reg


@decodes(I.LDG, I.LDS)
def _(ins, i, ctx):
    return _memory_access(ins, i, ctx, ins.src, ins.ty, load=True, reg=ins.dst.index)


@decodes(I.STG, I.STS)
def _(ins, i, ctx):
    return _memory_access(ins, i, ctx, ins.dst, ins.ty, load=False, reg=ins.src.index)


@decodes(I.PoolLoad)
def _(ins, i, ctx):
    from ...address import Address
    return _memory_access(ins, i, ctx, Address.pool(ins.pool, ins.offset), ins.ty, load=True, reg=ins.dst.index)


@decodes(I.PoolStore)
def _(ins, i, ctx):
    from ...address import Address
    return _memory_access(ins, i, ctx, Address.pool(ins.pool, ins.offset), ins.ty, load=False, reg=ins.src.index)


@decodes(I.MOV)
def _(ins, i, ctx):
    d, nxt = ins.dst.index, i + 1
    if isinstance(ins.src, Special):
        from .runtime import special_getter
        get, w = special_getter(ins.src, ctx.config), S.wrapper(ins.ty)

        def step(R, P, L):
            R[d] = w(get(L))
            return nxt
        return step
    s = ins.src.index

    def step(R, P, L):
        R[d] = R[s]
        return nxt
    return step


@decodes(I.MOV_IMM)
def _(ins, i, ctx):
    d, v, nxt = ins.dst.index, S.immediate(ins.value, ins.ty), i + 1

    def step(R, P, L):
        R[d] = v
        return nxt
    return step


@decodes(I.CVT)
def _(ins, i, ctx):
    d, s, f, nxt = ins.dst.index, ins.src.index, S.convert(ins.src_ty, ins.dst_ty), i + 1

    def step(R, P, L):
        R[d] = f(R[s])
        return nxt
    return step


def _binary(ins, i, ctx):
    d, a, b, nxt = ins.dst.index, ins.lhs.index, ins.rhs.index, i + 1
    f = S.binary(ins.name, ins.ty)

    def step(R, P, L):
        R[d] = f(R[a], R[b])
        return nxt
    return step


decodes(I.ADD, I.SUB, I.MUL, I.DIV, I.REM, I.MIN, I.MAX, I.AND, I.OR, I.XOR)(_binary)


@decodes(I.SHL, I.SHR)
def _(ins, i, ctx):
    d, a, b, nxt = ins.dst.index, ins.src.index, ins.amount.index, i + 1
    f = S.binary(ins.name, ins.ty)

    def step(R, P, L):
        R[d] = f(R[a], R[b])
        return nxt
    return step


def _unary(ins, i, ctx):
    d, s, nxt = ins.dst.index, ins.src.index, i + 1
    f = S.unary(ins.name, ins.ty)

    def step(R, P, L):
        R[d] = f(R[s])
        return nxt
    return step


decodes(I.ABS, I.NEG, I.NOT, I.EXP, I.LOG, I.SQRT, I.SIN, I.COS, I.TAN, I.TANH, I.SIGMOID, I.RCP, I.RSQRT,
        I.SIGN, I.FLOOR, I.CEIL, I.ROUND, I.TRUNC, I.GELU, I.SWISH, I.ClsGet, I.MIRROR, I.BoundMap)(_unary)


@decodes(I.FMA, I.FMS, I.MAD, I.CLAMP, I.LERP)
def _(ins, i, ctx):
    ops = {I.CLAMP: ("src", "min", "max"), I.LERP: ("a", "b", "t")}.get(type(ins), ("a", "b", "c"))
    d, (a, b, c), nxt = ins.dst.index, (getattr(ins, o).index for o in ops), i + 1
    f = S.ternary(ins.name, ins.ty)

    def step(R, P, L):
        R[d] = f(R[a], R[b], R[c])
        return nxt
    return step


@decodes(I.SETcc)
def _(ins, i, ctx):
    p, a, b, f, nxt = ins.pred.index, ins.lhs.index, ins.rhs.index, S.compare(ins.cond), i + 1

    def step(R, P, L):
        P[p] = f(R[a], R[b])
        return nxt
    return step


@decodes(I.SEL)
def _(ins, i, ctx):
    d, p, t, f, nxt = ins.dst.index, ins.pred.index, ins.true_val.index, ins.false_val.index, i + 1

    def step(R, P, L):
        R[d] = R[t] if P[p] else R[f]
        return nxt
    return step


SLICE = 4096   # backward jumps between two looks at whether the run was cancelled


def _jump_back(L, i: int) -> None:
    """Count a backward jump; past the budget the thread is taken to be in an endless loop."""
    L.budget -= 1
    if L.budget < 0:
        _slice_spent(L, i)


def _slice_spent(L, i: int) -> None:
    """A thread spends its step budget in slices (runtime.SLICE backward jumps): between two, its run
    may be cancelled (eidos.isa.cancel); when none is left, it is taken to be in an endless loop."""
    cancel.check("the program")
    if L.left <= 0:
        raise step_limit_error(i)
    L.budget = min(L.left, SLICE) - 1
    L.left -= L.budget + 1


@decodes(I.BRA)
def _(ins, i, ctx):
    t, nxt = ctx.labels[ins.target.name], i + 1
    back = t <= i
    if ins.pred is None:
        if not back:
            return lambda R, P, L: t

        def step(R, P, L):
            _jump_back(L, i)
            return t
        return step
    p = ins.pred.index
    if not back:
        return lambda R, P, L: t if P[p] else nxt

    def step(R, P, L):
        if P[p]:
            _jump_back(L, i)
            return t
        return nxt
    return step


@decodes(I.CALL)
def _(ins, i, ctx):
    t, nxt = ctx.labels[ins.target.name], i + 1

    def step(R, P, L):
        if len(L.stack) >= MAX_CALL_DEPTH:
            raise stack_overflow_error(i)
        _jump_back(L, i)
        L.stack.append(nxt)
        return t
    return step


@decodes(I.RET)
def _(ins, i, ctx):
    def step(R, P, L):
        if L.stack:
            return L.stack.pop()
        L.state = EXITED
        return -1
    return step


@decodes(I.LOOP)
def _(ins, i, ctx):
    c, n, t, nxt = ins.counter.index, ins.iterations, ctx.labels[ins.target.name], i + 1
    w, top = S.wrapper(Type.I64), Type.I64.max_value

    def step(R, P, L):  # the hottest back edge: the budget check is inlined
        v = R[c] + 1
        R[c] = v = v if v <= top else w(v)
        if v < n:
            L.budget -= 1
            if L.budget < 0:
                _slice_spent(L, i)
            return t
        return nxt
    return step


@decodes(I.EXIT)
def _(ins, i, ctx):
    def step(R, P, L):
        L.state = EXITED
        return -1
    return step


@decodes(I.BarSync)
def _(ins, i, ctx):
    bid, nxt = ins.id, i + 1

    def step(R, P, L):
        L.state, L.wait, L.pc = AT_BARRIER, bid, nxt
        return -1
    return step


@decodes(I.MemFence)
def _(ins, i, ctx):
    nxt = i + 1
    return lambda R, P, L: nxt


def collective(ins, i, ctx):
    def step(R, P, L):
        L.state, L.pc = AT_COLLECTIVE, i
        return -1
    return step


# ---- Atlas-specific --------------------------------------------------------------------------

@decodes(I.UnityTest)
def _(ins, i, ctx):
    p, s, nxt = ins.pred.index, ins.src.index, i + 1

    def step(R, P, L):
        P[p] = (R[s] % NUM_CLASSES) in (0, 7)
        return nxt
    return step


def neighbour(addr: int, offset: int, size: int, what: str) -> int:
    """The class-memory address `offset` elements from `addr` along its 256-byte page row (wrapping)."""
    if not 0 <= addr <= CLASS_MEMORY_BYTES - size:
        raise BackendError(f"{what}: class-memory address {addr} out of range 0..{CLASS_MEMORY_BYTES - size}")
    if addr % size:
        raise BackendError(f"{what}: class-memory address {addr} is not aligned to {size} bytes")
    col = addr % PAGE_BYTES
    return addr - col + (col + offset * size) % PAGE_BYTES


@decodes(I.NBRLoad)
def _(ins, i, ctx):
    d, s, k, nxt = ins.dst.index, ins.src.index, ins.offset, i + 1
    n, ld, _st = codec(ins.ty)
    mv, what = ctx.class_mv, f"instruction {i} (NBRLoad)"

    def step(R, P, L):
        R[d] = ld(mv, neighbour(R[s], k, n, what))
        return nxt
    return step


@decodes(I.NBRStore)
def _(ins, i, ctx):
    d, s, k, nxt, ty = ins.dst.index, ins.src.index, ins.offset, i + 1, ins.ty
    n, _ld, st = codec(ty)
    mv, what = ctx.class_mv, f"instruction {i} (NBRStore)"

    def step(R, P, L):
        try:
            st(mv, neighbour(R[d], k, n, what), R[s])
        except (struct.error, OverflowError, TypeError, ValueError) as e:
            raise store_error(what, R[s], ty, e) from None
        return nxt
    return step


@decodes(I.ResAccum)
def _(ins, i, ctx):
    d, s, c, nxt = ins.dst.index, ins.src.index, ins.class_id, i + 1
    acc, back, to64 = ctx.memory.accumulators, S.convert(Type.F64, ins.ty), S.convert(ins.ty, Type.F64)

    def step(R, P, L):
        v = acc[c] = float(acc[c]) + to64(R[s])
        R[d] = back(v)
        return nxt
    return step


@decodes(I.PhaseRead)
def _(ins, i, ctx):
    d, c, w, nxt, ph = ins.dst.index, ins.class_id, S.wrapper(ins.ty), i + 1, ctx.memory.phases

    def step(R, P, L):
        R[d] = w(int(ph[c]))
        return nxt
    return step


@decodes(I.PhaseWrite)
def _(ins, i, ctx):
    s, c, nxt, ph = ins.src.index, ins.class_id, i + 1, ctx.memory.phases

    def step(R, P, L):
        ph[c] = R[s] % PHASE_MODULUS
        return nxt
    return step


def decode(program, ctx: Context) -> list:
    """One closure per instruction, plus a final EXIT for falling off the end."""
    code = []
    for i, ins in enumerate(program.instructions):
        code.append(collective(ins, i, ctx) if ins.collective else decoder(ins, i, ctx))
    code.append(decoder(I.EXIT(), len(code), ctx))
    return code
