"""A cached program's repeated runs as one CUDA graph (TritonBackend.execute_program): which plans may
be captured (here, under Triton's interpreter too), and on a GPU that replays see new input data and
give the reference interpreter's bytes."""

from __future__ import annotations

import numpy as np
import pytest

from tests.isa.conftest import use_triton_interpreter_without_cuda  # noqa: E402

use_triton_interpreter_without_cuda()  # before triton is imported
torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from eidos import isa  # noqa: E402
from eidos.isa import Address, LaunchConfig, ReduceOperation, Register, Type  # noqa: E402
from eidos.isa import BinaryMapOperation as B  # noqa: E402
from eidos.isa import MapOperation as M  # noqa: E402
from eidos.isa.backends.reference import ReferenceBackend  # noqa: E402
from eidos.isa.backends.triton import TritonBackend  # noqa: E402

N = 5000
CUDA = TritonBackend().memory.cuda
on_gpu = pytest.mark.skipif(not CUDA, reason="CUDA graphs need an NVIDIA GPU (here Triton's interpreter runs the kernels)")


def map_sum(x, y, out, pool=9, zeroed=False):
    """The tensor layer's map+sum: ((x*2+1).exp()*y).sum() into out; a pool only its dead chain names
    (zeroed=True: the pool is read back, so its memory outlives no run but is touched)."""
    P, two, one = Address.pool(pool), Register(1), Register(2)
    steps = (isa.MapStep(P, B.Mul, Address.buffer(x), two), isa.MapStep(P, B.Add, P, one), isa.MapStep(P, M.Exp, P),
             isa.MapStep(P, B.Mul, P, Address.buffer(y)))
    tail = [isa.LDG(Register(3), P, Type.F32)] if zeroed else []
    return isa.ProgramBuilder().add(
        isa.MOV_IMM(two, 2.0, Type.F32), isa.MOV_IMM(one, 1.0, Type.F32), isa.PoolAlloc(pool, 4 * N),
        isa.FusedMap(N, steps, Type.F32), isa.ParallelReduce(Register(0), P, N, ReduceOperation.Sum, Type.F32),
        *tail, isa.PoolFree(pool), isa.STG(Address.buffer(out), Register(0), Type.F32)).build()


def fused(x, y, z):
    two = Register(1)
    return isa.ProgramBuilder().add(
        isa.MOV_IMM(two, 2.0, Type.F32),
        isa.ParallelMapBinary(Address.buffer(z), Address.buffer(x), two, N, B.Mul, Type.F32),
        isa.ParallelMapBinary(Address.buffer(z), Address.buffer(z), Address.buffer(y), N, B.Add, Type.F32)).build()


def reduce_then_scale(x, z):
    """A scalar operand read from a reduction's result: its run fetches the result (a sync)."""
    return isa.ProgramBuilder().add(
        isa.ParallelReduce(Register(0), Address.buffer(x), N, ReduceOperation.Max, Type.F32),
        isa.ParallelMapBinary(Address.buffer(z), Address.buffer(x), Register(0), N, B.Sub, Type.F32)).build()


def test_which_plans_are_captured():
    be = TritonBackend()
    x, y, z, out = (be.allocate_buffer(4 * N) for _ in range(4))
    assert be.plan(map_sum(x, y, out)).graphable
    assert be.plan(fused(x, y, z)).graphable
    assert not be.plan(map_sum(x, y, out, zeroed=True)).graphable   # a pool read after the chain
    assert not be.plan(reduce_then_scale(x, z)).graphable            # a fetched result



def _fill(backends, handles, rng):
    for h in handles:
        data = rng.uniform(-1, 1, N).astype(np.float32).tobytes()
        for be in backends:
            be.copy_to_buffer(h, data)


def _read(be, h, n):
    out = bytearray(n)
    be.copy_from_buffer(h, out)
    return np.frombuffer(bytes(out), dtype=np.float32)


@on_gpu
@pytest.mark.parametrize("case", ["map_sum", "fused", "reduce_then_scale"])
def test_replays_see_new_inputs_and_equal_the_reference(case):
    rng = np.random.default_rng(7)
    be, ref = TritonBackend(), ReferenceBackend()
    hs = [(be.allocate_buffer(4 * N), ref.allocate_buffer(4 * N)) for _ in range(3)]
    assert [a for a, _ in hs] == [b for _, b in hs]  # the same handles on both
    x, y, z = (a for a, _ in hs)
    program = {"map_sum": lambda: map_sum(x, y, z), "fused": lambda: fused(x, y, z),
               "reduce_then_scale": lambda: reduce_then_scale(x, z)}[case]()
    cfg = LaunchConfig.linear(1)
    for run in range(6):
        _fill((be, ref), (x, y), rng)       # new data in the same buffers before every run
        be.execute_program(program, cfg)
        ref.execute_program(program, cfg)
        got, want = _read(be, z, 4 * N), _read(ref, z, 4 * N)
        if case == "map_sum":  # a compensated float sum on the GPU, exact in the reference
            assert abs(float(got[0]) - float(want[0])) <= 1e-5 * max(1.0, abs(float(want[0]))), run
        else:
            assert np.array_equal(got, want), run
    g = be._graphs.get(id(program))
    assert (g is not None and g.graph is not None) == (case != "reduce_then_scale")
