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

import math
from dataclasses import dataclass
from pathlib import Path

from ... import instructions as I
from ...address import Register, Space, Special
from ...codegen import Blocks, Emitter, basic_blocks, emit_block, generator_version, import_source, s64
from ...codegen.loader import cache_root
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
    g = Gen(program, blocks, "lanes" if shape == "lanes" else "rounds")
    body = _body(g)
    regs, preds = sorted(g.kinds), sorted(g.preds)
    slot = {r: k for k, r in enumerate(regs)}
    entry = blocks.of[program.entry]
    states = ", ".join(str(x) for x in (EXITED, RUNNING, AT_BARRIER, AT_COLLECTIVE, FAILED))
    src = [HEADER.format(version=GENERATOR_VERSION, digest=digest, states=states)]
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
    return cache_root() / "isa-cpu"


def load_module(source: str, name: str, directory: Path):
    """The generated module `name` (written once to directory/name.py: numba's on-disk cache stays valid)."""
    return import_source(source, directory / f"{name}.py", f"eidos_isa_cpu_{name}")
