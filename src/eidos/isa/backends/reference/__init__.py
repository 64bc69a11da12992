"""The reference backend: a pure-Python interpreter of every instruction, the ISA's living definition."""

from __future__ import annotations

import weakref

from eidos.errors import BackendError

from ...faults import DEFAULT_MAX_STEPS
from ...launch import ExecutionParams
from ...program import Program
from ...target import Target
from .runtime import execute


class ReferenceBackend(Target):
    """Runs each thread instruction by instruction (per-thread registers, per-block shared memory,
    barriers honoured, every memory access bounds-checked). max_steps bounds the backward
    jumps one thread may take, so an endless loop is an error rather than a hang."""

    name = "reference"

    def __init__(self, max_steps: int = DEFAULT_MAX_STEPS) -> None:
        super().__init__()
        self.max_steps = int(max_steps)
        self._decoded: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # program -> its closures

    def execute_program_with_params(self, program: Program, params: ExecutionParams) -> None:
        if not isinstance(program, Program):
            raise BackendError(f"execute: expected a Program, got {type(program).__name__}")
        self.check_params(params, program)
        program.validate()
        execute(program, params, self.memory, self.max_steps, self._decoded.setdefault(program, {}))


__all__ = ["ReferenceBackend"]
