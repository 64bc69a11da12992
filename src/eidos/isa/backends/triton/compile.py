"""Register programs over threads -> one Triton kernel each, and generated source -> its kernel.

One Triton program instance runs one ISA block: its threads are the elements of [BLOCK]
vectors, so a register is a tensor variable (`i<r>` int64, U64 as its bit pattern; `f<r>`
float64 holding a value exact in the instruction's type; `p<k>` a predicate), made only for
the kinds each register is used as. The shared handler table (eidos.isa.codegen) writes each
instruction through this target's primitives (`Gen`): integer results wrap to their width
inline; floats are computed in binary64 and rounded once (F16 through a round-to-odd float32,
BF16 by integer rounding of the float32 bits, as the reference does).

Control flow: the program is cut into basic blocks and a thread carries a block id `pc`. A
straight-line program is plain vector code. Anything else is one `while` loop whose iteration
visits every block in program order under the mask `pc == block`, so a forward branch
(if/else, predicated skips, divergent threads) completes within one iteration as masked code and
only a back edge (LOOP, a backward BRA, CALL/RET) takes another; a block no thread is in is
skipped. CALL/RET keep a per-thread stack of block ids in scratch memory (1,024 deep, as the
reference). BarSync is where the iteration finds no thread running: if every live thread of the
block waits at a barrier with one id, a CTA barrier (tl.debug_barrier) releases them.

Memory: every access is a masked gather/scatter of bytes at an int64 address (unaligned
access is allowed by the ISA), through a table of (base address, size) per handle (handle 0 is
class memory; the slot after the last handle is the block's shared memory), bounds-checked in
the kernel. A failing access stops its thread and records (code, instruction, value, barrier
phase) in a per-thread row (runtime.py raises the reference's error).

Generated source is written once to a folder named by its Blake3 and imported from there
(triton.jit reads a kernel's source with inspect and hashes it for its own disk cache), so a
second load in this process is a dict hit and one in a later process reuses the file and
Triton's compiled binary keyed by it.
"""

from __future__ import annotations

import struct
import threading
from pathlib import Path

import blake3

from eidos.errors import BackendError, UnsupportedError

from ... import instructions as I
from ...address import CLASS_BYTES, CLASS_MEMORY_BYTES, Register, Space, Special
from ...codegen import CONTROL, HANDLERS, Blocks, Emitter, basic_blocks, emit_block, generator_version, s64, wrap
from ...codegen.loader import cache_root, import_source
from ...codegen.state import AT_BARRIER, AT_COLLECTIVE, EXITED, FAILED, RUNNING
from ...faults import E_BARRIER, E_BUDGET, E_MEMORY, E_NEIGHBOUR, E_STACK, MAX_CALL_DEPTH
from ...types import Type
from .runtime import _ANY_GPU, _ANY_INTERPRETED, _FMA_GPU, _FMA_INTERPRETED, EXACT, HEADER, ThreadKernel

_HERE = Path(__file__).parent

GUARD_MIN = 12  # blocks longer than this are skipped when no thread is in them

# The generator's own text is part of every cache key, so a changed generator never reuses a kernel.
GENERATOR_VERSION = generator_version(_HERE / "compile.py", _HERE / "runtime.py")


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
        self.emit(f"fc, fi, fv, fs = _fail(bad, {code}, {index}, {value}, seg, fc, fi, fv, fs)")
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



# ---- whole kernels ------------------------------------------------------------------------------

KERNEL_ARGS = ("TAB, NTB, SH, INI_I, INI_F, ERR, FLAG, STK, ACC, PHASE, "
               "RI, RF, RP, RPC, RST, RBUD, RSP, RWID, RSEG, NI, NF, "
               "BUDGET0, LANES, BT, BX, BY, BZ, GX, GY, GZ, BLOCK: tl.constexpr")


def _prologue(g: Gen, islots: dict, fslots: dict, entry: int) -> list[str]:
    out = ["pid = tl.program_id(0)", "t = tl.arange(0, BLOCK)", "live = t < BT",
           "tix = t.to(tl.int64)", "bix = pid.to(tl.int64)", "gid = bix * BT + tix",
           "SHB = tl.load(TAB + 2 * NTB)", "seg = pid * 0", "fc = tix * 0", "fi = fc", "fv = fc", "fs = fc"]
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
        return ["_failed(ERR, FLAG, gid, fc, fi, fv, fs)"]
    out = ["_failed(ERR, FLAG, gid, fc, fi, fv, fs)", "tl.store(RST + lrow, st, mask=live)", "tl.store(RPC + lrow, pc, mask=live)",
           "tl.store(RBUD + lrow, bud, mask=live)", "tl.store(RSP + lrow, sp, mask=live)",
           "tl.store(RWID + lrow, wid, mask=live)", "tl.store(RSEG + pid, seg)"]
    out += [f"tl.store(RI + lrow * NI + {k}, i{r}, mask=live)" for r, k in islots.items()]
    out += [f"tl.store(RF + lrow * NF + {k}, f{r}, mask=live)" for r, k in fslots.items()]
    out += [f"tl.store(RP + lrow * 16 + {k}, p{k}.to(tl.int8), mask=live)" for k in sorted(g.preds)]
    return out


def _body(g: Gen) -> list[str]:
    """The threads' code at depth 0: straight-line, or the block-visiting while loop."""
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
        if guard:  # skip a block no thread is in (a CTA-wide reduction: worth it for larger blocks only)
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
    # nobody running: open the barrier when every live thread of the block waits at one
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
    g.emit(f"fc, fi, fv, fs = _fail(mixed, {E_BARRIER}, pid, wid, seg, fc, fi, fv, fs)")
    g.emit(f"st = tl.where(mixed, {FAILED}, st)")
    g.emit("tl.debug_barrier()")
    g.emit(f"st = tl.where(st == {AT_BARRIER}, {RUNNING}, st)")
    g.emit("seg = seg + 1")
    g.emit(f"go = _any(st == {RUNNING})")
    g.depth -= 2
    return g.lines


def generate(program, digest: str, interpreted: bool) -> tuple[str, Gen]:
    """Triton source for the program's kernel `threads`, and the generator's findings."""
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
    src += "\n\n@triton.jit\ndef threads(" + KERNEL_ARGS + "):\n" + "\n".join("    " + x for x in lines) + "\n"
    return src, g


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

    source, _ = generate(program, program.digest(), interpreted=False)
    fn = load(source, "threads")
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


def compile_program(program) -> ThreadKernel:
    """The ThreadKernel of a (validated) register program, cached by its Blake3 key (the program, this
    generator, interpreter or GPU, library versions); UnsupportedError naming the first instruction
    it cannot run exactly."""
    from .device_memory import interpreting

    interpreted = interpreting()

    def build(p) -> ThreadKernel:
        bad = unsupported(p)
        if bad is not None:
            i, why = bad
            raise UnsupportedError(f"instruction {i} ({p.instructions[i].name}): the triton backend cannot run it: {why}")
        source, gen = generate(p, p.digest(), interpreted)
        return ThreadKernel(p, source, gen)

    return _cache().get_or_compile(program, build, "triton-threads",
                                   {"generator": GENERATOR_VERSION, "interpreted": interpreted})



# ---- generated source -> its @triton.jit function ----------------------------------------------

_LOADED: dict[tuple[str, str], object] = {}
_LOCK = threading.Lock()

def cache_dir() -> Path:
    """$EIDOS_CACHE_DIR (or ~/.cache/eidos) / isa-triton."""
    return cache_root() / "isa-triton"


def key(source: str) -> str:
    return blake3.blake3(source.encode()).hexdigest()


def path_of(source: str) -> Path:
    """Where `source` is (or will be) written: <cache>/<2 hex>/<blake3>/kernel.py."""
    k = key(source)
    return cache_dir() / k[:2] / k / "kernel.py"


def load(source: str, name: str):
    """The object `name` (a @triton.jit function) that `source` defines; BackendError if it defines none."""
    k = key(source)
    fn = _LOADED.get((k, name))
    if fn is not None:
        return fn
    with _LOCK:
        fn = _LOADED.get((k, name))
        if fn is not None:
            return fn
        module = import_source(source, path_of(source), f"eidos_isa_triton_{k[:40]}")
        fn = getattr(module, name, None)
        if fn is None:
            raise BackendError(f"generated triton source {k[:16]} defines no {name!r}; it defines: "
                               f"{', '.join(n for n in vars(module) if not n.startswith('_')) or 'nothing'}")
        _LOADED[(k, name)] = fn
        return fn



__all__ = ["compile_program", "ThreadKernel", "generate", "unsupported", "build_for", "load", "cache_dir", "path_of", "key"]
