"""The Atlas ISA: a typed instruction set for kernels, its programs, and the backend protocol.

`import eidos.isa` stays light (NumPy only); backends load lazily from eidos.isa.backends.
"""

from __future__ import annotations

from .address import (
    CLASS_BYTES,
    CLASS_MEMORY_BYTES,
    NUM_CLASSES,
    NUM_PREDICATES,
    NUM_REGISTERS,
    PAGE_BYTES,
    PAGES_PER_CLASS,
    Address,
    Label,
    Predicate,
    Register,
    Space,
    Special,
    pointer,
)
from .builder import ProgramBuilder
from .cache import DiskCache, ProgramCache
from .circuit import compile_circuit
from .instructions import *  # noqa: F403  (every instruction class, by its spec name)
from .instructions import (
    INSTRUCTIONS,
    BinaryMapOperation,
    Condition,
    Instruction,
    MapOperation,
    MapStep,
    MemoryScope,
    ReduceOperation,
)
from .launch import ExecutionParams, LaunchConfig
from .pool import Pool
from .program import Program, disassemble
from .stream import stream  # after the submodule import, so `isa.stream` is the function
from .target import Backend, Target
from .types import Type


def from_json(obj_or_text) -> Program:
    """A Program from JSON: either Program.to_json() output or a JSON kernel (docs/isa.md)."""
    from .kernel_json import from_json as _from_json

    return _from_json(obj_or_text)
