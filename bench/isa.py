"""The reference interpreter's cost per lane-instruction (target: about 1,000 ns or less).

reference_ns_per_lane_instruction() runs a kernel of loads, integer address arithmetic,
float arithmetic, a compare-and-select and a counted loop on every lane, and divides the
wall time by the number of instructions the lanes executed. Run: python bench/isa.py
"""

from __future__ import annotations

import statistics
import time

import numpy as np


def _kernel(n: int, iterations: int):
    from eidos import isa
    from eidos.isa import Address, Condition, Predicate, Register as R, Special, Type

    U64, F32 = Type.U64, Type.F32
    b = isa.ProgramBuilder()
    b.add(isa.MOV(R(0), Special.GLOBAL_ID, U64), isa.MOV_IMM(R(1), 4, U64), isa.MUL(R(2), R(0), R(1), U64),
          isa.ADD(R(3), R(10), R(2), U64), isa.LDG(R(4), Address.register(R(3)), F32),
          isa.MOV_IMM(R(5), 0.5, F32), isa.MOV_IMM(R(6), 0.0, F32), isa.MOV_IMM(R(7), 0, Type.I64))
    b.label("body")
    b.add(isa.FMA(R(6), R(4), R(5), R(6), F32), isa.MUL(R(4), R(4), R(5), F32),
          isa.SETcc(Predicate(0), R(6), R(5), Condition.GT, F32), isa.SEL(R(8), Predicate(0), R(6), R(5), F32),
          isa.ADD(R(6), R(8), R(5), F32), isa.LOOP(R(7), iterations, isa.Label("body")))
    b.add(isa.ADD(R(3), R(11), R(2), U64), isa.STG(Address.register(R(3)), R(6), F32))
    program = b.build()
    executed = n * (8 + 6 * iterations + 2)
    return program, executed


def reference_ns_per_lane_instruction(lanes: int = 2048, iterations: int = 16, repeats: int = 5) -> dict:
    """{'min', 'median' (wall ns), 'cpu_min' (process CPU ns, steadier on a loaded machine), 'lanes',
    'instructions'} over `repeats` runs."""
    from eidos import isa
    from eidos.isa.backends import ReferenceBackend

    be = ReferenceBackend()
    src, dst = be.allocate_buffer(4 * lanes), be.allocate_buffer(4 * lanes)
    be.copy_to_buffer(src, np.linspace(-1, 1, lanes).astype(np.float32))
    program, executed = _kernel(lanes, iterations)
    params = isa.ExecutionParams(isa.LaunchConfig.linear(lanes), {10: isa.pointer(src), 11: isa.pointer(dst)})
    times, cpu = [], []
    for _ in range(repeats):
        t, c = time.perf_counter(), time.process_time()
        be.execute_program_with_params(program, params)
        times.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
    ns = [t / executed * 1e9 for t in times]
    return {"min": min(ns), "median": statistics.median(ns), "cpu_min": min(cpu) / executed * 1e9,
            "lanes": lanes, "instructions": executed}


if __name__ == "__main__":
    r = reference_ns_per_lane_instruction()
    print(f"reference interpreter: {r['min']:.0f} ns min, {r['median']:.0f} ns median wall, {r['cpu_min']:.0f} ns "
          f"CPU per lane-instruction ({r['lanes']} lanes, {r['instructions']} lane-instructions)")
