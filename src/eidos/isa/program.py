"""Program: an immutable list of instructions, its labels, entry point and metadata."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import fields
from types import MappingProxyType

from .address import Address, Label, Predicate, Register, Special
from .instructions import Instruction, MapStep
from .types import Type


class Program:
    """Instructions plus `labels` (name -> index of the instruction it marks; len() marks the end).

    Programs are immutable: optimize() returns a new Program. The canonical form (JSON with
    sorted keys) and its Blake3 digest are computed once per Program object.
    """

    __slots__ = ("instructions", "labels", "entry", "metadata", "_canonical", "_digest", "_valid", "__weakref__")

    def __init__(self, instructions: Iterable[Instruction] = (), labels: Mapping[str, int] | None = None,
                 entry: int = 0, metadata: Mapping[str, object] | None = None) -> None:
        self.instructions: tuple[Instruction, ...] = tuple(instructions)
        self.labels: Mapping[str, int] = MappingProxyType(dict(labels or {}))
        self.entry = int(entry)
        self.metadata: dict[str, object] = dict(metadata or {})
        self._canonical: str | None = None
        self._digest: str | None = None
        self._valid = False

    def __len__(self) -> int:
        return len(self.instructions)

    def __iter__(self):
        return iter(self.instructions)

    def __getitem__(self, i: int) -> Instruction:
        return self.instructions[i]

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Program) and self.instructions == other.instructions
                and self.labels == other.labels and self.entry == other.entry and self.metadata == other.metadata)

    def __hash__(self) -> int:
        return hash(self.digest())

    def __repr__(self) -> str:
        return f"<Program {len(self)} instructions, labels={sorted(self.labels)}>"

    def target(self, label: Label | str) -> int:
        """The instruction index a label marks."""
        return self.labels[label.name if isinstance(label, Label) else label]

    def validate(self) -> Program:
        """Raise IsaError naming the first bad instruction's index and problem; return self when fine.
        (Checked once per Program object: programs are immutable.)"""
        if not self._valid:
            from .validate import validate

            validate(self)
            self._valid = True
        return self

    def optimize(self) -> Program:
        """A new, equivalent Program: constants propagated, dead code gone, peepholes, maps fused."""
        from .optimize import optimize

        return optimize(self)

    def to_json(self) -> str:
        from .serialize import to_json

        return to_json(self)

    @classmethod
    def from_json(cls, text) -> Program:
        from .serialize import from_json

        return from_json(text)

    def canonical(self) -> str:
        if self._canonical is None:
            from .serialize import canonical

            self._canonical = canonical(self)
        return self._canonical

    def digest(self) -> str:
        """Blake3 hex digest of the canonical form."""
        if self._digest is None:
            import blake3

            self._digest = blake3.blake3(self.canonical().encode()).hexdigest()
        return self._digest

    def __str__(self) -> str:
        by_index: dict[int, list[str]] = {}
        for name, i in self.labels.items():
            by_index.setdefault(i, []).append(name)
        width = len(str(max(len(self) - 1, 0)))
        lines = []
        for i, ins in enumerate(self.instructions):
            lines += [f"{name}:" for name in sorted(by_index.get(i, ()))]
            lines.append(f"  {i:>{width}}  {disassemble(ins)}")
        lines += [f"{name}:" for name in sorted(by_index.get(len(self), ()))]
        return "\n".join(lines)


def _operand(v: object) -> str:
    if isinstance(v, (Register, Predicate, Label, Special, Address)):
        return str(v)
    if isinstance(v, Type):
        return v.name
    if isinstance(v, MapStep):
        args = ", ".join(_operand(a) for a in (v.a, v.b) if a is not None)
        return f"{_operand(v.dst)} = {v.operation.value}({args})"
    if isinstance(v, tuple):
        return "(" + ", ".join(_operand(x) for x in v) + ")"
    if hasattr(v, "value") and hasattr(v, "name"):  # an enum
        return str(v.value)
    return repr(v)


def disassemble(ins: Instruction) -> str:
    """One line: NAME.TY operands; register-only instructions positional, the rest key=value."""
    name = ins.name
    ty = getattr(ins, "ty", None)
    if isinstance(ty, Type):
        name += f".{ty.name}"
    elif hasattr(ins, "src_ty"):
        name += f".{ins.src_ty.name}.{ins.dst_ty.name}"
    ops = [(f.name, getattr(ins, f.name)) for f in fields(ins) if f.name not in ("ty", "src_ty", "dst_ty")]
    if ops and all(isinstance(v, (Register, Predicate, Label, Special)) or v is None for _, v in ops):
        return f"{name} " + ", ".join(_operand(v) for _, v in ops if v is not None)
    if not ops:
        return name
    return f"{name} " + ", ".join(f"{k}={_operand(v)}" for k, v in ops)
