"""The partition of a program into basic blocks, which compiled targets turn into a dispatch on a
per-thread block id (`pc`)."""

from __future__ import annotations

from dataclasses import dataclass

from .. import instructions as I

# Instructions that end a basic block (a collective ends one too, and stands alone).
CONTROL = (I.BRA, I.CALL, I.RET, I.LOOP, I.EXIT, I.BarSync)


def block_starts(program) -> list[int]:
    """The first instruction of each basic block, in order: the entry, every label, the instruction
    after each control transfer or BarSync, and every collective (which stands alone)."""
    n = len(program.instructions)
    leaders = {program.entry, *program.labels.values()}
    for i, ins in enumerate(program.instructions):
        if isinstance(ins, CONTROL) or ins.collective:
            leaders.add(i + 1)
        if ins.collective:
            leaders.add(i)
    return sorted(x for x in leaders if 0 <= x < n)


@dataclass
class Blocks:
    starts: list[int]          # block id -> first instruction
    of: dict[int, int]         # first instruction -> block id; len(program) -> `end`
    end: int                   # the block id meaning "fell off the end": exit

    def stop(self, b: int, n: int) -> int:
        """One past the last instruction of block b in a program of n instructions."""
        return self.starts[b + 1] if b + 1 < len(self.starts) else n


def basic_blocks(program) -> Blocks:
    starts = block_starts(program)
    of = {s: b for b, s in enumerate(starts)}
    of[len(program.instructions)] = len(starts)
    return Blocks(starts, of, len(starts))
