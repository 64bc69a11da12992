"""ProgramBuilder: add instructions in a chain, bind labels, build a validated Program."""

from __future__ import annotations

from collections.abc import Mapping

from eidos.errors import IsaError

from .address import Label
from .instructions import Instruction
from .program import Program


class ProgramBuilder:
    """`ProgramBuilder().add(...).add(...).build()`.

    label(name=None) binds a label to the position of the next added instruction and returns
    it; a Label("name") may be used as a branch target before it is bound.
    """

    def __init__(self, metadata: Mapping[str, object] | None = None) -> None:
        self._instructions: list[Instruction] = []
        self._labels: dict[str, int] = {}
        self._metadata = dict(metadata or {})
        self._counter = 0

    def add(self, *instructions: Instruction) -> ProgramBuilder:
        for ins in instructions:
            if not isinstance(ins, Instruction):
                raise IsaError(f"ProgramBuilder.add: instruction {len(self._instructions)} is a "
                               f"{type(ins).__name__}, not an ISA instruction")
            self._instructions.append(ins)
        return self

    def label(self, name: str | Label | None = None) -> Label:
        if name is None:
            while f"L{self._counter}" in self._labels:
                self._counter += 1
            name = f"L{self._counter}"
        name = name.name if isinstance(name, Label) else str(name)
        if name in self._labels:
            raise IsaError(f"ProgramBuilder.label: label {name!r} is already bound to instruction {self._labels[name]}")
        self._labels[name] = len(self._instructions)
        return Label(name)

    def __len__(self) -> int:
        return len(self._instructions)

    def build(self, *, validate: bool = True) -> Program:
        program = Program(self._instructions, self._labels, 0, self._metadata)
        return program.validate() if validate else program
