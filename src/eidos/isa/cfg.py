"""The control-flow graph: where each instruction can go next (shared by validation and the optimizer)."""

from __future__ import annotations

from . import instructions as I


def successors(i: int, ins: I.Instruction, positions: dict[str, int]) -> list[int]:
    """Indices that may run after instruction i (len(program) means the lane ends).

    CALL goes to its target and, on return, to i + 1; RET and EXIT end the path here.
    """
    if isinstance(ins, (I.EXIT, I.RET)):
        return []
    if isinstance(ins, I.BRA):
        return [positions[ins.target.name]] + ([i + 1] if ins.pred is not None else [])
    if isinstance(ins, (I.LOOP, I.CALL)):
        return [positions[ins.target.name], i + 1]
    return [i + 1]


def block_starts(program) -> list[int]:
    """The first instruction of each basic block, in order: the entry, every label, the instruction
    after each control transfer or BarSync, and every collective (which stands alone), for backends
    that compile a program block by block."""
    n = len(program.instructions)
    leaders = {program.entry, *program.labels.values()}
    for i, ins in enumerate(program.instructions):
        if isinstance(ins, (I.BRA, I.CALL, I.RET, I.LOOP, I.EXIT, I.BarSync)) or ins.collective:
            leaders.add(i + 1)
        if ins.collective:
            leaders.add(i)
    return sorted(x for x in leaders if 0 <= x < n)


def written_unsigned(program, i: int, reg: int) -> bool:
    """Whether register `reg`, read at instruction i, was last written (in program order) as an unsigned
    integer: compiled backends hold a U64 as its int64 bit pattern, the reference as the unsigned int."""
    for j in range(i - 1, -1, -1):
        ins = program.instructions[j]
        if any(getattr(r, "index", None) == reg for r in ins.registers_written() if type(r).__name__ == "Register"):
            ty = getattr(ins, "dst_ty", None) or getattr(ins, "ty", None)
            return bool(getattr(ty, "is_unsigned", False))
    return False
