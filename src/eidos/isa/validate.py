"""Program.validate(): every static check, each IsaError naming the instruction index and problem."""

from __future__ import annotations

import math
from dataclasses import fields

from eidos.errors import IsaError, did_you_mean

from . import instructions as I
from .address import (
    CLASS_BYTES,
    CLASS_MEMORY_BYTES,
    NUM_CLASSES,
    NUM_PREDICATES,
    NUM_REGISTERS,
    Address,
    Label,
    Predicate,
    Register,
    Space,
    Special,
)
from .cfg import successors
from .instructions import Instruction, MapStep
from .types import Type

# Register operands that hold an address (any integer type), not a value of the instruction's ty.
ADDRESS_OPERANDS = {(I.NBRLoad, "src"), (I.NBRStore, "dst")}
INT_FIELDS = ("count", "m", "n", "k", "batch", "heads", "seq_len", "head_dim", "block_size", "channels", "groups",
              "spatial", "in_channels", "out_channels", "height", "width", "kernel_h", "kernel_w", "rows",
              "position", "iterations", "size", "handle", "pool", "offset", "id", "class_id")


class _Problem(Exception):
    pass


def _fail(msg: str):
    raise _Problem(msg)


def representable(value, ty: Type) -> bool:
    """Whether MOV_IMM can hold `value` as `ty` exactly (floats: any real or inf/nan; ints: in range)."""
    if isinstance(value, bool):
        return False
    if ty.is_float:
        if isinstance(value, int):
            try:
                float(value)
            except OverflowError:
                return False
        return isinstance(value, (int, float))
    if isinstance(value, float):
        if not math.isfinite(value) or value != int(value):
            return False
        value = int(value)
    return isinstance(value, int) and ty.min_value <= value <= ty.max_value


def _check_address(name: str, a: Address, ins: Instruction) -> None:
    if not isinstance(a, Address):
        _fail(f"{name} must be an Address, got {type(a).__name__}")
    if a.space is Space.REGISTER:
        _check_register(name, a.reg)
        if a.offset:
            _fail(f"{name}: a register-indirect address has no offset")
        return
    if a.offset < 0:
        _fail(f"{name}: negative offset {a.offset}")
    if a.reinterpret and a.space is not Space.BUFFER:
        _fail(f"{name}: reinterpret marks a typed buffer's access; a {a.space.value} address has no element type")
    if a.space is Space.CLASS:
        if not 0 <= a.handle < NUM_CLASSES:
            _fail(f"{name}: class {a.handle} out of range 0..{NUM_CLASSES - 1}")
        if a.offset >= CLASS_BYTES:
            _fail(f"{name}: class offset {a.offset} out of bounds (a class has {CLASS_BYTES} bytes)")
        extent = _extent(ins)
        if extent is not None and a.handle * CLASS_BYTES + a.offset + extent > CLASS_MEMORY_BYTES:
            _fail(f"{name}: constant offset out of bounds: {extent} bytes at class {a.handle} offset {a.offset} "
                  f"run past the end of class memory ({CLASS_MEMORY_BYTES} bytes)")
    elif a.space is Space.SHARED:
        if ins.collective:
            _fail(f"{name}: shared memory is per block; the grid-wide {ins.name} cannot address it")
        if isinstance(ins, (I.LDG, I.STG)):
            _fail(f"{name}: {ins.name} addresses global memory; use {'LDS' if isinstance(ins, I.LDG) else 'STS'} for shared")
    elif a.handle < 1:
        _fail(f"{name}: handle {a.handle} is not a valid {a.space.value} handle (handles start at 1)")
    if isinstance(ins, (I.LDS, I.STS)) and a.space not in (Space.SHARED, Space.REGISTER):
        _fail(f"{name}: {ins.name} addresses shared memory; got a {a.space.value} address (use LDG/STG)")


def _extent(ins: Instruction) -> int | None:
    """Bytes an instruction touches from one address, where that is known statically."""
    ty = getattr(ins, "ty", None)
    if not isinstance(ty, Type):
        return None
    if isinstance(ins, (I.LDG, I.STG, I.LDS, I.STS)):
        return ty.size_bytes
    count = getattr(ins, "count", None)
    if isinstance(count, int):
        return count * ty.size_bytes
    return None


def _check_register(name: str, r) -> None:
    if not isinstance(r, Register):
        _fail(f"{name} must be a Register, got {r!r}")
    if not isinstance(r.index, int) or not 0 <= r.index < NUM_REGISTERS:
        _fail(f"{name}: register r{r.index} out of range r0..r{NUM_REGISTERS - 1}")


def _check_predicate(name: str, p) -> None:
    if not isinstance(p, Predicate):
        _fail(f"{name} must be a Predicate, got {p!r}")
    if not isinstance(p.index, int) or not 0 <= p.index < NUM_PREDICATES:
        _fail(f"{name}: predicate p{p.index} out of range p0..p{NUM_PREDICATES - 1}")


def _check_types(ins: Instruction) -> None:
    ty = getattr(ins, "ty", None)
    if ins.types is not None:
        if not isinstance(ty, Type):
            _fail(f"ty must be a Type, got {ty!r}")
        if ins.types == "float" and not ty.is_float:
            _fail(f"type mismatch: {ins.name} takes a float type, got {ty.name}")
        if ins.types == "int" and not ty.is_integer:
            _fail(f"type mismatch: {ins.name} takes an integer type, got {ty.name}")
        if ins.collective and ty.is_extended:
            _fail(f"type mismatch: array instruction {ins.name} takes types up to 64 bits, got {ty.name}")
    if isinstance(ins, I.CVT):
        for n in ("src_ty", "dst_ty"):
            if not isinstance(getattr(ins, n), Type):
                _fail(f"{n} must be a Type, got {getattr(ins, n)!r}")
    if isinstance(ins, I.MOV_IMM) and not representable(ins.value, ty):
        _fail(f"MOV_IMM value {ins.value!r} is not representable as {ty.name}")
    if isinstance(ins, I.MOV) and isinstance(ins.src, Special) and not ty.is_integer:
        _fail(f"type mismatch: special value {ins.src} is an integer; MOV needs an integer ty, got {ty.name}")
    op = getattr(ins, "operation", None)
    if isinstance(ins, (I.ParallelMap, I.ParallelMapBinary)) and ty.is_integer and (
            op in I.FLOAT_ONLY_MAPS or op in I.FLOAT_ONLY_BINARY_MAPS):
        _fail(f"type mismatch: {op.value} takes a float type, got {ty.name}")
    if isinstance(ins, I.ParallelMap) and not isinstance(op, I.MapOperation):
        _fail(f"operation must be a MapOperation, got {op!r}")
    if isinstance(ins, I.ParallelMapBinary) and not isinstance(op, I.BinaryMapOperation):
        _fail(f"operation must be a BinaryMapOperation, got {op!r}")
    if isinstance(ins, (I.ParallelReduce, I.AllReduce, I.ReduceScatter)) and not isinstance(op, I.ReduceOperation):
        _fail(f"operation must be a ReduceOperation, got {op!r}")
    if isinstance(ins, I.FusedMap):
        for j, step in enumerate(ins.steps):
            if not isinstance(step, MapStep):
                _fail(f"steps[{j}] must be a MapStep")
            if ty.is_integer and (step.operation in I.FLOAT_ONLY_MAPS or step.operation in I.FLOAT_ONLY_BINARY_MAPS):
                _fail(f"type mismatch: steps[{j}] {step.operation.value} takes a float type, got {ty.name}")
            if isinstance(step.operation, I.BinaryMapOperation) != (step.b is not None):
                _fail(f"steps[{j}]: a binary operation needs b, a unary one must not have it")


def _check_instruction(ins: Instruction, labels) -> None:
    if not isinstance(ins, Instruction):
        _fail(f"not an ISA instruction: {type(ins).__name__}")
    _check_types(ins)
    for f in fields(ins):
        v = getattr(ins, f.name)
        ann = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", "")
        if ann == "Register" or isinstance(v, Register):
            _check_register(f.name, v)
        elif ann == "Register | Special":
            if not isinstance(v, Special):
                _check_register(f.name, v)
        elif ann == "Predicate" or isinstance(v, Predicate):
            _check_predicate(f.name, v)
        elif isinstance(v, Address):
            _check_address(f.name, v, ins)
        elif isinstance(v, Label) or f.name == "target":
            if not isinstance(v, Label):
                _fail(f"target must be a Label, got {v!r}")
            if v.name not in labels:
                hint = did_you_mean(v.name, labels)
                _fail(f"undefined label {v.name!r}" + (f"; {hint}" if hint else ""))
        elif f.name in INT_FIELDS:
            if isinstance(v, bool) or not isinstance(v, int):
                _fail(f"{f.name} must be an int, got {v!r}")
            if v < 0 and f.name not in ("offset",):
                _fail(f"{f.name} must be >= 0, got {v}")
    for j, step in enumerate(getattr(ins, "steps", ()) or ()):
        if not isinstance(step.dst, Address):
            _fail(f"steps[{j}].dst must be an Address, got {step.dst!r}")
        for nm, a in (("dst", step.dst), ("a", step.a), ("b", step.b)):
            if isinstance(a, Register) and nm != "dst":
                _check_register(f"steps[{j}].{nm}", a)
            elif a is not None:
                _check_address(f"steps[{j}].{nm}", a, ins)
    if isinstance(ins, (I.NBRLoad, I.NBRStore)):
        if not -128 <= ins.offset <= 127:
            _fail(f"neighbour offset {ins.offset} out of the i8 range -128..127")
        if 256 % ins.ty.size_bytes:
            _fail(f"type mismatch: {ins.ty.name} elements do not tile a 256-byte page row")
    if isinstance(ins, (I.ResAccum, I.PhaseRead, I.PhaseWrite)) and not 0 <= ins.class_id < NUM_CLASSES:
        _fail(f"class {ins.class_id} out of range 0..{NUM_CLASSES - 1}")
    if isinstance(ins, I.PoolAlloc | I.PoolFree | I.PoolLoad | I.PoolStore):
        h = ins.handle if isinstance(ins, (I.PoolAlloc, I.PoolFree)) else ins.pool
        if h < 1:
            _fail(f"pool handle {h} is not valid (handles start at 1)")
    if isinstance(ins, (I.PoolLoad, I.PoolStore)) and ins.offset < 0:
        _fail(f"negative pool offset {ins.offset}")
    if isinstance(ins, I.FFT) and ins.n < 1:
        _fail("FFT needs n >= 1")
    if isinstance(ins, I.Conv2D):
        for nm in ("stride", "padding"):
            v = getattr(ins, nm)
            if len(v) != 2 or any(not isinstance(x, int) or x < (1 if nm == "stride" else 0) for x in v):
                _fail(f"{nm} must be two ints (stride >= 1, padding >= 0), got {v!r}")
    if isinstance(ins, I.RoPE) and ins.head_dim % 2:
        _fail(f"RoPE needs an even head_dim, got {ins.head_dim}")
    if isinstance(ins, I.GroupNorm) and (ins.groups < 1 or ins.channels % ins.groups):
        _fail(f"GroupNorm: channels {ins.channels} must split into {ins.groups} equal groups")


def _read_types(ins: Instruction):
    """(field, register, expected type or 'int') for each register the instruction reads as a value."""
    ty = getattr(ins, "ty", None)
    for f in fields(ins):
        v = getattr(ins, f.name)
        if isinstance(v, Address) and v.space is Space.REGISTER:
            yield f.name, v.reg, "int"
        if not isinstance(v, Register) or (f.name in ins.writes and f.name not in ins.reads_too):
            continue
        if isinstance(ins, I.CVT):
            yield f.name, v, ins.src_ty
        elif isinstance(ins, I.LOOP) or (type(ins), f.name) in ADDRESS_OPERANDS:
            yield f.name, v, "int"
        elif isinstance(ty, Type):
            yield f.name, v, ty
    for j, step in enumerate(getattr(ins, "steps", ()) or ()):  # a FusedMap's scalar operands
        for nm in ("a", "b"):
            r = getattr(step, nm, None)
            if isinstance(r, Register):
                yield f"steps[{j}].{nm}", r, ty


def _written_type(ins: Instruction) -> Type | str | None:
    if isinstance(ins, I.CVT):
        return ins.dst_ty
    if isinstance(ins, I.LOOP):
        return "int"
    return getattr(ins, "ty", None)


_CONFLICT = "conflict"


def _register_types(program) -> list[dict[int, object]]:
    """For each instruction, the type each register holds on entry where every path agrees
    (forward dataflow; a register written with different types on different paths is a conflict)."""
    ins_list, n = program.instructions, len(program.instructions)
    written = {r.index for ins in ins_list for r in ins.registers_written() if isinstance(r, Register)}
    states: list[dict | None] = [None] * (n + 1)
    states[program.entry] = {}
    work = [program.entry]
    while work:
        i = work.pop()
        if i >= n:
            continue
        out = dict(states[i])
        ins = ins_list[i]
        wt = _written_type(ins)
        for reg in ins.registers_written():
            if isinstance(reg, Register) and wt is not None:
                out[reg.index] = wt
        for j in successors(i, ins, program.labels):
            flow = out
            if isinstance(ins, I.CALL) and j == i + 1:  # the callee may have written anything
                flow = {**out, **{r: _CONFLICT for r in written}}
            old = states[j]
            if old is None:
                states[j] = dict(flow)
                work.append(j)
                continue
            merged = dict(old)
            for r, t in flow.items():
                if merged.get(r, t) != t:
                    merged[r] = _CONFLICT
                elif r not in merged:
                    merged[r] = t
            if merged != old:
                states[j] = merged
                work.append(j)
    return [s if s is not None else {} for s in states]


def validate(program) -> None:
    n = len(program.instructions)
    labels = program.labels
    for name, idx in labels.items():
        if not isinstance(idx, int) or not 0 <= idx <= n:
            raise IsaError(f"label {name!r} marks instruction {idx}, outside 0..{n}")
    if not 0 <= program.entry <= n:
        raise IsaError(f"entry {program.entry} is outside the program (0..{n})")
    from .program import disassemble

    def fail(i, ins, p):
        try:
            text = disassemble(ins)
        except Exception:
            text = type(ins).__name__
        raise IsaError(f"instruction {i} ({text}): {p}") from None

    for i, ins in enumerate(program.instructions):
        try:
            _check_instruction(ins, labels)
        except _Problem as p:
            fail(i, ins, p)
    types = _register_types(program)
    writer: dict[int, int] = {}
    for i, ins in enumerate(program.instructions):
        try:
            for fname, reg, want in _read_types(ins):
                hty = types[i].get(reg.index)
                if hty is None or hty == _CONFLICT:
                    continue
                ok = (hty == want) or (want == "int" and (hty == "int" or isinstance(hty, Type) and hty.is_integer)) \
                    or (hty == "int" and isinstance(want, Type) and want.is_integer)
                if not ok:
                    at = writer.get(reg.index)
                    by = f" (written by instruction {at})" if at is not None else ""
                    _fail(f"type mismatch: {fname} {reg} holds {getattr(hty, 'name', hty)}{by}, "
                          f"read as {getattr(want, 'name', want)}")
        except _Problem as p:
            fail(i, ins, p)
        for reg in ins.registers_written():
            if isinstance(reg, Register):
                writer[reg.index] = i


# Address operands whose element type is not the instruction's ty, and the operands written.
ELEMENT_TYPES = {I.QuantizedGEMM: {"a": Type.I8, "b": Type.I8, "c": Type.I8},
                 I.MixedPrecisionGEMM: {"a": Type.F16, "b": Type.F16, "c": Type.F32},
                 I.SparseGEMM: {"a_indices": Type.I32, "a_ptr": Type.I32}}
WRITTEN_ADDRESSES = frozenset({"dst", "dst_array", "c", "output", "cache", "buffer"})


def check_buffer_types(program, types) -> None:
    """IsaError naming the instruction, the buffer, its element type and the type used, wherever a
    static buffer address of `program` touches a typed buffer (`types`: handle -> Type) as another
    type or between element boundaries, unless the address is marked reinterpret=True.

    Register-held pointers name their buffer only at run time and are not checked here."""
    from .program import disassemble

    for i, ins in enumerate(program.instructions):
        for name, a in ins.addresses():
            if a.space is not Space.BUFFER or a.reinterpret:
                continue
            held = types.get(a.handle)
            if held is None:
                continue
            field = name.rsplit(".", 1)[-1]
            used = ELEMENT_TYPES.get(type(ins), {}).get(field) or getattr(ins, "ty", None)
            if not isinstance(used, Type):
                continue
            verb = "writes" if field in WRITTEN_ADDRESSES else "reads"
            if used is not held:
                problem = f"{verb} buffer {a.handle} as {used.name}, but buffer {a.handle} holds {held.name} elements"
                fix = f"use ty={held.name}"
            elif a.offset % held.size_bytes:
                problem = (f"{verb} buffer {a.handle} at byte {a.offset}, inside element {a.offset // held.size_bytes} "
                           f"of its {held.name} elements ({held.size_bytes} bytes each)")
                fix = f"use an offset that is a multiple of {held.size_bytes}"
            else:
                continue
            raise IsaError(f"instruction {i} ({disassemble(ins)}): {name} {problem}; {fix}, or mark the access "
                           f"Address.buffer({a.handle}, {a.offset}, reinterpret=True) to reinterpret its bytes")
