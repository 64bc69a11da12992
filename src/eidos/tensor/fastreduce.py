"""The tensor layer's CPU kernel backend: eidos.isa's CpuBackend with float Sum reductions in NumPy.

The ISA CPU backend runs ParallelReduce/ReduceAdd Sum through the reference's exactly rounded
math.fsum, about 0.1 us an element: it would dominate every fused reduction. docs/isa.md lets a
backend's Sum differ from the exact one by 2 n eps S (its precision section), so here a float
Sum is NumPy's pairwise sum in float64, rounded once to the type (error about log2(n) eps S).
This belongs in eidos/isa/backends/cpu/kernels.py; it lives here until that file takes it.
"""

from __future__ import annotations

import numpy as np

from eidos.isa import instructions as I
from eidos.isa import semantics as S
from eidos.isa.backends.cpu import CpuBackend
from eidos.isa.backends.reference import arrays as ref


class FastSum:
    how = "NumPy pairwise sum in float64, rounded once (tensor layer)"

    def __init__(self, ins, index: int) -> None:
        self.ins, self.index = ins, index
        self.round = S.wrapper(ins.ty)

    def __call__(self, memory, lanes=()) -> None:
        ins = self.ins
        x = ref.Arrays(memory, ins, self.index, lanes).read(ins.src_array, ins.ty, ins.count, "src_array")
        with np.errstate(all="ignore"):
            value = self.round(float(np.sum(x, dtype=np.float64)))
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
