"""The array instructions as generated Triton kernels: ParallelMap, ParallelMapBinary, the
optimizer's FusedMap, ParallelReduce and ReduceAdd/Min/Max/Mul.

- An element-wise chain (one map, or a FusedMap's steps) is one kernel: each program instance
  loads a tile of every distinct input range once, runs every step for its elements while they
  sit in registers (each step's result rounded to the element type, as the ISA says), and
  stores each destination once. Ranges that are the same memory are one kernel argument, so a
  step reading an earlier step's output uses the value in the register.
- A reduction is a grid-stride kernel writing one partial per program, then (when there was
  more than one program) a one-program kernel combining the partials. A reduction over a range
  the chain just before it wrote, or read, takes its values from that chain's registers: map and
  reduction are one kernel, one pass over memory.

Generated code calls only Triton builtins and its own helpers (never triton.language's @jit standard
library: tl.zeros, tl.sum ...), so it runs in the interpreter even when triton.language was imported
before TRITON_INTERPRET was set.

ISA semantics (docs/isa.md, semantics.py): floats are computed exactly as the reference's
float64-then-round-once: +, -, *, / and sqrt in float32 for F16/BF16/F32 (correctly rounded,
which equals float64 rounded once) and float64 for F64; transcendentals in float64 (libdevice on
a GPU) rounded once; float contraction into FMA is off. Integers wrap at their width; division
truncates, x / 0 is all ones and MIN / -1 wraps to MIN. Min/Max propagate NaN and order -0.0
below 0.0. Float sums are double-double (about 106 bits) rounded once, so they agree with the
reference's correctly rounded sum; min/max reductions return the last of equal values (as
NumPy's does, -0.0 against 0.0); products are float64 in a tree order (within 2 ulps).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from eidos.errors import BackendError, UnsupportedError

from ... import instructions as I
from ... import semantics
from ...address import CLASS_BYTES, Register, Space
from ...types import Type
from ..reference import arrays as ref
from .compile import load
from .device_memory import interpreting, torch_dtype

M, B, R = I.MapOperation, I.BinaryMapOperation, I.ReduceOperation
MAP_KINDS = (I.ParallelMap, I.ParallelMapBinary, I.FusedMap)
REDUCE_OF = {I.ParallelReduce: None, I.ReduceAdd: R.Sum, I.ReduceMul: R.Product, I.ReduceMin: R.Min,
             I.ReduceMax: R.Max}
HANDLES = MAP_KINDS + tuple(REDUCE_OF)
TRANSCENDENTAL = {M.Exp, M.Log, M.Sin, M.Cos, M.Tan, M.Tanh, M.Sigmoid, B.Pow, B.Atan2}
MAP_WARPS = 8
# A reduction's programs: 64 per SM of 1024 elements an iteration and 4 warps. Measured on an H100
# (map+sum of 2^28 float32, bench/gpu_reduce_grid.py): 0.725-0.760 ms, the device copy's time; 4
# programs per SM of 2048 x 8 warps (one grid-stride wave) left each SM too little to overlap loads
# with the float64 math: 0.907-0.916 ms.
REDUCE_BLOCK = 1024
REDUCE_WARPS = 4
PROGRAMS_PER_SM = 64
# The one program combining the partials: up to 1024 in one 8-warp pass; more (8448 on an H100) in
# passes of 8192 with 16 warps, two loads in flight where 1024 a pass took nine (12.8 us on the H100)
FINISH_SMALL, FINISH_LARGE = (1024, 8), (8192, 16)
INTERPRETER_REDUCE_BLOCK = 64  # the interpreter combines a block's lanes one Python call at a time
WIDE = (1 << 31) - (1 << 16)  # counts at or above this index with int64

_TL = {Type.F16: "tl.float16", Type.BF16: "tl.bfloat16", Type.F32: "tl.float32", Type.F64: "tl.float64",
       Type.I8: "tl.int8", Type.I16: "tl.int16", Type.I32: "tl.int32", Type.I64: "tl.int64",
       Type.U8: "tl.uint8", Type.U16: "tl.uint16", Type.U32: "tl.uint32", Type.U64: "tl.uint64"}


def map_block(ty: Type) -> int:
    """Elements per program of a map kernel: 16 KiB of each operand (4 x 128-bit loads a thread)."""
    return max(1024, min(8192, 16384 // ty.size_bytes))


def check_type(ins, index: int) -> None:
    ty = ins.ty
    if ty.is_extended:
        raise UnsupportedError(f"instruction {index} ({ins.name}): type {ty.name} has no Triton form "
                               "(GPU integers stop at 64 bits); the reference and cpu backends run it exactly")


# ---- source generation -------------------------------------------------------------------------

HEADER = '''import triton
import triton.language as tl
{extern}

@triton.jit
def _neg0(x):
    # sign bit of a float (so -0.0 sorts below 0.0)
    if x.dtype == tl.float64:
        return x.to(tl.int64, bitcast=True) < 0
    return x.to(tl.float32).to(tl.int32, bitcast=True) < 0


@triton.jit
def _fmin(a, b):
    r = tl.where(a < b, a, b)
    r = tl.where(a == b, tl.where(_neg0(a), a, b), r)
    return tl.where((a != a) | (b != b), a + b, r)


@triton.jit
def _fmax(a, b):
    r = tl.where(a > b, a, b)
    r = tl.where(a == b, tl.where(_neg0(a), b, a), r)
    return tl.where((a != a) | (b != b), a + b, r)


@triton.jit
def _sdiv(a, b, LO: tl.constexpr):
    # truncating; x / 0 = -1 (all ones); LO / -1 = LO (wraps)
    bad = (b == 0) | ((a == LO) & (b == -1))
    q = a // tl.where(bad, 1, b)
    return tl.where(b == 0, -1, tl.where(bad, a, q))


@triton.jit
def _udiv(a, b):
    q = a // tl.where(b == 0, 1, b)
    return tl.where(b == 0, (a ^ a) - 1, q)


@triton.jit
def _bf16(x):
    # float32 -> the nearest bfloat16 (ties to even), as float32; by bits, so the interpreter agrees
    u = x.to(tl.uint32, bitcast=True)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16
    return tl.where(x != x, x, r.to(tl.float32, bitcast=True))


@triton.jit
def _bf16_bits(x):
    # a float32 holding a bfloat16 value -> that bfloat16
    return (x.to(tl.uint32, bitcast=True) >> 16).to(tl.uint16).to(tl.bfloat16, bitcast=True)


@triton.jit
def _bf16_load(v):
    return (v.to(tl.uint16, bitcast=True).to(tl.uint32) << 16).to(tl.float32, bitcast=True)


@triton.jit
def _sigmoid(x):
    e = _exp(-tl.abs(x))
    return tl.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


@triton.jit  # a combine function: tl.reduce needs it jitted
def _dd(ah, al, bh, bl):
    # double-double addition: (s, error) kept exactly, the error carried in the low part
    s = ah + bh
    bb = s - ah
    return s, al + bl + ((ah - (s - bb)) + (bh - bb))


@triton.jit  # a combine function: tl.reduce needs it jitted
def _mul(a, b):
    return a * b


@triton.jit  # a combine function: tl.reduce needs it jitted
def _add(a, b):
    return a + b


@triton.jit  # a combine function: tl.reduce needs it jitted
def _min(a, b):
    return tl.minimum(a, b)


@triton.jit  # a combine function: tl.reduce needs it jitted
def _max(a, b):
    return tl.maximum(a, b)


@triton.jit  # a combine function: tl.reduce needs it jitted
def _last_min(av, ai, bv, bi):
    take = (bv < av) | ((bv == av) & (bi > ai))
    return tl.where(take, bv, av), tl.where(take, bi, ai)


@triton.jit  # a combine function: tl.reduce needs it jitted
def _last_max(av, ai, bv, bi):
    take = (bv > av) | ((bv == av) & (bi > ai))
    return tl.where(take, bv, av), tl.where(take, bi, ai)
'''

# Float64 functions: libdevice on a GPU. Triton's interpreter has no libdevice (extern) calls, so there
# tan, tanh, pow and atan2 are NumPy on the interpreter's arrays and the rest its own tl.exp etc.
# name -> (arguments, libdevice function, NumPy function or None for triton.language's)
EXTERN = {"_exp": ("x", "exp", None), "_log": ("x", "log", None), "_sin": ("x", "sin", None),
          "_cos": ("x", "cos", None), "_tan": ("x", "tan", "tan"), "_tanh": ("x", "tanh", "tanh"),
          "_pow": ("a, b", "pow", "power"), "_atan2": ("a, b", "atan2", "arctan2")}

INTERPRETER_NUMPY = '''import numpy as _np
from triton.runtime.interpreter import TensorHandle as _TH


def _numpy(f, *xs):
    with _np.errstate(all="ignore"):
        return tl.core.tensor(_TH(f(*(x.handle.data for x in xs)), xs[0].dtype.scalar), xs[0].type)
'''


def extern_source(interpreted: bool) -> str:
    if interpreted:
        parts = [INTERPRETER_NUMPY] + [
            f"\n\ndef {name}({args}):\n    return "
            + (f"_numpy(_np.{np_fn}, {args})" if np_fn else f"tl.{lib}({args})") + "\n"
            for name, (args, lib, np_fn) in EXTERN.items()]
    else:
        parts = ["from triton.language.extra import libdevice\n"] + [
            f"\n\n@triton.jit\ndef {name}({args}):\n    return libdevice.{lib}({args})\n"
            for name, (args, lib, _) in EXTERN.items()]
    return "".join(parts)


def header() -> str:
    if not interpreting():
        return HEADER.format(extern=extern_source(False))
    # Under the interpreter a call to a nested @triton.jit function re-patches triton.language each
    # time; plain Python helpers run the same code several times faster (combine functions stay jitted).
    return HEADER.replace("@triton.jit\n", "").format(extern=extern_source(True))


def compute_type(ty: Type) -> str:
    """The Triton type a chain keeps values in: F32 for the narrow floats, else the type itself."""
    return "tl.float32" if ty in (Type.F16, Type.BF16) else _TL[ty]


def _round(expr: str, ty: Type, src: str) -> str:
    """expr (of type src) rounded once to ty and widened back to the compute type (BF16 by bits, through
    float32 as the reference rounds it: Triton's interpreter truncates a float32 -> bfloat16 cast)."""
    if ty is Type.BF16:
        return f"_bf16(({expr}).to(tl.float32))" if src == "tl.float64" else f"_bf16({expr})"
    if src == compute_type(ty):
        return f"({expr}).to({_TL[ty]}).to({src})" if ty in (Type.F16, Type.BF16) else f"({expr})"
    return f"({expr}).to({_TL[ty]}).to({compute_type(ty)})"


def float_expr(op, ty: Type, a: str, b: str | None) -> str:
    """One step on compute-type values a (and b), result rounded to ty, in the compute type."""
    c = compute_type(ty)
    narrow = c == "tl.float32"
    if op in TRANSCENDENTAL:
        x, y = f"{a}.to(tl.float64)", (f"{b}.to(tl.float64)" if b is not None else None)
        e = {M.Exp: f"_exp({x})", M.Log: f"_log({x})", M.Sin: f"_sin({x})", M.Cos: f"_cos({x})",
             M.Tan: f"_tan({x})", M.Tanh: f"_tanh({x})", M.Sigmoid: f"_sigmoid({x})",
             B.Pow: f"_pow({x}, {y})", B.Atan2: f"_atan2({x}, {y})"}[op]
        return _round(e, ty, "tl.float64")
    e = {M.Abs: f"tl.abs({a})", M.Neg: f"{a} * -1.0",  # unary minus is 0 - x in Triton: +0.0 for 0.0
         M.Sqrt: f"tl.sqrt_rn({a})" if narrow else f"tl.sqrt({a})",
         M.Relu: f"tl.where(({a} > 0) | ({a} != {a}), {a}, 0.0)",
         B.Add: f"{a} + {b}", B.Sub: f"{a} - {b}", B.Mul: f"{a} * {b}",
         B.Div: f"tl.math.div_rn({a}, {b})" if narrow else f"{a} / {b}",
         B.Min: f"_fmin({a}, {b})", B.Max: f"_fmax({a}, {b})"}[op]
    return _round(e, ty, c)


def int_expr(op, ty: Type, a: str, b: str | None) -> str:
    t = _TL[ty]
    if op is M.Abs:
        e = a if ty.is_unsigned else f"tl.where({a} < 0, 0 - {a}, {a})"
    elif op is M.Neg:
        e = f"0 - {a}"
    elif op is M.Relu:
        e = a if ty.is_unsigned else f"tl.where({a} > 0, {a}, 0)"
    elif op in (B.Add, B.Sub, B.Mul):
        e = f"{a} {'+-*'[[B.Add, B.Sub, B.Mul].index(op)]} {b}"
    elif op is B.Div:
        e = f"_udiv({a}, {b})" if ty.is_unsigned else f"_sdiv({a}, {b}, {ty.min_value})"
    elif op is B.Min:
        e = f"tl.minimum({a}, {b})"
    elif op is B.Max:
        e = f"tl.maximum({a}, {b})"
    else:
        raise KeyError(op)
    return f"({e}).to({t})"


def step_expr(op, ty: Type, a: str, b: str | None) -> str:
    return float_expr(op, ty, a, b) if ty.is_float else int_expr(op, ty, a, b)


@dataclass(frozen=True)
class Reduction:
    """A reduction fused after (or instead of) a chain: over slot `slot` with `op`."""
    op: R
    slot: int


def _acc_types(op: R, ty: Type) -> tuple[str, str]:
    """(accumulator type, second partial's type) of a reduction."""
    if ty.is_float:
        return "tl.float64", ("tl.float64" if op is R.Sum else "tl.int64")
    return ("tl.uint64" if ty is Type.U64 else "tl.int64"), "tl.int64"


def _identity(op: R, ty: Type) -> str:
    if ty.is_float:
        return {R.Sum: "0.0", R.Product: "1.0", R.Min: "float('inf')", R.Max: "float('-inf')"}[op]
    return {R.Sum: "0", R.Product: "1", R.Min: str(ty.max_value), R.Max: str(ty.min_value)}[op]


def chain_source(ty: Type, steps: tuple, nslots: int, loads: tuple[int, ...], stores: tuple[int, ...],
                 reduction: Reduction | None, wide: bool, scalars: dict | None = None) -> str:
    """Source of `kernel` (and, for a reduction, `finish`): steps are (dst, op, a, b) over slots; the
    slots in `scalars` (slot -> index) are scalar operands, read once from the tensor `sc`."""
    scalars = scalars or {}
    c = compute_type(ty) if ty.is_float else _TL[ty]
    args = ", ".join([f"x{k}" for k in used_slots(nslots, loads, stores, scalars)] + (["sc"] if scalars else []))
    lines = [header(), "", "@triton.jit"]
    body: list[str] = []

    def convert(load: str) -> str:
        return (f"_bf16_load({load})" if ty is Type.BF16 else
                f"{load}.to({c})" if ty.is_float and c != _TL[ty] else load)

    def emit_scalars(ind: str) -> None:
        for k, j in scalars.items():
            body.append(f"{ind}v{k} = tl.broadcast_to({convert(f'tl.load(sc + {j})')}, [BLOCK])")

    def emit_tile(ind: str) -> None:
        for k in loads:
            if k in scalars:
                continue
            load = f"tl.load(x{k} + offs, mask=m)"
            body.append(f"{ind}v{k} = " + (f"_bf16_load({load})" if ty is Type.BF16 else
                                            f"{load}.to({c})" if ty.is_float and c != _TL[ty] else load))
        for dst, op, a, b in steps:
            body.append(f"{ind}v{dst} = {step_expr(op, ty, f'v{a}', None if b is None else f'v{b}')}")
        for k in stores:
            v = (f"_bf16_bits(v{k})" if ty is Type.BF16 else
                 f"v{k}.to({_TL[ty]})" if ty.is_float and c != _TL[ty] else f"v{k}")
            body.append(f"{ind}tl.store(x{k} + offs, {v}, mask=m)")

    if reduction is None:
        lines.append(f"def kernel({args}, n, BLOCK: tl.constexpr):")
        pid = "tl.program_id(0).to(tl.int64)" if wide else "tl.program_id(0)"
        body.append(f"    offs = {pid} * BLOCK + tl.arange(0, BLOCK)")
        body.append("    m = offs < n")
        emit_scalars("    ")
        emit_tile("    ")
        return "\n".join(lines + body) + "\n"

    op = reduction.op
    acc, second = _acc_types(op, ty)
    ident = _identity(op, ty)
    lines.append(f"def kernel({args}{', ' if args else ''}n, p, iters, pa, pb, out, BLOCK: tl.constexpr, "
                 "FINAL: tl.constexpr):")
    body += ["    pid = tl.program_id(0)", "    lane = tl.arange(0, BLOCK)"]
    emit_scalars("    ")
    body += _acc_init(op, ty, acc, ident, "    ")
    # while, not for: Triton's interpreter cannot range() over a runtime argument (NumPy 2)
    pid = "pid.to(tl.int64)" if wide else "pid"
    body += ["    it = 0", "    while it < iters:", f"        offs = ({pid} + it * p) * BLOCK + lane",
             "        m = offs < n", "        it += 1"]
    emit_tile("        ")
    value = f"v{reduction.slot}"
    body.append(f"        x = tl.where(m, {value}.to({acc}), {ident})")
    body += _acc_step(op, ty, "        ")
    body += _acc_lanes(op, ty, acc, "    ")
    body += ["    if FINAL:"] + _acc_final(op, ty, "        ") + [
        "    else:", "        tl.store(pa + pid, ra)", "        tl.store(pb + pid, rb)"]
    finish = ["def finish(pa, pb, out, p, iters, BLOCK: tl.constexpr):", "    lane = tl.arange(0, BLOCK)"]
    finish += _acc_init(op, ty, acc, ident, "    ")
    finish += ["    it = 0", "    while it < iters:", "        offs = it * BLOCK + lane", "        m = offs < p",
               "        it += 1",
               f"        x = tl.load(pa + offs, mask=m, other={ident}).to({acc})",
               f"        x2 = tl.load(pb + offs, mask=m, other={'0.0' if second == 'tl.float64' else '-1'})"]
    finish += _acc_partial(op, ty, "        ")
    finish += _acc_lanes(op, ty, acc, "    ")
    finish += _acc_final(op, ty, "    ")
    return "\n".join(lines + body + ["", "", "@triton.jit"] + finish) + "\n"


def used_slots(nslots: int, loads, stores, scalars) -> list[int]:
    """The slots a kernel takes as tensor arguments: those it loads or stores. A dead chain's pool
    (written in registers only) is no argument, so its reallocation asks for no rebinding."""
    return [k for k in range(nslots) if k not in scalars and (k in loads or k in stores)]


def _acc_init(op, ty, acc, ident, ind):
    lines = [f"{ind}hi = tl.full([BLOCK], {ident}, {acc})"]
    if ty.is_float and op is R.Sum:
        lines.append(f"{ind}lo = tl.full([BLOCK], 0.0, tl.float64)")
    if ty.is_float and op in (R.Min, R.Max):
        lines += [f"{ind}idx = tl.full([BLOCK], -1, tl.int64)", f"{ind}nan = tl.full([BLOCK], 0, tl.int32)"]
    return lines


def _acc_step(op, ty, ind):
    """Fold x (the tile's values, identity where masked) into the accumulators."""
    if ty.is_float and op is R.Sum:
        return [f"{ind}hi, lo = _dd(hi, lo, x, 0.0)"]
    if op is R.Sum:
        return [f"{ind}hi = hi + x"]
    if op is R.Product:
        return [f"{ind}hi = hi * x"]
    if ty.is_float:
        cmp = "<" if op is R.Min else ">"
        return [f"{ind}take = (x {cmp} hi) | ((x == hi) & m)",
                f"{ind}hi = tl.where(take, x, hi)", f"{ind}idx = tl.where(take, offs.to(tl.int64), idx)",
                f"{ind}nan = nan | (x != x).to(tl.int32)"]
    return [f"{ind}hi = {'tl.minimum' if op is R.Min else 'tl.maximum'}(hi, x)"]


def _acc_partial(op, ty, ind):
    """Fold partials (x, x2) into the accumulators."""
    if ty.is_float and op is R.Sum:
        return [f"{ind}hi, lo = _dd(hi, lo, x, x2)"]
    if ty.is_float and op in (R.Min, R.Max):
        return [f"{ind}nan = nan | (x != x).to(tl.int32)",
                f"{ind}hi, idx = {'_last_min' if op is R.Min else '_last_max'}(hi, idx, x, x2)"]
    return _acc_step(op, ty, ind)


def _acc_lanes(op, ty, acc, ind):
    """The accumulators across the block's lanes -> (ra, rb) scalars."""
    if ty.is_float and op is R.Sum:
        return [f"{ind}ra, rb = tl.reduce((hi, lo), 0, _dd)"]
    if ty.is_float and op in (R.Min, R.Max):
        return [f"{ind}ra, rb = tl.reduce((hi, idx), 0, {'_last_min' if op is R.Min else '_last_max'})",
                f"{ind}ra = tl.where(tl.reduce(nan, 0, _max) > 0, float('nan'), ra)"]
    if op is R.Sum:
        return [f"{ind}ra = tl.reduce(hi, 0, _add)", f"{ind}rb = 0"]
    if op is R.Product:
        return [f"{ind}ra = tl.reduce(hi, 0, _mul)", f"{ind}rb = 0"]
    return [f"{ind}ra = tl.reduce(hi, 0, {'_min' if op is R.Min else '_max'})", f"{ind}rb = 0"]


def _acc_final(op, ty, ind):
    """Store the result, rounded once to ty (BF16 through float32, as the reference)."""
    r = "ra"
    if ty.is_float and op is R.Sum:
        r = "tl.where(ra - ra == 0, ra + rb, ra)"  # a non-finite high part is the sum (NaN, +-inf)
    if ty is Type.BF16:
        return [f"{ind}tl.store(out, _bf16_bits(_bf16(({r}).to(tl.float32))))"]
    return [f"{ind}tl.store(out, ({r}).to({_TL[ty]}))"]


# ---- binding: addresses -> tensors, checked as the reference checks --------------------------------

class Checks(ref.Arrays):
    """The reference's bounds and overlap checks (and their messages), over device memory."""

    def _view(self, addr, ty: Type, count: int, name: str, skip: int = 0):
        mem, off = self._locate(addr)
        off += skip
        nbytes = count * ty.size_bytes
        if off < 0 or off + nbytes > len(mem):
            raise BackendError(f"{self.what}: {name} needs bytes {off}..{off + nbytes} but its memory has {len(mem)}")
        return (mem, off), (id(mem), off, nbytes, name)


def check(ins, index: int, memory) -> None:
    """The reference's checks of one instruction's ranges, in its order (bounds, then overlaps)."""
    A = Checks(memory, ins, index, ())
    ty, n = ins.ty, ins.count
    if isinstance(ins, I.ParallelMap):
        A.read(ins.src_array, ty, n, "src_array")
        A.output(ins.dst_array, ty, n, "dst_array")
    elif isinstance(ins, I.ParallelMapBinary):
        for nm in ("src_a", "src_b"):
            if not isinstance(getattr(ins, nm), Register):  # scalar operands: scalars()
                A.read(getattr(ins, nm), ty, n, nm)
        A.output(ins.dst_array, ty, n, "dst_array")
    elif isinstance(ins, I.FusedMap):
        for j, st in enumerate(ins.steps):
            for nm, a in (("a", st.a), ("b", st.b)):
                if a is not None and not isinstance(a, Register):
                    A.read(a, ty, n, f"steps[{j}].{nm}")
        for j, st in enumerate(ins.steps):
            A.output(st.dst, ty, n, f"steps[{j}].dst")
            A.read(st.dst, ty, n, f"steps[{j}].dst")
    else:
        A.read(ins.src_array, ty, n, "src_array")


def scalar_names(ins) -> list:
    """(operand name, Register) of each scalar operand (a Register where an array may stand)."""
    if isinstance(ins, I.ParallelMapBinary):
        return [(nm, getattr(ins, nm)) for nm in ("src_a", "src_b") if isinstance(getattr(ins, nm), Register)]
    if isinstance(ins, I.FusedMap):
        return [(f"steps[{j}].{nm}", a) for j, st in enumerate(ins.steps) for nm, a in (("a", st.a), ("b", st.b))
                if isinstance(a, Register)]
    return []


def scalars(k, memory, threads) -> tuple:
    """The scalar operands' values, one per scalar slot, each the same in every thread (the reference's
    check and message), rounded or wrapped to the element type."""
    out = {}
    for i, ins in k.instructions:
        A = Checks(memory, ins, i, threads)
        for nm, reg in scalar_names(ins):
            v = A.scalar(reg, ins.ty, nm)
            out.setdefault(reg.index, v)
    return tuple(out[r.index] for r in k.scalar_regs)


def uniform_scalars(k, R) -> tuple:
    """scalars() for one register file (a uniform run: one thread, so nothing can differ): R's values
    of the scalar registers brought to the element type, without the per-thread checks' objects."""
    bring = semantics.wrapper(k.ty)
    return tuple(bring(R[r.index]) for r in k.scalar_regs)


def _addresses(ins) -> list:
    """Every operand in step order: (dst, a[, b]) per step, or the reduction's source; a scalar operand
    is its Register."""
    if isinstance(ins, I.FusedMap):
        return [a for st in ins.steps for a in (st.dst, st.a, st.b) if a is not None]
    if isinstance(ins, I.ParallelMap):
        return [ins.dst_array, ins.src_array]
    if isinstance(ins, I.ParallelMapBinary):
        return [ins.dst_array, ins.src_a, ins.src_b]
    return [ins.src_array]


def _steps_of(ins) -> list[tuple]:
    """(op, has_b) per step, in _addresses' order."""
    if isinstance(ins, I.FusedMap):
        return [(st.operation, st.b is not None) for st in ins.steps]
    if isinstance(ins, I.ParallelMap):
        return [(ins.operation, False)]
    if isinstance(ins, I.ParallelMapBinary):
        return [(ins.operation, True)]
    return []


def _key(a) -> tuple:
    """Static addresses naming the same bytes have the same key (class memory by absolute offset)."""
    if isinstance(a, Register):
        return ("scalar", a.index, 0)
    if a.space is Space.CLASS:
        return ("class", 0, a.class_id * CLASS_BYTES + a.offset)
    return (a.space.value, a.handle, a.offset)


@dataclass
class Kernel:
    """One generated kernel for one or two instructions (a chain, a reduction, or a chain and the
    reduction after it); bound to the tensors of one memory generation before each launch."""
    instructions: tuple             # ((index, instruction), ...)
    ty: Type
    count: int
    source: str
    reduction: Reduction | None
    slots: list                     # slot -> its address (or Register: a scalar operand)
    written: list                   # slots the chain stores
    loads: tuple = ()               # slots it reads from memory (before any step writes them)
    scalar_regs: list = field(default_factory=list)   # the scalar operands' registers, in kernel order
    fn: object = None
    finish: object = None
    memory: object = None
    generation: int = -1
    args: tuple = ()
    staged: list = field(default_factory=list)    # (destination bytes, aligned copy) written back
    staged_in: list = field(default_factory=list)  # (aligned copy, source bytes) refreshed before each launch
    bound: tuple = ()                             # (address, its memory's tensor, length) of every slot
    grid: tuple = ()
    launches: tuple = ()                          # Prepared: the kernel (and a reduction's combine)
    scalar_values: tuple | None = None            # what the scalar tensor holds now
    scalar_tensor: object = None
    scratch: tuple = ()
    result: object = None

    @property
    def how(self) -> str:
        names = " + ".join(ins.name for _, ins in self.instructions)
        if self.reduction is None:
            return f"one Triton kernel ({names}): one pass over {self.count} {self.ty.name}"
        return (f"one Triton kernel ({names}): a grid-stride pass writing a partial per program, "
                f"then one program combining them; {self.count} {self.ty.name}")


def build(group, dead: bool = False) -> Kernel:
    """The kernel for ((index, ins),): an element-wise instruction or a reduction, or for
    ((i, chain), (j, reduction)) where fusable_reduce(chain, reduction). Addresses are static.
    dead: the chain's destinations are freed right after the reduction (dead_after), so it stores nothing."""
    for i, ins in group:
        check_type(ins, i)
    ty, n = group[0][1].ty, group[0][1].count
    keys: dict = {}
    slots, plan = [], []
    for _, ins in group:
        for a in _addresses(ins):
            k = _key(a)
            if k not in keys:
                keys[k] = len(slots)
                slots.append(a)
            plan.append(keys[k])
    steps, written, loads, pos = [], [], [], 0
    for op, has_b in _steps_of(group[0][1]):
        d, a = plan[pos], plan[pos + 1]
        b = plan[pos + 2] if has_b else None
        pos += 3 if has_b else 2
        loads += [s for s in dict.fromkeys((a, b)) if s is not None and s not in written and s not in loads]
        steps.append((d, op, a, b))
        written += [d] if d not in written else []
    reduction = None
    last = group[-1][1]
    if type(last) in REDUCE_OF:
        rslot = plan[-1]
        loads += [rslot] if rslot not in written and rslot not in loads else []
        reduction = Reduction(REDUCE_OF[type(last)] or last.operation, rslot)
    scal = {k: j for j, k in enumerate(k for k, a in enumerate(slots) if isinstance(a, Register))}
    stored = [] if dead and reduction is not None else written
    src = chain_source(ty, tuple(steps), len(slots), tuple(loads), tuple(stored), reduction, n >= WIDE, scal)
    return Kernel(tuple(group), ty, n, src, reduction, slots, stored, tuple(loads), [slots[k] for k in scal],
                  load(src, "kernel"), load(src, "finish") if reduction is not None else None)


def bind(k: Kernel, memory) -> Kernel:
    """Typed tensors for every slot in this memory's current allocations, after the reference's
    checks (aligned copies where an offset is not a multiple of the element size). Kept while the
    allocations its slots name are the same tensors (and unused slots' memory the same length):
    an allocation or free elsewhere, or a dead chain's scratch pool made anew, rebinds nothing."""
    if k.memory is memory and (k.generation == memory.generation or _unchanged(k, memory)):
        k.generation = memory.generation
        return k
    for i, ins in k.instructions:
        check(ins, i, memory)
    torch = memory.torch
    dt = torch_dtype(k.ty)
    size = k.ty.size_bytes
    nbytes = k.count * size
    scal = {s for s, a in enumerate(k.slots) if isinstance(a, Register)}
    used = set(used_slots(len(k.slots), k.loads, k.written, scal))
    args, staged, staged_in, bound = [], [], [], []
    for s, addr in enumerate(k.slots):
        if s in scal:
            continue
        mem, off = memory.locate(addr)
        bound.append((addr, mem if s in used else None, len(mem)))
        if s not in used:
            continue
        if (mem.storage_offset() + off) % size == 0:
            args.append(mem[off:off + nbytes].view(dt))
        else:  # not element-aligned: an aligned copy, filled before and written back after each launch
            tmp = mem[off:off + nbytes].clone()
            args.append(tmp.view(dt))
            if s in k.loads:
                staged_in.append((tmp, mem[off:off + nbytes]))
            if s in k.written:
                staged.append((mem[off:off + nbytes], tmp))
    k.bound = tuple(bound)
    if k.scalar_regs:
        k.scalar_tensor = torch.zeros(len(k.scalar_regs), dtype=dt, device=memory.device)
        k.scalar_values = None
        args.append(k.scalar_tensor)
    k.args, k.staged, k.staged_in = tuple(args), staged, staged_in
    n = k.count
    if k.reduction is None:
        k.grid = (max(1, -(-n // map_block(k.ty))),)
        k.launches = (Prepared(k.fn, k.grid, k.args + (n,), dict(BLOCK=map_block(k.ty)), MAP_WARPS),) if n else ()
    else:
        acc, second = _acc_types(k.reduction.op, k.ty)
        tdt = {"tl.float64": torch.float64, "tl.int64": torch.int64, "tl.uint64": torch.uint64}
        p = programs(k.count, REDUCE_BLOCK if memory.cuda else INTERPRETER_REDUCE_BLOCK, memory)
        block, fblock, fwarps = ((REDUCE_BLOCK,) + (FINISH_SMALL if p <= FINISH_SMALL[0] else FINISH_LARGE)
                                 if memory.cuda else (INTERPRETER_REDUCE_BLOCK, INTERPRETER_REDUCE_BLOCK, 1))
        k.grid = (p,)
        k.scratch = (torch.empty(p, dtype=tdt[acc], device=memory.device),
                     torch.empty(p, dtype=tdt[second], device=memory.device))
        k.result = torch.empty(1, dtype=dt, device=memory.device)
        pa, pb = k.scratch
        k.launches = (Prepared(k.fn, k.grid, k.args + (n, p, -(-n // (p * block)), pa, pb, k.result),
                               dict(BLOCK=block, FINAL=p == 1), REDUCE_WARPS),)
        if p > 1:
            k.launches += (Prepared(k.finish, (1,), (pa, pb, k.result, p, -(-p // fblock)), dict(BLOCK=fblock),
                                    fwarps),)
    k.memory, k.generation = memory, memory.generation
    return k


class Prepared:
    """One launch whose every argument a binding fixed. The first call goes through Triton's
    JITFunction (compiling, specializing on the arguments); later ones call the compiled kernel's own
    launcher, skipping the per-call specialization that would choose the same kernel again. Under
    Triton's interpreter there is no compiled kernel, and every call goes through Triton."""

    __slots__ = ("fn", "grid", "args", "constexprs", "warps", "direct")

    def __init__(self, fn, grid: tuple, args: tuple, constexprs: dict, warps: int) -> None:
        self.fn, self.grid, self.args, self.constexprs, self.warps = fn, grid, args, constexprs, warps
        self.direct = None

    def __call__(self) -> None:
        if self.direct is not None:
            self.direct(*self.args, *self.constexprs.values())  # the signature ends with the constexprs
            return
        compiled = self.fn[self.grid](*self.args, **self.constexprs, num_warps=self.warps, enable_fp_fusion=False)
        if hasattr(compiled, "packed_metadata"):  # a CompiledKernel (the interpreter returns none)
            self.direct = compiled[self.grid + (1,) * (3 - len(self.grid))]


def _unchanged(k: Kernel, memory) -> bool:
    """Whether every slot's address still names the tensor it was bound to (an unused slot: memory of
    the same length, so the reference's checks would pass as before)."""
    for addr, mem, length in k.bound:
        try:
            now = memory.locate(addr)[0]
        except BackendError:
            return False  # freed: bind() raises the reference's message
        if (now is not mem) if mem is not None else (len(now) != length):
            return False
    return True


_SMS: dict = {}


def programs(n: int, block: int, memory) -> int:
    """Programs for a grid-stride reduction: PROGRAMS_PER_SM per SM, no more than tiles."""
    tiles = max(1, -(-n // block))
    if not memory.cuda:
        return min(tiles, 8)
    sms = _SMS.get(memory.device)
    if sms is None:
        sms = _SMS[memory.device] = memory.torch.cuda.get_device_properties(memory.device).multi_processor_count
    return min(tiles, PROGRAMS_PER_SM * sms)


def set_scalars(k: Kernel, values: tuple) -> None:
    """Put the scalar operands' values where the kernel reads them (a copy only when they changed)."""
    if values != k.scalar_values:
        import numpy as np
        import torch

        host = (torch.tensor(values, dtype=torch.float32).to(torch.bfloat16) if k.ty is Type.BF16 else
                torch.from_numpy(np.array(values, dtype=k.ty.np_dtype)))
        k.scalar_tensor.copy_(host)
        k.scalar_values = values


def launch(k: Kernel, fetch: bool = True):
    """Run a bound kernel; a reduction returns its result as a register holds it (fetch=False: the
    one-element device tensor holding it, valid until this kernel's next launch; no sync)."""
    for tmp, src in k.staged_in:
        tmp.copy_(src)
    for prepared in k.launches:
        prepared()
    for dst, tmp in k.staged:
        dst.copy_(tmp)
    if k.reduction is None:
        return None
    return register_value(k.result, k.ty) if fetch else k.result


def register_value(t, ty: Type):
    """A one-element tensor's value as a register holds it (Python float or int)."""
    v = t.item()
    return float(v) if ty.is_float else int(v)


# ---- grouping: which instructions share a kernel ---------------------------------------------------

def _static(ins) -> bool:
    return all(a.space in (Space.BUFFER, Space.POOL, Space.CLASS) for _, a in ins.addresses())


def _ranges(ins) -> set:
    from ...optimize import _range
    return {_range(a, ins.count, ins.ty) for _, a in ins.addresses()}


def fusable_reduce(chain, reduce) -> bool:
    """A reduction right after an element-wise chain reads, per element, what the chain left there when
    its range is one of the chain's (same start, count, type) and every address is static."""
    if not (isinstance(chain, MAP_KINDS) and type(reduce) in REDUCE_OF):
        return False
    if chain.count != reduce.count or chain.ty != reduce.ty or not (_static(chain) and _static(reduce)):
        return False
    return _ranges(reduce) <= _ranges(chain)


def reads_pool(k: Kernel, handle: int) -> bool:
    """Whether the kernel loads any byte of pool `handle` (a dead chain that does not never needs it zeroed)."""
    addrs = [k.slots[s] for s in k.loads if not isinstance(k.slots[s], Register)]
    return any(a.space is Space.POOL and a.handle == handle for a in addrs)


def dead_after(chain, free) -> bool:
    """A chain fused with its reduction writes nothing anyone reads when the instruction after the
    reduction frees the pool holding every destination (the tensor layer's map+sum form)."""
    return (isinstance(free, I.PoolFree) and isinstance(chain, MAP_KINDS)
            and all(d.space is Space.POOL and d.handle == free.handle for d in _destinations(chain)))


def _destinations(ins) -> list:
    return [st.dst for st in ins.steps] if isinstance(ins, I.FusedMap) else [ins.dst_array]


__all__ = ["HANDLES", "MAP_KINDS", "REDUCE_OF", "Kernel", "build", "bind", "launch", "fusable_reduce",
           "chain_source", "check_type", "dead_after", "reads_pool"]
