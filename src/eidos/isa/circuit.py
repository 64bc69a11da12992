"""Circuits: a small language of generators over class memory, and its translation to a Program.

`merge@c00[c01,c02]` applies the generator `merge` at class 0 over the operand classes 1 and 2
(c00 = c01 + c02, element-wise over the whole class). Circuits compose with `.` (in order, left
to right) and `||` (independent branches). docs/isa.md (Circuits) gives the grammar and what each
generator runs; parse() checks syntax, class ids and arity, translate() builds the Program.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from eidos.errors import IsaError, did_you_mean

from . import instructions as I
from .address import CLASS_BYTES, NUM_CLASSES, Address, Label, Predicate, Register, Special
from .builder import ProgramBuilder
from .program import Program
from .types import Type

# generator -> (operand form, {variant: operation}, default variant); forms: "c", "c->c", "c<->c", "c[c,c]"
GENERATORS: dict[str, tuple[str, dict, str | None]] = {
    "mark": ("c", {}, None),
    "copy": ("c->c", {}, None),
    "swap": ("c<->c", {}, None),
    "merge": ("c[c,c]", {"add": I.BinaryMapOperation.Add, "mul": I.BinaryMapOperation.Mul,
                         "min": I.BinaryMapOperation.Min, "max": I.BinaryMapOperation.Max}, "add"),
    "split": ("c[c,c]", {"sub": I.BinaryMapOperation.Sub, "div": I.BinaryMapOperation.Div}, "sub"),
    "quote": ("c", {}, None),
    "evaluate": ("c", {}, None),
}
EXAMPLES = {"c": "c05", "c->c": "c05->c06", "c<->c": "c05<->c06", "c[c,c]": "c00[c01,c02]"}
PHASE_STEP = {"quote": 1, "evaluate": 767}  # phases are mod 768: evaluate undoes one quote
BITS = Type.I64  # copy and swap move bits: 64-bit integers are exact for every payload


# ---- the syntax tree --------------------------------------------------------------------------

@dataclass(frozen=True)
class Call:
    """One generator applied at classes[0] (`form` says how the rest are written)."""
    generator: str
    variant: str | None
    classes: tuple[int, ...]
    form: str
    position: int = field(default=0, compare=False)

    def __str__(self) -> str:
        c = [f"c{k:02d}" for k in self.classes]
        default = GENERATORS.get(self.generator, ("", {}, None))[2]
        name = self.generator + (f":{self.variant}" if self.variant not in (None, default) else "")
        operands = {"c": "{0}", "c->c": "{0}->{1}", "c<->c": "{0}<->{1}", "c[c,c]": "{0}[{1},{2}]"}.get(self.form, "")
        if operands.count("{") != len(c):  # a malformed tree built by hand, shown for its error message
            return f"{name}@{','.join(c)}"
        return f"{name}@{operands.format(*c)}"

    @property
    def reads(self) -> frozenset:
        """The class memory (("class", c)) and phases (("phase", c)) this call reads."""
        if self.generator in PHASE_STEP:
            return frozenset({("phase", self.classes[0])})
        read = {"c[c,c]": self.classes[1:], "c->c": self.classes[:1]}.get(self.form, self.classes)
        return frozenset(("class", c) for c in read)

    @property
    def writes(self) -> frozenset:
        if self.generator in PHASE_STEP:
            return frozenset({("phase", self.classes[0])})
        if self.form == "c->c":
            return frozenset({("class", self.classes[1])})
        if self.form == "c[c,c]":
            return frozenset({("class", self.classes[0])})
        return frozenset(("class", c) for c in self.classes)


@dataclass(frozen=True)
class Sequence:
    """items run one after another, left to right."""
    items: tuple

    def __str__(self) -> str:
        return " . ".join(f"({x})" if isinstance(x, Parallel) else str(x) for x in self.items)


@dataclass(frozen=True)
class Parallel:
    """Independent branches: none writes what another reads or writes, so any order gives one result."""
    branches: tuple

    def __str__(self) -> str:
        return " || ".join(str(x) for x in self.branches)


Node = Call | Sequence | Parallel


def _children(node: Sequence | Parallel) -> tuple:
    return node.items if isinstance(node, Sequence) else node.branches


def join(kind, parts) -> Node:
    """`parts` joined as a Sequence or Parallel, nested ones of the same kind flattened and a single
    part returned as itself: the parser's normal form."""
    flat = [y for x in parts for y in (_children(x) if isinstance(x, kind) else (x,))]
    return flat[0] if len(flat) == 1 else kind(tuple(flat))


def calls(node: Node) -> list[Call]:
    """The calls of a circuit in the order they run."""
    if isinstance(node, Call):
        return [node]
    return [c for x in _children(node) for c in calls(x)]


# ---- parsing ------------------------------------------------------------------------------------

_TOKEN = re.compile(r"\s*(?:(?P<word>[A-Za-z_][A-Za-z_0-9]*)|(?P<number>\d+)|(?P<op><->|->|\|\||[.@:\[\],()]))")


def _error(text: str, pos: int, message: str) -> IsaError:
    return IsaError(f"circuit, position {pos}: {message}\n  {text}\n  {' ' * pos}^")


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens: list[tuple[str, str, int]] = []  # (kind, value, position)
        pos = 0
        while True:
            m = _TOKEN.match(text, pos)
            if not m:
                rest = text[pos:].lstrip()
                if not rest:
                    break
                at = len(text) - len(rest)
                raise _error(text, at, f"unexpected character {rest[0]!r}")
            kind = m.lastgroup
            self.tokens.append((kind, m.group(kind), m.start(kind)))
            pos = m.end()
        self.i = 0

    def peek(self) -> tuple[str, str, int]:
        return self.tokens[self.i] if self.i < len(self.tokens) else ("end", "", len(self.text))

    def fail(self, expected: str):
        kind, value, pos = self.peek()
        got = "the end of the circuit" if kind == "end" else repr(value)
        raise _error(self.text, pos, f"expected {expected}, got {got}")

    def take(self, value: str, expected: str) -> int:
        kind, v, pos = self.peek()
        if kind != "op" or v != value:
            self.fail(expected)
        self.i += 1
        return pos

    def joined(self, op: str, kind, part) -> Node:
        parts = [part()]
        while self.peek()[:2] == ("op", op):
            self.i += 1
            parts.append(part())
        return join(kind, parts)

    def parallel(self) -> Node:
        return self.joined("||", Parallel, self.sequence)

    def sequence(self) -> Node:
        return self.joined(".", Sequence, self.term)

    def term(self) -> Node:
        if self.peek()[:2] == ("op", "("):
            self.i += 1
            inner = self.parallel()
            self.take(")", "')' closing the group")
            return inner
        return self.call()

    def call(self) -> Call:
        kind, name, at = self.peek()
        if kind != "word":
            self.fail(f"a generator ({', '.join(GENERATORS)}) or '('")
        if name not in GENERATORS:
            hint = did_you_mean(name, GENERATORS)
            raise _error(self.text, at, f"unknown generator {name!r}; " + (f"{hint} " if hint else "")
                         + f"generators: {', '.join(GENERATORS)}")
        self.i += 1
        form, variants, variant = GENERATORS[name]
        if self.peek()[:2] == ("op", ":"):
            self.i += 1
            k, v, vat = self.peek()
            if k != "word" or v not in variants:
                choices = f"one of {', '.join(variants)}" if variants else "none (it has no variants)"
                raise _error(self.text, vat, f"{name} has no variant {v!r}; variants: {choices}")
            variant = v
            self.i += 1
        self.take("@", f"'@' after {name!r} (e.g. {name}@{EXAMPLES[form]})")
        classes = [self.cls()]
        if self.peek()[:2] in (("op", "->"), ("op", "<->")):
            got = self.peek()[1]
            self.i += 1
            classes.append(self.cls())
            got_form = f"c{got}c"
        elif self.peek()[:2] == ("op", "["):
            self.i += 1
            classes.append(self.cls())
            self.take(",", "',' between the two operand classes")
            classes.append(self.cls())
            self.take("]", "']' closing the operand classes")
            got_form = "c[c,c]"
        else:
            got_form = "c"
        if got_form != form:
            raise _error(self.text, at, f"{name} takes {_describe(form)} ({name}@{EXAMPLES[form]}), "
                                        f"got {_describe(got_form)}")
        return Call(name, variant, tuple(classes), form, at)

    def cls(self) -> int:
        kind, word, at = self.peek()
        m = re.fullmatch(r"c(\d+)", word) if kind == "word" else None
        if not m:
            self.fail("a class (c0..c95, e.g. c05)")
        self.i += 1
        k = int(m.group(1))
        if not 0 <= k < NUM_CLASSES:
            raise _error(self.text, at, f"class {word} is out of range c0..c{NUM_CLASSES - 1}")
        return k


def _describe(form: str) -> str:
    return {"c": "one class", "c->c": "a source and a destination class (cA->cB)",
            "c<->c": "two classes to exchange (cA<->cB)",
            "c[c,c]": "a destination and two operand classes (cD[cA,cB])"}[form]


def parse(text: str) -> Node:
    """The syntax tree of a circuit, validated; IsaError naming the position and what was expected."""
    if not isinstance(text, str):
        raise IsaError(f"circuit: expected the circuit's text, got {type(text).__name__}")
    p = _Parser(text)
    node = p.parallel()
    if p.i < len(p.tokens):
        p.fail("'.', '||' or the end of the circuit")
    return validate(node, text)


def validate(node: Node, text: str | None = None) -> Node:
    """Check a syntax tree (one from parse() or built by hand): class ids 0..95, each generator's
    arity and variant, swap of two different classes, parallel branches independent."""
    src = text if text is not None else str(node)

    def fail(call: Call, message: str):
        if text is None:  # a tree built by hand has no positions
            raise IsaError(f"circuit {src!r}: {call}: {message}")
        raise _error(src, call.position, f"{call}: {message}")

    for c in calls(node):
        if not isinstance(c, Call) or c.generator not in GENERATORS:
            raise IsaError(f"circuit: not a generator call: {c!r}")
        form, variants, _ = GENERATORS[c.generator]
        if c.form != form or len(c.classes) != {"c": 1, "c[c,c]": 3}.get(form, 2):
            fail(c, f"{c.generator} takes {_describe(form)}")
        if (c.variant is None) != (not variants) or (variants and c.variant not in variants):
            fail(c, f"{c.generator} has no variant {c.variant!r}")
        for k in c.classes:
            if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k < NUM_CLASSES:
                fail(c, f"class {k!r} is out of range 0..{NUM_CLASSES - 1}")
        if c.generator == "swap" and c.classes[0] == c.classes[1]:
            fail(c, "swap exchanges two different classes")
    _check_independent(node, fail)
    return node


def _check_independent(node: Node, fail) -> None:
    if isinstance(node, Call):
        return
    for x in _children(node):
        _check_independent(x, fail)
    if isinstance(node, Parallel):
        seen: list[tuple[Node, frozenset, frozenset]] = []
        for b in node.branches:
            cs = calls(b)
            r = frozenset().union(*(c.reads for c in cs))
            w = frozenset().union(*(c.writes for c in cs))
            for other, r2, w2 in seen:
                clash = (w & (r2 | w2)) | (w2 & r)
                if clash:
                    what, k = sorted(clash)[0]
                    fail(calls(b)[0], f"parallel branches '{other}' and '{b}' both use {what} c{k:02d} and one "
                                      "writes it; run them in sequence ('.') instead")
            seen.append((b, r, w))


# ---- translation --------------------------------------------------------------------------------

def _element_type(ty) -> Type:
    try:
        ty = Type.parse(ty)
    except ValueError as e:
        raise IsaError(f"circuit: {e}") from None
    if ty.is_extended:
        raise IsaError(f"circuit: element type {ty.name} is wider than 64 bits; circuits run array instructions, "
                       "which take types up to 64 bits")
    return ty


def translate(node: Node, ty: Type | str = Type.F32) -> Program:
    """The Program a circuit runs: each generator over whole classes of `ty` elements (12,288 bytes
    each), as collectives; quote/evaluate step a phase from lane 0 alone. Correct under any launch."""
    ty = _element_type(ty)
    validate(node)
    count, words = CLASS_BYTES // ty.size_bytes, CLASS_BYTES // BITS.size_bytes
    b = ProgramBuilder(metadata={"eidos.isa.circuit": str(node), "eidos.isa.circuit.ty": ty.name})
    cls = Address.cls
    pending: list[Call] = []  # consecutive phase steps share one lane-0 block

    def flush() -> None:
        if not pending:
            return
        gid, zero, value, step = Register(0), Register(1), Register(2), Register(3)
        skip = Label(f"after_phases_{len(b)}")
        b.add(I.MOV(gid, Special.GLOBAL_ID, Type.U32), I.MOV_IMM(zero, 0, Type.U32),
              I.SETcc(Predicate(0), gid, zero, I.Condition.NE, Type.U32), I.BRA(skip, Predicate(0)))
        for c in pending:
            b.add(I.PhaseRead(value, c.classes[0], Type.U32), I.MOV_IMM(step, PHASE_STEP[c.generator], Type.U32),
                  I.ADD(value, value, step, Type.U32), I.PhaseWrite(value, c.classes[0], Type.U32))
        b.label(skip)
        pending.clear()

    for c in calls(node):
        if c.generator in PHASE_STEP:
            pending.append(c)
            continue
        flush()
        k = c.classes
        if c.generator == "mark":
            b.add(I.ParallelMap(cls(k[0]), cls(k[0]), count, I.MapOperation.Neg, ty))
        elif c.generator == "copy":
            b.add(I.ParallelMapBinary(cls(k[1]), cls(k[0]), cls(k[0]), words, I.BinaryMapOperation.Max, BITS))
        elif c.generator == "swap":
            x, y = cls(k[0]), cls(k[1])
            b.add(I.ParallelMapBinary(x, x, y, words, I.BinaryMapOperation.Add, BITS),
                  I.ParallelMapBinary(y, x, y, words, I.BinaryMapOperation.Sub, BITS),
                  I.ParallelMapBinary(x, x, y, words, I.BinaryMapOperation.Sub, BITS))
        else:
            op = GENERATORS[c.generator][1][c.variant]
            b.add(I.ParallelMapBinary(cls(k[0]), cls(k[1]), cls(k[2]), count, op, ty))
    flush()
    return b.build()


def compile_circuit(text: str, ty: Type | str = Type.F32) -> Program:
    """parse, validate and translate a circuit: `compile_circuit("merge@c00[c01,c02]")`."""
    return translate(parse(text), ty)


__all__ = ["Call", "Sequence", "Parallel", "GENERATORS", "parse", "validate", "translate", "calls", "join",
           "compile_circuit"]
