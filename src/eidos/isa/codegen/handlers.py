"""The handler table: one function per instruction group, writing it through the Emitter protocol.

Every compiled target runs the same table, so an instruction's decomposition (operand order, which
steps round, how a floor modulo or a LERP is built) is written once; a target differs only in its
primitives (emitter.py). `emit_block` walks one basic block through the table.
"""

from __future__ import annotations

from .. import instructions as I
from .. import semantics as S
from ..address import CLASS_BYTES, CLASS_MEMORY_BYTES, NUM_CLASSES, Address, Register, Space, Special
from ..memory import PHASE_MODULUS
from ..types import Type
from .blocks import CONTROL
from .emitter import Emitter, s64, wrap

HANDLERS: dict[type, object] = {}
STATIC = (Space.BUFFER, Space.POOL, Space.CLASS, Space.SHARED)  # the same address in every thread of a block


def handles(*classes):
    def reg(fn):
        for c in classes:
            HANDLERS[c] = fn
        return fn
    return reg


def emit_block(g: Emitter, start: int, stop: int) -> bool:
    """Instructions start..stop-1 through the table, up to the first that ends the block (a control
    transfer, BarSync or collective); True when one did."""
    instructions = g.program.instructions
    for i in range(start, stop):
        ins = instructions[i]
        if ins.collective:
            collective(g, ins, i)
            return True
        handler = HANDLERS.get(type(ins))
        if handler is None:
            raise g.Unsupported(f"no emitter for {ins.name}")
        handler(g, ins, i)
        if isinstance(ins, CONTROL):
            return True
    return False


def collective(g: Emitter, ins, i: int) -> None:
    """Every register a collective reads or writes gets both views, for the host's code between rounds."""
    for r in ins.registers_read() + ins.registers_written():
        if isinstance(r, Register):
            g.i(r), g.f(r)
    g.wait_collective(i)


# ---- memory ------------------------------------------------------------------------------------------

@handles(I.LDG, I.LDS)
def _(g: Emitter, ins, i):
    g.load(ins.dst, ins.ty, g.address(ins, i, ins.src, ins.ty.size_bytes))


@handles(I.STG, I.STS)
def _(g: Emitter, ins, i):
    g.store(ins.src, ins.ty, g.address(ins, i, ins.dst, ins.ty.size_bytes), ins.dst.space in STATIC)


@handles(I.PoolLoad)
def _(g: Emitter, ins, i):
    g.load(ins.dst, ins.ty, g.address(ins, i, Address.pool(ins.pool, ins.offset), ins.ty.size_bytes))


@handles(I.PoolStore)
def _(g: Emitter, ins, i):
    g.store(ins.src, ins.ty, g.address(ins, i, Address.pool(ins.pool, ins.offset), ins.ty.size_bytes), True)


@handles(I.NBRLoad)
def _(g: Emitter, ins, i):
    g.load(ins.dst, ins.ty, g.neighbour(ins, i, ins.src))


@handles(I.NBRStore)
def _(g: Emitter, ins, i):
    g.store(ins.src, ins.ty, g.neighbour(ins, i, ins.dst), False)


# ---- moves and conversions -----------------------------------------------------------------------------

@handles(I.MOV)
def _(g: Emitter, ins, i):
    if isinstance(ins.src, Special):
        g.specials.add(ins.src)
        g.set(g.i(ins.dst), wrap(ins.ty, g.special(ins.src)))
    else:
        g.move(ins.dst, ins.src, ins.ty)


@handles(I.MOV_IMM)
def _(g: Emitter, ins, i):
    v = S.immediate(ins.value, ins.ty)
    if ins.ty.is_float:
        g.set(g.f(ins.dst), g.float_const(v))
    else:
        g.set(g.i(ins.dst), g.int_const(s64(v)))


@handles(I.CVT)
def _(g: Emitter, ins, i):
    s, d = ins.src_ty, ins.dst_ty
    if s.is_integer and d.is_integer:
        g.set(g.i(ins.dst), wrap(d, g.i(ins.src)))
    elif s.is_float and d.is_float:
        g.set(g.f(ins.dst), g.rnd(d, g.f(ins.src)))
    elif s.is_integer:
        g.set(g.f(ins.dst), g.int_to_float(s, d, g.i(ins.src)))
    else:
        g.set(g.i(ins.dst), g.float_to_int(d, g.f(ins.src)))


@handles(I.SEL)
def _(g: Emitter, ins, i):
    g.select(ins.dst, g.p(ins.pred), ins.true_val, ins.false_val, ins.ty)


# ---- arithmetic ----------------------------------------------------------------------------------------

_SYMBOL = {"ADD": "+", "SUB": "-", "MUL": "*", "AND": "&", "OR": "|", "XOR": "^"}


def int_binary(g: Emitter, op: str, ty: Type, a: str, b: str) -> str:
    """A binary integer instruction's result: wrapped to ty; DIV/REM truncating, x/0 = -1, x%0 = x."""
    u64 = ty is Type.U64
    if op in _SYMBOL:
        return wrap(ty, f"{a} {_SYMBOL[op]} {b}")
    if op in ("DIV", "REM"):
        name = op.lower()
        return f"{g.rt(f'u{name}64')}({a}, {b})" if u64 else wrap(ty, f"{g.rt(f's{name}')}({a}, {b})")
    if op in ("MIN", "MAX"):
        return g.where(g.lt(ty, a, b) if op == "MIN" else g.lt(ty, b, a), a, b)
    if op == "SHL":
        return wrap(ty, f"{a} << ({g.shift(ty, b)})")
    if op == "SHR":
        return g.shr_u64(a, g.shift(ty, b)) if u64 else f"({a} >> ({g.shift(ty, b)}))"
    raise KeyError(op)


_FLOAT_BINARY = {"ADD": "{a} + {b}", "SUB": "{a} - {b}", "MUL": "{a} * {b}", "DIV": "{a} / {b}"}


@handles(I.ADD, I.SUB, I.MUL, I.DIV, I.REM, I.MIN, I.MAX, I.AND, I.OR, I.XOR)
def _(g: Emitter, ins, i):
    op, ty = ins.name, ins.ty
    if ty.is_float:
        a, b = g.f(ins.lhs), g.f(ins.rhs)
        if op in ("MIN", "MAX", "REM"):
            e = f"{g.rt('f' + op.lower())}({a}, {b})"
            e = e if op != "REM" else g.rnd(ty, e)
        else:
            e = g.rnd(ty, _FLOAT_BINARY[op].format(a=a, b=b))
        g.set(g.f(ins.dst), e)
    else:
        g.set(g.i(ins.dst), int_binary(g, op, ty, g.i(ins.lhs), g.i(ins.rhs)))


@handles(I.SHL, I.SHR)
def _(g: Emitter, ins, i):
    g.set(g.i(ins.dst), int_binary(g, ins.name, ins.ty, g.i(ins.src), g.i(ins.amount)))


@handles(I.ABS, I.NEG, I.NOT, I.EXP, I.LOG, I.SQRT, I.SIN, I.COS, I.TAN, I.TANH, I.SIGMOID, I.RCP, I.RSQRT,
         I.SIGN, I.FLOOR, I.CEIL, I.ROUND, I.TRUNC, I.GELU, I.SWISH)
def _(g: Emitter, ins, i):
    op, ty = ins.name, ins.ty
    if ty.is_float:
        x = g.f(ins.src)
        fixed = {"ABS": g.fabs, "NEG": g.fneg, "SIGN": g.fsign}.get(op)
        g.set(g.f(ins.dst), fixed(x) if fixed is not None else g.float_fun(op, ty, x))
        return
    x = g.i(ins.src)
    if op == "ABS":
        e = x if ty.is_unsigned else wrap(ty, g.iabs(x))
    elif op == "NEG":
        e = wrap(ty, g.ineg(x))
    elif op == "NOT":
        e = wrap(ty, f"~{x}")
    elif op == "SIGN":
        e = g.as_int(f"{x} != 0") if ty.is_unsigned else f"{g.as_int(f'{x} > 0')} - {g.as_int(f'{x} < 0')}"
    else:
        raise g.Unsupported(f"{op} on {ty.name}")
    g.set(g.i(ins.dst), e)


_OPERANDS = {I.CLAMP: ("src", "min", "max"), I.LERP: ("a", "b", "t")}


@handles(I.FMA, I.FMS, I.MAD, I.CLAMP, I.LERP)
def _(g: Emitter, ins, i):
    names = _OPERANDS.get(type(ins), ("a", "b", "c"))
    op, ty = ins.name, ins.ty
    if ty.is_integer:
        a, b, c = (g.i(getattr(ins, o)) for o in names)
        d = g.i(ins.dst)
        if op in ("FMA", "MAD"):
            e = wrap(ty, f"{a} * {b} + {c}")
        elif op == "FMS":
            e = wrap(ty, f"{a} * {b} - {c}")
        else:  # CLAMP
            e = g.int_clamp(ty, a, b, c)
        g.set(d, e)
        return
    a, b, c = (g.f(getattr(ins, o)) for o in names)
    d = g.f(ins.dst)
    if op in ("FMA", "FMS"):
        cc = c if op == "FMA" else g.fneg(c)
        e = (f"{g.rt('fma64')}({a}, {b}, {cc})" if ty is Type.F64
             else g.rnd(ty, f"{g.rt('fma_narrow')}({a}, {b}, {cc})"))
    elif op == "MAD":
        e = g.rnd(ty, g.rnd(ty, f"{a} * {b}") + f" + {c}")
    elif op == "CLAMP":
        e = f"{g.rt('fmin')}({g.rt('fmax')}({a}, {b}), {c})"
    else:  # LERP
        e = g.rnd(ty, f"{a} + " + g.rnd(ty, g.rnd(ty, f"{b} - {a}") + f" * {c}"))
    g.set(d, e)


_CMP = {I.Condition.EQ: "==", I.Condition.NE: "!=", I.Condition.LT: "<", I.Condition.LE: "<=",
        I.Condition.GT: ">", I.Condition.GE: ">="}


@handles(I.SETcc)
def _(g: Emitter, ins, i):
    ty = ins.ty
    a, b = g.reg(ins.lhs, ty), g.reg(ins.rhs, ty)
    if ty is Type.U64 and ins.cond not in (I.Condition.EQ, I.Condition.NE):
        a, b = g.u64(a), g.u64(b)
    g.set(g.p(ins.pred), f"({a} {_CMP[ins.cond]} {b})")


# ---- control -------------------------------------------------------------------------------------------

@handles(I.BRA)
def _(g: Emitter, ins, i):
    t = g.program.labels[ins.target.name]
    g.jump(None if ins.pred is None else g.p(ins.pred), t, i, back=t <= i)


@handles(I.LOOP)
def _(g: Emitter, ins, i):
    c = g.i(ins.counter)
    g.set(c, f"{c} + 1")
    g.jump(f"{c} < {ins.iterations}", g.program.labels[ins.target.name], i, back=True)


@handles(I.CALL)
def _(g: Emitter, ins, i):
    g.uses_call = True
    g.call(i, g.program.labels[ins.target.name])


@handles(I.RET)
def _(g: Emitter, ins, i):
    g.uses_call = True
    g.ret()


@handles(I.EXIT)
def _(g: Emitter, ins, i):
    g.exit()


@handles(I.BarSync)
def _(g: Emitter, ins, i):
    g.barrier(i, int(ins.id))


@handles(I.MemFence)
def _(g: Emitter, ins, i):
    g.emit("pass")


# ---- class memory --------------------------------------------------------------------------------------

@handles(I.ClsGet)
def _(g: Emitter, ins, i):
    g.set(g.i(ins.dst), wrap(ins.ty, g.mod(ins.ty, g.i(ins.src), CLASS_MEMORY_BYTES) + f" // {CLASS_BYTES}"))


@handles(I.MIRROR)
def _(g: Emitter, ins, i):
    g.set(g.i(ins.dst), wrap(ins.ty, g.mod(ins.ty, g.i(ins.src), NUM_CLASSES) + " ^ 7"))


@handles(I.UnityTest)
def _(g: Emitter, ins, i):
    g.emit(f"tt = {g.mod(ins.ty, g.i(ins.src), NUM_CLASSES)}")
    g.set(g.p(ins.pred), g.bool_or("tt == 0", "tt == 7"))


@handles(I.BoundMap)
def _(g: Emitter, ins, i):
    g.set(g.i(ins.dst), wrap(ins.ty, g.mod(ins.ty, g.i(ins.src), CLASS_MEMORY_BYTES)))


@handles(I.ResAccum)
def _(g: Emitter, ins, i):
    ty = ins.ty
    v = g.f(ins.src) if ty.is_float else g.int_to_float(ty, Type.F64, g.i(ins.src))
    total = g.accumulate(ins.class_id, v)
    g.set(g.reg(ins.dst, ty), g.rnd(ty, total) if ty.is_float else g.float_to_int(ty, total))


@handles(I.PhaseRead)
def _(g: Emitter, ins, i):
    g.set(g.i(ins.dst), wrap(ins.ty, g.phase(ins.class_id)))


@handles(I.PhaseWrite)
def _(g: Emitter, ins, i):
    g.set_phase(ins.class_id, g.mod(ins.ty, g.i(ins.src), PHASE_MODULUS))


__all__ = ["HANDLERS", "STATIC", "emit_block", "collective", "int_binary", "handles"]
