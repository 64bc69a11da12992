"""Flow expressions -> Atlas ISA lane-form programs, with eidos semantics (docs/semantics.md).

One program per map step (the expressions of a Project, a Filter's predicate, an Aggregate's
keys and aggregation arguments): one lane per row, every column a value buffer plus, where it may
hold nulls, a validity buffer of U8 0/1. Null propagation, three-valued logic, division by zero
as null and NaN's place in comparisons are register code (SETcc/SEL on 0/1 bytes); integer
overflow and failing casts set a per-row error code that the executor checks after the run and
turns into ExecutionError naming the operation (UnsupportedError for the few values this lane
cannot compute exactly, e.g. integers past 2**53 divided as floats). Errors are gated by the
branch a row takes in `when/then`, so only the branch a row takes can fail for it.

No torch here: programs depend only on the plan's expressions, dtypes and which inputs may be
null, so any ISA backend runs them (the Triton target on a GPU, the reference interpreter in
tests). Buffer base pointers are kernel arguments (ExecutionParams.registers), so one program
serves every run of the same step.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

from eidos import isa
from eidos.errors import EidosError, PlanError, UnsupportedError
from eidos.hal import coverage as C
from eidos.hal.coverage import Coverage
from eidos.ir import dtypes as T
from eidos.ir import evaluate as V
from eidos.ir import expr as E
from eidos.ir import functions as F
from eidos.ir import nodes as N
from eidos.ir.schema import Schema
from eidos.ir.typing import adapt, infer, literal_dtype, operand_dtypes, promote
from eidos.isa import Address, Register, Type
from eidos.isa import instructions as I
from eidos.isa.address import Special
from eidos.isa.emit import RegisterCode, Registers

ISA_TYPES = {"Int8": Type.I8, "Int16": Type.I16, "Int32": Type.I32, "Int64": Type.I64, "UInt8": Type.U8,
             "UInt16": Type.U16, "UInt32": Type.U32, "UInt64": Type.U64, "Float32": Type.F32,
             "Float64": Type.F64, "Boolean": Type.U8}

# The functions `_Code.call` computes in registers, by the branch that does; with emit's forms
# (cast, case) they are FUNCTIONS, what `translated()` reports. Powers and aggregations are not
# here: execute.py computes them around these programs.
LOGIC = ("and", "or")
NULL_TESTS = ("is_null", "is_not_null")
ARITHMETIC = ("add", "sub", "mul", "truediv", "floordiv", "mod")
SIGN = ("neg", "abs")
MATH = {"sqrt": I.SQRT, "exp": I.EXP, "log": I.LOG, "sin": I.SIN, "cos": I.COS, "tanh": I.TANH}
FUNCTIONS = frozenset(LOGIC + ("not",) + NULL_TESTS + ("is_in", "is_between", "fill_null") + F.COMPARISON
                      + ARITHMETIC + SIGN + tuple(MATH) + ("floor", "ceil", "round", "cast", "case"))

# Error kinds a site raises as (the executor maps them to exception classes).
EXECUTION, UNSUPPORTED = "execution", "unsupported"


def isa_type(t: T.DType) -> Type:
    try:
        return ISA_TYPES[t.name]
    except KeyError:
        raise UnsupportedError(f"the triton lane has no device form for {t}") from None


@dataclass(frozen=True)
class Value:
    """An expression's value in a register (`value`), and a U8 register that is 1 where it is not null
    (`valid`; None: never null)."""

    value: Register
    valid: Register | None
    dtype: T.DType


@dataclass(frozen=True)
class Site:
    """Where a row can fail: the error kind and what to tell the user."""

    kind: str
    text: str


@dataclass(frozen=True)
class Step:
    """One lowered map step: the program, its buffers in order, and its error sites (code i + 1)."""

    program: isa.Program
    inputs: tuple[tuple[str, T.DType, bool], ...]     # (column, dtype, has a validity buffer)
    outputs: tuple[tuple[str, T.DType, bool], ...]    # (column, dtype, has a validity buffer)
    sites: tuple[Site, ...]
    pointer_registers: tuple[int, ...]                 # one per buffer: inputs, outputs, then errors

    @property
    def buffers(self) -> int:
        return len(self.pointer_registers)


class _Code(RegisterCode):
    """Register code for eidos expressions over one row; see the module docstring."""

    def __init__(self, regs: Registers, schema: Schema, nullable: frozenset[str]):
        super().__init__(regs)
        self.schema, self.nullable = schema, nullable
        self.columns: dict[str, Value] = {}
        self.column_order: list[str] = []
        self.pointers: dict[str, tuple[Register, Register | None]] = {}
        self.sites: list[Site] = []
        self.error: Register | None = None
        self.active: list[Register] = []   # U8 registers: the row takes the branch being emitted

    # ---- small pieces ------------------------------------------------------------------
    def u8(self, op, a: Register, b: Register) -> Register:
        r = self.regs()
        self.out.append(op(r, a, b, Type.U8))
        return r

    def both(self, a: Register | None, b: Register | None) -> Register | None:
        """Validity of a result of two operands: 1 where both are valid."""
        if a is None or b is None:
            return b if a is None else a
        return self.u8(I.AND, a, b)

    def invert(self, a: Register) -> Register:
        return self.u8(I.XOR, a, self.const(1, Type.U8))

    def sel(self, take: Register, a: Register, b: Register, ty: Type) -> Register:
        """a where the U8 `take` is 1, else b."""
        r = self.regs()
        self.out.append(I.SEL(r, self.pred_of(take, Type.U8), a, b, ty))
        return r

    def op(self, ins, a: Register, b: Register | None, ty: Type) -> Register:
        r = self.regs()
        self.out.append(ins(r, a, b, ty) if b is not None else ins(r, a, ty))
        return r

    def cvt(self, x: Register, src: Type, dst: Type) -> Register:
        if src is dst:
            return x
        r = self.regs()
        self.out.append(I.CVT(r, x, src, dst))
        return r

    def convert(self, v: Value, dst: T.DType) -> Register:
        """v's value in dst (a widening conversion: types that meet, or casts checked elsewhere)."""
        if v.dtype == T.Null:
            return self.const(0.0 if dst.is_float else 0, isa_type(dst))
        return self.cvt(v.value, isa_type(v.dtype), isa_type(dst))

    def fail_where(self, flag: Register, valid: Register | None, kind: str, text: str) -> None:
        """Record an error site: rows where `flag` (U8) is 1, the operands are valid and the row takes
        this branch get its code."""
        for gate in ([valid] if valid is not None else []) + self.active[-1:]:
            flag = self.u8(I.AND, flag, gate)
        self.sites.append(Site(kind, text))
        if self.error is None:
            self.error = self.const(0, Type.I32)
        r = self.regs()
        self.out.append(I.SEL(r, self.pred_of(flag, Type.U8), self.const(len(self.sites), Type.I32), self.error,
                              Type.I32))
        self.error = r

    # ---- expressions -------------------------------------------------------------------
    def emit(self, e: E.Expr) -> Value:
        if isinstance(e, E.Alias):
            return self.emit(e.expr)
        if isinstance(e, E.Column):
            return self.column(e.name)
        if isinstance(e, E.Literal):
            return self.literal(e.value, e.dtype)
        if isinstance(e, E.Cast):
            return self.cast(e)
        if isinstance(e, E.Case):
            return self.case(e)
        if isinstance(e, E.Call):
            return self.call(e)
        raise UnsupportedError(f"the triton lane cannot compute {type(e).__name__} {e}")

    def operand(self, e: E.Expr, t: T.DType) -> Value:
        """`e` as an operand of type t: a weak literal takes that type (docs/semantics.md section 3)."""
        if isinstance(e, E.Literal) and e.weak and t != e.dtype:
            return self.literal(V.cast(e.value, e.dtype, t), t)
        return self.emit(e)

    def column(self, name: str) -> Value:
        if name not in self.columns:
            t = self.schema.dtype(name)
            ty = isa_type(t)
            vp = self.regs()
            np_ = self.regs() if name in self.nullable else None
            self.pointers[name] = (vp, np_)
            self.column_order.append(name)
            value = self.regs()
            self.out.append(I.LDG(value, Address.register(vp), ty))
            valid = None
            if np_ is not None:
                valid = self.regs()
                self.out.append(I.LDG(valid, Address.register(np_), Type.U8))
            self.columns[name] = Value(value, valid, t)
        return self.columns[name]

    def literal(self, value, t: T.DType) -> Value:
        if t == T.Null:
            return Value(self.const(0, Type.U8), self.const(0, Type.U8), T.Null)
        if value is None:
            return Value(self.const(0.0 if t.is_float else 0, isa_type(t)), self.const(0, Type.U8), t)
        ty = isa_type(t)
        v = V.literal_value(value, t)
        imm = int(bool(v)) if t == T.Boolean else (float(v) if t.is_float else int(v))
        return Value(self.const(imm, ty), None, t)

    # ---- calls -------------------------------------------------------------------------
    def call(self, e: E.Call) -> Value:
        fn = e.fn
        rt = infer(e, self.schema)
        if fn in LOGIC:
            return self.logic(fn, self.emit(e.args[0]), self.emit(e.args[1]))
        if fn == "not":
            a = self.emit(e.args[0])
            return Value(self.invert(a.value), a.valid, T.Boolean)
        if fn in NULL_TESTS:
            a = self.emit(e.args[0])
            valid = a.valid if a.valid is not None else self.const(1, Type.U8)
            return Value(valid if fn == "is_not_null" else self.invert(valid), None, T.Boolean)
        if fn == "is_in":
            return self.is_in(e)
        types = operand_dtypes(e, self.schema)
        args = [self.operand(a, t) for a, t in zip(e.args, types)]
        if fn == "is_between":
            x, lo, hi = args
            return self.logic("and", self.compare("ge", x, lo), self.compare("le", x, hi))
        if fn == "fill_null":
            x, y = args
            xv = self.convert(x, rt)
            yv = self.convert(y, rt)
            if x.valid is None:
                return Value(xv, None, rt)
            valid = None if y.valid is None else self.u8(I.OR, x.valid, y.valid)
            return Value(self.sel(x.valid, xv, yv, isa_type(rt)), valid, rt)
        if rt == T.Null or any(a.dtype == T.Null for a in args):
            return self.literal(None, rt)
        if fn in F.COMPARISON:
            return self.compare(fn, *args)
        if fn in ARITHMETIC:
            return self.arith(fn, args[0], args[1], rt, e)
        if fn in SIGN:
            return self.neg_abs(fn, args[0], rt, e)
        if fn in MATH:
            x = args[0]
            r = self.op(MATH[fn], self.convert(x, T.Float64), None, Type.F64)   # double precision, then rounded
            return Value(self.cvt(r, Type.F64, isa_type(rt)), x.valid, rt)
        if fn in ("floor", "ceil"):
            x = args[0]
            if not x.dtype.is_float:
                return x
            ty = isa_type(rt)
            r = self.op(I.FLOOR if fn == "floor" else I.CEIL, x.value, None, ty)
            return Value(self.op(I.ADD, r, self.const(0.0, ty), ty), x.valid, rt)  # -0.0 -> 0.0, as floor() gives
        if fn == "round":
            return self.round(args[0], e.options[0], rt)
        raise UnsupportedError(f"the triton lane has no device form for {fn}")

    def round(self, x: Value, decimals: int, rt: T.DType) -> Value:
        """Half away from zero, as the reference: in double precision, x * 10**d (or x / 10**-d),
        rounded, scaled back; a value whose scaled form is not finite stays as it is."""
        if not rt.is_float:
            if decimals >= 0:
                return x
            raise UnsupportedError("round of integers to negative places has no device form in the triton lane")
        f64 = Type.F64
        v = self.convert(x, T.Float64)
        p = self.const(10.0 ** abs(decimals), f64)
        y = self.op(I.MUL if decimals >= 0 else I.DIV, v, p, f64)
        r = self.op(I.TRUNC, y, None, f64)   # keeps the sign of zero
        half = self.select("ge", self.op(I.ABS, self.op(I.SUB, y, r, f64), None, f64), self.const(0.5, f64), f64)
        step = self.sel(self.select("gt", y, self.const(0.0, f64), f64), self.const(1.0, f64), self.const(-1.0, f64), f64)
        r = self.sel(half, self.op(I.ADD, r, step, f64), r, f64)
        back = self.op(I.DIV if decimals >= 0 else I.MUL, r, p, f64)
        if decimals >= 0:   # the scaled value overflowed (or x is inf or NaN): x itself
            finite = self.select("lt", self.op(I.ABS, y, None, f64), self.const(math.inf, f64), f64)
            back = self.sel(finite, back, v, f64)
        return Value(self.cvt(back, f64, isa_type(rt)), x.valid, rt)

    def logic(self, fn: str, a: Value, b: Value) -> Value:
        """Kleene and/or: a definite false (and) or true (or) on either side decides, else null if either is."""
        if a.valid is None and b.valid is None:
            return Value(self.u8(I.AND if fn == "and" else I.OR, a.value, b.value), None, T.Boolean)
        one = self.const(1, Type.U8)
        va, vb = a.valid or one, b.valid or one
        if fn == "and":
            value = self.u8(I.AND, a.value, b.value)
            fa = self.u8(I.AND, va, self.invert(a.value))
            fb = self.u8(I.AND, vb, self.invert(b.value))
        else:
            value = self.u8(I.OR, self.u8(I.AND, va, a.value), self.u8(I.AND, vb, b.value))
            fa = self.u8(I.AND, va, a.value)
            fb = self.u8(I.AND, vb, b.value)
        decided = self.u8(I.OR, fa, fb)
        valid = self.u8(I.OR, decided, self.u8(I.AND, va, vb))
        if fn == "and":
            value = self.u8(I.AND, value, valid)
        return Value(value, valid, T.Boolean)

    def compare(self, fn: str, a: Value, b: Value) -> Value:
        if T.Null in (a.dtype, b.dtype):
            return self.literal(None, T.Boolean)
        domain = V.comparison_domain(a.dtype, b.dtype)
        ty = isa_type(domain)
        x, y = self.convert(a, domain), self.convert(b, domain)
        valid = self.both(a.valid, b.valid)
        if not domain.is_float:
            return Value(self.select(fn, x, y, ty), valid, T.Boolean)
        # NaN equals NaN and is greater than every other number (semantics section 6)
        if fn in ("gt", "ge"):
            fn, x, y = {"gt": "lt", "ge": "le"}[fn], y, x
        nan_y = self.select("ne", y, y, ty)
        if fn in ("eq", "ne"):
            both_nan = self.u8(I.AND, self.select("ne", x, x, ty), nan_y)
            r = self.u8(I.OR, self.select("eq", x, y, ty), both_nan)
            return Value(self.invert(r) if fn == "ne" else r, valid, T.Boolean)
        if fn == "lt":
            r = self.u8(I.OR, self.select("lt", x, y, ty), self.u8(I.AND, self.select("eq", x, x, ty), nan_y))
        else:
            r = self.u8(I.OR, self.select("le", x, y, ty), nan_y)
        return Value(r, valid, T.Boolean)

    def is_in(self, e: E.Call) -> Value:
        """SQL IN: true on a match (compared in the supertype of x and every value), else null when a
        value is null, else false; null for a null x."""
        x = self.emit(e.args[0])
        raw = e.options[0]
        values = [v for v in raw if v is not None]
        has_null = len(values) < len(raw)
        types = [adapt(E.Literal(v, literal_dtype(v), weak=True), literal_dtype(v), x.dtype) for v in values]
        domain = x.dtype
        for vt in types:
            domain = promote(domain, vt, op="compare")
        xd = Value(self.convert(x, domain), None, domain)
        hit = self.const(0, Type.U8)
        for v, vt in zip(values, types):
            member = V.cast(V.literal_value(v, vt), vt, domain)
            hit = self.u8(I.OR, hit, self.compare("eq", xd, self.literal(member, domain)).value)
        valid = x.valid
        if has_null:
            valid = self.both(valid, hit)   # no match and a null among the values: null
        return Value(hit, valid, T.Boolean)

    # ---- arithmetic --------------------------------------------------------------------
    def arith(self, fn: str, a: Value, b: Value, rt: T.DType, e: E.Expr) -> Value:
        valid = self.both(a.valid, b.valid)
        if fn == "truediv":
            return self.divide(a, b, rt, valid)
        if rt.is_float:
            return self.float_arith(fn, a, b, rt, valid)
        if not rt.is_integer:
            raise UnsupportedError(f"the triton lane has no device form for {fn} on {rt}")
        ty = isa_type(rt)
        x, y = self.convert(a, rt), self.convert(b, rt)
        sym = {"add": "+", "sub": "-", "mul": "*", "floordiv": "//", "mod": "%"}[fn]
        overflow = f"integer overflow: {sym} does not fit in {rt} ({T.int_range(rt)[0]}..{T.int_range(rt)[1]}) in {e}"
        if fn in ("floordiv", "mod"):
            zero = self.select("eq", y, self.const(0, ty), ty)
            safe = self.sel(zero, self.const(1, ty), y, ty)
            r = self.regs()
            self.int_floor(r, x, safe, ty, want="q" if fn == "floordiv" else "r")
            valid = self.both(valid, self.invert(zero))
            if fn == "floordiv" and rt.is_signed_integer:   # min // -1
                lo = T.int_range(rt)[0]
                flag = self.u8(I.AND, self.select("eq", x, self.const(lo, ty), ty),
                               self.select("eq", y, self.const(-1, ty), ty))
                self.fail_where(flag, valid, EXECUTION, overflow)
            return Value(r, valid, rt)
        if rt.bits < 64:   # exact in 64 bits (unsigned: a wrapped difference is past the range), then checked
            wide = Type.U64 if rt.is_unsigned_integer else Type.I64
            r = self.op({"add": I.ADD, "sub": I.SUB, "mul": I.MUL}[fn], self.cvt(x, ty, wide), self.cvt(y, ty, wide),
                        wide)
            lo, hi = T.int_range(rt)
            flag = self.select("gt", r, self.const(hi, wide), wide)
            if lo < 0:
                flag = self.u8(I.OR, self.select("lt", r, self.const(lo, wide), wide), flag)
            self.fail_where(flag, valid, EXECUTION, overflow)
            return Value(self.cvt(r, wide, ty), valid, rt)
        r = self.op({"add": I.ADD, "sub": I.SUB, "mul": I.MUL}[fn], x, y, ty)
        self.fail_where(self.overflowed64(fn, x, y, r, ty), valid, EXECUTION, overflow)
        return Value(r, valid, rt)

    def overflowed64(self, fn: str, x: Register, y: Register, r: Register, ty: Type) -> Register:
        """1 where the wrapped 64-bit result r of x fn y differs from the exact one."""
        zero = self.const(0, ty)
        if ty.is_unsigned:
            if fn == "add":
                return self.select("lt", r, x, ty)
            if fn == "sub":
                return self.select("lt", x, y, ty)
        elif fn in ("add", "sub"):
            sx, sy, sr = (self.select("lt", v, zero, ty) for v in (x, y, r))
            same = self.u8(I.XOR, sx, sy)   # add: signs equal; sub: signs differ
            if fn == "add":
                same = self.invert(same)
            return self.u8(I.AND, same, self.u8(I.XOR, sr, sx))
        # mul: r / x != y where x is not 0 (and -1 * min, which the division cannot see)
        nonzero = self.invert(self.select("eq", x, zero, ty))
        safe = self.sel(nonzero, x, self.const(1, ty), ty)
        differs = self.u8(I.AND, nonzero, self.select("ne", self.op(I.DIV, r, safe, ty), y, ty))
        if ty.is_unsigned:
            return differs
        lo = T.int_range(T.Int64)[0]
        minus = self.u8(I.AND, self.select("eq", x, self.const(-1, ty), ty), self.select("eq", y, self.const(lo, ty), ty))
        return self.u8(I.OR, differs, minus)

    def divide(self, a: Value, b: Value, rt: T.DType, valid: Register | None) -> Value:
        """True division: both operands converted to the float result type (as the reference does);
        a zero divisor gives null."""
        ty = isa_type(rt)
        x, y = self.convert(a, rt), self.convert(b, rt)
        zero = self.select("eq", y, self.const(0.0, ty), ty)
        return Value(self.op(I.DIV, x, y, ty), self.both(valid, self.invert(zero)), rt)

    def float_arith(self, fn: str, a: Value, b: Value, rt: T.DType, valid: Register | None) -> Value:
        ty = isa_type(rt)
        if fn in ("add", "sub", "mul"):
            x, y = self.convert(a, rt), self.convert(b, rt)
            return Value(self.op({"add": I.ADD, "sub": I.SUB, "mul": I.MUL}[fn], x, y, ty), valid, rt)
        # floor division and modulo in double precision, rounded once to the result type (as Python does)
        f64 = Type.F64
        x, y = self.convert(a, T.Float64), self.convert(b, T.Float64)
        zero = self.select("eq", y, self.const(0.0, f64), f64)
        valid = self.both(valid, self.invert(zero))
        if fn == "floordiv":
            r = self.op(I.FLOOR, self.op(I.DIV, x, y, f64), None, f64)
            r = self.op(I.ADD, r, self.const(0.0, f64), f64)   # floor(-0.0) is 0.0, as Python's math.floor gives
        else:
            m = self.regs()
            self.float_mod(m, x, y, f64)
            # a zero remainder takes the divisor's sign (Python)
            signed_zero = self.sel(self.select("lt", y, self.const(0.0, f64), f64), self.const(-0.0, f64),
                                   self.const(0.0, f64), f64)
            r = self.sel(self.select("eq", m, self.const(0.0, f64), f64), signed_zero, m, f64)
        return Value(self.cvt(r, f64, ty), valid, rt)

    def neg_abs(self, fn: str, x: Value, rt: T.DType, e: E.Expr) -> Value:
        ty = isa_type(rt)
        ins = I.NEG if fn == "neg" else I.ABS
        if rt.is_float:
            return Value(self.op(ins, x.value, None, ty), x.valid, rt)
        if rt.is_unsigned_integer:   # abs of an unsigned value is itself (and - of one is a PlanError)
            return x
        lo, hi = T.int_range(rt)
        flag = self.select("eq", x.value, self.const(lo, ty), ty)   # only the most negative value overflows
        self.fail_where(flag, x.valid, EXECUTION,
                        f"integer overflow: {fn}({lo}) does not fit in {rt} ({lo}..{hi}) in {e}")
        return Value(self.op(ins, x.value, None, ty), x.valid, rt)

    # ---- casts and when/then -------------------------------------------------------------
    def cast(self, e: E.Cast) -> Value:
        x = self.emit(e.expr)
        src, dst = x.dtype, e.dtype
        if src == dst:
            return x
        if src == T.Null:
            return self.literal(None, dst)
        if dst == T.Boolean:
            return Value(self.truth(x.value, isa_type(src)), x.valid, dst)
        sty, dty = isa_type(src), isa_type(dst)
        if dst.is_float or src == T.Boolean:
            return Value(self.cvt(x.value, sty, dty), x.valid, dst)
        lo, hi = T.int_range(dst)
        if src.is_float:
            f = self.cvt(x.value, sty, Type.F64)
            low = float(lo - 1)
            below = (self.select("le", f, self.const(low, Type.F64), Type.F64) if low != lo
                     else self.select("lt", f, self.const(float(lo), Type.F64), Type.F64))
            above = self.select("ge", f, self.const(float(hi + 1), Type.F64), Type.F64)
            bad = self.u8(I.OR, self.u8(I.OR, below, above), self.select("ne", f, f, Type.F64))
            self.fail_where(bad, x.valid, EXECUTION, f"cannot cast a value outside {lo}..{hi} "
                            f"(or NaN, inf) to {dst} in {e}")
            return Value(self.cvt(f, Type.F64, dty), x.valid, dst)
        # integer to integer: checked against the target's range in the source type
        slo, shi = T.int_range(src)
        flags = []
        if lo > slo:
            flags.append(self.select("lt", x.value, self.const(lo, sty), sty))
        if hi < shi:
            flags.append(self.select("gt", x.value, self.const(hi, sty), sty))
        if flags:
            bad = flags[0] if len(flags) == 1 else self.u8(I.OR, *flags)
            self.fail_where(bad, x.valid, EXECUTION, f"cannot cast a value outside {lo}..{hi} to {dst} in {e}")
        return Value(self.cvt(x.value, sty, dty), x.valid, dst)

    def case(self, e: E.Case) -> Value:
        """Each row takes the first branch whose condition is true; errors count only in the branch taken."""
        rt = infer(e, self.schema)
        values = [v for _, v in e.branches] + [e.otherwise]
        types = [infer(v, self.schema) for v in values]
        strong = [t for v, t in zip(values, types) if not (isinstance(v, E.Literal) and v.weak)]
        anchor = strong[0] if strong else types[0]
        one = self.const(1, Type.U8)
        open_ = one       # 1 where no earlier branch was taken
        taken: list[tuple[Register, Value]] = []
        for (cond, v), t in zip(e.branches, types):
            self.active.append(self.both_gate(open_))
            c = self.emit(cond)
            self.active.pop()
            take = c.value if c.valid is None else self.u8(I.AND, c.value, c.valid)
            take = self.u8(I.AND, take, open_)
            self.active.append(self.both_gate(take))
            taken.append((take, self.operand(v, adapt(v, t, anchor))))
            self.active.pop()
            open_ = self.u8(I.AND, open_, self.invert(take))
        self.active.append(self.both_gate(open_))
        result = self.operand(e.otherwise, adapt(e.otherwise, types[-1], anchor))
        self.active.pop()
        ty = isa_type(rt)
        value = self.convert(result, rt)
        valid = result.valid
        for take, v in reversed(taken):
            value = self.sel(take, self.convert(v, rt), value, ty)
            v_valid = v.valid if v.valid is not None else one
            if valid is not None or v.valid is not None:
                valid = self.sel(take, v_valid, valid if valid is not None else one, Type.U8)
        return Value(value, valid, rt)

    def both_gate(self, gate: Register) -> Register:
        """The gate for a nested branch: this one and the enclosing one."""
        return gate if not self.active else self.u8(I.AND, gate, self.active[-1])


def step(schema: Schema, nullable: frozenset[str], outputs: tuple[tuple[str, E.Expr], ...]) -> Step:
    """The program computing `outputs` (name, expression) for every row of a frame with `schema`, whose
    columns in `nullable` carry validity buffers. Cached: plans that repeat a step reuse its program."""
    return _step(tuple(schema.items()), nullable, tuple(outputs))


@functools.lru_cache(maxsize=256)
def _step(fields: tuple, nullable: frozenset[str], outputs: tuple[tuple[str, E.Expr], ...]) -> Step:
    try:
        return _build(Schema(fields), nullable, outputs)
    except (PlanError, UnsupportedError):
        raise
    except EidosError as e:   # out of registers
        raise UnsupportedError(f"the triton lane cannot fit this step in one program: {e}") from e


def _build(schema: Schema, nullable: frozenset[str], outputs: tuple[tuple[str, E.Expr], ...]) -> Step:
    # r0 = the row, then the pointer registers (kernel arguments), then the code
    regs = Registers(1)
    code = _Code(regs, schema, nullable)
    results = [(name, code.emit(e)) for name, e in outputs]
    body = code.out
    inputs = [(name, code.columns[name].dtype, code.pointers[name][1] is not None) for name in code.column_order]
    in_ptrs = [p for name in code.column_order for p in code.pointers[name] if p is not None]
    out_ptrs, stores, outs = [], [], []
    for name, v in results:
        t = v.dtype
        vp = regs()
        out_ptrs.append(vp)
        stores.append(I.STG(Address.register(vp), v.value, isa_type(t)))
        if v.valid is not None:
            np_ = regs()
            out_ptrs.append(np_)
            stores.append(I.STG(Address.register(np_), v.valid, Type.U8))
        outs.append((name, t, v.valid is not None))
    err_ptrs = []
    if code.error is not None:
        ep = regs()
        err_ptrs.append(ep)
        stores.append(I.STG(Address.register(ep), code.error, Type.I32))
    pointers = in_ptrs + out_ptrs + err_ptrs
    sizes = ([s for name in code.column_order for s in _sizes(code, name)]
             + [s for name, t, has_valid in outs for s in ([isa_type(t).size_bytes] + ([1] if has_valid else []))]
             + ([4] if err_ptrs else []))
    gid = Register(0)
    head = [I.MOV(gid, Special.GLOBAL_ID, Type.U64)]
    offsets: dict[int, Register] = {}
    for p, size in zip(pointers, sizes):   # each pointer moves to this lane's element
        if size not in offsets:
            s, off = regs(), regs()
            head += [I.MOV_IMM(s, size, Type.U64), I.MUL(off, gid, s, Type.U64)]
            offsets[size] = off
        head.append(I.ADD(p, p, offsets[size], Type.U64))
    program = isa.ProgramBuilder({"eidos.flow": "map"}).add(*head, *body, *stores).build()
    return Step(program, tuple(inputs), tuple(outs), tuple(code.sites), tuple(p.index for p in pointers))


def _sizes(code: _Code, name: str) -> list[int]:
    vp, np_ = code.pointers[name]
    return [isa_type(code.columns[name].dtype).size_bytes] + ([1] if np_ is not None else [])


def translated() -> Coverage:
    """What this lane translates: the nodes execute.py runs (its visitor's registry), the functions
    map-step programs compute (FUNCTIONS), and the types with a device form (ISA_TYPES)."""
    from eidos.lanes.triton import execute

    return Coverage(C.dispatched(execute.run, N.Node), FUNCTIONS, frozenset(ISA_TYPES))
