"""A device group: the ranks a collective instruction runs across, as one rank sees them.

Every rank runs the same program, so every rank calls each method in the same order, including ranks
outside an instruction's `devices` (they leave their memory alone). Arrays are one rank's operands:
NumPy views (reference and cpu targets) or torch tensors (triton); the methods write them in place.
"""

from __future__ import annotations

import threading

import numpy as np

from eidos.errors import BackendError

from ..backends.reference import arrays as ref


class Group:
    """One rank of a group of `size` devices."""

    rank: int = 0
    size: int = 1
    capturable: bool = False   # its collectives may be captured in a CUDA graph (device work alone)

    def members(self, devices=()) -> tuple[int, ...]:
        """The ranks an instruction's `devices` names: ascending distinct ranks, or every rank when empty."""
        return ref.members(devices, self.size)

    def all_reduce(self, array, op, ty, devices=()) -> None:
        raise NotImplementedError

    def all_gather(self, out, src, ty, devices=()) -> None:
        raise NotImplementedError

    def broadcast(self, array, root: int, ty, devices=()) -> None:
        raise NotImplementedError

    def reduce_scatter(self, out, src, op, ty, devices=()) -> None:
        raise NotImplementedError

    def barrier(self) -> None:
        raise NotImplementedError


class Simulated(Group):
    """The reference group: `size` ranks in one process, one thread each, every collective computed from
    the reference interpreter's definition (reference/arrays.py all_reduce, all_gather). Simulated.of(n)
    makes the n ranks; run(n, fn) runs fn(rank) on each in its own thread."""

    def __init__(self, rank: int, size: int, meeting) -> None:
        self.rank, self.size, self._meeting = rank, size, meeting

    @classmethod
    def of(cls, size: int, timeout: float = 60.0) -> list[Simulated]:
        meeting = (threading.Barrier(size, timeout=timeout), [None] * size)
        return [cls(r, size, meeting) for r in range(size)]

    def _exchange(self, value) -> list:
        barrier, slots = self._meeting
        slots[self.rank] = value
        try:
            barrier.wait()
            seen = list(slots)
            barrier.wait()
        except threading.BrokenBarrierError:
            raise BackendError(f"rank {self.rank}: another rank of the simulated group failed or never came "
                               "to this collective") from None
        return seen

    def _gather(self, array, devices) -> tuple[tuple[int, ...], list]:
        m = self.members(devices)
        seen = self._exchange(np.array(array, copy=True))
        return m, [seen[r] for r in m]

    def all_reduce(self, array, op, ty, devices=()) -> None:
        m, vals = self._gather(array, devices)
        if self.rank in m:
            array[...] = ref.all_reduce(vals, op, ty)

    def all_gather(self, out, src, ty, devices=()) -> None:
        m, vals = self._gather(src, devices)
        if self.rank in m:
            out[...] = ref.all_gather(vals)

    def broadcast(self, array, root: int, ty, devices=()) -> None:
        m = self.members(devices)
        if root not in m:
            raise BackendError(f"Broadcast: root {root} is not one of the devices {m}")
        seen = self._exchange(np.array(array, copy=True))
        if self.rank in m:
            array[...] = seen[root]

    def reduce_scatter(self, out, src, op, ty, devices=()) -> None:
        m, vals = self._gather(src, devices)
        if self.rank in m:
            n, i = len(out), m.index(self.rank)
            out[...] = ref.all_reduce(vals, op, ty)[i * n:(i + 1) * n]

    def barrier(self) -> None:
        self._exchange(None)

    def abort(self) -> None:
        """Wake every rank waiting at a collective with an error (a rank failed)."""
        self._meeting[0].abort()


def run(size: int, fn) -> list:
    """fn(rank) for each rank of a new simulated group, in its own thread; the results in rank order (the
    first rank's error raised, the others woken)."""
    ranks = Simulated.of(size)
    results: list = [None] * size
    errors: list = [None] * size

    def one(g):
        try:
            results[g.rank] = fn(g)
        except BaseException as e:  # noqa: BLE001 - re-raised in the caller's thread
            errors[g.rank] = e
            g.abort()

    threads = [threading.Thread(target=one, args=(g,), name=f"eidos-rank-{g.rank}") for g in ranks]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    first = next((e for e in errors if e is not None and not isinstance(e, BackendError)), None) or \
        next((e for e in errors if e is not None), None)
    if first is not None:
        raise first
    return results
