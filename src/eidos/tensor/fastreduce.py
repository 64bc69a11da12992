"""The tensor layer's CPU kernel backend: eidos.isa's CpuBackend with float Sum reductions in NumPy.

The ISA CPU backend runs ParallelReduce/ReduceAdd Sum through the reference's exactly rounded
math.fsum, about 0.1 us an element: it would dominate every fused reduction. docs/isa.md lets a
backend's Sum differ from the exact one by 2 n eps S (its precision section), so here a float
Sum is NumPy's pairwise sum in float64 over one chunk per core (threads: NumPy releases the GIL
in reductions), the chunks' sums added exactly (math.fsum) and rounded once to the type (error
about log2(n) eps S). This belongs in eidos/isa/backends/cpu/kernels.py; it lives here until that
file takes it.
"""

from __future__ import annotations

import math
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from eidos.isa import instructions as I
from eidos.isa import semantics as S
from eidos.isa.backends.cpu import CpuBackend
from eidos.isa.backends.reference import arrays as ref


PAR_MIN = 1 << 20   # elements; below this one thread is faster than handing out chunks
_POOL: list = []


def _pool() -> ThreadPoolExecutor:
    if not _POOL:
        _POOL.append(ThreadPoolExecutor(max_workers=min(os.cpu_count() or 1, 32), thread_name_prefix="eidos-sum"))
    return _POOL[0]


def _sum64(x: np.ndarray) -> float:
    return float(np.sum(x, dtype=np.float64))


def float_sum(x: np.ndarray) -> float:
    """The float64 sum of x: pairwise per chunk, chunks in parallel, chunk sums added exactly."""
    workers = min(os.cpu_count() or 1, 32)
    if x.size < PAR_MIN or workers < 2:
        return _sum64(x)
    step = -(-x.size // workers)
    parts = list(_pool().map(_sum64, [x[i:i + step] for i in range(0, x.size, step)]))
    if all(math.isfinite(p) for p in parts):
        return math.fsum(parts)
    return float(np.sum(np.array(parts)))


class FastSum:
    how = "NumPy pairwise sum in float64 per core, chunk sums added exactly, rounded once (tensor layer)"

    def __init__(self, ins, index: int) -> None:
        self.ins, self.index = ins, index
        self.round = S.wrapper(ins.ty)

    def __call__(self, memory, lanes=()) -> None:
        ins = self.ins
        x = ref.Arrays(memory, ins, self.index, lanes).read(ins.src_array, ins.ty, ins.count, "src_array")
        with np.errstate(all="ignore"):
            value = self.round(float_sum(x))
        for lane in lanes:
            lane.R[ins.dst.index] = value


def _fast(ins) -> bool:
    if isinstance(ins, I.ParallelReduce):
        return ins.operation is I.ReduceOperation.Sum and ins.ty.is_float
    return isinstance(ins, I.ReduceAdd) and ins.ty.is_float


class TensorCpuBackend(CpuBackend):
    def _make_plan(self, program):
        plan = super()._make_plan(program)
        if plan.collectives:
            for i, step in list(plan.collectives.items()):
                if _fast(program.instructions[i]):
                    plan.collectives[i] = FastSum(program.instructions[i], i)
        return plan


def cpu_backend() -> CpuBackend:
    return TensorCpuBackend()
