"""Tensor kernels -> ISA programs.

A kernel is an element-wise expression over input slots (optionally followed by a reduction), a tree
of three node types, each a NamedTuple so that a kernel is its own exact, fast cache key:

    Input(slot, dtype)              the slot's array (every input has the output's element count)
    Scalar(index, dtype)            constant number `index` of the kernel's values (programs do not depend
                                    on constants' values, which are bound at run time)
    Apply(op, dtype, args)          an operation on the expressions `args`, whose result has dtype

Two program forms (docs/tensor.md says why):
- map form: ParallelMap/ParallelMapBinary steps over whole arrays, fused by the ISA optimizer
  into one FusedMap (constants are scalar operands: registers), optionally followed by a
  ParallelReduce and an STG of its result, the chain's intermediates then in a pool freed right
  after the reduction (dead, so the CPU backend sums while mapping and stores nothing): run by the
  CPU backend as one parallel numba loop. Used when every operation is an array map operation on
  one dtype.
- lane form: a per-lane register program (LDG through register pointers, register arithmetic
  with MOV_IMM constants, CVT, SETcc/SEL, STG). Element-wise: one lane per element, pointers
  affine in GLOBAL_ID (so the CPU backend runs lanes in parallel). Reductions: one lane per
  output, a LOOP over the reduced elements with the expression inline.

Programs are built once per kernel structure (operations, dtypes, sizes; not the constants'
values) and kept in an LRU. Constants are bound at run time in both forms, as kernel arguments
(starting register values, ExecutionParams.registers).
Buffers are bound by slot: slot i is the backend's buffer handle i + 1 (backends allocate those
first), so the same kernel is the same Program whatever arrays it runs on.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from eidos import isa
from eidos.errors import EidosError
from eidos.isa import Address, Condition, LaunchConfig, ProgramBuilder, Register, Type
from eidos.isa import instructions as I
from eidos.isa.address import Special
from eidos.isa.emit import CMP, RegisterCode, Registers, lane_pointers

from . import dtypes as D

M, B = I.MapOperation, I.BinaryMapOperation
MAP1 = {"abs": M.Abs, "neg": M.Neg, "sqrt": M.Sqrt, "exp": M.Exp, "log": M.Log, "sin": M.Sin, "cos": M.Cos,
        "tan": M.Tan, "relu": M.Relu, "sigmoid": M.Sigmoid, "tanh": M.Tanh}
MAP2 = {"add": B.Add, "sub": B.Sub, "mul": B.Mul, "div": B.Div, "pow": B.Pow, "minimum": B.Min,
        "maximum": B.Max, "atan2": B.Atan2}
FLOAT_MAP = {"sqrt", "exp", "log", "sin", "cos", "tan", "sigmoid", "tanh", "div", "pow", "atan2"}
REDUCE_OPS = {"sum": I.ReduceOperation.Sum, "prod": I.ReduceOperation.Product, "min": I.ReduceOperation.Min,
              "max": I.ReduceOperation.Max}

UNARY = {"abs", "neg", "sqrt", "exp", "log", "sin", "cos", "tan", "tanh", "sigmoid", "relu", "gelu", "floor",
         "ceil", "round", "trunc", "sign", "logical_not", "invert", "cast", "isnan", "isinf", "isfinite",
         "reciprocal", "rsqrt", "square", "swish"}
BINARY = {"add", "sub", "mul", "div", "pow", "minimum", "maximum", "atan2", "floordiv", "mod", "and", "or",
          "xor", "lshift", "rshift", "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or",
          "logical_xor"}
TERNARY = {"where", "clip"}


def slot_handle(slot: int) -> int:
    return slot + 1


def ptr_value(slot: int) -> int:
    return isa.pointer(slot_handle(slot), 0)


class Input(NamedTuple):
    """Input slot `slot`'s array, of dtype (a name)."""
    slot: int
    dtype: str
    kind: str = "in"      # in the tuple, so that Input and Scalar never compare equal as cache keys


class Scalar(NamedTuple):
    """Constant number `index` of the values a kernel runs with (kernel arguments: starting registers)."""
    index: int
    dtype: str
    kind: str = "const"


class Apply(NamedTuple):
    """Operation `op` on the expressions `args` (one to three), its result of dtype."""
    op: str
    dtype: str
    args: tuple


Expr = Input | Scalar | Apply


class Kernel(NamedTuple):
    """What one program computes: out[m] = reduce_k expr(inputs[m * R + k]) [/ divisor] (op None: no reduction)."""
    expr: Expr
    n_inputs: int
    out_dtype: str
    count: int                   # output elements (m)
    reduce: str | None = None    # sum prod min max argmin argmax
    length: int = 1              # R, elements reduced per output
    divisor: float = 0           # nonzero: the reduced value is divided by it (mean, var) in the same program

    @property
    def kind(self) -> str:
        return "reduction" if self.reduce else "elementwise"


@dataclass
class Lowered:
    program: isa.Program
    config: LaunchConfig
    form: str                      # "map" or "lane" or an extension's name
    params: tuple = ()             # (constant index, register, dtype): kernel arguments (starting registers)
    temps: tuple = ()              # map form: (slot, dtype, count) scratch arrays
    out_slot: int = 0


# ---- helpers on expressions --------------------------------------------------------------------

def dtype_of(e: Expr) -> np.dtype:
    return D.NAMES[e.dtype]


def walk(e: Expr):
    yield e
    if e.__class__ is Apply:
        for a in e.args:
            yield from walk(a)


def map_form_ok(k: Kernel) -> bool:
    """Every operation an array map op on one dtype of at most 64 bits (not bool), reduction (if any) full."""
    dt = D.as_dtype(k.out_dtype)
    if dt == D.bool_:
        return False
    if k.reduce is not None and (k.count != 1 or k.reduce not in REDUCE_OPS):
        return False
    ops = 0
    for e in walk(k.expr):
        if dtype_of(e) != dt:
            return False
        if e.__class__ is not Apply:
            continue
        ops += 1
        if e.op not in MAP1 and e.op not in MAP2:
            return False
        if e.op in FLOAT_MAP and not D.is_float(dt):
            return False
    if k.reduce is None and ops == 0:
        return False
    if k.reduce in ("sum", "prod") and not D.is_float(dt):
        return False   # NumPy sums integers in 64 bits: the lane form's wide accumulator does that
    if k.divisor and float(np.asarray(k.divisor, dtype=dt)) != k.divisor:
        return False   # the count is not exact in a half type: divide in the lane form's float64
    return True


# ---- map form ---------------------------------------------------------------------------------

SCRATCH_POOL = 1024      # the pool handle of a map-form reduction's scratch (above every slot buffer's handle)
CONST_REG = 8            # map form: user constant i is the scalar operand register r(8 + i), a kernel argument


def lower_map(k: Kernel) -> Lowered:
    dt = D.as_dtype(k.out_dtype)
    ty = D.isa_type(dt)
    n = k.count * k.length
    nslot = k.n_inputs
    out_slot = nslot
    nslot += 1
    temps: list = []
    params: dict = {}
    in_pool = k.reduce is not None   # a reduction's intermediates live in a pool freed after the sum: dead stores
    npool = 0
    ins: list = []

    def buf(s):
        return Address.buffer(slot_handle(s))

    def new_temp():
        nonlocal nslot, npool
        if in_pool:
            npool += 1
            return Address.pool(SCRATCH_POOL, (npool - 1) * n * dt.itemsize)
        temps.append((nslot, str(dt), n))
        nslot += 1
        return buf(nslot - 1)

    def emit(e, dst):
        """Emit e's steps writing `dst` (an Address, or None for 'any'); return the operand holding it
        (an Address, or a Register for a constant: a scalar operand)."""
        if e.__class__ is Input:
            return buf(e.slot)
        if e.__class__ is Scalar:
            if e.index not in params:
                if CONST_REG + e.index > 255:
                    raise EidosError("expression has too many constants for one program (more than 248); "
                                     "realize part of it first (ei.realize)")
                params[e.index] = (Register(CONST_REG + e.index), e.dtype)
            return params[e.index][0]
        args = e.args
        first = args[0]
        # the first operand's result buffer becomes this node's when it is computed here only for us
        if first.__class__ is Apply:
            a = emit(first, dst)
            target = a
        else:
            a = emit(first, None)
            target = dst if dst is not None else new_temp()
        if len(args) == 1:
            ins.append(I.ParallelMap(target, a, n, MAP1[e.op], ty))
        else:
            second = args[1]
            b = emit(second, None) if second.__class__ is not Apply else emit(second, new_temp())
            ins.append(I.ParallelMapBinary(target, a, b, n, MAP2[e.op], ty))
        return target

    if k.reduce is None:
        res = emit(k.expr, buf(out_slot))
        if res != buf(out_slot):
            raise EidosError("internal: map-form result not in the output slot")
    else:
        res = emit(k.expr, new_temp() if k.expr.__class__ is not Input else None)
        ins.append(I.ParallelReduce(Register(0), res, n, REDUCE_OPS[k.reduce], ty))
        if npool:
            ins.insert(0, I.PoolAlloc(SCRATCH_POOL, npool * n * dt.itemsize))
            ins.append(I.PoolFree(SCRATCH_POOL))
        if k.divisor:
            ins += [I.MOV_IMM(Register(1), float(k.divisor), ty), I.DIV(Register(2), Register(0), Register(1), ty),
                    I.STG(buf(out_slot), Register(2), ty)]
        else:
            ins.append(I.STG(buf(out_slot), Register(0), ty))
    program = ProgramBuilder({"eidos.tensor": "map", "eidos.tensor.outputs": [out_slot]}).add(*ins).build().optimize()
    return Lowered(program, LaunchConfig.linear(1), "map", temps=tuple(temps), out_slot=out_slot,
                  params=tuple((i, r.index, dtn) for i, (r, dtn) in sorted(params.items())))


# ---- lane form --------------------------------------------------------------------------------

_UNARY_INS = {"sqrt": I.SQRT, "exp": I.EXP, "log": I.LOG, "sin": I.SIN, "cos": I.COS, "tan": I.TAN,
              "tanh": I.TANH, "sigmoid": I.SIGMOID, "gelu": I.GELU, "floor": I.FLOOR, "ceil": I.CEIL,
              "round": I.ROUND, "trunc": I.TRUNC, "sign": I.SIGN, "abs": I.ABS, "neg": I.NEG, "invert": I.NOT,
              "reciprocal": I.RCP, "rsqrt": I.RSQRT, "swish": I.SWISH}
_BIN_INS = {"add": I.ADD, "sub": I.SUB, "mul": I.MUL, "div": I.DIV, "minimum": I.MIN, "maximum": I.MAX,
            "and": I.AND, "or": I.OR, "xor": I.XOR, "lshift": I.SHL, "rshift": I.SHR, "mod": I.REM}


class _Emitter(RegisterCode):
    """Register code for a tensor expression; loads come from per-slot pointer registers."""

    def __init__(self, regs: Registers, ptrs: dict) -> None:
        super().__init__(regs)
        self.ptrs = ptrs
        self.loaded: dict = {}
        self.params: dict = {}

    def param(self, index: int, dt) -> Register:
        """The register holding user constant `index` (a kernel argument, set before the lane starts)."""
        if index not in self.params:
            self.params[index] = (self.regs(), D.NAME[dt])
        return self.params[index][0]

    def hoist_consts(self, e) -> list:
        """Registers for every user constant in e, given before a loop (kernel arguments: no code)."""
        for x in walk(e):
            if x.__class__ is Scalar:
                self.param(x.index, dtype_of(x))
        return []

    def emit(self, e: Expr) -> Register:
        dt = dtype_of(e)
        ty = D.isa_type(dt)
        if e.__class__ is Input:
            if e.slot not in self.loaded:
                r = self.regs()
                self.out.append(I.LDG(r, Address.register(self.ptrs[e.slot]), ty))
                self.loaded[e.slot] = r
            return self.loaded[e.slot]
        if e.__class__ is Scalar:
            return self.param(e.index, dt)
        kind = e.op
        args = [self.emit(a) for a in e.args]
        aty = [D.isa_type(dtype_of(a)) for a in e.args]
        adt = [dtype_of(a) for a in e.args]
        r = self.regs()
        o = self.out
        if kind == "cast":
            src = adt[0]
            if dt == D.bool_:
                return self.truth(args[0], aty[0])
            if src == dt:
                return args[0]
            o.append(I.CVT(r, args[0], aty[0], ty))
        elif kind in CMP:
            return self.select(kind, args[0], args[1], aty[0])
        elif kind in ("isnan", "isinf", "isfinite"):
            x, t = args[0], aty[0]
            if kind == "isnan":
                return self.select("ne", x, x, t)
            a = self.regs()
            o.append(I.ABS(a, x, t))
            inf = self.const(float("inf"), t)
            return self.select("eq" if kind == "isinf" else "lt", a, inf, t)
        elif kind == "logical_not":
            return self.select("eq", args[0], self.const(0, aty[0]), aty[0])
        elif kind in ("logical_and", "logical_or", "logical_xor"):
            a = self.truth(args[0], aty[0])
            b = self.truth(args[1], aty[1])
            o.append({"logical_and": I.AND, "logical_or": I.OR, "logical_xor": I.XOR}[kind](r, a, b, Type.U8))
        elif kind == "relu":
            o.append(I.MAX(r, args[0], self.const(0.0 if D.is_float(dt) else 0, ty), ty))
        elif kind == "square":
            o.append(I.MUL(r, args[0], args[0], ty))
        elif kind in ("abs", "neg", "invert", "sign") or kind in _UNARY_INS:
            if kind in ("abs",) and dt == D.bool_:
                return args[0]
            o.append(_UNARY_INS[kind](r, args[0], ty))
        elif kind in ("pow", "atan2"):
            raise EidosError(f"internal: {kind} has no register instruction (map form only)")
        elif kind == "floordiv":
            if D.is_float(dt):
                q = self.regs()
                o.append(I.DIV(q, args[0], args[1], ty))
                o.append(I.FLOOR(r, q, ty))
            else:
                self.int_floor(r, args[0], args[1], ty, want="q")
        elif kind == "mod":
            if D.is_float(dt):
                self.float_mod(r, args[0], args[1], ty)
            else:
                self.int_floor(r, args[0], args[1], ty, want="r")
        elif kind in _BIN_INS:
            o.append(_BIN_INS[kind](r, args[0], args[1], ty))
        elif kind == "where":
            c = self.pred_of(args[0], aty[0])
            o.append(I.SEL(r, c, args[1], args[2], ty))
        elif kind == "clip":
            a = self.regs()
            o.append(I.MAX(a, args[0], args[1], ty))
            o.append(I.MIN(r, a, args[2], ty))
        else:
            raise EidosError(f"internal: no lowering for {kind}")
        return r


def _imm(value, dt: np.dtype):
    if dt == D.bool_:
        return int(bool(value))
    if D.is_float(dt):
        return float(value)
    return int(value)


def _slot_pointers(regs: Registers, n_slots: int, sizes: list, lane_index: Register, stride_elems: int,
                   out: list) -> dict:
    """ptr_s = pointer(slot s) + lane * stride * size: affine in GLOBAL_ID."""
    bases = [ptr_value(s) for s in range(n_slots)]
    return dict(enumerate(lane_pointers(regs, bases, lane_index, [stride_elems * sizes[s] for s in range(n_slots)],
                                        out)))


def _input_dtypes(k: Kernel) -> list:
    dts = [None] * k.n_inputs
    for e in walk(k.expr):
        if e.__class__ is Input:
            dts[e.slot] = dtype_of(e)
    return [d if d is not None else D.uint8 for d in dts]


def lower_lane(k: Kernel) -> Lowered:
    out_dt = D.as_dtype(k.out_dtype)
    out_ty = D.isa_type(out_dt)
    in_dts = _input_dtypes(k)
    out_slot = k.n_inputs
    regs = Registers(1)
    code: list = []
    gid = Register(0)
    code.append(I.MOV(gid, Special.GLOBAL_ID, Type.U64))
    sizes = [d.itemsize for d in in_dts] + [out_dt.itemsize]
    if k.reduce is None:
        ptrs = _slot_pointers(regs, k.n_inputs + 1, sizes, gid, 1, code)
        em = _Emitter(regs, ptrs)
        r = em.emit(k.expr)
        code += em.out
        code.append(I.STG(Address.register(ptrs[out_slot]), r, out_ty))
        prog = ProgramBuilder({"eidos.tensor": "lane", "eidos.tensor.outputs": [out_slot]}).add(*code).build()
        return Lowered(prog, LaunchConfig.linear(k.count), "lane", out_slot=out_slot, params=_params(em))
    # reduction: lane m reduces elements m*R .. m*R+R-1
    in_ptrs = _slot_pointers(regs, k.n_inputs, sizes, gid, k.length, code)
    # the output pointer: slot out_slot, one element per lane
    base, off, scaled, outp = regs(), regs(), regs(), regs()
    code += [I.MOV_IMM(base, ptr_value(out_slot), Type.U64), I.MOV_IMM(off, sizes[-1], Type.U64),
             I.MUL(scaled, gid, off, Type.U64), I.ADD(outp, base, scaled, Type.U64)]
    vdt = dtype_of(k.expr)
    vty = D.isa_type(vdt)
    acc_ty, init = _accumulator(k.reduce, vdt, out_dt)
    acc = regs()
    idx = regs() if k.reduce in ("argmin", "argmax") else None
    counter = regs()
    em = _Emitter(regs, in_ptrs)
    code += em.hoist_consts(k.expr)
    code.append(I.MOV_IMM(acc, init, acc_ty))
    if idx is not None:
        code.append(I.MOV_IMM(idx, 0, Type.I64))
    steps = {s: em.const(sizes[s], Type.U64) for s in range(k.n_inputs)}
    code += em.out
    em.out = []
    if k.length > 0:
        code.append(I.MOV_IMM(counter, 0, Type.I64))
        b = ProgramBuilder({"eidos.tensor": "lane-reduce", "eidos.tensor.outputs": [out_slot]})
        b.add(*code)
        body = b.label("body")
        em.loaded = {}
        v = em.emit(k.expr)
        o = em.out
        if k.reduce in ("sum", "prod"):
            if vty != acc_ty:
                c = regs()
                o.append(I.CVT(c, v, vty, acc_ty))
                v = c
            o.append((I.ADD if k.reduce == "sum" else I.MUL)(acc, acc, v, acc_ty))
        elif k.reduce in ("min", "max"):
            o.append((I.MIN if k.reduce == "min" else I.MAX)(acc, acc, v, acc_ty))
        else:  # argmin / argmax: first extreme; for floats the first NaN wins
            p = em.pred()
            cond = Condition.GT if k.reduce == "argmax" else Condition.LT
            o.append(I.SETcc(p, v, acc, cond, vty))
            take = regs()
            one8, zero8 = em.const(1, Type.U8), em.const(0, Type.U8)
            o.append(I.SEL(take, p, one8, zero8, Type.U8))
            if vty.is_float:
                isn = em.select("ne", v, v, vty)
                bok = em.select("eq", acc, acc, vty)
                both, t2 = regs(), regs()
                o.append(I.AND(both, isn, bok, Type.U8))
                o.append(I.OR(t2, take, both, Type.U8))
                take = t2
            pt = em.pred()
            o.append(I.SETcc(pt, take, zero8, Condition.NE, Type.U8))
            o.append(I.SEL(acc, pt, v, acc, vty))
            o.append(I.SEL(idx, pt, counter, idx, Type.I64))
        for s in range(k.n_inputs):
            o.append(I.ADD(in_ptrs[s], in_ptrs[s], steps[s], Type.U64))
        b.add(*o)
        b.add(I.LOOP(counter, k.length, body))
        tail: list = []
    else:
        b = ProgramBuilder({"eidos.tensor": "lane-reduce", "eidos.tensor.outputs": [out_slot]})
        b.add(*code)
        tail = []
    result = idx if idx is not None else acc
    rty = Type.I64 if idx is not None else acc_ty
    if k.divisor:
        d, q = regs(), regs()
        tail += [I.MOV_IMM(d, float(k.divisor), rty), I.DIV(q, result, d, rty)]
        result = q
    if rty != out_ty:
        c = regs()
        tail.append(I.CVT(c, result, rty, out_ty))
        result = c
    tail.append(I.STG(Address.register(outp), result, out_ty))
    b.add(*tail)
    return Lowered(b.build(), LaunchConfig.linear(k.count), "lane", out_slot=out_slot, params=_params(em))


def _params(em: _Emitter) -> tuple:
    return tuple((index, reg.index, dt) for index, (reg, dt) in sorted(em.params.items()))


def _accumulator(op: str, vdt: np.dtype, out_dt: np.dtype):
    if op in ("sum", "prod"):
        if D.is_float(out_dt):
            return Type.F64, (0.0 if op == "sum" else 1.0)
        t = Type.U64 if out_dt in D.UNSIGNED else Type.I64
        return t, (0 if op == "sum" else 1)
    t = D.isa_type(vdt)
    if op in ("min", "argmin"):
        return t, (float("inf") if t.is_float else t.max_value)
    return t, (float("-inf") if t.is_float else t.min_value)


# ---- cache ------------------------------------------------------------------------------------

class LoweringCache:
    """Lowered programs by kernel (an LRU): a repeated expression is not rebuilt or recompiled."""

    def __init__(self, capacity: int = 512) -> None:
        self.capacity = capacity
        self.entries: OrderedDict = OrderedDict()
        self.hits = self.misses = 0

    def get(self, key, build):
        v = self.entries.get(key)
        if v is not None:
            self.entries.move_to_end(key)
            self.hits += 1
            return v
        self.misses += 1
        v = self.entries[key] = build()
        while len(self.entries) > self.capacity:
            self.entries.popitem(last=False)
        return v


CACHE = LoweringCache()


def lower(k: Kernel) -> Lowered:
    """The program for a kernel (map form when map_form_ok, else lane form); built once per kernel, which
    holds its constants' indices, not their values."""
    return CACHE.get(k, lambda: lower_map(k) if map_form_ok(k) else lower_lane(k))


def register_value(value, dtype: str):
    """A constant as the starting value of a register of `dtype` (rounded or wrapped as MOV_IMM would)."""
    dt = D.NAMES[dtype]
    if D.is_float(dt):
        return float(np.asarray(value, dtype=np.float64).astype(dt).astype(np.float64))
    return int(np.asarray(int(value)).astype(dt)) if dt != D.bool_ else int(bool(value))


# ---- extensions: one instruction each --------------------------------------------------------

def lower_extension(name: str, dtype: str, dims: tuple) -> Lowered:
    """GEMM / BatchedGEMM / Softmax / LayerNorm over slots 0.. (inputs) and the last slot (output)."""
    return CACHE.get(("ext", name, dtype, dims), lambda: _build_extension(name, dtype, dims))


def _build_extension(name: str, dtype: str, dims: tuple) -> Lowered:
    ty = D.isa_type(D.as_dtype(dtype))
    b = [Address.buffer(slot_handle(s)) for s in range(5)]
    if name == "gemm":
        m, n, k = dims
        ins, out = I.GEMM(b[2], b[0], b[1], m, n, k, ty=ty), 2
    elif name == "batched_gemm":
        batch, m, n, k = dims
        ins, out = I.BatchedGEMM(b[2], b[0], b[1], batch, m, n, k, ty=ty), 2
    elif name == "softmax":
        rows, n = dims
        ins, out = I.Softmax(b[1], b[0], n, rows, ty=ty), 1
    elif name == "layer_norm":
        rows, n, eps = dims
        ins, out = I.LayerNorm(b[3], b[0], b[1], b[2], n, eps, rows, ty=ty), 3
    else:
        raise EidosError(f"internal: no extension {name}")
    prog = ProgramBuilder({"eidos.tensor": name, "eidos.tensor.outputs": [out]}).add(ins).build()
    return Lowered(prog, LaunchConfig.linear(1), name, out_slot=out)
