"""Program -> Python source of numba functions -> native code, cached in memory and on disk.

The program is cut into basic blocks (eidos.isa.codegen); a thread runs a dispatch loop over
block ids (`pc`), each block straight-line numba code on locals written by the shared handler
table through this target's primitives (`Gen`): ISA register r is two locals, i<r> (int64; U64
as its bit pattern) and f<r> (float64), predicate p is p<k>. LLVM keeps them in machine registers.

Two shapes of generated code (docs/isa.md's scheduling, reproduced exactly):
- threads: no BarSync, no collective, no shared memory. One function runs every thread start
  to end: `run_seq` (thread order, as the reference) or `run_par` (prange over threads) when
  the launch's memory accesses provably never touch another thread's bytes (`Accesses`, below).
- rounds: barriers, shared memory or collectives. Registers live in per-thread rows between
  suspensions; each round runs every runnable block's threads, in order, until each exits,
  waits at a barrier or reaches a collective (lockstep phases split at barriers); a block whose
  threads all wait at one barrier runs again; when none can, Python runs the collective once for
  the grid (or reports the divergence) and resumes. `rounds_par` runs blocks in parallel when
  the launch is hazard-free across threads.

Memory is addressed by raw byte address (base pointer + offset, unaligned loads and stores);
every access is bounds-checked, and a failing one records (code, instruction, thread, operand)
in `err` so Python re-raises the reference's exact BackendError (eidos.isa.faults).
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from pathlib import Path

from ... import instructions as I
from ...address import CLASS_BYTES, POINTER_SHIFT, Register, Space, Special
from ...cache import cache_root, kernel_dir, trim
from ...codegen import Blocks, Emitter, basic_blocks, emit_block, generator_version, import_source, s64
from ...codegen.state import AT_BARRIER, AT_COLLECTIVE, EXITED, FAILED, RUNNING
from ...faults import E_BARRIER, E_BUDGET, E_MEMORY, E_NEIGHBOUR, E_STACK, MAX_CALL_DEPTH
from ...types import Type

_HERE = Path(__file__).parent
# Generated modules name the code that generated them, so a changed generator never loads stale code.
GENERATOR_VERSION = generator_version(_HERE / "compile.py", _HERE / "runtime.py")

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
    """'array' (collectives only, no per-thread operand: none writes a register or addresses memory through one;
    scalar operands are read from the launch's starting registers), 'threads' or 'rounds' (see the module doc)."""
    ins = program.instructions
    if program.entry == 0 and ins and all(
            x.collective and not x.registers_written() and not any(a.space is Space.REGISTER for _, a in x.addresses())
            for x in ins):
        return "array"
    for x in ins:
        if x.collective or isinstance(x, (I.BarSync, I.LDS, I.STS)):
            return "rounds"
    return "threads"


@dataclass
class Site:
    """A memory operand with a constant address, resolved by Python at each launch."""
    index: int          # instruction
    space: Space
    handle: int
    offset: int
    size: int


# ---- code generation: the primitives of the shared handler table ----------------------------------

def _flit(x: float) -> str:
    if math.isnan(x):
        return "np.nan"
    if math.isinf(x):
        return "np.inf" if x > 0 else "-np.inf"
    return repr(float(x))


_FUN = {"EXP": "math.exp({x})", "LOG": "flog({x})", "SQRT": "fsqrt({x})", "SIN": "ftrig(0, {x})",
        "COS": "ftrig(1, {x})", "TAN": "ftrig(2, {x})", "TANH": "math.tanh({x})", "SIGMOID": "fsigmoid({x})",
        "RCP": "1.0 / {x}", "RSQRT": "1.0 / fsqrt({x})", "FLOOR": "fkeep(0, {x})", "CEIL": "fkeep(1, {x})",
        "TRUNC": "fkeep(2, {x})", "ROUND": "fkeep(3, {x})", "GELU": "fgelu({x})", "SWISH": "{x} * fsigmoid({x})"}


class Gen(Emitter):
    """numba code for one thread at a time: scalar locals, `if` for predicates, `break` to leave the thread."""

    Unsupported = NotCompilable

    def __init__(self, program, blocks: Blocks, mode: str) -> None:
        super().__init__(program, blocks)
        self.mode = mode                        # "threads" or "rounds"
        self.sites: list[Site] = []

    def fail(self, code: int, index: int, value: str = "0") -> None:
        self.emit(f"state = fail(err, {code}, {index}, g, {value})")
        self.emit("break")

    def checked(self, expr: str, index: int, value: str = "0") -> str:
        """`at = expr` (a helper returning -1 on failure), then leave the thread when it failed."""
        self.emit(f"at = {expr}")
        self.emit("if at < 0:")
        self.depth += 1
        self.fail(E_MEMORY if not expr.startswith("naddr") else E_NEIGHBOUR, index, value)
        self.depth -= 1
        return "at"

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
        """Leave the thread (rounds): registers to their rows, then the thread's state."""
        self.emit(f"PCS[l] = {resume_block}; WAIT[l] = {wait}; state = {state}")
        self.emit("break")

    # ---- expressions ------------------------------------------------------------------------------
    def rnd(self, ty: Type, e: str) -> str:
        return {Type.F64: f"({e})", Type.F32: f"rf32({e})", Type.F16: f"rf16({e})", Type.BF16: f"rbf16({e})"}[ty]

    def where(self, c: str, a: str, b: str) -> str:
        return f"({a} if {c} else {b})"

    def ult(self, a: str, b: str) -> str:
        return f"ult64({a}, {b})"

    def u64(self, a: str) -> str:
        return f"np.uint64({a})"

    def mod(self, ty: Type, a: str, m: int) -> str:
        return f"umod64({a}, {m})" if ty is Type.U64 else f"({a} % {m})"

    def shift(self, ty: Type, b: str) -> str:
        return f"{b} % {ty.bits}"

    def shr_u64(self, a: str, s: str) -> str:
        return f"ushr64({a}, {s})"

    def int_const(self, v: int) -> str:
        return f"np.int64({v})"

    def float_const(self, v: float) -> str:
        return _flit(v)

    def special(self, s: Special) -> str:
        return f"np.int64({_SPECIAL[s]})"

    def int_to_float(self, src: Type, dst: Type, e: str) -> str:
        v = f"np.uint64({e})" if src is Type.U64 else e  # one rounding (through float32 for BF16, as the reference)
        return {Type.F64: f"np.float64({v})", Type.F32: f"np.float64(np.float32({v}))",
                Type.F16: f"rf16(np.float64({v}))", Type.BF16: f"rbf16(np.float32({v}))"}[dst]

    def float_to_int(self, ty: Type, e: str) -> str:
        if ty is Type.U64:
            return f"f2u64({e})"
        return f"f2i({e}, np.int64({s64(ty.min_value)}), np.int64({s64(ty.max_value)}))"

    def fabs(self, x: str) -> str:
        return f"abs({x})"

    def fsign(self, x: str) -> str:
        return f"fsign({x})"

    def float_fun(self, op: str, ty: Type, x: str) -> str:
        return self.rnd(ty, _FUN[op].format(x=x))

    def iabs(self, x: str) -> str:
        return f"abs({x})"

    def ineg(self, x: str) -> str:
        return f"-{x}"

    def fneg(self, x: str) -> str:
        return f"-{x}"

    def as_int(self, cond: str) -> str:
        return f"np.int64({cond})"

    def bool_or(self, a: str, b: str) -> str:
        return f"{a} or {b}"

    def int_clamp(self, ty: Type, x: str, lo: str, hi: str) -> str:
        self.emit(f"tt = {self.where(self.lt(ty, x, lo), lo, x)}")
        return self.where(self.lt(ty, "tt", hi), "tt", hi)

    def phase(self, class_id: int) -> str:
        return f"phase[{class_id}]"

    # ---- statements -------------------------------------------------------------------------------
    def set(self, name: str, expr: str) -> None:
        self.emit(f"{name} = {expr}")

    def move(self, dst: Register, src: Register, ty: Type) -> None:
        self.emit(f"{self.i(dst)} = {self.i(src)}; {self.f(dst)} = {self.f(src)}")

    def select(self, dst: Register, pred: str, t: Register, f: Register, ty: Type) -> None:
        self.emit(f"if {pred}:")
        self.emit(f"    {self.i(dst)} = {self.i(t)}; {self.f(dst)} = {self.f(t)}")
        self.emit("else:")
        self.emit(f"    {self.i(dst)} = {self.i(f)}; {self.f(dst)} = {self.f(f)}")

    def address(self, ins, i: int, addr, size: int) -> str:
        if addr.space in (Space.BUFFER, Space.POOL, Space.CLASS):
            j = len(self.sites)
            self.sites.append(Site(i, addr.space, addr.handle, addr.offset, size))
            self.emit(f"if cst[{j}] < 0:")
            self.depth += 1
            self.fail(E_MEMORY, i)
            self.depth -= 1
            return f"cst[{j}]"
        if addr.space is Space.SHARED:
            return self.checked(f"saddr({addr.offset}, {size}, shb, shsz)", i)
        r = self.i(addr.reg)
        if isinstance(ins, (I.LDS, I.STS)):
            return self.checked(f"saddr({r}, {size}, shb, shsz)", i, r)
        # inline (a helper taking the tables would incref/decref them on every access)
        self.emit(f"hh = {r} >> 32")
        return self.checked(f"(tbb[hh] + ({r} & 0xFFFFFFFF)) if ({r} >= 0 and hh < ntb and "
                            f"({r} & 0xFFFFFFFF) <= tbs[hh] - {size}) else -1", i, r)

    def neighbour(self, ins, i: int, reg: Register) -> str:
        n = ins.ty.size_bytes
        a = self.i(reg)
        return self.checked(f"naddr({a}, {ins.offset * n}, {n}, tbb[0])", i, a)

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

    def store(self, src: Register, ty: Type, at: str, uniform: bool) -> None:
        """Threads run one at a time in order, so the last thread's store wins without help."""
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

    def accumulate(self, class_id: int, v: str) -> str:
        self.emit(f"acc[{class_id}] = acc[{class_id}] + {v}")
        return f"acc[{class_id}]"

    def set_phase(self, class_id: int, v: str) -> None:
        self.emit(f"phase[{class_id}] = {v}")

    # ---- control ------------------------------------------------------------------------------------
    def jump(self, cond: str | None, target: int, i: int, back: bool) -> None:
        if cond is not None:
            self.emit(f"if {cond}:")
            self.depth += 1
        if back:
            self.back_edge(i)
        self.goto(target)
        if cond is not None:
            self.depth -= 1
            self.goto(i + 1)

    def call(self, i: int, target: int) -> None:
        self.emit(f"if sp >= {MAX_CALL_DEPTH}:")
        self.depth += 1
        self.fail(E_STACK, i)
        self.depth -= 1
        self.back_edge(i)
        self.emit(f"stk[sp] = {self.blocks.of[i + 1]}; sp += 1")
        self.goto(target)

    def ret(self) -> None:
        self.emit("if sp == 0:")
        self.emit("    state = EXITED")
        self.emit("    break")
        self.emit("sp -= 1; pc = stk[sp]")
        self.emit("continue")

    def exit(self) -> None:
        self.emit("state = EXITED")
        self.emit("break")

    def barrier(self, i: int, barrier_id: int) -> None:
        self.suspend("AT_BARRIER", self.blocks.of[i + 1], str(barrier_id))

    def wait_collective(self, i: int) -> None:
        self.suspend("AT_COLLECTIVE", self.blocks.of[i])


# ---- whole functions ---------------------------------------------------------------------------

HEADER = """\
# Generated by eidos.isa.backends.cpu.compile (generator {version}) for program {digest}.
import math
import numpy as np
from numba import njit, prange
from eidos.isa.backends.cpu.runtime import *  # noqa: F403

EXITED, RUNNING, AT_BARRIER, AT_COLLECTIVE, FAILED = {states}
"""


def _body(g: Gen) -> list[str]:
    """The dispatch loop of one thread, as lines at depth 0 (the caller indents)."""
    program, blocks = g.program, g.blocks
    g.lines, g.depth = [], 0
    single = len(blocks.starts) == 1 and not any(
        isinstance(x, (I.BRA, I.CALL, I.RET, I.LOOP, I.BarSync)) or x.collective for x in program.instructions)
    g.emit("while True:")
    g.depth += 1
    n = len(program.instructions)
    for b, start in enumerate(blocks.starts):
        stop = blocks.stop(b, n)
        if not single:
            g.emit(f"{'if' if b == 0 else 'elif'} pc == {b}:")
            g.depth += 1
        if not emit_block(g, start, stop):
            if single or stop >= n:
                g.exit()
            else:
                g.goto(stop)
        if not single:
            g.depth -= 1
    if not blocks.starts:
        g.exit()
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
    g = Gen(program, blocks, "threads" if shape == "threads" else "rounds")
    body = _body(g)
    regs, preds = sorted(g.kinds), sorted(g.preds)
    slot = {r: k for k, r in enumerate(regs)}
    entry = blocks.of[program.entry]
    states = ", ".join(str(x) for x in (EXITED, RUNNING, AT_BARRIER, AT_COLLECTIVE, FAILED))
    src = [HEADER.format(version=GENERATOR_VERSION, digest=digest, states=states)]
    args = "cfg, ini, inf, tbb, tbs, ntb, cst, acc, phase, err, budget0"
    if g.mode == "threads":
        for name, par in (("run_seq", False), ("run_par", True)):
            lines = [f"@njit(parallel={par}, **OPTS)", f"def {name}({args}):", "    n = cfg[0]"]
            lines.append(f"    for g in {'prange' if par else 'range'}(n):")
            thread = ["if err[0] != 0:", "    continue"] if par else []
            thread += _prologue_consts(g)
            thread += [f"i{r} = ini[{r}]; f{r} = inf[{r}]" for r in regs]
            thread += [f"p{k} = False" for k in preds]
            thread += ["budget = budget0", f"pc = {entry}", "state = RUNNING", "tt = np.int64(0)", "at = np.int64(0)", "hh = np.int64(0)"]
            if g.uses_call:
                thread += [f"stk = np.empty({MAX_CALL_DEPTH}, np.int64)", "sp = 0"]
            thread += body
            if not par:
                thread += ["if state == FAILED:", "    return"]
            lines += _indent(thread, 2)
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
            thread = _prologue_consts(g)
            thread += [f"i{r} = RI[l, {slot[r]}]; f{r} = RF[l, {slot[r]}]" for r in regs]
            thread += [f"p{k} = PR[l, {k}]" for k in preds]
            thread += ["budget = BUD[l]", "pc = PCS[l]", "state = RUNNING", "tt = np.int64(0)", "at = np.int64(0)", "hh = np.int64(0)"]
            if g.uses_call:
                thread += ["stk = STK[l]", "sp = SPS[l]"]
            thread += body
            thread += [f"RI[l, {slot[r]}] = i{r}; RF[l, {slot[r]}] = f{r}" for r in regs]
            thread += [f"PR[l, {k}] = p{k}" for k in preds]
            thread += ["BUD[l] = budget", "STATE[l] = state"]
            if g.uses_call:
                thread += ["SPS[l] = sp"]
            lines += _indent(thread, 4)
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
                      "                if mixed:", f"                    err[0] = {E_BARRIER}; err[1] = b", "                    return -1",
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

def default_cache_dir() -> Path:
    """cache_root()/isa-cpu/<build tag> (eidos.isa.cache.kernel_dir)."""
    return kernel_dir("isa-cpu")


def load_module(source: str, name: str, directory: Path):
    """The generated module `name` (written once to directory/name.py: numba's on-disk cache stays valid), its
    functions' numba cache files sealed (seal_numba_cache)."""
    fresh = f"eidos_isa_cpu_{name}" not in sys.modules
    module = import_source(source, directory / f"{name}.py", f"eidos_isa_cpu_{name}")
    if fresh:
        from .runtime import seal_numba_cache

        seal_numba_cache(module)
        if not _TRIMMED and directory.parent.parent == cache_root():
            _TRIMMED.append(True)   # once a process, when it first loads or compiles: keep the cache bounded
            trim()
    return module


_TRIMMED: list = []


# ---- may a launch run its threads in parallel? -------------------------------------------------
#
# May a launch run its threads (or blocks) in parallel and still equal the reference's thread order?
#
# Yes when no thread can touch bytes another thread stores. Addresses are followed as affine forms
#   const + sum(coef * initial register) + sum(coef * launch constant) + stride * global_id
# for registers written once, in the program's straight-line prefix (before any label or branch;
# barriers and collectives do not end it),
# so every later read sees that one value. At launch the initial registers are known, so each
# access becomes (handle, first byte, stride, size) and pairs of accesses are checked exactly.
# Anything not of that form (a store through a loop-carried pointer, ResAccum, PhaseWrite, a
# class-memory neighbour store) keeps the launch in thread order.

_UNIFORM = {Special.LANE_COUNT, Special.BLOCK_THREADS, Special.BLOCK_DIM_X, Special.BLOCK_DIM_Y,
            Special.BLOCK_DIM_Z, Special.GRID_DIM_X, Special.GRID_DIM_Y, Special.GRID_DIM_Z}
_LOW = (1 << POINTER_SHIFT) - 1
_CONTROL = (I.BRA, I.CALL, I.RET, I.LOOP, I.EXIT)  # a barrier or a collective does not branch


def _add(a, b, sign=1):
    if a is None or b is None:
        return None
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0) + sign * v
    return out


def _scale(a, c):
    return None if a is None else {k: v * c for k, v in a.items()}


def _const(a):
    if a is not None and set(a) <= {"1"}:
        return a.get("1", 0)
    return None


class Accesses:
    """The program's memory accesses, each (kind 'load'/'store', space, handle, form or offset, size, why)."""

    def __init__(self, program) -> None:
        ins = program.instructions
        writes: dict[int, int] = {}
        for x in ins:
            for r in x.registers_written():
                if isinstance(r, Register):
                    writes[r.index] = writes.get(r.index, 0) + 1
        prefix = len(ins)
        for pos in program.labels.values():
            prefix = min(prefix, pos)
        for i, x in enumerate(ins):
            if isinstance(x, _CONTROL):
                prefix = min(prefix, i)
                break
        if program.entry != 0:
            prefix = 0
        forms: dict[int, dict | None] = {}
        read_early: set[int] = set()

        def form(r: Register):
            if r.index in forms:
                return forms[r.index]
            if writes.get(r.index, 0) == 0:
                return {("r", r.index): 1}
            return None

        for i in range(prefix):
            x = ins[i]
            for r in x.registers_read():
                if isinstance(r, Register) and writes.get(r.index, 0) and r.index not in forms:
                    read_early.add(r.index)
            written = [r for r in x.registers_written() if isinstance(r, Register)]
            if len(written) != 1 or writes.get(written[0].index) != 1 or written[0].index in read_early:
                continue
            f = None
            ty = getattr(x, "ty", None)
            if isinstance(x, I.MOV):
                if isinstance(x.src, Special):
                    f = {"gid": 1} if x.src is Special.GLOBAL_ID else ({("s", x.src): 1} if x.src in _UNIFORM else None)
                else:
                    f = form(x.src)
            elif isinstance(x, I.MOV_IMM) and ty.is_integer:
                f = {"1": int(x.value)}
            elif isinstance(x, I.CVT) and x.src_ty.is_integer and x.dst_ty.is_integer:
                f = form(x.src)
            elif ty is not None and getattr(ty, "is_integer", False):
                if isinstance(x, I.ADD):
                    f = _add(form(x.lhs), form(x.rhs))
                elif isinstance(x, I.SUB):
                    f = _add(form(x.lhs), form(x.rhs), -1)
                elif isinstance(x, I.MUL):
                    a, b = form(x.lhs), form(x.rhs)
                    ca, cb = _const(a), _const(b)
                    f = _scale(b, ca) if ca is not None else (_scale(a, cb) if cb is not None else None)
                elif isinstance(x, I.SHL):
                    c = _const(form(x.amount))
                    f = _scale(form(x.src), 1 << (c % ty.bits)) if c is not None else None
            forms[written[0].index] = f
        self.unsafe: str | None = None
        self.list: list[tuple] = []
        for i, x in enumerate(ins):
            if isinstance(x, (I.ResAccum, I.PhaseWrite)):
                self.unsafe = self.unsafe or f"instruction {i} ({x.name}) updates state every thread shares"
            elif isinstance(x, I.NBRStore):
                self.unsafe = self.unsafe or f"instruction {i} (NBRStore) stores at a run-time class-memory address"
            elif isinstance(x, (I.LDG, I.STG, I.PoolLoad, I.PoolStore, I.NBRLoad)):
                kind = "store" if isinstance(x, (I.STG, I.PoolStore)) else "load"
                size = x.ty.size_bytes
                if isinstance(x, (I.PoolLoad, I.PoolStore)):
                    self.list.append((kind, Space.POOL, x.pool, {"1": x.offset}, size, i))
                    continue
                if isinstance(x, I.NBRLoad):
                    self.list.append((kind, None, 0, None, size, i))
                    continue
                a = x.src if kind == "load" else x.dst
                if a.space is Space.REGISTER:
                    self.list.append((kind, Space.REGISTER, 0, form(a.reg), size, i))
                else:
                    h = 0 if a.space is Space.CLASS else a.handle
                    off = a.class_id * CLASS_BYTES + a.offset if a.space is Space.CLASS else a.offset
                    self.list.append((kind, a.space, h, {"1": off}, size, i))
        self.has_stores = any(k == "store" for k, *_ in self.list)

    def check(self, registers: dict, config) -> str | None:
        """None when threads may run in parallel for this launch, else the reason they may not."""
        if self.unsafe:
            return self.unsafe
        if not self.has_stores:
            return None
        n = config.total_threads()
        env = {("s", s): v for s, v in _launch_values(config).items()}
        concrete = []
        for kind, space, h, f, size, i in self.list:
            if f is None:
                return f"instruction {i}: the address is not an affine function of the thread's id"
            base, stride = 0, 0
            for k, c in f.items():
                if k == "1":
                    base += c
                elif k == "gid":
                    stride += c
                elif k[0] == "r":
                    v = registers.get(k[1], 0)
                    if not isinstance(v, int):
                        return f"instruction {i}: the address register holds {v!r}"
                    base += c * v
                else:
                    base += c * env[k]
            if space is Space.REGISTER:
                if base < 0:
                    return f"instruction {i}: negative pointer"
                h, base = base >> POINTER_SHIFT, base & _LOW
                last = base + stride * (n - 1)
                if not (0 <= last <= _LOW):
                    return f"instruction {i}: the threads' addresses leave one allocation"
            concrete.append((kind, h, base, stride, size, i))
        for a in concrete:
            if a[0] != "store":
                continue
            if abs(a[3]) < a[4] and n > 1:
                return f"instruction {a[5]}: threads store to overlapping bytes (stride {a[3]}, {a[4]} bytes)"
            for b in concrete:
                if b is not a and b[1] == a[1] and _conflict(a, b, n):
                    return f"instructions {a[5]} and {b[5]}: one thread may touch bytes another thread stores"
        return None


def _launch_values(config) -> dict:
    (gx, gy, gz), (bx, by, bz) = config.grid, config.block
    return {Special.LANE_COUNT: config.total_threads(), Special.BLOCK_THREADS: bx * by * bz,
            Special.BLOCK_DIM_X: bx, Special.BLOCK_DIM_Y: by, Special.BLOCK_DIM_Z: bz,
            Special.GRID_DIM_X: gx, Special.GRID_DIM_Y: gy, Special.GRID_DIM_Z: gz}


def _conflict(a, b, n: int) -> bool:
    """Whether thread i's access a and thread j != i's access b can share a byte."""
    _, _, oa, sa, za, _ = a
    _, _, ob, sb, zb, _ = b
    if sa == sb and sa != 0:
        # bytes meet when s*k lies strictly inside (ob - oa - za, ob - oa + zb), k = i - j != 0
        d = ob - oa
        lo, hi = d - za, d + zb
        s = sa
        if s < 0:
            s, lo, hi = -s, -hi, -lo
        k_lo = lo // s + 1
        k_hi = -((-hi) // s) - 1
        k_lo, k_hi = max(k_lo, -(n - 1)), min(k_hi, n - 1)
        return any(k != 0 for k in range(k_lo, k_hi + 1)) if k_hi - k_lo < 4 else True
    span_a = sorted((oa, oa + sa * (n - 1)))
    span_b = sorted((ob, ob + sb * (n - 1)))
    return span_a[0] < span_b[1] + zb and span_b[0] < span_a[1] + za
