"""Program -> Python source of numba functions -> native code, cached in memory and on disk.

The program is cut into basic blocks; a lane runs a dispatch loop over block ids (`pc`), each
block straight-line numba code on locals: ISA register r is two locals, i<r> (int64; U64 as its
bit pattern) and f<r> (float64), predicate p is p<k>. LLVM keeps them in machine registers.

Two shapes of generated code (docs/isa.md's scheduling, reproduced exactly):
- lanes: no BarSync, no collective, no shared memory. One function runs every lane start to
  end: `run_seq` (lane order, as the reference) or `run_par` (prange over lanes) when the
  launch's memory accesses provably never touch another lane's bytes (hazards.py).
- rounds: barriers, shared memory or collectives. Registers live in per-lane rows between
  suspensions; each round runs every runnable block's lanes, in order, until each exits, waits
  at a barrier or reaches a collective (lockstep phases split at barriers); a block whose lanes
  all wait at one barrier runs again; when none can, Python runs the collective once for the
  grid (or reports the divergence) and resumes. `rounds_par` runs blocks in parallel when the
  launch is hazard-free across lanes.

Memory is addressed by raw byte address (base pointer + offset, unaligned loads and stores);
every access is bounds-checked, and a failing one records (code, instruction, lane, operand)
in `err` so Python re-raises the reference backend's exact BackendError.
"""

from __future__ import annotations

import hashlib
import importlib.util
import math
import os
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

from ... import instructions as I
from ...address import CLASS_BYTES, CLASS_MEMORY_BYTES, NUM_CLASSES, PAGE_BYTES, Register, Space, Special
from ...instructions import Instruction
from ...memory import PHASE_MODULUS
from ...types import Type

EXITED, RUNNING, AT_BARRIER, AT_COLLECTIVE, FAILED = 0, 1, 2, 3, 4
E_MEMORY, E_BUDGET, E_STACK, E_NEIGHBOUR = 1, 2, 3, 4
MAX_CALL_DEPTH = 1024  # as the reference interpreter

_HERE = Path(__file__).parent
# Generated modules name the code that generated them, so a changed generator never loads stale code.
GENERATOR_VERSION = hashlib.blake2b(b"".join((_HERE / f).read_bytes() for f in ("compile.py", "runtime.py")),
                                    digest_size=6).hexdigest()

_LOADS = {Type.I8: "ld_i8", Type.U8: "ld_u8", Type.I16: "ld_i16", Type.U16: "ld_u16", Type.I32: "ld_i32",
          Type.U32: "ld_u32", Type.I64: "ld_i64", Type.U64: "ld_i64", Type.F32: "ld_f32", Type.F64: "ld_f64",
          Type.F16: "ld_u16", Type.BF16: "ld_u16"}
_STORES = {Type.I8: "st_i8", Type.U8: "st_i8", Type.I16: "st_i16", Type.U16: "st_i16", Type.I32: "st_i32",
           Type.U32: "st_i32", Type.I64: "st_i64", Type.U64: "st_i64", Type.F32: "st_f32", Type.F64: "st_f64",
           Type.F16: "st_i16", Type.BF16: "st_i16"}
_NP_INT = {8: "np.int8", 16: "np.int16", 32: "np.int32", 64: "np.int64"}
_SPECIAL = {Special.GLOBAL_ID: "g", Special.THREAD_INDEX: "tix", Special.BLOCK_INDEX: "bix",
            Special.LANE_COUNT: "cfg[0]", Special.BLOCK_THREADS: "cfg[1]",
            Special.THREAD_X: "(tix % cfg[2])", Special.THREAD_Y: "((tix // cfg[2]) % cfg[3])",
            Special.THREAD_Z: "(tix // (cfg[2] * cfg[3]))", Special.BLOCK_X: "(bix % cfg[5])",
            Special.BLOCK_Y: "((bix // cfg[5]) % cfg[6])", Special.BLOCK_Z: "(bix // (cfg[5] * cfg[6]))",
            Special.BLOCK_DIM_X: "cfg[2]", Special.BLOCK_DIM_Y: "cfg[3]", Special.BLOCK_DIM_Z: "cfg[4]",
            Special.GRID_DIM_X: "cfg[5]", Special.GRID_DIM_Y: "cfg[6]", Special.GRID_DIM_Z: "cfg[7]"}


class NotCompilable(Exception):
    """The program needs the exact (interpreted) path; the message says why."""


# ---- what a program needs, decided before generating anything -------------------------------

def extended_type(program) -> tuple[int, Type] | None:
    """(index, type) of the first instruction using an integer type wider than 64 bits."""
    for i, ins in enumerate(program.instructions):
        for name in ("ty", "src_ty", "dst_ty"):
            t = getattr(ins, name, None)
            if isinstance(t, Type) and t.is_extended:
                return i, t
    return None


def shape_of(program) -> str:
    """'array' (collectives only, no per-lane operand: none writes a register or addresses memory through one;
    scalar operands are read from the launch's starting registers), 'lanes' or 'rounds' (see the module doc)."""
    ins = program.instructions
    if program.entry == 0 and ins and all(
            x.collective and not x.registers_written() and not any(a.space is Space.REGISTER for _, a in x.addresses())
            for x in ins):
        return "array"
    for x in ins:
        if x.collective or isinstance(x, (I.BarSync, I.LDS, I.STS)):
            return "rounds"
    return "lanes"


@dataclass
class Site:
    """A memory operand with a constant address, resolved by Python at each launch."""
    index: int          # instruction
    space: Space
    handle: int
    offset: int
    size: int


@dataclass
class Blocks:
    starts: list[int]                     # block id -> first instruction
    of: dict[int, int]                    # first instruction -> block id
    end: int                              # block id meaning "fell off the end": exit


def basic_blocks(program) -> Blocks:
    from ...cfg import block_starts

    starts = block_starts(program)
    of = {s: b for b, s in enumerate(starts)}
    end = len(starts)
    of[len(program.instructions)] = end
    return Blocks(starts, of, end)


# ---- code generation -----------------------------------------------------------------------------

def _flit(x: float) -> str:
    if math.isnan(x):
        return "np.nan"
    if math.isinf(x):
        return "np.inf" if x > 0 else "-np.inf"
    return repr(float(x))


def _ilit(v: int) -> str:
    v = int(v) & ((1 << 64) - 1)
    return str(v - (1 << 64) if v >= 1 << 63 else v)


def wrap(ty: Type, e: str) -> str:
    """An int64 expression brought to ty's width (U64/I64: int64 arithmetic already wraps)."""
    if ty.bits >= 64:
        return e
    mask = (1 << ty.bits) - 1
    if ty.is_unsigned:
        return f"(({e}) & {mask})"
    half = 1 << (ty.bits - 1)
    return f"(((({e}) + {half}) & {mask}) - {half})"


def rnd(ty: Type, e: str) -> str:
    """A float64 expression rounded once to ty."""
    return {Type.F64: f"({e})", Type.F32: f"rf32({e})", Type.F16: f"rf16({e})", Type.BF16: f"rbf16({e})"}[ty]


def _lt(ty: Type, a: str, b: str) -> str:
    return f"ult64({a}, {b})" if ty is Type.U64 else f"({a} < {b})"


def _mod(ty: Type, a: str, m: int) -> str:
    return f"umod64({a}, {m})" if ty is Type.U64 else f"({a} % {m})"


@dataclass
class Gen:
    program: object
    blocks: Blocks
    mode: str                              # "lanes" or "rounds"
    sites: list[Site] = field(default_factory=list)
    regs: set[int] = field(default_factory=set)
    preds: set[int] = field(default_factory=set)
    specials: set[Special] = field(default_factory=set)
    uses_call: bool = False
    lines: list[str] = field(default_factory=list)
    depth: int = 0

    def emit(self, line: str) -> None:
        self.lines.append("    " * self.depth + line)

    def i(self, r: Register) -> str:
        self.regs.add(r.index)
        return f"i{r.index}"

    def f(self, r: Register) -> str:
        self.regs.add(r.index)
        return f"f{r.index}"

    def p(self, p) -> str:
        self.preds.add(p.index)
        return f"p{p.index}"

    def fail(self, code: int, index: int, value: str = "0") -> None:
        self.emit(f"state = fail(err, {code}, {index}, g, {value})")
        self.emit("break")

    def checked(self, expr: str, index: int, value: str = "0") -> str:
        """`at = expr` (a helper returning -1 on failure), then leave the lane when it failed."""
        self.emit(f"at = {expr}")
        self.emit("if at < 0:")
        self.depth += 1
        self.fail(E_MEMORY if not expr.startswith("naddr") else E_NEIGHBOUR, index, value)
        self.depth -= 1
        return "at"

    # ---- memory operands ------------------------------------------------------------------
    def address(self, ins: Instruction, index: int, addr, size: int) -> str:
        """Emit the checks for one access; return the name holding the byte address."""
        if addr.space in (Space.BUFFER, Space.POOL, Space.CLASS):
            j = len(self.sites)
            self.sites.append(Site(index, addr.space, addr.handle, addr.offset, size))
            self.emit(f"if cst[{j}] < 0:")
            self.depth += 1
            self.fail(E_MEMORY, index)
            self.depth -= 1
            return f"cst[{j}]"
        if addr.space is Space.SHARED:
            return self.checked(f"saddr({addr.offset}, {size}, shb, shsz)", index)
        r = self.i(addr.reg)
        if isinstance(ins, (I.LDS, I.STS)):
            return self.checked(f"saddr({r}, {size}, shb, shsz)", index, r)
        # inline (a helper taking the tables would incref/decref them on every access)
        self.emit(f"hh = {r} >> 32")
        return self.checked(f"(tbb[hh] + ({r} & 0xFFFFFFFF)) if ({r} >= 0 and hh < ntb and "
                            f"({r} & 0xFFFFFFFF) <= tbs[hh] - {size}) else -1", index, r)

    def load(self, dst: Register, ty: Type, at: str) -> None:
        fn = _LOADS[ty]
        if ty is Type.F16:
            self.emit(f"{self.f(dst)} = f16_to_f64({fn}({at}))")
        elif ty is Type.BF16:
            self.emit(f"{self.f(dst)} = bf16_to_f64({fn}({at}))")
        elif ty.is_float:
            self.emit(f"{self.f(dst)} = np.float64({fn}({at}))")
        else:
            self.emit(f"{self.i(dst)} = np.int64({fn}({at}))")

    def store(self, src: Register, ty: Type, at: str) -> None:
        fn = _STORES[ty]
        if ty is Type.F16:
            self.emit(f"{fn}({at}, np.int16(f64_to_f16({self.f(src)})))")
        elif ty is Type.BF16:
            self.emit(f"{fn}({at}, np.int16(f64_to_bf16({self.f(src)})))")
        elif ty is Type.F32:
            self.emit(f"{fn}({at}, np.float32({self.f(src)}))")
        elif ty is Type.F64:
            self.emit(f"{fn}({at}, {self.f(src)})")
        else:
            self.emit(f"{fn}({at}, {_NP_INT[ty.bits]}({self.i(src)}))")

    # ---- control ------------------------------------------------------------------------------
    def goto(self, target_index: int) -> None:
        self.emit(f"pc = {self.blocks.of[target_index]}")
        self.emit("continue")

    def back_edge(self, index: int) -> None:
        self.emit("budget -= 1")
        self.emit("if budget < 0:")
        self.depth += 1
        self.fail(E_BUDGET, index)
        self.depth -= 1

    def suspend(self, state: str, resume_block: int, wait: str = "0") -> None:
        """Leave the lane (rounds mode): registers to their rows, then the lane's state."""
        self.emit(f"PCS[l] = {resume_block}; WAIT[l] = {wait}; state = {state}")
        self.emit("break")


EMIT: dict[type, object] = {}


def emits(*classes):
    def reg(fn):
        for c in classes:
            EMIT[c] = fn
        return fn
    return reg


@emits(I.LDG, I.LDS)
def _(g: Gen, ins, i):
    g.load(ins.dst, ins.ty, g.address(ins, i, ins.src, ins.ty.size_bytes))


@emits(I.STG, I.STS)
def _(g: Gen, ins, i):
    g.store(ins.src, ins.ty, g.address(ins, i, ins.dst, ins.ty.size_bytes))


@emits(I.PoolLoad)
def _(g: Gen, ins, i):
    from ...address import Address
    g.load(ins.dst, ins.ty, g.address(ins, i, Address.pool(ins.pool, ins.offset), ins.ty.size_bytes))


@emits(I.PoolStore)
def _(g: Gen, ins, i):
    from ...address import Address
    g.store(ins.src, ins.ty, g.address(ins, i, Address.pool(ins.pool, ins.offset), ins.ty.size_bytes))


@emits(I.MOV)
def _(g: Gen, ins, i):
    if isinstance(ins.src, Special):
        g.specials.add(ins.src)
        g.emit(f"{g.i(ins.dst)} = {wrap(ins.ty, 'np.int64(' + _SPECIAL[ins.src] + ')')}")
        return
    g.emit(f"{g.i(ins.dst)} = {g.i(ins.src)}; {g.f(ins.dst)} = {g.f(ins.src)}")


@emits(I.MOV_IMM)
def _(g: Gen, ins, i):
    from ... import semantics as S
    v = S.immediate(ins.value, ins.ty)
    if ins.ty.is_float:
        g.emit(f"{g.f(ins.dst)} = {_flit(v)}")
    else:
        g.emit(f"{g.i(ins.dst)} = np.int64({_ilit(v)})")


@emits(I.CVT)
def _(g: Gen, ins, i):
    s, d = ins.src_ty, ins.dst_ty
    if s.is_integer and d.is_integer:
        g.emit(f"{g.i(ins.dst)} = {wrap(d, g.i(ins.src))}")
    elif s.is_float and d.is_float:
        g.emit(f"{g.f(ins.dst)} = {rnd(d, g.f(ins.src))}")
    elif s.is_integer:  # int -> float: one rounding (through float32 for BF16, as the reference)
        v = f"np.uint64({g.i(ins.src)})" if s is Type.U64 else g.i(ins.src)
        e = {Type.F64: f"np.float64({v})", Type.F32: f"np.float64(np.float32({v}))",
             Type.F16: f"rf16(np.float64({v}))", Type.BF16: f"rbf16(np.float32({v}))"}[d]
        g.emit(f"{g.f(ins.dst)} = {e}")
    else:
        g.emit(f"{g.i(ins.dst)} = {float_to_int(d, g.f(ins.src))}")


def float_to_int(ty: Type, e: str) -> str:
    """CVT's float -> integer: truncate toward zero, saturate, NaN -> 0."""
    if ty is Type.U64:
        return f"f2u64({e})"
    return f"f2i({e}, np.int64({_ilit(ty.min_value)}), np.int64({_ilit(ty.max_value)}))"


_FBIN = {"ADD": "{a} + {b}", "SUB": "{a} - {b}", "MUL": "{a} * {b}", "DIV": "{a} / {b}", "REM": "frem({a}, {b})"}


def int_binary(op: str, ty: Type, a: str, b: str) -> str:
    u64 = ty is Type.U64
    if op in ("ADD", "SUB", "MUL", "AND", "OR", "XOR"):
        sym = {"ADD": "+", "SUB": "-", "MUL": "*", "AND": "&", "OR": "|", "XOR": "^"}[op]
        return wrap(ty, f"{a} {sym} {b}")
    if op == "DIV":
        return f"udiv64({a}, {b})" if u64 else wrap(ty, f"sdiv({a}, {b})")
    if op == "REM":
        return f"urem64({a}, {b})" if u64 else wrap(ty, f"srem({a}, {b})")
    if op in ("MIN", "MAX"):
        lt = _lt(ty, a, b) if op == "MIN" else _lt(ty, b, a)
        return f"({a} if {lt} else {b})"
    if op == "SHL":
        return wrap(ty, f"{a} << ({b} % {ty.bits})")
    if op == "SHR":
        return f"ushr64({a}, {b} % 64)" if u64 else f"({a} >> ({b} % {ty.bits}))"
    raise KeyError(op)


@emits(I.ADD, I.SUB, I.MUL, I.DIV, I.REM, I.MIN, I.MAX, I.AND, I.OR, I.XOR)
def _(g: Gen, ins, i):
    op, ty = ins.name, ins.ty
    if ty.is_float:
        a, b = g.f(ins.lhs), g.f(ins.rhs)
        if op in ("MIN", "MAX"):
            g.emit(f"{g.f(ins.dst)} = f{op.lower()}({a}, {b})")
        else:
            g.emit(f"{g.f(ins.dst)} = {rnd(ty, _FBIN[op].format(a=a, b=b))}")
    else:
        g.emit(f"{g.i(ins.dst)} = {int_binary(op, ty, g.i(ins.lhs), g.i(ins.rhs))}")


@emits(I.SHL, I.SHR)
def _(g: Gen, ins, i):
    g.emit(f"{g.i(ins.dst)} = {int_binary(ins.name, ins.ty, g.i(ins.src), g.i(ins.amount))}")


_FUN = {"EXP": "math.exp({x})", "LOG": "flog({x})", "SQRT": "fsqrt({x})", "SIN": "ftrig(0, {x})",
        "COS": "ftrig(1, {x})", "TAN": "ftrig(2, {x})", "TANH": "math.tanh({x})", "SIGMOID": "fsigmoid({x})",
        "RCP": "1.0 / {x}", "RSQRT": "1.0 / fsqrt({x})", "FLOOR": "fkeep(0, {x})", "CEIL": "fkeep(1, {x})",
        "TRUNC": "fkeep(2, {x})", "ROUND": "fkeep(3, {x})", "GELU": "fgelu({x})", "SWISH": "{x} * fsigmoid({x})"}


@emits(I.ABS, I.NEG, I.NOT, I.EXP, I.LOG, I.SQRT, I.SIN, I.COS, I.TAN, I.TANH, I.SIGMOID, I.RCP, I.RSQRT,
       I.SIGN, I.FLOOR, I.CEIL, I.ROUND, I.TRUNC, I.GELU, I.SWISH)
def _(g: Gen, ins, i):
    op, ty = ins.name, ins.ty
    if ty.is_float:
        x, d = g.f(ins.src), g.f(ins.dst)
        if op == "ABS":
            g.emit(f"{d} = abs({x})")
        elif op == "NEG":
            g.emit(f"{d} = -{x}")
        elif op == "SIGN":
            g.emit(f"{d} = fsign({x})")
        else:
            g.emit(f"{d} = {rnd(ty, _FUN[op].format(x=x))}")
        return
    x, d = g.i(ins.src), g.i(ins.dst)
    if op == "ABS":
        g.emit(f"{d} = {x if ty.is_unsigned else wrap(ty, f'abs({x})')}")
    elif op == "NEG":
        g.emit(f"{d} = {wrap(ty, f'-{x}')}")
    elif op == "NOT":
        g.emit(f"{d} = {wrap(ty, f'~{x}')}")
    elif op == "SIGN":
        g.emit(f"{d} = np.int64({x} != 0)" if ty.is_unsigned else f"{d} = np.int64({x} > 0) - np.int64({x} < 0)")
    else:
        raise NotCompilable(f"{op} on {ty.name}")


@emits(I.FMA, I.FMS, I.MAD, I.CLAMP, I.LERP)
def _(g: Gen, ins, i):
    ops = {I.CLAMP: ("src", "min", "max"), I.LERP: ("a", "b", "t")}.get(type(ins), ("a", "b", "c"))
    op, ty = ins.name, ins.ty
    if ty.is_integer:
        a, b, c = (g.i(getattr(ins, o)) for o in ops)
        d = g.i(ins.dst)
        if op in ("FMA", "MAD"):
            g.emit(f"{d} = {wrap(ty, f'{a} * {b} + {c}')}")
        elif op == "FMS":
            g.emit(f"{d} = {wrap(ty, f'{a} * {b} - {c}')}")
        else:  # CLAMP
            g.emit(f"tt = {b} if {_lt(ty, a, b)} else {a}")
            g.emit(f"{d} = tt if {_lt(ty, 'tt', c)} else {c}")
        return
    a, b, c = (g.f(getattr(ins, o)) for o in ops)
    d = g.f(ins.dst)
    if op in ("FMA", "FMS"):
        cc = c if op == "FMA" else f"-{c}"
        g.emit(f"{d} = fma64({a}, {b}, {cc})" if ty is Type.F64 else f"{d} = {rnd(ty, f'ffma_narrow({a}, {b}, {cc})')}")
    elif op == "MAD":
        g.emit(f"{d} = {rnd(ty, rnd(ty, f'{a} * {b}') + f' + {c}')}")
    elif op == "CLAMP":
        g.emit(f"{d} = fmin(fmax({a}, {b}), {c})")
    else:  # LERP
        g.emit(f"{d} = {rnd(ty, f'{a} + ' + rnd(ty, rnd(ty, f'{b} - {a}') + f' * {c}'))}")


_CMP = {I.Condition.EQ: "==", I.Condition.NE: "!=", I.Condition.LT: "<", I.Condition.LE: "<=",
        I.Condition.GT: ">", I.Condition.GE: ">="}


@emits(I.SETcc)
def _(g: Gen, ins, i):
    ty, p = ins.ty, g.p(ins.pred)
    a, b = (g.f(ins.lhs), g.f(ins.rhs)) if ty.is_float else (g.i(ins.lhs), g.i(ins.rhs))
    if ty is Type.U64 and ins.cond not in (I.Condition.EQ, I.Condition.NE):
        a, b = f"np.uint64({a})", f"np.uint64({b})"
    g.emit(f"{p} = {a} {_CMP[ins.cond]} {b}")


@emits(I.SEL)
def _(g: Gen, ins, i):
    p = g.p(ins.pred)
    g.emit(f"if {p}:")
    g.emit(f"    {g.i(ins.dst)} = {g.i(ins.true_val)}; {g.f(ins.dst)} = {g.f(ins.true_val)}")
    g.emit("else:")
    g.emit(f"    {g.i(ins.dst)} = {g.i(ins.false_val)}; {g.f(ins.dst)} = {g.f(ins.false_val)}")


@emits(I.BRA)
def _(g: Gen, ins, i):
    t = g.program.labels[ins.target.name]
    if ins.pred is not None:
        g.emit(f"if {g.p(ins.pred)}:")
        g.depth += 1
    if t <= i:
        g.back_edge(i)
    g.goto(t)
    if ins.pred is not None:
        g.depth -= 1
        g.goto(i + 1)


@emits(I.CALL)
def _(g: Gen, ins, i):
    g.uses_call = True
    g.emit(f"if sp >= {MAX_CALL_DEPTH}:")
    g.depth += 1
    g.fail(E_STACK, i)
    g.depth -= 1
    g.back_edge(i)
    g.emit(f"stk[sp] = {g.blocks.of[i + 1]}; sp += 1")
    g.goto(g.program.labels[ins.target.name])


@emits(I.RET)
def _(g: Gen, ins, i):
    g.uses_call = True
    g.emit("if sp == 0:")
    g.emit("    state = EXITED")
    g.emit("    break")
    g.emit("sp -= 1; pc = stk[sp]")
    g.emit("continue")


@emits(I.LOOP)
def _(g: Gen, ins, i):
    c = g.i(ins.counter)
    g.emit(f"{c} = {c} + 1")
    g.emit(f"if {c} < {ins.iterations}:")
    g.depth += 1
    g.back_edge(i)
    g.goto(g.program.labels[ins.target.name])
    g.depth -= 1
    g.goto(i + 1)


@emits(I.EXIT)
def _(g: Gen, ins, i):
    g.emit("state = EXITED")
    g.emit("break")


@emits(I.BarSync)
def _(g: Gen, ins, i):
    g.suspend("AT_BARRIER", g.blocks.of[i + 1], str(int(ins.id)))


@emits(I.MemFence)
def _(g: Gen, ins, i):
    g.emit("pass")


@emits(I.ClsGet)
def _(g: Gen, ins, i):
    g.emit(f"{g.i(ins.dst)} = {wrap(ins.ty, _mod(ins.ty, g.i(ins.src), CLASS_MEMORY_BYTES) + f' // {CLASS_BYTES}')}")


@emits(I.MIRROR)
def _(g: Gen, ins, i):
    g.emit(f"{g.i(ins.dst)} = {wrap(ins.ty, _mod(ins.ty, g.i(ins.src), NUM_CLASSES) + ' ^ 7')}")


@emits(I.UnityTest)
def _(g: Gen, ins, i):
    g.emit(f"tt = {_mod(ins.ty, g.i(ins.src), NUM_CLASSES)}")
    g.emit(f"{g.p(ins.pred)} = tt == 0 or tt == 7")


@emits(I.BoundMap)
def _(g: Gen, ins, i):
    g.emit(f"{g.i(ins.dst)} = {wrap(ins.ty, _mod(ins.ty, g.i(ins.src), CLASS_MEMORY_BYTES))}")


def _neighbour(g: Gen, ins, i, reg: Register) -> str:
    n = ins.ty.size_bytes
    a = g.i(reg)
    return g.checked(f"naddr({a}, {ins.offset * n}, {n}, tbb[0])", i, a)


@emits(I.NBRLoad)
def _(g: Gen, ins, i):
    g.load(ins.dst, ins.ty, _neighbour(g, ins, i, ins.src))


@emits(I.NBRStore)
def _(g: Gen, ins, i):
    g.store(ins.src, ins.ty, _neighbour(g, ins, i, ins.dst))


@emits(I.ResAccum)
def _(g: Gen, ins, i):
    ty = ins.ty
    src = g.f(ins.src) if ty.is_float else (f"np.float64(np.uint64({g.i(ins.src)}))" if ty is Type.U64
                                            else f"np.float64({g.i(ins.src)})")
    g.emit(f"acc[{ins.class_id}] = acc[{ins.class_id}] + {src}")
    v = f"acc[{ins.class_id}]"
    if ty.is_float:
        g.emit(f"{g.f(ins.dst)} = {rnd(ty, v)}")
    else:
        g.emit(f"{g.i(ins.dst)} = {float_to_int(ty, v)}")


@emits(I.PhaseRead)
def _(g: Gen, ins, i):
    g.emit(f"{g.i(ins.dst)} = {wrap(ins.ty, f'phase[{ins.class_id}]')}")


@emits(I.PhaseWrite)
def _(g: Gen, ins, i):
    g.emit(f"phase[{ins.class_id}] = {_mod(ins.ty, g.i(ins.src), PHASE_MODULUS)}")


def _collective(g: Gen, ins, i):
    # every register the collective reads or writes must have a row slot
    for r in ins.registers_read() + ins.registers_written():
        if isinstance(r, Register):
            g.i(r), g.f(r)
    g.suspend("AT_COLLECTIVE", g.blocks.of[i])


# ---- whole functions ---------------------------------------------------------------------------

HEADER = """\
# Generated by eidos.isa.backends.cpu.compile (generator {version}) for program {digest}.
import math
import numpy as np
from numba import njit, prange
from eidos.isa.backends.cpu.runtime import *  # noqa: F403

EXITED, RUNNING, AT_BARRIER, AT_COLLECTIVE, FAILED = 0, 1, 2, 3, 4
"""


def _body(g: Gen) -> list[str]:
    """The dispatch loop of one lane, as lines at depth 0 (the caller indents)."""
    program, blocks = g.program, g.blocks
    g.lines, g.depth = [], 0
    single = len(blocks.starts) == 1 and not any(
        isinstance(x, (I.BRA, I.CALL, I.RET, I.LOOP, I.BarSync)) or x.collective for x in program.instructions)
    g.emit("while True:")
    g.depth += 1
    n = len(program.instructions)
    for b, start in enumerate(blocks.starts):
        stop = blocks.starts[b + 1] if b + 1 < len(blocks.starts) else n
        if not single:
            g.emit(f"{'if' if b == 0 else 'elif'} pc == {b}:")
            g.depth += 1
        ended = False
        for i in range(start, stop):
            ins = program.instructions[i]
            if ins.collective:
                _collective(g, ins, i)
                ended = True
                break
            fn = EMIT.get(type(ins))
            if fn is None:
                raise NotCompilable(f"no emitter for {ins.name}")
            fn(g, ins, i)
            if isinstance(ins, (I.BRA, I.CALL, I.RET, I.LOOP, I.EXIT, I.BarSync)):
                ended = True
                break
        if not ended:
            if single or stop >= n:
                g.emit("state = EXITED")
                g.emit("break")
            else:
                g.goto(stop)
        if not single:
            g.depth -= 1
    if not blocks.starts:
        g.emit("state = EXITED")
        g.emit("break")
    elif not single:
        g.emit("else:")
        g.emit("    state = EXITED")
        g.emit("    break")
    return g.lines


def _indent(lines: list[str], depth: int) -> list[str]:
    return ["    " * depth + x for x in lines]


def _prologue_consts(g: Gen) -> list[str]:
    out = []
    if {Special.THREAD_INDEX, Special.THREAD_X, Special.THREAD_Y, Special.THREAD_Z} & g.specials:
        out.append("tix = g % cfg[1]")
    if {Special.BLOCK_INDEX, Special.BLOCK_X, Special.BLOCK_Y, Special.BLOCK_Z} & g.specials:
        out.append("bix = g // cfg[1]")
    return out


def generate(program, digest: str) -> tuple[str, Gen]:
    """Python source for the program's functions, and the generator state (sites, registers)."""
    shape = shape_of(program)
    blocks = basic_blocks(program)
    g = Gen(program, blocks, "lanes" if shape == "lanes" else "rounds")
    body = _body(g)
    regs, preds = sorted(g.regs), sorted(g.preds)
    slot = {r: k for k, r in enumerate(regs)}
    entry = blocks.of[program.entry]
    src = [HEADER.format(version=GENERATOR_VERSION, digest=digest)]
    args = "cfg, ini, inf, tbb, tbs, ntb, cst, acc, phase, err, budget0"
    if g.mode == "lanes":
        for name, par in (("run_seq", False), ("run_par", True)):
            lines = [f"@njit(parallel={par}, **OPTS)", f"def {name}({args}):", "    n = cfg[0]"]
            lines.append(f"    for g in {'prange' if par else 'range'}(n):")
            lane = ["if err[0] != 0:", "    continue"] if par else []
            lane += _prologue_consts(g)
            lane += [f"i{r} = ini[{r}]; f{r} = inf[{r}]" for r in regs]
            lane += [f"p{k} = False" for k in preds]
            lane += ["budget = budget0", f"pc = {entry}", "state = RUNNING", "tt = np.int64(0)", "at = np.int64(0)", "hh = np.int64(0)"]
            if g.uses_call:
                lane += [f"stk = np.empty({MAX_CALL_DEPTH}, np.int64)", "sp = 0"]
            lane += body
            if not par:
                lane += ["if state == FAILED:", "    return"]
            lines += _indent(lane, 2)
            src.append("\n".join(lines) + "\n")
    else:
        rargs = ("cfg, RI, RF, PR, PCS, STATE, WAIT, BUD, STK, SPS, RUN, SHM, tbb, tbs, ntb, cst, acc, phase, err")
        for name, par in (("rounds_seq", False), ("rounds_par", True)):
            lines = [f"@njit(parallel={par}, **OPTS)", f"def {name}({rargs}):",
                     "    bt = cfg[1]", "    nb = cfg[0] // bt", "    shsz = SHM.shape[1]",
                     "    while True:",
                     f"        for b in {'prange' if par else 'range'}(nb):",
                     "            if not RUN[b]:", "                continue",
                     "            shb = np.int64(SHM[b].ctypes.data)",
                     "            for t in range(bt):",
                     "                g = b * bt + t", "                l = g",
                     "                if STATE[l] != RUNNING or err[0] != 0:", "                    continue"]
            lane = _prologue_consts(g)
            lane += [f"i{r} = RI[l, {slot[r]}]; f{r} = RF[l, {slot[r]}]" for r in regs]
            lane += [f"p{k} = PR[l, {k}]" for k in preds]
            lane += ["budget = BUD[l]", "pc = PCS[l]", "state = RUNNING", "tt = np.int64(0)", "at = np.int64(0)", "hh = np.int64(0)"]
            if g.uses_call:
                lane += ["stk = STK[l]", "sp = SPS[l]"]
            lane += body
            lane += [f"RI[l, {slot[r]}] = i{r}; RF[l, {slot[r]}] = f{r}" for r in regs]
            lane += [f"PR[l, {k}] = p{k}" for k in preds]
            lane += ["BUD[l] = budget", "STATE[l] = state"]
            if g.uses_call:
                lane += ["SPS[l] = sp"]
            lines += _indent(lane, 4)
            lines += ["        if err[0] != 0:", "            return -1",
                      "        again = False",
                      "        for b in range(nb):",
                      "            RUN[b] = False",
                      "            live = 0", "            waiting = 0", "            wid = -1", "            mixed = False",
                      "            for t in range(bt):",
                      "                s = STATE[b * bt + t]",
                      "                if s != EXITED:", "                    live += 1",
                      "                if s == AT_BARRIER:", "                    waiting += 1",
                      "                    w = WAIT[b * bt + t]",
                      "                    if wid == -1:", "                        wid = w",
                      "                    elif w != wid:", "                        mixed = True",
                      "            if live > 0 and waiting == live:",
                      "                if mixed:", "                    err[0] = -2; err[1] = b", "                    return -1",
                      "                RUN[b] = True", "                again = True",
                      "                for t in range(bt):",
                      "                    if STATE[b * bt + t] == AT_BARRIER:",
                      "                        STATE[b * bt + t] = RUNNING",
                      "        if not again:", "            return 0"]
            src.append("\n".join(lines) + "\n")
    g.slot = slot  # type: ignore[attr-defined]
    g.entry = entry  # type: ignore[attr-defined]
    return "".join(src), g


# ---- loading: one module file per program in the cache directory, numba's cache beside it ---------

_lock = threading.Lock()


def default_cache_dir() -> Path:
    root = os.environ.get("EIDOS_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "eidos")
    return Path(root) / "isa-cpu"


def load_module(source: str, name: str, directory: Path):
    """Write the source once (same name, same bytes: numba's on-disk cache stays valid) and import it."""
    with _lock:
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"{name}.py"
        if not path.exists() or path.read_text() != source:
            tmp = directory / f".{name}.{os.getpid()}.tmp"
            tmp.write_text(source)
            os.replace(tmp, path)
        modname = f"eidos_isa_cpu_{name}"
        mod = sys.modules.get(modname)
        if mod is not None:
            return mod
        spec = importlib.util.spec_from_file_location(modname, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[modname] = mod
        spec.loader.exec_module(mod)
        return mod
