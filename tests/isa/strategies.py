"""Hypothesis strategies for ISA programs, for optimizer checks and cross-backend comparison.

programs() draws a GeneratedProgram: straight-line register code over several types, with
optional counted loops and predicated forward branches; every lane ends by storing all of
its value registers to its own slice of an output buffer, whose pointer arrives in r255
through ExecutionParams. run(backend, gp) returns what the lanes stored, as raw bytes per
lane, so two backends (or a program and its optimized form) compare directly.
"""

from __future__ import annotations

import typing
from dataclasses import dataclass, fields

from hypothesis import strategies as st

from eidos import isa
from eidos.isa import Address, Condition, ExecutionParams, Label, LaunchConfig, Predicate, Register, Special, Type

# Value registers by type: 6 of each; r240.. are the harness's.
TYPES = [Type.I32, Type.U8, Type.I64, Type.F32, Type.F64, Type.I128]
NARROW_TYPES = [t for t in TYPES if not t.is_extended]  # for backends without integers wider than 64 bits
PER_TYPE = 6
REGS = {ty: [Register(8 * k + j) for j in range(PER_TYPE)] for k, ty in enumerate(TYPES)}
SLOT = 16  # bytes per stored register
OUT, GID, SCRATCH, ADDR, COUNTER = Register(255), Register(250), Register(251), Register(252), Register(249)
BINARY = ["ADD", "SUB", "MUL", "DIV", "REM", "MIN", "MAX"]
INT_BINARY = ["AND", "OR", "XOR", "SHL", "SHR"]
UNARY = ["ABS", "NEG"]
EXACT_FLOAT_UNARY = ["SQRT", "FLOOR", "CEIL", "ROUND", "TRUNC", "SIGN", "RCP"]
FLOAT_UNARY = EXACT_FLOAT_UNARY + ["EXP", "SIN", "TANH"]


def _imm(ty: Type):
    if ty.is_float:
        return st.one_of(st.floats(-1e3, 1e3, width=32 if ty is Type.F32 else 64),
                         st.sampled_from([0.0, -0.0, 1.0, float("inf"), float("nan")]))
    return st.integers(ty.min_value, ty.max_value)


@st.composite
def _instruction(draw, transcendentals: bool = True, types=tuple(TYPES)):
    ty = draw(st.sampled_from(types))
    regs = REGS[ty]
    d, a, b, c = (draw(st.sampled_from(regs)) for _ in range(4))
    kinds = ["binary", "unary", "imm", "mov", "select", "fma", "cvt", "lane"]
    if ty.is_integer:
        kinds.append("int")
    else:
        kinds.append("float")
    kind = draw(st.sampled_from(kinds))
    if kind == "binary":
        return [getattr(isa, draw(st.sampled_from(BINARY)))(d, a, b, ty)]
    if kind == "int":
        return [getattr(isa, draw(st.sampled_from(INT_BINARY)))(d, a, b, ty)]
    if kind == "unary":
        return [getattr(isa, draw(st.sampled_from(UNARY)))(d, a, ty)]
    if kind == "float":
        return [getattr(isa, draw(st.sampled_from(FLOAT_UNARY if transcendentals else EXACT_FLOAT_UNARY)))(d, a, ty)]
    if kind == "imm":
        return [isa.MOV_IMM(d, draw(_imm(ty)), ty)]
    if kind == "mov":
        return [isa.MOV(d, a, ty)]
    if kind == "fma":
        return [getattr(isa, draw(st.sampled_from(["FMA", "MAD", "CLAMP"])))(d, a, b, c, ty)]
    if kind == "select":
        p = Predicate(draw(st.integers(1, 3)))
        return [isa.SETcc(p, a, b, draw(st.sampled_from(list(Condition))), ty), isa.SEL(d, p, b, c, ty)]
    if kind == "cvt":
        src_ty = draw(st.sampled_from(types))
        return [isa.CVT(d, draw(st.sampled_from(REGS[src_ty])), src_ty, ty)]
    # lane: mix the lane id in, so lanes differ
    return [isa.MOV(d, Special.GLOBAL_ID, ty)] if ty.is_integer else \
        [isa.MOV(REGS[Type.I32][0], Special.GLOBAL_ID, Type.I32), isa.CVT(d, REGS[Type.I32][0], Type.I32, ty)]


@dataclass
class GeneratedProgram:
    program: isa.Program
    config: LaunchConfig
    types: tuple = tuple(TYPES)

    @property
    def out_bytes(self) -> int:
        return self.config.total_threads() * len(self.types) * PER_TYPE * SLOT


def _prologue(types) -> list:
    out = []
    for ty in types:
        for k, r in enumerate(REGS[ty]):
            out.append(isa.MOV_IMM(r, (k + 1) * (0.5 if ty.is_float else 3), ty))
    return out


def _epilogue(types) -> list:
    lane = len(types) * PER_TYPE * SLOT
    out = [isa.MOV(GID, Special.GLOBAL_ID, Type.U64), isa.MOV_IMM(SCRATCH, lane, Type.U64),
           isa.MUL(GID, GID, SCRATCH, Type.U64), isa.ADD(GID, GID, OUT, Type.U64),
           isa.MOV_IMM(SCRATCH, SLOT, Type.U64)]
    for ty in types:
        for r in REGS[ty]:
            out += [isa.STG(Address.register(GID), r, ty), isa.ADD(GID, GID, SCRATCH, Type.U64)]
    return out


@st.composite
def programs(draw, max_blocks: int = 4, loops: bool = True, branches: bool = True, transcendentals: bool = True,
             wide: bool = True):
    """A random GeneratedProgram (straight-line, plus loops and predicated forward branches).

    With transcendentals=False every instruction is exactly specified (docs/isa.md), so any two
    backends must store identical bytes. wide=False leaves out the integers wider than 64 bits."""
    types = tuple(TYPES if wide else NARROW_TYPES)
    b = isa.ProgramBuilder(metadata={"generated": True})
    b.add(*_prologue(types))
    n_labels = 0
    for _ in range(draw(st.integers(1, max_blocks))):
        shape = draw(st.sampled_from(["line"] + (["loop"] if loops else []) + (["branch"] if branches else [])))
        body = [ins for chunk in draw(st.lists(_instruction(transcendentals, types), min_size=1, max_size=6))
                for ins in chunk]
        if shape == "line":
            b.add(*body)
        elif shape == "loop":
            top = b.label(f"loop{n_labels}")
            n_labels += 1
            b.add(isa.MOV_IMM(COUNTER, 0, Type.I64))
            b2 = b.label(f"body{n_labels}")
            b.add(*body, isa.LOOP(COUNTER, draw(st.integers(1, 4)), b2))
            del top
        else:
            ty = draw(st.sampled_from(types))
            x, y = draw(st.sampled_from(REGS[ty])), draw(st.sampled_from(REGS[ty]))
            p = Predicate(draw(st.integers(4, 6)))
            skip = Label(f"skip{n_labels}")
            n_labels += 1
            b.add(isa.SETcc(p, x, y, draw(st.sampled_from(list(Condition))), ty), isa.BRA(skip, p), *body)
            b.label(skip)
    b.add(*_epilogue(types))
    lanes = draw(st.sampled_from([(1, 1), (1, 3), (2, 2)]))
    return GeneratedProgram(b.build(), LaunchConfig(grid=(lanes[0], 1, 1), block=(lanes[1], 1, 1)), types)


def canonical_nans(data: bytes, ty: Type) -> bytes:
    """The bytes of an array of ty with every NaN made one NaN: NaN sign and payload carry no meaning."""
    if not ty.is_float or not data:
        return data
    import numpy as np
    a = np.frombuffer(data, dtype=ty.np_dtype).copy()
    a[np.isnan(a.astype(np.float64))] = np.nan
    return a.tobytes()


def run(backend, gp: GeneratedProgram, program: isa.Program | None = None) -> bytes:
    """What the lanes stored (NaNs made canonical), lane after lane, register after register."""
    out = backend.allocate_buffer(gp.out_bytes)
    backend.execute_program_with_params(program or gp.program,
                                        ExecutionParams(gp.config, {OUT.index: isa.pointer(out)}))
    data = bytearray(gp.out_bytes)
    backend.copy_from_buffer(out, data)
    backend.free_buffer(out)
    pieces, at = [], 0
    while at < len(data):
        for ty in gp.types:
            for _ in REGS[ty]:
                pieces.append(canonical_nans(bytes(data[at:at + ty.size_bytes]), ty))
                at += SLOT
    return b"".join(pieces)


# ---- one sample of every instruction class (JSON, disassembly and validation checks) -----------

def _sample_value(hint, name: str):
    from eidos.isa.instructions import MapOperation, MapStep
    if hint is Register or name in ("dst", "src") and hint == (Register | Special):
        return Register(1)
    if hint == (Register | Special):
        return Register(1)
    if hint is Predicate or hint == (Predicate | None):
        return Predicate(2)
    if hint is Label:
        return Label("start")
    if hint is Address:
        return Address.buffer(1, 8)
    if hint == (Address | Register):  # ParallelMapBinary's sources: one array, one scalar operand
        return Register(1) if name == "src_b" else Address.buffer(1, 8)
    if hint is Type:
        return Type.U32
    if hint is bool:
        return True
    if hint is int or hint == (int | float):
        return 2
    if hint is float:
        return 0.5
    if isinstance(hint, type) and issubclass(hint, __import__("enum").Enum):
        return list(hint)[0]
    args = typing.get_args(hint)
    if args and args[0] is MapStep:
        from eidos.isa.instructions import BinaryMapOperation
        return (MapStep(Address.buffer(1), MapOperation.Abs, Address.buffer(2)),
                MapStep(Address.buffer(1), BinaryMapOperation.Add, Register(1), Address.buffer(1)))
    if args == (int, int):
        return (1, 1)
    if args == (int, Ellipsis):
        return (2, 3)
    if args and typing.get_args(args[0]) == (int, int):
        return ((0, 0),)
    raise TypeError(f"no sample for {hint!r}")


def every_instruction() -> list[isa.Instruction]:
    """One valid-looking instance of each instruction class (types chosen by the class's rule)."""
    from eidos.isa import instructions as I
    out = []
    for cls in I.INSTRUCTIONS.values():
        hints = typing.get_type_hints(cls, vars(I))
        kwargs = {f.name: _sample_value(hints[f.name], f.name) for f in fields(cls)}
        if cls.types == "float" and "ty" in kwargs:
            kwargs["ty"] = Type.F32
        out.append(cls(**kwargs))
    return out


# ---- array programs: chains of collectives over a few buffers ----------------------------------

ARRAY_TYPES = [Type.F32, Type.F64, Type.I32, Type.U8, Type.I64]
EXACT_MAPS = [isa.MapOperation.Abs, isa.MapOperation.Neg, isa.MapOperation.Relu, isa.MapOperation.Sqrt]
EXACT_BINARY = [isa.BinaryMapOperation.Add, isa.BinaryMapOperation.Sub, isa.BinaryMapOperation.Mul,
                isa.BinaryMapOperation.Div, isa.BinaryMapOperation.Min, isa.BinaryMapOperation.Max]
N_BUFFERS = 3


@dataclass
class GeneratedArrays:
    """A chain of array instructions over N_BUFFERS buffers of 2 * count elements each. Every
    address is the start or the middle of a buffer, so any two ranges are identical or disjoint;
    reductions land in registers that the program stores to a results buffer."""

    program: isa.Program
    ty: Type
    count: int
    data: list[bytes]

    @property
    def buffer_bytes(self) -> int:
        return max(1, 2 * self.count * self.ty.size_bytes)


@st.composite
def array_programs(draw, exact: bool = True):
    ty = draw(st.sampled_from(ARRAY_TYPES))
    count = draw(st.integers(0, 24))
    size = ty.size_bytes
    maps = [m for m in (EXACT_MAPS if exact else list(isa.MapOperation))
            if ty.is_float or m not in isa.instructions.FLOAT_ONLY_MAPS]
    binary = [b for b in (EXACT_BINARY if exact else list(isa.BinaryMapOperation))
              if ty.is_float or b not in isa.instructions.FLOAT_ONLY_BINARY_MAPS]
    reduces = [r for r in isa.ReduceOperation
               if not (exact and ty.is_float and r in (isa.ReduceOperation.Sum, isa.ReduceOperation.Product))]
    # buffers are handles 1..N_BUFFERS, results N_BUFFERS + 1, on a fresh backend (run() checks)
    addr = st.builds(lambda h, half: Address.buffer(h, half * count * size),
                     st.integers(1, N_BUFFERS), st.integers(0, 1))
    b = isa.ProgramBuilder(metadata={"generated": "arrays"})
    if ty.is_float:
        elems = st.one_of(st.floats(-100, 100, width=32), st.sampled_from([0.0, -0.0, 1.5, -2.0]))
    else:
        elems = st.integers(ty.min_value, ty.max_value)
    # scalar operands (registers set once by MOV_IMM: the program then runs in rounds, the values per lane)
    scalars = [Register(8 + k) for k in range(draw(st.integers(0, 2)))]
    for r in scalars:
        v = draw(elems)
        b.add(isa.MOV_IMM(r, float(v) if ty.is_float else int(v), ty))
    src = st.one_of(addr, st.sampled_from(scalars)) if scalars else addr
    n_red = 0
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["map", "binary", "binary", "reduce"]))
        if kind == "map":
            b.add(isa.ParallelMap(draw(addr), draw(addr), count, draw(st.sampled_from(maps)), ty))
        elif kind == "binary":
            b.add(isa.ParallelMapBinary(draw(addr), draw(src), draw(src), count, draw(st.sampled_from(binary)), ty))
        elif n_red < 4:
            r = Register(n_red)
            b.add(isa.ParallelReduce(r, draw(addr), count, draw(st.sampled_from(reduces)), ty),
                  isa.STG(Address.buffer(N_BUFFERS + 1, n_red * size), r, ty))
            n_red += 1
    import numpy as np
    data = [np.array(draw(st.lists(elems, min_size=2 * count, max_size=2 * count)), dtype=ty.np_dtype).tobytes()
            for _ in range(N_BUFFERS)]
    return GeneratedArrays(b.build(), ty, count, data)


def run_arrays(backend, g: GeneratedArrays, program: isa.Program | None = None,
               config: LaunchConfig | None = None) -> list[bytes]:
    """The buffers' bytes (and the results buffer's; NaNs made canonical) after running on a fresh `backend`."""
    handles = [backend.allocate_buffer(g.buffer_bytes) for _ in range(N_BUFFERS)]
    results = backend.allocate_buffer(4 * g.ty.size_bytes)
    assert handles + [results] == list(range(1, N_BUFFERS + 2)), "run_arrays needs a fresh backend"
    for h, d in zip(handles, g.data):
        backend.copy_to_buffer(h, d)
    backend.execute_program(program or g.program, config or LaunchConfig.linear(3))
    out = []
    for h in handles + [results]:
        buf = bytearray(backend.buffer_size(h))
        backend.copy_from_buffer(h, buf)
        out.append(canonical_nans(bytes(buf[:len(buf) - len(buf) % g.ty.size_bytes]), g.ty))
    return out
