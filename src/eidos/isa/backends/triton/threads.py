"""Register programs over lanes -> one Triton kernel each.

One Triton program instance runs one ISA block: its lanes are the elements of [BLOCK]
vectors, so a register is a tensor variable (`i<r>` int64, U64 as its bit pattern; `f<r>`
float64 holding a value exact in the instruction's type; `p<k>` a predicate), made only for
the kinds each register is used as (the CPU compiler's slots). Integer results wrap to their
width inline; floats are computed in binary64 and rounded once (F16 through a round-to-odd
float32, BF16 by integer rounding of the float32 bits, as the reference does).

Control flow: the program is cut into basic blocks and a lane carries a block id `pc`. A
straight-line program is plain vector code. Anything else is one `while` loop whose iteration
visits every block in program order under the mask `pc == block`, so a forward branch
(if/else, predicated skips, divergent lanes) completes within one iteration as masked code and
only a back edge (LOOP, a backward BRA, CALL/RET) takes another; a block no lane is in is
skipped. CALL/RET keep a per-lane stack of block ids in scratch memory (1,024 deep, as the
reference). BarSync is where the iteration finds no lane running: if every live lane of the
block waits at a barrier with one id, a CTA barrier (tl.debug_barrier) releases them.

Memory: every access is a masked gather/scatter of bytes at an int64 address (unaligned
access is allowed by the ISA), through a table of (base address, size) per handle (handle 0 is
class memory; the slot after the last handle is the block's shared memory), bounds-checked in
the kernel. A failing access stops its lane and records (code, instruction, value, barrier
phase) in a per-lane row; the host re-runs that instruction in the reference interpreter, so
the BackendError is the reference's word for word, and reports the lane the reference would
have met first.

Collective instructions inside a register program run between launches (the CPU backend's
rounds): the kernel saves every lane's state when all live lanes wait at the collective, the
host runs it once (PoolAlloc/PoolFree here, the rest through the caller's `run_collective`)
and launches again.
"""

from __future__ import annotations

import struct
import threading
from dataclasses import dataclass
from pathlib import Path

from eidos.errors import BackendError, UnsupportedError

from ... import instructions as I
from ...address import CLASS_BYTES, CLASS_MEMORY_BYTES, Register, Space, Special
from ...codegen import CONTROL, HANDLERS, Blocks, Emitter, basic_blocks, emit_block, generator_version, s64, thread_views, wrap
from ...codegen.state import AT_BARRIER, AT_COLLECTIVE, EXITED, FAILED, RUNNING
from ...faults import (DEFAULT_MAX_STEPS, E_BARRIER, E_BUDGET, E_MEMORY, E_NEIGHBOUR, E_STACK, MAX_CALL_DEPTH,
                       barrier_ids_error, divergence_error, fault_error, replay_access)
from ...types import Type

GUARD_MIN = 12  # blocks longer than this are skipped when no lane is in them

# The generator's own text is part of every cache key, so a changed generator never reuses a kernel.
GENERATOR_VERSION = generator_version(Path(__file__))


# ---- what a program needs, decided before generating anything ------------------------------------

def unsupported(program) -> tuple[int, str] | None:
    """(index, why) of the first instruction this target cannot run exactly, or None."""
    for i, ins in enumerate(program.instructions):
        for name in ("ty", "src_ty", "dst_ty"):
            t = getattr(ins, name, None)
            if isinstance(t, Type) and t.is_extended:
                return i, (f"{t.name}: GPU integers stop at 64 bits, and the reference and cpu backends run "
                           "wider integers exactly")
        if not ins.collective and type(ins) not in HANDLERS:
            return i, "no Triton form"
    return None


def _flit(x: float) -> str:
    """An exact float64 constant tensor expression (NaN, infinities and -0.0 included)."""
    bits = struct.unpack("<q", struct.pack("<d", float(x)))[0]
    return f"tl.full([BLOCK], {bits}, tl.int64).to(tl.float64, bitcast=True)"


def _u(e: str) -> str:
    return f"({e}).to(tl.uint64, bitcast=True)"


# ---- code generation: the primitives of the shared handler table -----------------------------------

_SPECIAL = {Special.GLOBAL_ID: "gid", Special.THREAD_INDEX: "tix", Special.BLOCK_INDEX: "bix",
            Special.LANE_COUNT: "LANES", Special.BLOCK_THREADS: "BT",
            Special.THREAD_X: "tix % BX", Special.THREAD_Y: "(tix // BX) % BY", Special.THREAD_Z: "tix // (BX * BY)",
            Special.BLOCK_X: "bix % GX", Special.BLOCK_Y: "(bix // GX) % GY", Special.BLOCK_Z: "bix // (GX * GY)",
            Special.BLOCK_DIM_X: "BX", Special.BLOCK_DIM_Y: "BY", Special.BLOCK_DIM_Z: "BZ",
            Special.GRID_DIM_X: "GX", Special.GRID_DIM_Y: "GY", Special.GRID_DIM_Z: "GZ"}

_FUN = {"EXP": "tl.exp({x})", "LOG": "tl.log({x})", "SQRT": "tl.sqrt({x})", "SIN": "tl.sin({x})",
        "COS": "tl.cos({x})", "TAN": "(tl.sin({x}) / tl.cos({x}))", "TANH": "_tanh({x})",
        "SIGMOID": "_sigmoid({x})", "RCP": "(1.0 / {x})", "RSQRT": "(1.0 / tl.sqrt({x}))",
        "GELU": "({x} * (1.0 + tl.erf({x} / 1.4142135623730951)) / 2.0)", "SWISH": "({x} * _sigmoid({x}))",
        "FLOOR": "_keep(tl.floor({x}), {x})", "CEIL": "_keep(tl.ceil({x}), {x})",
        "TRUNC": "_keep(tl.where({x} < 0, tl.ceil({x}), tl.floor({x})), {x})", "ROUND": "_keep(_rint({x}), {x})"}
_EXACT = ("FLOOR", "CEIL", "TRUNC", "ROUND")  # results already in the type


class Gen(Emitter):
    """Triton code for a block's threads at once: each register a [BLOCK] vector, the threads running
    here a mask `m`, a thread leaving a block by its `pc`."""

    prefix = "_"
    Unsupported = UnsupportedError

    def __init__(self, program, blocks: Blocks, single: bool, collectives: bool) -> None:
        super().__init__(program, blocks)
        self.single = single                 # one straight-line block: no masks, no loop
        self.collectives = collectives
        self.uses_shared = False
        self.static_handles: set[int] = set()

    @property
    def needs_fma64(self) -> bool:
        return "fma64" in self.helpers

    def fail(self, bad: str, code: int, index: int, value: str = "0") -> None:
        """Threads in `bad` stop here, recording why; the rest of the block runs without them."""
        self.emit(f"bad = {bad}")
        self.emit(f"_fail(ERR, FLAG, gid, bad, {code}, {index}, {value}, seg)")
        self.emit(f"st = tl.where(bad, {FAILED}, st)")
        self.emit("m = m & ~bad")

    def goto(self, mask: str, target_index: int) -> None:
        self.emit(f"pc = tl.where({mask}, {self.blocks.of[target_index]}, pc)")

    def back_edge(self, take: str, index: int) -> None:
        """Count the backward jumps of the threads in `take` against the step budget."""
        self.emit(f"bud = tl.where({take}, bud - 1, bud)")
        self.fail(f"{take} & (bud < 0)", E_BUDGET, index)

    # ---- expressions ------------------------------------------------------------------------------
    def rnd(self, ty: Type, e: str) -> str:
        return {Type.F64: f"({e})", Type.F32: f"({e}).to(tl.float32).to(tl.float64)",
                Type.F16: f"_rf16({e})", Type.BF16: f"_rbf16({e})"}[ty]

    def where(self, c: str, a: str, b: str) -> str:
        return f"tl.where({c}, {a}, {b})"

    def ult(self, a: str, b: str) -> str:
        return f"({_u(a)} < {_u(b)})"

    def u64(self, a: str) -> str:
        return _u(a)

    def mod(self, ty: Type, a: str, m: int) -> str:
        if ty is Type.U64:
            return f"({_u(a)} % {m}).to(tl.int64, bitcast=True)"
        if ty.is_unsigned:
            return f"(({a}) % {m})"
        return f"(((({a}) % {m}) + {m}) % {m})"  # Triton's % truncates

    def shift(self, ty: Type, b: str) -> str:
        return f"{b} & {ty.bits - 1}"

    def shr_u64(self, a: str, s: str) -> str:
        return f"({_u(a)} >> ({s}).to(tl.uint64)).to(tl.int64, bitcast=True)"

    def int_const(self, v: int) -> str:
        return f"tl.full([BLOCK], {v}, tl.int64)"

    def float_const(self, v: float) -> str:
        return _flit(v)

    def special(self, s: Special) -> str:
        return f"({_SPECIAL[s]}) + tl.full([BLOCK], 0, tl.int64)"

    def int_to_float(self, src: Type, dst: Type, e: str) -> str:
        v = _u(e) if src is Type.U64 else e  # BF16 through float32, as the reference
        return {Type.F64: f"{v}.to(tl.float64)", Type.F32: f"{v}.to(tl.float32).to(tl.float64)",
                Type.F16: f"_rf16({v}.to(tl.float64))", Type.BF16: f"_rbf16({v}.to(tl.float32).to(tl.float64))"}[dst]

    def float_to_int(self, ty: Type, e: str) -> str:
        if ty is Type.U64:
            return f"_f2u64({e})"
        return (f"_f2i({e}, {s64(ty.min_value)}, {s64(ty.max_value)}, {float(ty.min_value)!r}, "
                f"{float(ty.max_value)!r})")

    def fabs(self, x: str) -> str:
        return f"tl.where(({x}).to(tl.int64, bitcast=True) < 0, _neg({x}), {x})"

    def fsign(self, x: str) -> str:
        return f"tl.where({x} > 0, 1.0, tl.where({x} < 0, -1.0, tl.where({x} == {x}, 0.0, {x})))"

    def float_fun(self, op: str, ty: Type, x: str) -> str:
        e = _FUN[op].format(x=x)
        return e if op in _EXACT else self.rnd(ty, e)

    def iabs(self, x: str) -> str:
        return f"tl.where({x} < 0, 0 - {x}, {x})"

    def ineg(self, x: str) -> str:
        return f"0 - {x}"

    def fneg(self, x: str) -> str:
        return f"_neg({x})"

    def as_int(self, cond: str) -> str:
        return f"({cond}).to(tl.int64)"

    def bool_or(self, a: str, b: str) -> str:
        return f"({a}) | ({b})"

    def int_clamp(self, ty: Type, x: str, lo: str, hi: str) -> str:
        mx = self.where(self.lt(ty, x, lo), lo, x)
        return self.where(self.lt(ty, hi, mx), hi, mx)

    def phase(self, class_id: int) -> str:
        return f"tl.load(PHASE + {class_id} + tl.full([BLOCK], 0, tl.int32))"

    # ---- statements -------------------------------------------------------------------------------
    def set(self, name: str, expr: str) -> None:
        self.emit(f"{name} = {expr}" if self.single else f"{name} = tl.where(m, {expr}, {name})")

    def move(self, dst: Register, src: Register, ty: Type) -> None:
        self.set(self.reg(dst, ty), self.reg(src, ty))

    def select(self, dst: Register, pred: str, t: Register, f: Register, ty: Type) -> None:
        self.set(self.reg(dst, ty), self.where(pred, self.reg(t, ty), self.reg(f, ty)))

    def address(self, ins, i: int, addr, size: int) -> str:
        if addr.space in (Space.BUFFER, Space.POOL, Space.CLASS):
            h, off = (0, addr.handle * CLASS_BYTES + addr.offset) if addr.space is Space.CLASS else (addr.handle, addr.offset)
            self.static_handles.add(h)
            self.emit(f"hs = tl.load(TAB + {2 * h + 1})")
            self.emit(f"ok = (hs >= {off + size}) & {'True' if off >= 0 else 'False'}")
            self.fail("m & ~ok", E_MEMORY, i)
            self.emit(f"at = tl.load(TAB + {2 * h}) + {off} + tl.full([BLOCK], 0, tl.int64)")
            return "at"
        if addr.space is Space.SHARED or isinstance(ins, (I.LDS, I.STS)):
            self.uses_shared = True
            o = str(addr.offset) if addr.space is Space.SHARED else self.i(addr.reg)
            self.emit(f"o = {o} + tl.full([BLOCK], 0, tl.int64)")
            self.fail(f"m & ((o < 0) | (o > SH - {size}))", E_MEMORY, i, "o")
            self.emit("at = SHB + pid.to(tl.int64) * SH + o")
            return "at"
        q = self.i(addr.reg)
        self.emit(f"hh = {q} >> 32")
        self.emit(f"inb = ({q} >= 0) & (hh < NTB)")
        self.emit("hs = tl.load(TAB + 2 * hh + 1, mask=m & inb, other=-1)")
        self.fail(f"m & ~(inb & (({q} & 4294967295) <= hs - {size}))", E_MEMORY, i, q)
        self.emit(f"at = tl.load(TAB + 2 * hh, mask=m, other=0) + ({q} & 4294967295)")
        return "at"

    def neighbour(self, ins, i: int, reg: Register) -> str:
        n = ins.ty.size_bytes
        a = self.i(reg)
        self.static_handles.add(0)
        self.fail(f"m & (({a} < 0) | ({a} > {CLASS_MEMORY_BYTES - n}) | (({a} % {n}) != 0))", E_NEIGHBOUR, i, a)
        self.emit(f"at = tl.load(TAB) + {a} - ({a} & 255) + ((({a} & 255) + {ins.offset * n}) & 255)")
        return "at"

    def load(self, dst: Register, ty: Type, at: str) -> None:
        v = f"_ld(({at}), m, {ty.size_bytes})"
        if ty is Type.F64:
            e = f"{v}.to(tl.float64, bitcast=True)"
        elif ty is Type.F32:
            e = f"{v}.to(tl.int32).to(tl.float32, bitcast=True).to(tl.float64)"
        elif ty is Type.F16:
            e = f"{v}.to(tl.int16).to(tl.float16, bitcast=True).to(tl.float64)"
        elif ty is Type.BF16:
            e = f"({v} << 16).to(tl.int32).to(tl.float32, bitcast=True).to(tl.float64)"
        else:
            e = wrap(ty, v) if ty.is_signed else v
        self.set(self.reg(dst, ty), e)

    def store(self, src: Register, ty: Type, at: str, uniform: bool) -> None:
        """A uniform store: only the block's last storing thread stores, as the reference's thread order
        leaves it (a GPU's same-address scatter keeps an unspecified thread's value)."""
        if ty is Type.F64:
            v = f"{self.f(src)}.to(tl.int64, bitcast=True)"
        elif ty is Type.F32:
            v = f"{self.f(src)}.to(tl.float32).to(tl.int32, bitcast=True).to(tl.int64)"
        elif ty is Type.F16:
            v = f"{self.f(src)}.to(tl.float32).to(tl.float16).to(tl.int16, bitcast=True).to(tl.int64)"
        elif ty is Type.BF16:
            v = f"({self.f(src)}.to(tl.float32).to(tl.int32, bitcast=True) >> 16).to(tl.int64)"
        else:
            v = self.i(src)
        mask = "m"
        if uniform:
            self.emit("last = m & (t == tl.max(tl.where(m, t, -1), 0))")
            mask = "last"
        self.emit(f"_st(({at}), {v}, {mask}, {ty.size_bytes})")

    def accumulate(self, class_id: int, v: str) -> str:
        self.emit(f"v = {v}")
        self.emit(f"old = tl.atomic_add(ACC + {class_id} + tl.full([BLOCK], 0, tl.int32), v, mask=m)")
        return "(old + v)"

    def set_phase(self, class_id: int, v: str) -> None:
        self.emit(f"tl.store(PHASE + {class_id} + tl.full([BLOCK], 0, tl.int32), {v}, mask=m)")

    # ---- control ------------------------------------------------------------------------------------
    def jump(self, cond: str | None, target: int, i: int, back: bool) -> None:
        take = "m"
        if cond is not None:
            self.emit(f"take = m & ({cond})")
            take = "take"
        if back:
            self.back_edge(take, i)
        if cond is not None:
            self.goto("m", i + 1)
        self.goto(take, target)

    def call(self, i: int, target: int) -> None:
        self.fail(f"m & (sp >= {MAX_CALL_DEPTH})", E_STACK, i)
        self.back_edge("m", i)
        self.emit(f"tl.store(STK + gid.to(tl.int64) * {MAX_CALL_DEPTH} + sp, tl.full([BLOCK], 0, tl.int32) + "
                  f"{self.blocks.of[i + 1]}, mask=m)")
        self.emit("sp = tl.where(m, sp + 1, sp)")
        self.goto("m", target)

    def ret(self) -> None:
        self.emit(f"st = tl.where(m & (sp == 0), {EXITED}, st)")
        self.emit("pop = m & (sp > 0)")
        self.emit("sp = tl.where(pop, sp - 1, sp)")
        self.emit(f"pc = tl.where(pop, tl.load(STK + gid.to(tl.int64) * {MAX_CALL_DEPTH} + sp, mask=pop, other=0), pc)")

    def exit(self) -> None:
        self.emit(f"st = tl.where(m, {EXITED}, st)")

    def barrier(self, i: int, barrier_id: int) -> None:
        self.emit(f"st = tl.where(m, {AT_BARRIER}, st)")
        self.emit(f"wid = tl.where(m, {barrier_id}, wid)")
        self.goto("m", i + 1)

    def wait_collective(self, i: int) -> None:
        self.emit(f"st = tl.where(m, {AT_COLLECTIVE}, st)")


# ---- whole kernels -------------------------------------------------------------------------------

HEADER = '''\
# Generated by eidos.isa.backends.triton.threads (generator {version}) for program {digest}.
import triton
import triton.language as tl
# Helpers are inlined by triton.jit on a GPU; under the interpreter they are plain Python (a nested
# jit call there re-patches triton.language on every call, which costs milliseconds).
_helper = {helper}
{fma_import}
{any_impl}

@_helper
def _ld(a, m, N: tl.constexpr):
    """N little-endian bytes at int64 addresses a, as int64 (zero-extended): one typed load where a
    lane's address is aligned, byte loads where it is not (the ISA allows any alignment)."""
    if N == 1:
        return tl.load(a.to(tl.pointer_type(tl.uint8)), mask=m, other=0).to(tl.int64)
    al = (a & (N - 1)) == 0
    if N == 2:
        w = tl.load(a.to(tl.pointer_type(tl.int16)), mask=m & al, other=0).to(tl.int64) & 65535
    elif N == 4:
        w = tl.load(a.to(tl.pointer_type(tl.int32)), mask=m & al, other=0).to(tl.int64) & 4294967295
    else:
        w = tl.load(a.to(tl.pointer_type(tl.int64)), mask=m & al, other=0)
    v = a * 0
    for k in tl.static_range(N):
        b = tl.load((a + k).to(tl.pointer_type(tl.uint8)), mask=m & ~al, other=0)
        v = v | (b.to(tl.int64) << (8 * k))
    return tl.where(al, w, v)


@_helper
def _st(a, v, m, N: tl.constexpr):
    if N == 1:
        tl.store(a.to(tl.pointer_type(tl.uint8)), (v & 255).to(tl.uint8), mask=m)
    else:
        al = (a & (N - 1)) == 0
        if N == 2:
            tl.store(a.to(tl.pointer_type(tl.int16)), v.to(tl.int16), mask=m & al)
        elif N == 4:
            tl.store(a.to(tl.pointer_type(tl.int32)), v.to(tl.int32), mask=m & al)
        else:
            tl.store(a.to(tl.pointer_type(tl.int64)), v, mask=m & al)
        for k in tl.static_range(N):
            tl.store((a + k).to(tl.pointer_type(tl.uint8)), ((v >> (8 * k)) & 255).to(tl.uint8), mask=m & ~al)


@_helper
def _fail(ERR, FLAG, gid, bad, code, index, value, seg):
    row = ERR + gid.to(tl.int64) * 4
    tl.store(row, gid * 0 + code, mask=bad)
    tl.store(row + 1, gid * 0 + index, mask=bad)
    tl.store(row + 2, gid * 0 + value, mask=bad)
    tl.store(row + 3, gid * 0 + seg, mask=bad)
    tl.store(FLAG + (gid * 0).to(tl.int32), (gid * 0).to(tl.int32) + 1, mask=bad)


@_helper
def _rf16(x):
    """float64 -> the nearest float16 (one rounding: round to odd in float32, then to nearest)."""
    r = x.to(tl.float32)
    back = r.to(tl.float64)
    bits = r.to(tl.int32, bitcast=True)
    step = tl.where(tl.abs(back) > tl.abs(x), -1, 1)
    bits = tl.where((back != x) & (x == x) & ((bits & 1) == 0), bits + step, bits)
    return bits.to(tl.float32, bitcast=True).to(tl.float16).to(tl.float64)


@_helper
def _rbf16(x):
    """float64 -> float32 -> bfloat16, each to nearest even (as ml_dtypes through float32)."""
    u = x.to(tl.float32).to(tl.int32, bitcast=True).to(tl.int64) & 4294967295
    r = ((u + 32767 + ((u >> 16) & 1)) >> 16) & 65535
    r = tl.where(x != x, ((u >> 16) | 64) & 65535, r)
    return (r << 16).to(tl.int32).to(tl.float32, bitcast=True).to(tl.float64)


@_helper
def _fmin(a, b):
    r = tl.where(a == b, tl.where(a.to(tl.int64, bitcast=True) < 0, a, b), tl.where(a < b, a, b))
    return tl.where((a != a) | (b != b), a + b, r)


@_helper
def _fmax(a, b):
    r = tl.where(a == b, tl.where(a.to(tl.int64, bitcast=True) < 0, b, a), tl.where(a > b, a, b))
    return tl.where((a != a) | (b != b), a + b, r)


@_helper
def _neg(x):
    """-x by the sign bit (Triton's unary minus is 0 - x, which makes -(0.0) +0.0)."""
    return (x.to(tl.int64, bitcast=True) ^ -9223372036854775808).to(tl.float64, bitcast=True)


@_helper
def _keep(r, x):
    """A zero result keeps the input's sign."""
    return tl.where(r == 0, x * 0.0, r)


@_helper
def _rint(x):
    f = tl.floor(x)
    d = x - f
    odd = (f - 2.0 * tl.floor(f * 0.5)) != 0
    return tl.where(d > 0.5, f + 1.0, tl.where(d < 0.5, f, tl.where(odd, f + 1.0, f)))


@_helper
def _sigmoid(x):
    e = tl.exp(-tl.abs(x))
    return tl.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


@_helper
def _tanh(x):
    """tanh through an accurate expm1 (Kahan: (u - 1) * y / log(u) with u = exp(y))."""
    ax = tl.abs(x)
    y = 2.0 * tl.minimum(ax, 40.0)
    u = tl.exp(y)
    lu = tl.log(u)
    em1 = tl.where(u == 1.0, y, (u - 1.0) * y / tl.where(lu == 0, 1.0, lu))
    t = tl.where(ax > 20.0, 1.0, em1 / (em1 + 2.0))
    t = tl.where(x < 0, -t, t)
    return tl.where((x == 0) | (x != x), x, t)


@_helper
def _fma_narrow(a, b, c):
    """a * b + c for float32/16 values: the binary64 sum nudged toward its exact error, so the final
    rounding to the narrow type is the only one (the reference's formula)."""
    p = a * b
    s = p + c
    bb = s - p
    err = (p - (s - bb)) + (c - bb)
    fin = (s - s) == 0
    bits = s.to(tl.int64, bitcast=True)
    up = (err > 0) == (s >= 0)
    nudged = tl.where(s == 0, tl.where(err > 0, 5e-324, -5e-324),
                      tl.where(up, bits + 1, bits - 1).to(tl.float64, bitcast=True))
    return tl.where(fin & (err != 0), nudged, s)


@_helper
def _f2i(x, lo, hi, LOF, HIF):
    inr = (x == x) & (x < HIF) & (x > LOF)
    v = tl.where(inr, x, 0.0).to(tl.int64)
    return tl.where(x != x, 0, tl.where(x >= HIF, hi, tl.where(x <= LOF, lo, v)))


@_helper
def _f2u64(x):
    inr = (x == x) & (x < 18446744073709551616.0) & (x > 0)
    v = tl.where(inr, x, 0.0).to(tl.uint64).to(tl.int64, bitcast=True)
    return tl.where(inr, v, tl.where(x >= 18446744073709551616.0, -1, 0))


@_helper
def _frem(a, b):
    """fmod exactly, by long division on the significands (GPUs have no exact remainder instruction):
    a = ma * 2^ea, b = mb * 2^eb, a mod b = ((ma mod mb) * 2^(ea - eb) mod mb) * 2^eb, ten bits a step."""
    ua = a.to(tl.int64, bitcast=True)
    ub = b.to(tl.int64, bitcast=True)
    fa = (ua >> 52) & 2047
    fb = (ub >> 52) & 2047
    ma = tl.where(fa == 0, ua & 4503599627370495, (ua & 4503599627370495) | 4503599627370496)
    mb = tl.where(fb == 0, ub & 4503599627370495, (ub & 4503599627370495) | 4503599627370496)
    eb = tl.where(fb == 0, 1, fb)
    nan = (a != a) | (b != b) | (b == 0) | (fa == 2047)
    keep = (fb == 2047) | (a == 0) | (tl.abs(a) < tl.abs(b))
    plain = nan | keep
    mbs = tl.where(plain, 1, mb)
    r = tl.where(plain, 0, ma % mbs)
    d = tl.where(plain, 0, tl.where(fa == 0, 1, fa) - eb)
    while _any(d > 0):
        sh = tl.minimum(d, 10)
        r = (r << sh) % mbs
        d = d - sh
    k = eb - 1075
    p2 = tl.where(k >= -1022, (k + 1023) << 52, 1 << tl.maximum(k + 1074, 0)).to(tl.float64, bitcast=True)
    q = r.to(tl.float64) * p2
    q = tl.where(a < 0, _neg(q), q)
    return tl.where(nan, (ua * 0 + 9221120237041090560).to(tl.float64, bitcast=True), tl.where(keep, a, q))


@_helper
def _sdiv(a, b):
    """Truncating division; x/0 = -1, x/-1 = -x (wrapped by the caller)."""
    safe = tl.where((b == 0) | (b == -1), 1, b)
    return tl.where(b == 0, -1, tl.where(b == -1, 0 - a, a // safe))


@_helper
def _srem(a, b):
    safe = tl.where((b == 0) | (b == -1), 1, b)
    return tl.where(b == 0, a, tl.where(b == -1, 0, a % safe))


@_helper
def _udiv64(a, b):
    safe = tl.where(b == 0, 1, b).to(tl.uint64, bitcast=True)
    q = (a.to(tl.uint64, bitcast=True) // safe).to(tl.int64, bitcast=True)
    return tl.where(b == 0, -1, q)


@_helper
def _urem64(a, b):
    safe = tl.where(b == 0, 1, b).to(tl.uint64, bitcast=True)
    r = (a.to(tl.uint64, bitcast=True) % safe).to(tl.int64, bitcast=True)
    return tl.where(b == 0, a, r)
'''

_ANY_GPU = '''
@triton.jit
def _any(m):
    return tl.max(m.to(tl.int32), 0) > 0


@triton.jit
def _count(m):
    return tl.sum(m.to(tl.int32), 0)
'''
# tl.max and tl.sum are jit functions: under the interpreter each call re-patches triton.language
_ANY_INTERPRETED = '''
def _any(m):
    return bool(m.handle.data.any())


def _count(m):
    return int(m.handle.data.sum())
'''

_FMA_GPU = '''
@_helper
def _fma64(a, b, c):
    return tl.fma(a, b, c)
'''
_FMA_INTERPRETED = "from eidos.isa.backends.triton.threads import interpreted_fma64 as _fma64"

KERNEL_ARGS = ("TAB, NTB, SH, INI_I, INI_F, ERR, FLAG, STK, ACC, PHASE, "
               "RI, RF, RP, RPC, RST, RBUD, RSP, RWID, RSEG, NI, NF, "
               "BUDGET0, LANES, BT, BX, BY, BZ, GX, GY, GZ, BLOCK: tl.constexpr")


def _prologue(g: Gen, islots: dict, fslots: dict, entry: int) -> list[str]:
    out = ["pid = tl.program_id(0)", "t = tl.arange(0, BLOCK)", "live = t < BT",
           "tix = t.to(tl.int64)", "bix = pid.to(tl.int64)", "gid = bix * BT + tix",
           "SHB = tl.load(TAB + 2 * NTB)", "seg = pid * 0"]
    if g.collectives:
        out += ["lrow = gid", f"st = tl.load(RST + lrow, mask=live, other={EXITED})",
                "pc = tl.load(RPC + lrow, mask=live, other=0)", "bud = tl.load(RBUD + lrow, mask=live, other=0)",
                "sp = tl.load(RSP + lrow, mask=live, other=0)", "wid = tl.load(RWID + lrow, mask=live, other=0)",
                "seg = tl.load(RSEG + pid)"]
        out += [f"i{r} = tl.load(RI + lrow * NI + {k}, mask=live, other=0)" for r, k in islots.items()]
        out += [f"f{r} = tl.load(RF + lrow * NF + {k}, mask=live, other=0.0)" for r, k in fslots.items()]
        out += [f"p{k} = tl.load(RP + lrow * 16 + {k}, mask=live, other=0) != 0" for k in sorted(g.preds)]
    else:
        out += [f"st = tl.where(live, {RUNNING}, {EXITED})", f"pc = tl.full([BLOCK], 0, tl.int32) + {entry}",
                "bud = tl.full([BLOCK], 0, tl.int64) + BUDGET0", "sp = tl.full([BLOCK], 0, tl.int32)",
                "wid = tl.full([BLOCK], 0, tl.int64)"]
        out += [f"i{r} = tl.full([BLOCK], 0, tl.int64) + tl.load(INI_I + {r})" for r in islots]
        out += [f"f{r} = tl.full([BLOCK], 0, tl.float64) + tl.load(INI_F + {r})" for r in fslots]
        out += [f"p{k} = t < 0" for k in sorted(g.preds)]
    return out


def _epilogue(g: Gen, islots: dict, fslots: dict) -> list[str]:
    if not g.collectives:
        return []
    out = ["tl.store(RST + lrow, st, mask=live)", "tl.store(RPC + lrow, pc, mask=live)",
           "tl.store(RBUD + lrow, bud, mask=live)", "tl.store(RSP + lrow, sp, mask=live)",
           "tl.store(RWID + lrow, wid, mask=live)", "tl.store(RSEG + pid, seg)"]
    out += [f"tl.store(RI + lrow * NI + {k}, i{r}, mask=live)" for r, k in islots.items()]
    out += [f"tl.store(RF + lrow * NF + {k}, f{r}, mask=live)" for r, k in fslots.items()]
    out += [f"tl.store(RP + lrow * 16 + {k}, p{k}.to(tl.int8), mask=live)" for k in sorted(g.preds)]
    return out


def _body(g: Gen) -> list[str]:
    """The lanes' code at depth 0: straight-line, or the block-visiting while loop."""
    program, blocks = g.program, g.blocks
    n = len(program.instructions)
    g.lines, g.depth = [], 0
    if g.single:
        g.emit("m = live")
        emit_block(g, 0, n)
        return g.lines
    g.emit(f"go = _any(st == {RUNNING})")
    g.emit("while go:")
    g.depth += 1
    g.emit(f"st = tl.where((st == {RUNNING}) & (pc >= {len(blocks.starts)}), {EXITED}, st)  # past the end: exit")
    for b, start in enumerate(blocks.starts):
        stop = blocks.stop(b, n)
        g.emit(f"m = (st == {RUNNING}) & (pc == {b})")
        guard = stop - start > GUARD_MIN or any(isinstance(x, (I.CALL, I.RET)) for x in program.instructions[start:stop])
        if guard:  # skip a block no lane is in (a CTA-wide reduction: worth it for larger blocks only)
            g.emit("if _any(m):")
            g.depth += 1
        if not emit_block(g, start, stop):
            if stop >= n:
                g.exit()
            else:
                g.goto("m", stop)
        if guard:
            g.depth -= 1
    g.emit(f"go = _any(st == {RUNNING})")
    if not any(isinstance(x, I.BarSync) for x in program.instructions):
        return g.lines
    # nobody running: open the barrier when every live lane of the block waits at one
    g.emit("if not go:")
    g.depth += 1
    g.emit(f"waiting = st == {AT_BARRIER}")
    g.emit("nw = _count(waiting)")
    g.emit(f"nl = _count((st == {AT_BARRIER}) | (st == {AT_COLLECTIVE}))")
    g.emit("if (nw > 0) & (nw == nl):")
    g.depth += 1
    g.emit("wlo = tl.min(tl.where(waiting, wid, 1 << 40), 0)")
    g.emit("whi = tl.max(tl.where(waiting, wid, -1), 0)")
    g.emit("mixed = waiting & (wlo != whi)")
    g.emit(f"_fail(ERR, FLAG, gid, mixed, {E_BARRIER}, pid, wid, seg)")
    g.emit(f"st = tl.where(mixed, {FAILED}, st)")
    g.emit("tl.debug_barrier()")
    g.emit(f"st = tl.where(st == {AT_BARRIER}, {RUNNING}, st)")
    g.emit("seg = seg + 1")
    g.emit(f"go = _any(st == {RUNNING})")
    g.depth -= 2
    return g.lines


def generate(program, digest: str, interpreted: bool) -> tuple[str, Gen]:
    """Triton source for the program's kernel `lanes`, and the generator's findings."""
    blocks = basic_blocks(program)
    collectives = any(ins.collective for ins in program.instructions)
    single = (len(blocks.starts) <= 1 and program.entry == 0 and not collectives
              and not any(isinstance(x, CONTROL) for x in program.instructions))
    g = Gen(program, blocks, single, collectives)
    body = _body(g)
    islots, fslots = g.slots("i"), g.slots("f")
    g.islots, g.fslots = islots, fslots  # type: ignore[attr-defined]
    entry = blocks.of.get(program.entry, len(blocks.starts))
    lines = _prologue(g, islots, fslots, entry) + body + _epilogue(g, islots, fslots)
    fma = (_FMA_INTERPRETED if interpreted else _FMA_GPU) if g.needs_fma64 else ""
    src = HEADER.format(version=GENERATOR_VERSION, digest=digest, fma_import=fma,
                        helper="lambda fn: fn" if interpreted else "triton.jit",
                        any_impl=_ANY_INTERPRETED if interpreted else _ANY_GPU)
    src += "\n\n@triton.jit\ndef lanes(" + KERNEL_ARGS + "):\n" + "\n".join("    " + x for x in lines) + "\n"
    return src, g


def interpreted_fma64(a, b, c):
    """F64 FMA with one rounding under Triton's interpreter, whose tl.fma multiplies and adds with two.
    (On a GPU the generated code calls tl.fma, which is the hardware's fused fma.rn.f64.)"""
    import numpy as np
    import triton.language as tl
    from triton.runtime.interpreter import TensorHandle

    from ... import semantics as S

    f = S.fused_multiply_add(Type.F64)
    x, y, z = (np.broadcast_to(v.handle.data, np.broadcast_shapes(a.handle.data.shape, b.handle.data.shape,
                                                                   c.handle.data.shape)) for v in (a, b, c))
    out = np.array([f(float(p), float(q), float(r)) for p, q, r in zip(x.ravel(), y.ravel(), z.ravel())],
                   dtype=np.float64).reshape(x.shape)
    return tl.core.tensor(TensorHandle(out, tl.float64), a.type)


# ---- compiled programs and their launches ----------------------------------------------------------

def _pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


class LaneKernel:
    """One register program compiled to the Triton kernel `lanes` (one program instance per ISA block)."""

    def __init__(self, program, source: str, gen: Gen) -> None:
        self.program = program
        self.source = source
        self.gen = gen
        self._fn = None

    def how(self) -> str:
        """One line for explain(): the kernel's shape and why."""
        g = self.gen
        shape = ("straight-line vector code (one basic block)" if g.single else
                 f"a while loop over {len(g.blocks.starts)} basic blocks with a per-lane pc (branches, loops, "
                 "CALL/RET and barriers as masks)")
        extra = [w for w, on in (("barriers in the kernel", any(isinstance(x, I.BarSync) for x in self.program)),
                                 ("shared memory", g.uses_shared), ("a per-lane call stack", g.uses_call),
                                 ("collectives between launches", g.collectives)) if on]
        return "lanes: one Triton program per ISA block, " + shape + (f"; {', '.join(extra)}" if extra else "")

    @property
    def kernel(self):
        if self._fn is None:
            from .source import load
            self._fn = load(self.source, "lanes")
        return self._fn

    def launch(self, memory, params, *, run_collective=None, max_steps: int = DEFAULT_MAX_STEPS) -> None:
        """Run the program on params.config's lanes with params.registers as their starting values.
        run_collective(instruction, index, lanes), where each lane has `.R` (its registers), runs a
        collective other than PoolAlloc/PoolFree once for the grid (the backend's array route)."""
        import torch

        config = params.config
        n = config.total_threads()
        if n == 0:
            return
        g, program = self.gen, self.program
        dev = memory.device
        bt = config.block_threads()
        nb = n // bt
        (gx, gy, gz), (bx, by, bz) = config.grid, config.block
        ini_i, ini_f = [0] * 256, [0] * 256  # float64 bit patterns
        for k, v in params.registers.items():
            k = int(k)
            if not 0 <= k < 256:
                raise BackendError(f"ExecutionParams.registers: register r{k} out of range r0..r255")
            if isinstance(v, bool) or not isinstance(v, (int, float)) and not hasattr(v, "__index__") \
                    and not hasattr(v, "__float__"):
                raise BackendError(f"ExecutionParams.registers: r{k} holds {v!r}, not a number")
            if isinstance(v, float) or (hasattr(v, "dtype") and getattr(v.dtype, "kind", "") == "f"):
                ini_f[k] = _bits(float(v))
            else:
                ini_i[k] = s64(v)
                ini_f[k] = _bits(float(int(v)))
        scratch = _scratch(memory, n, g.uses_call)
        shared = (torch.zeros(nb * config.shared_memory, dtype=torch.uint8, device=dev) if config.shared_memory
                  else scratch.dummy)
        inputs = ini_i + ini_f
        ni, nf = max(1, len(g.islots)), max(1, len(g.fslots))
        if g.collectives:
            RI = torch.tensor([[ini_i[r] for r in g.islots] or [0]], dtype=torch.int64, device=dev).repeat(n, 1)
            RF = torch.tensor([[ini_f[r] for r in g.fslots] or [0]], dtype=torch.int64,
                              device=dev).view(torch.float64).repeat(n, 1)
            RP = torch.zeros((n, 16), dtype=torch.int8, device=dev)
            RPC = torch.full((n,), self.gen.blocks.of.get(program.entry, len(g.blocks.starts)), dtype=torch.int32, device=dev)
            RST = torch.full((n,), RUNNING, dtype=torch.int32, device=dev)
            RBUD = torch.full((n,), int(max_steps), dtype=torch.int64, device=dev)
            RSP = torch.zeros(n, dtype=torch.int32, device=dev)
            RWID = torch.zeros(n, dtype=torch.int64, device=dev)
            RSEG = torch.zeros(nb, dtype=torch.int32, device=dev)
        else:
            RI = RF = RP = RPC = RST = RBUD = RSP = RWID = RSEG = scratch.dummy
        block = _pow2(bt)
        rounds = 0
        while True:
            tab, ntb, ini_i_d, ini_f_d = _table(memory, g.static_handles, shared, config.shared_memory, inputs)
            args = (tab, ntb, config.shared_memory, ini_i_d, ini_f_d, scratch.err, scratch.flag, scratch.stack,
                    memory.accumulators, memory.phases, RI, RF, RP, RPC, RST, RBUD, RSP, RWID, RSEG, ni, nf,
                    int(max_steps), n, bt, bx, by, bz, gx, gy, gz)
            _run(self.kernel, nb, args, block, memory)
            if int(scratch.flag[0]):
                self._raise(memory, params, scratch, max_steps, rounds)
            if not g.collectives:
                return
            st = RST.cpu()
            live = torch.nonzero(st != EXITED).flatten()
            if live.numel() == 0:
                return
            pcs = RPC.cpu()[live]
            sts = st[live]
            starts = g.blocks.starts + [len(program)]
            if bool((sts == AT_COLLECTIVE).all()) and bool((pcs == pcs[0]).all()):
                i = starts[int(pcs[0])]
                self._collective(memory, program.instructions[i], i, live, RI, RF, run_collective)
                RST[live.to(dev)] = RUNNING
                RPC[live.to(dev)] = g.blocks.of[i + 1]
                rounds += 1
                continue
            waits = {(int(s), starts[int(p)]) for s, p in zip(sts.tolist(), pcs.tolist())}
            raise divergence_error(waits, program.instructions, AT_BARRIER)

    def _collective(self, memory, ins, i: int, live, RI, RF, run_collective) -> None:
        if isinstance(ins, I.PoolAlloc):
            memory.allocate_pool(ins.size, ins.handle)
            return
        if isinstance(ins, I.PoolFree):
            memory.free_pool(ins.handle)
            return
        if run_collective is None:
            raise UnsupportedError(f"instruction {i} ({ins.name}): a collective inside a register program needs "
                                   "the backend's array route (LaneKernel.launch(run_collective=...))")
        ri, rf = RI.cpu().numpy(), RF.cpu().numpy()
        run_collective(ins, i, thread_views(ri, rf, live.tolist(), self.gen.islots, self.gen.fslots))
        RI.copy_(RI.new_tensor(ri))
        RF.copy_(RF.new_tensor(rf))

    def _raise(self, memory, params, scratch, max_steps: int, rounds: int):
        """The BackendError of the lane the reference would have met first, in its words."""
        import torch

        err = scratch.err[:params.config.total_threads() * 4].view(-1, 4).to("cpu", copy=True)
        scratch.err.zero_()
        scratch.flag.zero_()
        failed = torch.nonzero(err[:, 0]).flatten().tolist()
        bt = params.config.block_threads()
        if self.gen.collectives:
            lane = min(failed, key=lambda l: (int(err[l, 3]), l))
        else:
            lane = min(failed, key=lambda l: (l // bt, int(err[l, 3]), l))
        code, i, value = (int(x) for x in err[lane, :3])
        if code == E_BARRIER:
            raise barrier_ids_error(i, {int(err[l, 2]) for l in failed if int(err[l, 0]) == E_BARRIER and int(err[l, 1]) == i})
        raise fault_error(self.program, code, i, lane, lambda: replay(self.program, i, value, memory, params, max_steps))


def replay(program, i: int, value: int, memory, params, max_steps: int) -> None:
    """Run instruction i alone in the reference interpreter over a shadow of `memory` (same handles,
    sizes and freed handles, zero bytes), its address register holding `value`: it raises the
    reference's BackendError for that access, word for word."""
    import numpy as np

    from ...memory import Memory

    shadow = Memory()
    shadow.buffers = {h: np.zeros(int(t.numel()), dtype=np.uint8) for h, t in memory.buffers.items()}
    shadow.pools = {h: np.zeros(int(t.numel()), dtype=np.uint8) for h, t in memory.pools.items()}
    shadow._freed = dict(memory._freed)
    replay_access(program, i, value, shadow, params.config, max_steps)


@dataclass
class _Scratch:
    err: object
    flag: object
    stack: object
    dummy: object


_SCRATCH: dict[int, _Scratch] = {}
_scratch_lock = threading.Lock()


def _scratch(memory, lanes: int, call: bool) -> _Scratch:
    """Per-memory error rows (zero between launches: only a failing launch writes them), flag, call stacks."""
    import torch

    dev = memory.device
    with _scratch_lock:
        s = getattr(memory, "_lanes_scratch", None)
        if s is None:
            z = torch.zeros
            s = _Scratch(z(4, dtype=torch.int64, device=dev), z(1, dtype=torch.int32, device=dev),
                         z(1, dtype=torch.int32, device=dev), z(1, dtype=torch.int64, device=dev))
            memory._lanes_scratch = s
        if s.err.numel() < 4 * lanes:
            s.err = torch.zeros(4 * _pow2(lanes), dtype=torch.int64, device=dev)
        if call and s.stack.numel() < lanes * MAX_CALL_DEPTH:
            s.stack = torch.empty(lanes * MAX_CALL_DEPTH, dtype=torch.int32, device=dev)
        return s


def _table(memory, static_handles, shared, shared_bytes: int, inputs: list):
    """One device tensor holding (base address, size) per handle (-1 size for none), then the shared
    scratch's base and size, then the 256 initial integer registers and the 256 float ones (as bits):
    one host-to-device copy per launch, none when nothing changed since the last launch."""
    import torch

    key = (memory.generation, frozenset(static_handles), shared.data_ptr(), shared_bytes, tuple(inputs))
    cached = getattr(memory, "_lanes_table", None)
    if cached is not None and cached[0] == key:
        return cached[1]
    hmax = max([0, *memory.buffers, *memory.pools, *static_handles])
    tab = [0, -1] * (hmax + 2)
    cm = memory.class_memory
    tab[0], tab[1] = cm.data_ptr(), cm.numel()
    for table in (memory.buffers, memory.pools):
        for h, t in table.items():
            tab[2 * h], tab[2 * h + 1] = t.data_ptr(), t.numel()
    tab[2 * (hmax + 1)], tab[2 * (hmax + 1) + 1] = shared.data_ptr(), shared_bytes
    t = torch.tensor(tab + inputs, dtype=torch.int64, device=memory.device)
    k = len(tab)
    value = (t, hmax + 1, t[k:k + 256], t[k + 256:k + 512].view(torch.float64))
    memory._lanes_table = (key, value)
    return value


def _bits(x: float) -> int:
    return struct.unpack("<q", struct.pack("<d", x))[0]


# Triton fuses a * b + c into one fma by default (LLVM contraction, ptxas --fmad); the ISA rounds each step
EXACT = {"enable_fp_fusion": False}


def _run(kernel, nb: int, args, block: int, memory) -> None:
    warps = max(1, min(8, block // 32))
    if memory.device.type == "cpu":
        import numpy as np
        with np.errstate(all="ignore"):  # the interpreter computes masked-off lanes too
            kernel[(nb,)](*args, BLOCK=block, num_warps=warps, **EXACT)
    else:
        kernel[(nb,)](*args, BLOCK=block, num_warps=warps, **EXACT)


_ARG_TYPES = {"TAB": "*i64", "INI_I": "*i64", "INI_F": "*fp64", "ERR": "*i64", "FLAG": "*i32", "STK": "*i32",
              "ACC": "*fp64", "PHASE": "*i64", "RI": "*i64", "RF": "*fp64", "RP": "*i8", "RPC": "*i32", "RST": "*i32",
              "RBUD": "*i64", "RSP": "*i32", "RWID": "*i64", "RSEG": "*i32"}


def build_for(program, arch: int = 90, block: int = 128, num_warps: int = 4):
    """Compile a program's kernel through Triton's real pipeline (to PTX and a cubin) for compute
    capability `arch`, without a GPU: the check that generated code is valid GPU Triton, which the
    interpreter never makes. Needs TRITON_INTERPRET unset when the kernel is loaded."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from .source import load

    source, _ = generate(program, program.digest(), interpreted=False)
    fn = load(source, "lanes")
    sig = {n: "constexpr" if n == "BLOCK" else _ARG_TYPES.get(n, "i32") for n in fn.arg_names}
    return triton.compile(ASTSource(fn, sig, constexprs={"BLOCK": block}), target=GPUTarget("cuda", arch, 32),
                          options=dict(num_warps=num_warps, **EXACT))


_CACHE = None
_cache_lock = threading.Lock()


def _cache():
    global _CACHE
    with _cache_lock:
        if _CACHE is None:
            from ...cache import ProgramCache
            _CACHE = ProgramCache(1024, libraries=("triton", "torch"))
        return _CACHE


def compile_program(program) -> LaneKernel:
    """The LaneKernel of a (validated) register program, cached by its Blake3 key (the program, this
    generator, interpreter or GPU, library versions); UnsupportedError naming the first instruction
    it cannot run exactly."""
    from .device_memory import interpreting

    interpreted = interpreting()

    def build(p) -> LaneKernel:
        bad = unsupported(p)
        if bad is not None:
            i, why = bad
            raise UnsupportedError(f"instruction {i} ({p.instructions[i].name}): the triton backend cannot run it: {why}")
        source, gen = generate(p, p.digest(), interpreted)
        return LaneKernel(p, source, gen)

    return _cache().get_or_compile(program, build, "triton-lanes",
                                   {"generator": GENERATOR_VERSION, "interpreted": interpreted})


__all__ = ["compile_program", "LaneKernel", "generate", "unsupported", "build_for", "MAX_CALL_DEPTH"]
