"""Register code for expression trees: the part of lowering an expression to a lane-form program
that does not depend on where the expression came from.

The tensor layer (eidos.tensor.lower) and the Triton Flow lane (eidos.lanes.triton) both walk
their own expression trees and emit per-lane register code through `RegisterCode`: registers and
predicates, constants, booleans as U8 0/1, and the forms the ISA has no single instruction for
(Python's floor division and modulo from truncating DIV/REM).
"""

from __future__ import annotations

from eidos.errors import EidosError

from . import instructions as I
from .address import NUM_PREDICATES, NUM_REGISTERS, Predicate, Register
from .instructions import Condition
from .types import Type

CMP = {"eq": Condition.EQ, "ne": Condition.NE, "lt": Condition.LT, "le": Condition.LE, "gt": Condition.GT,
       "ge": Condition.GE}


class Registers:
    """Hands out registers in order from `start`; an expression needing more than the ISA has is an error."""

    def __init__(self, start: int) -> None:
        self.next = start

    def __call__(self) -> Register:
        if self.next >= NUM_REGISTERS:
            raise EidosError(f"expression too large for one program (more than {NUM_REGISTERS} registers); "
                             "compute part of it first")
        self.next += 1
        return Register(self.next - 1)


class RegisterCode:
    """Collects register instructions in `out`; constants are MOV_IMM'd once per (value, type)."""

    def __init__(self, regs: Registers) -> None:
        self.regs = regs
        self.out: list = []
        self.consts: dict = {}
        self.npred = 0

    def const(self, value, ty: Type) -> Register:
        key = (repr(value), ty)
        if key not in self.consts:
            r = self.regs()
            self.out.append(I.MOV_IMM(r, value, ty))
            self.consts[key] = r
        return self.consts[key]

    def pred(self) -> Predicate:
        """A predicate register; they are reused round-robin (each is read right after it is set)."""
        p = Predicate(self.npred % NUM_PREDICATES)
        self.npred += 1
        return p

    def pred_of(self, x: Register, ty: Type) -> Predicate:
        """A predicate that is true where x != 0."""
        p = self.pred()
        self.out.append(I.SETcc(p, x, self.const(0.0 if ty.is_float else 0, ty), Condition.NE, ty))
        return p

    def select(self, cond: str, a: Register, b: Register, ty: Type) -> Register:
        """A U8 register: 1 where `a cond b` (cond in CMP), else 0."""
        p = self.pred()
        r = self.regs()
        self.out.append(I.SETcc(p, a, b, CMP[cond], ty))
        self.out.append(I.SEL(r, p, self.const(1, Type.U8), self.const(0, Type.U8), Type.U8))
        return r

    def truth(self, x: Register, ty: Type) -> Register:
        """A U8 register: 1 where x != 0, else 0."""
        return self.select("ne", x, self.const(0.0 if ty.is_float else 0, ty), ty)

    def int_floor(self, r: Register, a: Register, b: Register, ty: Type, want: str) -> None:
        """Python's floor division (want="q") or modulo (want="r") into r, from truncating DIV/REM.
        Where b == 0 the result is 0 (callers that define it otherwise mask it)."""
        o = self.out
        q, m = self.regs(), self.regs()
        zero = self.const(0, ty)
        o.append(I.DIV(q, a, b, ty))
        o.append(I.REM(m, a, b, ty))
        if ty.is_signed:
            # adjust when m != 0 and sign(m) != sign(b)
            p1, p2, p3 = self.pred(), self.pred(), self.pred()
            one = self.const(1, ty)
            o.append(I.SETcc(p1, m, zero, Condition.LT, ty))
            o.append(I.SETcc(p2, b, zero, Condition.LT, ty))
            f1, f2, f3 = self.regs(), self.regs(), self.regs()
            o.append(I.SEL(f1, p1, one, zero, ty))
            o.append(I.SEL(f2, p2, one, zero, ty))
            o.append(I.XOR(f3, f1, f2, ty))
            o.append(I.SETcc(p3, m, zero, Condition.NE, ty))
            adj = self.regs()
            o.append(I.SEL(adj, p3, f3, zero, ty))
            if want == "q":
                q2 = self.regs()
                o.append(I.SUB(q2, q, adj, ty))
                q = q2
            else:
                bm, m2 = self.regs(), self.regs()
                o.append(I.MUL(bm, b, adj, ty))
                o.append(I.ADD(m2, m, bm, ty))
                m = m2
        res = q if want == "q" else m
        pz = self.pred()
        o.append(I.SETcc(pz, b, zero, Condition.EQ, ty))
        o.append(I.SEL(r, pz, zero, res, ty))

    def float_mod(self, r: Register, a: Register, b: Register, ty: Type) -> None:
        """Python's float modulo into r: fmod, then add b when the signs differ and the remainder is not 0; a zero
        remainder takes b's sign (-0.0 % 2.0 is 0.0, 0.0 % -2.0 is -0.0, as Python and the Array API)."""
        o = self.out
        m = self.regs()
        zero = self.const(0.0, ty)
        o.append(I.REM(m, a, b, ty))
        p1, p2 = self.pred(), self.pred()
        o.append(I.SETcc(p2, b, zero, Condition.LT, ty))
        z = self.regs()
        o.append(I.SEL(z, p2, self.const(-0.0, ty), zero, ty))
        o.append(I.SETcc(p1, m, zero, Condition.NE, ty))
        s = self.regs()
        o.append(I.MUL(s, m, b, ty))
        o.append(I.SETcc(p2, s, zero, Condition.LT, ty))
        mb = self.regs()
        o.append(I.ADD(mb, m, b, ty))
        t = self.regs()
        o.append(I.SEL(t, p2, mb, m, ty))
        o.append(I.SEL(r, p1, t, z, ty))


def lane_pointers(regs: Registers, bases: list, lane_index: Register, strides: list, out: list) -> list:
    """For each base pointer (an int: emitted as MOV_IMM; or a Register holding it), a register with
    base + lane_index * stride bytes: pointers affine in GLOBAL_ID, so backends run lanes in parallel."""
    ptrs = []
    for base, stride in zip(bases, strides):
        if not isinstance(base, Register):
            r = regs()
            out.append(I.MOV_IMM(r, base, Type.U64))
            base = r
        off, p = regs(), regs()
        out.append(I.MOV_IMM(off, stride, Type.U64))
        scaled = regs()
        out.append(I.MUL(scaled, lane_index, off, Type.U64))
        out.append(I.ADD(p, base, scaled, Type.U64))
        ptrs.append(p)
    return ptrs
