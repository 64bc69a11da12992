"""The Atlas ISA in five minutes: array instructions, a per-lane kernel, a JSON kernel, the optimizer,
and streaming an input of any size through a fixed pool.

Run: python examples/isa_quickstart.py [reference|cpu]
"""

from __future__ import annotations

import sys

import numpy as np

from eidos import isa
from eidos.isa import Address, BinaryMapOperation, LaunchConfig, MapOperation, Special, Type
from eidos.isa import Register as R


def backend(name: str):
    from eidos.isa import backends

    return backends.CpuBackend() if name == "cpu" else backends.ReferenceBackend()


def main(name: str = "reference") -> None:
    be = backend(name)
    n = 256
    a, b, c = (be.allocate_buffer(4 * n) for _ in range(3))
    be.copy_to_buffer(a, np.arange(n, dtype=np.float32) - 100)
    be.copy_to_buffer(b, np.arange(n, dtype=np.float32) * 2)

    # 1. Array instructions run once per launch, over whole arrays: c = relu(a + b).
    prog = (isa.ProgramBuilder()
            .add(isa.ParallelMapBinary(Address.buffer(c), Address.buffer(a), Address.buffer(b), n,
                                       BinaryMapOperation.Add, Type.F32))
            .add(isa.ParallelMap(Address.buffer(c), Address.buffer(c), n, MapOperation.Relu, Type.F32))
            .build())
    print(prog, end="\n\n")
    fused = prog.optimize()
    print("optimized:", fused, sep="\n", end="\n\n")
    be.execute_program(fused, LaunchConfig.linear(n))
    out = np.empty(n, np.float32)
    be.copy_from_buffer(c, out)
    print("relu(a + b)[95:105] =", out[95:105])

    # 2. A per-lane kernel: each lane scales its own element, c[i] = a[i] * 3, by pointer arithmetic.
    k = isa.ProgramBuilder().add(
        isa.MOV(R(0), Special.GLOBAL_ID, Type.U64), isa.MOV_IMM(R(1), 4, Type.U64), isa.MUL(R(0), R(0), R(1), Type.U64),
        isa.ADD(R(2), R(10), R(0), Type.U64), isa.LDG(R(3), Address.register(R(2)), Type.F32),
        isa.MOV_IMM(R(4), 3.0, Type.F32), isa.MUL(R(3), R(3), R(4), Type.F32),
        isa.ADD(R(2), R(11), R(0), Type.U64), isa.STG(Address.register(R(2)), R(3), Type.F32)).build()
    be.execute_program_with_params(k, isa.ExecutionParams(LaunchConfig.linear(n),
                                                          {10: isa.pointer(a), 11: isa.pointer(c)}))
    be.copy_from_buffer(c, out)
    print("a * 3 [:5] =", out[:5])

    # 3. A JSON kernel of element-wise math.
    kernel = isa.from_json({"kernel": "axpby", "type": "f32", "count": n, "inputs": {"x": a, "y": b},
                            "outputs": {"out": c}, "compute": {"out": {"op": "fma", "args": [0.5, "x", "y"]}}})
    be.execute_program(kernel, LaunchConfig.linear(64))
    be.copy_from_buffer(c, out)
    print("0.5 * a + b [:5] =", out[:5])

    # 4. Streaming: 4 MiB of input through one 36 KiB pool, a chunk at a time; memory stays at the pool.
    data = np.linspace(-1.0, 1.0, 2**20, dtype=np.float32)
    pool_bytes = 36 * 1024
    chunk = np.empty(pool_bytes // 4, np.float32)
    total = [0.0]

    def relu_in_pool(pool, nbytes):
        return isa.ProgramBuilder().add(isa.ParallelMap(dst_array=Address.pool(pool), src_array=Address.pool(pool),
                                                        count=nbytes // 4, operation=MapOperation.Relu,
                                                        ty=Type.F32)).build()

    def add_up(pool, nbytes):
        view = chunk[: nbytes // 4]
        be.copy_from_pool(pool, 0, view)
        total[0] += float(view.sum(dtype=np.float64))

    streamed = isa.stream(be, data, relu_in_pool, pool_bytes=pool_bytes, sink=add_up)
    print(f"streamed {streamed:,} bytes through a {pool_bytes:,}-byte pool: sum(relu(x)) = {total[0]:.3f} "
          f"(NumPy: {float(np.maximum(data, 0).sum(dtype=np.float64)):.3f})")


if __name__ == "__main__":
    main(*sys.argv[1:2])
