"""The emitter protocol: what a compiled target supplies so the shared handler table can generate its code.

Generated code names ISA register r as two variables, `i<r>` (int64; a U64 as its bit pattern) and
`f<r>` (float64, holding a value exact in the instruction's type), and predicate k as `p<k>`. The
handlers (handlers.py) write every instruction in terms of the methods below; a target subclasses
Emitter and supplies the primitives: how to assign, round, compare, address memory, branch. Runtime
helpers the generated code calls are named `prefix + name` (the same names on every target).
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from ..address import Register, Special
from ..types import Type


def s64(v: int) -> int:
    """An integer's low 64 bits as a signed int64 (how compiled code holds every integer register)."""
    v = int(v) & ((1 << 64) - 1)
    return v - (1 << 64) if v >= 1 << 63 else v


def wrap(ty: Type, e: str) -> str:
    """An int64 expression brought to ty's width (64-bit types wrap in int64 already)."""
    if ty.bits >= 64:
        return f"({e})"
    mask = (1 << ty.bits) - 1
    if ty.is_unsigned:
        return f"(({e}) & {mask})"
    half = 1 << (ty.bits - 1)
    return f"(((({e}) + {half}) & {mask}) - {half})"


class Emitter(ABC):
    """One program's code generation: the lines so far and what the code uses (registers by kind,
    predicates, Specials, runtime helpers, a call stack)."""

    prefix = ""                          # generated code's name for runtime helper x: prefix + x
    Unsupported: type = NotImplementedError  # raised for an instruction form the target has no code for

    def __init__(self, program, blocks) -> None:
        self.program = program
        self.blocks = blocks
        self.kinds: dict[int, set[str]] = {}     # register -> {"i", "f"}
        self.preds: set[int] = set()
        self.specials: set[Special] = set()
        self.helpers: set[str] = set()
        self.uses_call = False
        self.lines: list[str] = []
        self.depth = 0

    # ---- shared mechanics -------------------------------------------------------------------------
    def emit(self, line: str) -> None:
        self.lines.append("    " * self.depth + line)

    def i(self, r: Register) -> str:
        self.kinds.setdefault(r.index, set()).add("i")
        return f"i{r.index}"

    def f(self, r: Register) -> str:
        self.kinds.setdefault(r.index, set()).add("f")
        return f"f{r.index}"

    def reg(self, r: Register, ty: Type) -> str:
        return self.f(r) if ty.is_float else self.i(r)

    def p(self, p) -> str:
        self.preds.add(p.index)
        return f"p{p.index}"

    def rt(self, name: str) -> str:
        """The generated code's name for runtime helper `name`."""
        self.helpers.add(name)
        return self.prefix + name

    def lt(self, ty: Type, a: str, b: str) -> str:
        return self.ult(a, b) if ty is Type.U64 else f"({a} < {b})"

    def slots(self, kind: str) -> dict[int, int]:
        """Register -> column, for the registers used as `kind` ("i" or "f"), in register order."""
        return {r: k for k, r in enumerate(sorted(r for r, s in self.kinds.items() if kind in s))}

    # ---- expressions ------------------------------------------------------------------------------
    @abstractmethod
    def rnd(self, ty: Type, e: str) -> str:
        """A float64 expression rounded once to float type ty."""

    @abstractmethod
    def where(self, c: str, a: str, b: str) -> str:
        """a where c holds, else b."""

    @abstractmethod
    def ult(self, a: str, b: str) -> str:
        """a < b for int64 bit patterns read as U64."""

    @abstractmethod
    def u64(self, a: str) -> str:
        """An int64 bit pattern as an unsigned 64-bit value (for comparisons)."""

    @abstractmethod
    def mod(self, ty: Type, a: str, m: int) -> str:
        """Euclidean a mod m (m > 0), as Python's %."""

    @abstractmethod
    def shift(self, ty: Type, b: str) -> str:
        """A shift amount b taken modulo ty's width."""

    @abstractmethod
    def shr_u64(self, a: str, s: str) -> str:
        """A logical right shift of a U64 bit pattern by s (already reduced)."""

    @abstractmethod
    def int_const(self, v: int) -> str:
        """An int64 constant (v already an int64)."""

    @abstractmethod
    def float_const(self, v: float) -> str:
        """An exact float64 constant (NaN, infinities, -0.0 included)."""

    @abstractmethod
    def special(self, s: Special) -> str:
        """A Special register's value, as int64."""

    @abstractmethod
    def int_to_float(self, src: Type, dst: Type, e: str) -> str:
        """An integer register's exact value rounded once to dst."""

    @abstractmethod
    def float_to_int(self, ty: Type, e: str) -> str:
        """CVT's float -> integer: toward zero, saturating, NaN -> 0."""

    @abstractmethod
    def fabs(self, x: str) -> str:
        """|x| for a float64 by its sign bit."""

    @abstractmethod
    def fsign(self, x: str) -> str:
        """-1.0, 0.0 (keeping -0.0) or 1.0 by x's sign; NaN stays NaN."""

    @abstractmethod
    def float_fun(self, op: str, ty: Type, x: str) -> str:
        """A float function's result rounded to ty (EXP, LOG, SQRT, ..., FLOOR, ROUND, GELU, SWISH)."""

    @abstractmethod
    def iabs(self, x: str) -> str:
        """|x| in int64 (wrapped by the caller)."""

    @abstractmethod
    def ineg(self, x: str) -> str:
        """-x in int64 (wrapped by the caller)."""

    @abstractmethod
    def fneg(self, x: str) -> str:
        """-x for a float64 by its sign bit (so -(0.0) is -0.0)."""

    @abstractmethod
    def as_int(self, cond: str) -> str:
        """A condition as int64 0/1."""

    @abstractmethod
    def bool_or(self, a: str, b: str) -> str:
        """The disjunction of two conditions."""

    @abstractmethod
    def int_clamp(self, ty: Type, x: str, lo: str, hi: str) -> str:
        """min(max(x, lo), hi) of integers (may emit temporaries first)."""

    @abstractmethod
    def phase(self, class_id: int) -> str:
        """The current phase of class `class_id`."""

    # ---- statements -------------------------------------------------------------------------------
    @abstractmethod
    def set(self, name: str, expr: str) -> None:
        """name = expr, for the threads running here."""

    @abstractmethod
    def move(self, dst: Register, src: Register, ty: Type) -> None:
        """MOV between registers."""

    @abstractmethod
    def select(self, dst: Register, pred: str, t: Register, f: Register, ty: Type) -> None:
        """SEL: dst = t where pred holds, else f."""

    @abstractmethod
    def address(self, ins, i: int, addr, size: int) -> str:
        """Emit the bounds check of one access of `size` bytes at `addr`; return the name of its byte address."""

    @abstractmethod
    def neighbour(self, ins, i: int, reg: Register) -> str:
        """The checked byte address of an NBRLoad/NBRStore through register `reg`."""

    @abstractmethod
    def load(self, dst: Register, ty: Type, at: str) -> None:
        """dst = the ty value at byte address `at`."""

    @abstractmethod
    def store(self, src: Register, ty: Type, at: str, uniform: bool) -> None:
        """`uniform`: every thread's address is the same (static), so the last storing thread's value wins."""

    @abstractmethod
    def accumulate(self, class_id: int, v: str) -> str:
        """Add float64 v to class `class_id`'s accumulator; return the new total."""

    @abstractmethod
    def set_phase(self, class_id: int, v: str) -> None:
        """Class `class_id`'s phase = v (already reduced mod PHASE_MODULUS)."""

    # ---- control ------------------------------------------------------------------------------------
    @abstractmethod
    def jump(self, cond: str | None, target: int, i: int, back: bool) -> None:
        """Go to instruction `target` where cond holds (always: None), else on to i + 1; `back`: a backward
        jump, counted against the step budget."""

    @abstractmethod
    def call(self, i: int, target: int) -> None:
        """CALL at instruction i: push the return block, go to `target` (the stack is MAX_CALL_DEPTH deep)."""

    @abstractmethod
    def ret(self) -> None:
        """RET: pop a return block, or exit with an empty stack."""

    @abstractmethod
    def exit(self) -> None:
        """The threads here end."""

    @abstractmethod
    def barrier(self, i: int, barrier_id: int) -> None:
        """BarSync at instruction i: wait, resuming at i + 1."""

    @abstractmethod
    def wait_collective(self, i: int) -> None:
        """Stop before collective instruction i: the host runs it once for the grid, then the threads resume after it."""


__all__ = ["Emitter", "s64", "wrap"]
