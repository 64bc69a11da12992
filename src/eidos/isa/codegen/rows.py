"""Compiled threads' registers as the reference's collective code reads and writes them.

Between rounds a compiled target keeps each thread's registers in rows of two arrays (RI: int64,
a U64 as its bit pattern; RF: float64), one column per register the program uses. A collective runs
the reference's code over objects with `.R`; these views give it that without copying the rows.
"""

from __future__ import annotations

from .emitter import s64


class Row:
    """Thread `t`'s registers: integer columns `islots` in RI, float columns `fslots` in RF (a target
    that keeps both views of every register passes the same map twice)."""

    __slots__ = ("RI", "RF", "t", "islots", "fslots")

    def __init__(self, RI, RF, t: int, islots: dict, fslots: dict) -> None:
        self.RI, self.RF, self.t, self.islots, self.fslots = RI, RF, t, islots, fslots

    def __getitem__(self, r: int):
        if r in self.islots:
            return int(self.RI[self.t, self.islots[r]])
        return float(self.RF[self.t, self.fslots[r]])

    def __setitem__(self, r: int, value) -> None:
        if r in self.fslots:
            self.RF[self.t, self.fslots[r]] = float(value)
        if r in self.islots and not isinstance(value, float):
            self.RI[self.t, self.islots[r]] = s64(value)


class ThreadView:
    """What the reference's collective code needs of a thread: its registers, `.R`."""

    __slots__ = ("R",)

    def __init__(self, registers) -> None:
        self.R = registers


def thread_views(RI, RF, threads, islots: dict, fslots: dict) -> list[ThreadView]:
    return [ThreadView(Row(RI, RF, int(t), islots, fslots)) for t in threads]


__all__ = ["Row", "ThreadView", "thread_views"]
