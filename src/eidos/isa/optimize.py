"""Program.optimize(): passes that keep every result identical to the unoptimized program.

1. fold: constant propagation within straight-line code (known values reset at every label
   and after CALL), folding only operations whose results are exactly specified (no
   transcendentals), plus peephole rules (identities, branches to the next instruction,
   branches on known predicates).
2. dce: unreachable instructions, then register writes no later instruction reads
   (liveness over the control-flow graph; skipped when the program uses CALL/RET).
3. fuse: consecutive ParallelMap/ParallelMapBinary over the same count and type, with no
   label between them and every pair of ranges identical or disjoint, become one FusedMap.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from . import instructions as I
from . import semantics as S
from .address import Address, Register, Space
from .cfg import successors
from .instructions import Instruction, MapStep
from .program import Program
from .types import Type

_ENTRY = "\0entry"


@dataclass
class _Slot:
    ins: Instruction
    labels: list[str] = field(default_factory=list)


def _slots(program: Program) -> tuple[list[_Slot], list[str]]:
    slots = [_Slot(ins) for ins in program.instructions]
    tail: list[str] = []
    marks = dict(program.labels)
    marks[_ENTRY] = program.entry
    for name, i in marks.items():
        (slots[i].labels if i < len(slots) else tail).append(name)
    return slots, tail


def _program(slots: list[_Slot], tail: list[str], like: Program) -> Program:
    labels, entry = {}, None
    for i, s in enumerate(slots):
        for name in s.labels:
            labels[name] = i
    for name in tail:
        labels[name] = len(slots)
    entry = labels.pop(_ENTRY)
    return Program([s.ins for s in slots], labels, entry, like.metadata)


def _drop(slots: list[_Slot], tail: list[str], keep: list[bool]) -> tuple[list[_Slot], list[str]]:
    """Remove slots, moving their labels to the next surviving instruction."""
    out: list[_Slot] = []
    carry: list[str] = []
    for s, k in zip(slots, keep):
        if k:
            s.labels = carry + s.labels
            carry = []
            out.append(s)
        else:
            carry += s.labels
    return out, carry + tail


# ---- 1. constants and peepholes -----------------------------------------------------------

_FOLD_BINARY = (I.ADD, I.SUB, I.MUL, I.DIV, I.REM, I.MIN, I.MAX, I.AND, I.OR, I.XOR)
_FOLD_UNARY = (I.ABS, I.NEG, I.NOT, I.SIGN, I.FLOOR, I.CEIL, I.ROUND, I.TRUNC, I.SQRT, I.RCP, I.ClsGet, I.MIRROR,
               I.BoundMap)
_FOLD_TERNARY = {I.FMA: ("a", "b", "c"), I.FMS: ("a", "b", "c"), I.MAD: ("a", "b", "c"),
                 I.CLAMP: ("src", "min", "max")}


def _is(v, x) -> bool:
    """v equals x with the same sign of zero (so -0.0 is not taken for 0.0)."""
    return v == x and (not isinstance(v, float) or str(v) == str(float(x)))


def _fold_one(ins: Instruction, known: dict[int, tuple[Type, object]], preds: dict[int, bool]):
    """(replacement or None to delete or the instruction itself). Updates nothing."""
    def const(r: Register, ty: Type):
        k = known.get(r.index)
        return k[1] if k is not None and k[0] == ty else None

    def has(r: Register, ty: Type) -> bool:
        k = known.get(r.index)
        return k is not None and k[0] == ty

    if isinstance(ins, I.MOV) and isinstance(ins.src, Register):
        if ins.src == ins.dst:
            return None
        if has(ins.src, ins.ty):
            return I.MOV_IMM(ins.dst, const(ins.src, ins.ty), ins.ty)
    if isinstance(ins, I.CVT) and has(ins.src, ins.src_ty):
        return I.MOV_IMM(ins.dst, S.convert(ins.src_ty, ins.dst_ty)(const(ins.src, ins.src_ty)), ins.dst_ty)
    ty = getattr(ins, "ty", None)
    if isinstance(ins, (*_FOLD_BINARY, I.SHL, I.SHR)):
        a, b = (ins.lhs, ins.rhs) if hasattr(ins, "lhs") else (ins.src, ins.amount)
        if has(a, ty) and has(b, ty):
            return I.MOV_IMM(ins.dst, S.binary(ins.name, ty)(const(a, ty), const(b, ty)), ty)
        ident = _identity(ins, a, b, ty, const(a, ty) if has(a, ty) else None, const(b, ty) if has(b, ty) else None)
        if ident is not None:
            return ident
    if isinstance(ins, _FOLD_UNARY) and has(ins.src, ty):
        return I.MOV_IMM(ins.dst, S.unary(ins.name, ty)(const(ins.src, ty)), ty)
    if type(ins) in _FOLD_TERNARY:
        regs = [getattr(ins, n) for n in _FOLD_TERNARY[type(ins)]]
        if all(has(r, ty) for r in regs):
            return I.MOV_IMM(ins.dst, S.ternary(ins.name, ty)(*(const(r, ty) for r in regs)), ty)
    if isinstance(ins, I.SEL) and ins.pred.index in preds:
        src = ins.true_val if preds[ins.pred.index] else ins.false_val
        return I.MOV(ins.dst, src, ty) if src != ins.dst else None
    if isinstance(ins, I.BRA) and ins.pred is not None and ins.pred.index in preds:
        return I.BRA(ins.target) if preds[ins.pred.index] else None
    return ins


def _identity(ins, a: Register, b: Register, ty: Type, ca, cb):
    """x + 0, x - 0, x * 1, x / 1, x | 0, x ^ 0, x & ~0, x << 0 -> MOV x; x * 0 (integers) -> 0."""
    mov = lambda r: I.MOV(ins.dst, r, ty) if r != ins.dst else None  # noqa: E731
    if ty.is_integer:
        zero_ok = (I.ADD, I.SUB, I.OR, I.XOR, I.SHL, I.SHR)
        if cb is not None and cb == 0 and isinstance(ins, zero_ok):
            return mov(a)
        if ca is not None and ca == 0 and isinstance(ins, (I.ADD, I.OR, I.XOR)):
            return mov(b)
        if isinstance(ins, I.MUL) and 0 in (ca, cb):
            return I.MOV_IMM(ins.dst, 0, ty)
        if isinstance(ins, I.AND) and S.wrapper(ty)(-1) in (ca, cb):
            return mov(a if cb is not None and cb == S.wrapper(ty)(-1) else b)
    else:
        if isinstance(ins, I.ADD) and cb is not None and _is(cb, -0.0):
            return mov(a)
        if isinstance(ins, I.ADD) and ca is not None and _is(ca, -0.0):
            return mov(b)
        if isinstance(ins, I.SUB) and cb is not None and _is(cb, 0.0):
            return mov(a)
    if isinstance(ins, (I.MUL, I.DIV)) and cb is not None and cb == 1:
        return mov(a)
    if isinstance(ins, I.MUL) and ca is not None and ca == 1:
        return mov(b)
    return None


def fold(slots: list[_Slot]) -> list[_Slot | None]:
    known: dict[int, tuple[Type, object]] = {}
    preds: dict[int, bool] = {}
    out: list[_Slot | None] = []
    for s in slots:
        if s.labels:
            known.clear()
            preds.clear()
        ins = s.ins
        new = _fold_one(ins, known, preds)
        if isinstance(ins, I.SETcc) and all(
                known.get(r.index, (None,))[0] == ins.ty for r in (ins.lhs, ins.rhs)):
            preds[ins.pred.index] = S.compare(ins.cond)(known[ins.lhs.index][1], known[ins.rhs.index][1])
        else:
            for r in ins.registers_written():
                if isinstance(r, Register):
                    known.pop(r.index, None)
                else:
                    preds.pop(r.index, None)
        if isinstance(new, I.MOV_IMM):
            known[new.dst.index] = (new.ty, S.immediate(new.value, new.ty))
        if isinstance(ins, (I.CALL, I.RET)):
            known.clear()
            preds.clear()
        if new is None:
            out.append(None)
        else:
            s.ins = new
            out.append(s)
    # A branch to the very next instruction does nothing.
    positions = _positions(slots)
    for i, s in enumerate(out):
        if s is not None and isinstance(s.ins, I.BRA) and positions.get(s.ins.target.name) == i + 1:
            out[i] = None
    return out


def _positions(slots: list[_Slot]) -> dict[str, int]:
    return {name: i for i, s in enumerate(slots) for name in s.labels}


# ---- 2. dead code ---------------------------------------------------------------------------

_PURE = (I.MOV, I.MOV_IMM, I.CVT, I.ADD, I.SUB, I.MUL, I.DIV, I.REM, I.MAD, I.FMA, I.MIN, I.MAX, I.ABS, I.NEG,
         I.AND, I.OR, I.XOR, I.NOT, I.SHL, I.SHR, I.SETcc, I.SEL, I.EXP, I.LOG, I.SQRT, I.SIN, I.COS, I.TAN,
         I.TANH, I.SIGMOID, I.FMS, I.RCP, I.RSQRT, I.CLAMP, I.LERP, I.SIGN, I.FLOOR, I.CEIL, I.ROUND, I.TRUNC,
         I.GELU, I.SWISH, I.ClsGet, I.MIRROR, I.UnityTest, I.BoundMap)


def _key(r) -> tuple[str, int]:
    return ("r" if isinstance(r, Register) else "p", r.index)


def dce(slots: list[_Slot], tail: list[str], entry_pos: int) -> list[bool]:
    n = len(slots)
    pos = {**{name: n for name in tail}, **_positions(slots)}
    succ = [successors(i, s.ins, pos) for i, s in enumerate(slots)]
    # reachability
    seen, stack = set(), [entry_pos]
    while stack:
        i = stack.pop()
        if i in seen or i >= n:
            continue
        seen.add(i)
        stack += succ[i]
    keep = [i in seen for i in range(n)]
    if any(isinstance(s.ins, (I.CALL, I.RET)) for s in slots):
        return keep
    # liveness
    uses = [{_key(r) for r in s.ins.registers_read()} for s in slots]
    defs = [{_key(r) for r in s.ins.registers_written()} for s in slots]
    live_in: list[set] = [set() for _ in range(n + 1)]
    changed = True
    while changed:
        changed = False
        for i in range(n - 1, -1, -1):
            if not keep[i]:
                continue
            out = set().union(*(live_in[j] for j in succ[i] if j < n)) if succ[i] else set()
            new = uses[i] | (out - defs[i])
            if new != live_in[i]:
                live_in[i], changed = new, True
    for i in range(n):
        if keep[i] and isinstance(slots[i].ins, _PURE):
            out = set().union(*(live_in[j] for j in succ[i] if j < n)) if succ[i] else set()
            if not (defs[i] & out):
                keep[i] = False
    return keep


# ---- 3. fusion ------------------------------------------------------------------------------

def _range(a: Address, count: int, ty: Type):
    """(memory key, start, end) of a static address, or None for register-indirect/shared."""
    if a.space is Space.CLASS:
        from .address import CLASS_BYTES
        start = a.class_id * CLASS_BYTES + a.offset
        return ("class", 0), start, start + count * ty.size_bytes
    if a.space in (Space.BUFFER, Space.POOL):
        return (a.space.value, a.handle), a.offset, a.offset + count * ty.size_bytes
    return None


def _steps(ins) -> tuple[MapStep, ...]:
    if isinstance(ins, I.FusedMap):
        return ins.steps
    if isinstance(ins, I.ParallelMap):
        return (MapStep(ins.dst_array, ins.operation, ins.src_array),)
    return (MapStep(ins.dst_array, ins.operation, ins.src_a, ins.src_b),)


def fusable(steps: tuple[MapStep, ...], count: int, ty: Type) -> bool:
    """Every pair of ranges the steps touch is identical or disjoint, and all are static."""
    ranges = set()
    for st in steps:
        for a in (st.dst, st.a, st.b):
            if a is None or isinstance(a, Register):  # a scalar operand touches no memory
                continue
            r = _range(a, count, ty)
            if r is None:
                return False
            ranges.add(r)
    rs = sorted(ranges)
    for (k1, _s1, e1), (k2, s2, _e2) in zip(rs, rs[1:]):
        if k1 == k2 and s2 < e1:
            return False
    return True


def fuse(slots: list[_Slot]) -> list[_Slot]:
    out: list[_Slot] = []
    for s in slots:
        ins = s.ins
        prev = out[-1] if out else None
        if (prev is not None and not s.labels
                and isinstance(ins, (I.ParallelMap, I.ParallelMapBinary))
                and isinstance(prev.ins, (I.ParallelMap, I.ParallelMapBinary, I.FusedMap))
                and prev.ins.count == ins.count and prev.ins.ty == ins.ty):
            steps = _steps(prev.ins) + _steps(ins)
            if fusable(steps, ins.count, ins.ty):
                prev.ins = I.FusedMap(ins.count, steps, ins.ty)
                continue
        out.append(s)
    return out


def optimize(program: Program) -> Program:
    program.validate()
    slots, tail = _slots(program)
    for _ in range(3):
        folded = fold(slots)
        slots, tail = _drop(slots, tail, [s is not None for s in folded])
        entry_pos = next((i for i, s in enumerate(slots) if _ENTRY in s.labels), len(slots))
        keep = dce(slots, tail, entry_pos)
        before = len(slots)
        slots, tail = _drop(slots, tail, keep)
        if len(slots) == before and all(s is not None for s in folded):
            break
    slots = fuse(slots)
    result = _program(slots, tail, program)
    return result.validate()
