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
