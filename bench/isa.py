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
    from eidos.isa import Address, Condition, Predicate, Special, Type
    from eidos.isa import Register as R

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


# ---- the compiled CPU backend (CpuBackend) beside NumPy and the machine's memory bandwidth ----------

def _best(fn, repeats: int, number: int = 1) -> tuple[float, float]:
    """(min, median) seconds of one call of fn over `repeats` timings of `number` calls."""
    out = []
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in range(number):
            fn()
        out.append((time.perf_counter() - t) / number)
    return min(out), statistics.median(out)


def bandwidth(n: int = 50_000_000, repeats: int = 7) -> dict:
    """STREAM-style add (c = a + b) and triad (a = b + s*c) on float32 with numba prange over every
    thread, and NumPy's (one thread) add, in GB/s counting 12 bytes per element (2 reads, 1 write)."""
    import numba

    @numba.njit(parallel=True, fastmath=False)
    def add(a, b, c):
        for i in numba.prange(a.size):
            c[i] = a[i] + b[i]

    @numba.njit(parallel=True)
    def triad(a, b, c, s):
        for i in numba.prange(a.size):
            a[i] = b[i] + s * c[i]

    a, b, c = (np.full(n, 1.5, dtype=np.float32) for _ in range(3))
    add(a, b, c), triad(a, b, c, np.float32(3.0))
    gb = 12 * n / 1e9
    out = {}
    for name, fn in (("numba add", lambda: add(a, b, c)), ("numba triad", lambda: triad(a, b, c, np.float32(3.0))),
                     ("numpy add", lambda: np.add(a, b, out=c))):
        lo, med = _best(fn, repeats)
        out[name] = (gb / lo, gb / med)
    out["threads"] = numba.config.NUMBA_NUM_THREADS
    return out


def _map_program(be, n: int, fused: bool):
    from eidos import isa
    from eidos.isa import Address, LaunchConfig, Type
    from eidos.isa import BinaryMapOperation as BM
    from eidos.isa import MapOperation as MO

    a, b, c = (be.allocate_buffer(4 * n) for _ in range(3))
    be.copy_to_buffer(a, np.linspace(-1, 1, n, dtype=np.float32))
    be.copy_to_buffer(b, np.linspace(2, -2, n, dtype=np.float32))
    A, B, C = Address.buffer(a), Address.buffer(b), Address.buffer(c)
    pb = isa.ProgramBuilder()
    if fused:  # c = relu(a * b + a), three instructions the optimizer fuses into one FusedMap
        pb.add(isa.ParallelMapBinary(C, A, B, n, BM.Mul, Type.F32), isa.ParallelMapBinary(C, C, A, n, BM.Add, Type.F32),
               isa.ParallelMap(C, C, n, MO.Relu, Type.F32))
        program = pb.build().optimize()
    else:
        program = pb.add(isa.ParallelMapBinary(C, A, B, n, BM.Add, Type.F32)).build()
    views = [be.memory.buffers[h].view(np.float32) for h in (a, b, c)]
    return program, LaunchConfig.linear(1), views


def elementwise(sizes=(1_000, 100_000, 10_000_000, 100_000_000), repeats: int = 7) -> list[dict]:
    """GB/s (12 bytes per element) of compiled element-wise programs and of NumPy doing the same."""
    from eidos.isa.backends import CpuBackend

    rows = []
    for n in sizes:
        number = max(1, 2_000_000 // n)
        for fused in (False, True):
            be = CpuBackend()
            program, cfg, (a, b, c) = _map_program(be, n, fused)
            be.execute_program(program, cfg)
            lo, med = _best(lambda: be.execute_program(program, cfg), repeats, number)
            if fused:
                t = np.empty_like(a)

                def numpy_fn():
                    np.multiply(a, b, out=t)
                    np.add(t, a, out=c)
                    np.maximum(c, 0, out=c)
            else:
                def numpy_fn():
                    np.add(a, b, out=c)
            nlo, nmed = _best(numpy_fn, repeats, number)
            gb = 12 * n / 1e9
            rows.append({"n": n, "program": "relu(a*b+a) fused" if fused else "a+b", "eidos": (gb / lo, gb / med),
                         "numpy": (gb / nlo, gb / nmed), "how": be.explain(program).splitlines()[-1].strip()})
            for h in list(be.memory.buffers):
                be.free_buffer(h)
    return rows


def register_program(n: int = 10_000_000, repeats: int = 5) -> dict:
    """GB/s of a per-lane register program (two LDG, ADD, STG per lane, addresses from global_id)."""
    from eidos import isa
    from eidos.isa import Address, Special, Type
    from eidos.isa import Register as R
    from eidos.isa.backends import CpuBackend

    U64, F32 = Type.U64, Type.F32
    be = CpuBackend()
    a, b, c = (be.allocate_buffer(4 * n) for _ in range(3))
    pb = isa.ProgramBuilder().add(
        isa.MOV(R(0), Special.GLOBAL_ID, U64), isa.MOV_IMM(R(1), 4, U64), isa.MUL(R(2), R(0), R(1), U64),
        isa.ADD(R(3), R(10), R(2), U64), isa.ADD(R(4), R(11), R(2), U64), isa.ADD(R(5), R(12), R(2), U64),
        isa.LDG(R(6), Address.register(R(3)), F32), isa.LDG(R(7), Address.register(R(4)), F32),
        isa.ADD(R(8), R(6), R(7), F32), isa.STG(Address.register(R(5)), R(8), F32))
    program = pb.build()
    params = isa.ExecutionParams(isa.LaunchConfig.linear(n), {10: isa.pointer(a), 11: isa.pointer(b), 12: isa.pointer(c)})
    be.execute_program_with_params(program, params)
    lo, med = _best(lambda: be.execute_program_with_params(program, params), repeats)
    gb = 12 * n / 1e9
    return {"n": n, "eidos": (gb / lo, gb / med), "how": be.explain(program, params).splitlines()[-1].strip()}


def call_overhead(n: int = 1000, repeats: int = 7, number: int = 20_000) -> dict:
    """Seconds per execute_program of a cached one-instruction program on n float32, beside np.add."""
    from eidos.isa.backends import CpuBackend

    be = CpuBackend()
    program, cfg, (a, b, c) = _map_program(be, n, False)
    be.execute_program(program, cfg)
    lo, med = _best(lambda: be.execute_program(program, cfg), repeats, number)
    nlo, nmed = _best(lambda: np.add(a, b, out=c), repeats, number)
    return {"eidos": (lo, med), "numpy": (nlo, nmed)}


def gemm(sizes=(256, 1024, 2048), repeats: int = 5) -> list[dict]:
    """GFLOP/s of GEMM (F32, alpha 1, beta 0) through CpuBackend beside np.matmul into the same output."""
    from eidos import isa
    from eidos.isa import Address, LaunchConfig, Type
    from eidos.isa.backends import CpuBackend

    rows = []
    for s in sizes:
        be = CpuBackend()
        a, b, c = (be.allocate_buffer(4 * s * s) for _ in range(3))
        rng = np.random.default_rng(0)
        be.copy_to_buffer(a, rng.standard_normal(s * s, dtype=np.float32))
        be.copy_to_buffer(b, rng.standard_normal(s * s, dtype=np.float32))
        program = isa.ProgramBuilder().add(isa.GEMM(Address.buffer(c), Address.buffer(a), Address.buffer(b), s, s, s,
                                                    1.0, 0.0, Type.F32)).build()
        cfg = LaunchConfig.linear(1)
        be.execute_program(program, cfg)
        A, B, C = (be.memory.buffers[h].view(np.float32).reshape(s, s) for h in (a, b, c))
        number = max(2, 2000 // s)
        lo, med = _best(lambda: be.execute_program(program, cfg), repeats, number)
        nlo, nmed = _best(lambda: np.matmul(A, B, out=C), repeats, number)
        fl = 2 * s ** 3 / 1e9
        rows.append({"n": s, "eidos": (fl / lo, fl / med), "numpy": (fl / nlo, fl / nmed)})
    return rows


_COMPILE_CHILD = r"""
import sys, time, json
t0 = time.perf_counter()
import numpy as np
from eidos import isa
from eidos.isa.backends import CpuBackend
sys.path.insert(0, sys.argv[2])
from isa import _kernel  # bench/isa.py: the reference benchmark's kernel
be = CpuBackend(cache_dir=sys.argv[1])
n = 1024
a, c = be.allocate_buffer(4 * n), be.allocate_buffer(4 * n)
program, _ = _kernel(n, 16)
params = isa.ExecutionParams(isa.LaunchConfig.linear(n), {10: isa.pointer(a), 11: isa.pointer(c)})
t1 = time.perf_counter()
import numba  # noqa: E402  (timed apart: every numba user pays it)
t2 = time.perf_counter()
be.execute_program_with_params(program, params)
t3 = time.perf_counter()
be.execute_program_with_params(program, params)
t4 = time.perf_counter()
print(json.dumps({"imports": t1 - t0, "numba": t2 - t1, "first": t3 - t2, "second": t4 - t3}))
"""


def compile_times(runs: int = 3) -> dict:
    """First-execute time of the 16-instruction register program of reference_ns_per_lane_instruction in a new process: cold (empty cache
    directory: numba compiles the runtime helpers and the program) and warm (a second process on the
    same directory loads both from disk)."""
    import json
    import os
    import subprocess
    import sys
    import tempfile

    out = {"cold": [], "warm": [], "second_call": [], "import_numba": []}
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as d:
            for kind in ("cold", "warm"):
                r = subprocess.run([sys.executable, "-c", _COMPILE_CHILD, d, os.path.dirname(os.path.abspath(__file__))],
                                   capture_output=True, text=True, check=True)
                res = json.loads(r.stdout.strip().splitlines()[-1])
                out[kind].append(res["first"])
                out["import_numba"].append(res["numba"])
                if kind == "warm":
                    out["second_call"].append(res["second"])
    return {k: (min(v), statistics.median(v)) for k, v in out.items()}


def cpu_main() -> None:
    import os

    load = os.getloadavg()[0]
    print(f"\n## compiled CPU backend (load average {load:.1f})")
    bw = bandwidth()
    print(f"memory bandwidth, float32, {bw['threads']} threads (GB/s min-time / median-time):")
    for k in ("numba add", "numba triad", "numpy add"):
        print(f"  {k:12s} {bw[k][0]:6.1f} / {bw[k][1]:6.1f}")
    peak = max(bw["numba add"][0], bw["numba triad"][0])
    print("element-wise programs (GB/s best / median; % of measured bandwidth; vs NumPy best):")
    for r in elementwise():
        print(f"  n={r['n']:>11,} {r['program']:18s} eidos {r['eidos'][0]:6.1f} / {r['eidos'][1]:6.1f} "
              f"({100 * r['eidos'][0] / peak:3.0f}%)  numpy {r['numpy'][0]:6.1f} / {r['numpy'][1]:6.1f}  "
              f"eidos/numpy {r['eidos'][0] / r['numpy'][0]:4.2f}x   [{r['how']}]")
    rp = register_program()
    print(f"register program (LDG, LDG, ADD, STG per lane), {rp['n']:,} lanes: {rp['eidos'][0]:.1f} / {rp['eidos'][1]:.1f} GB/s"
          f" ({100 * rp['eidos'][0] / peak:.0f}% of bandwidth)  [{rp['how']}]")
    co = call_overhead()
    print(f"call overhead, cached 1-instruction program on 1,000 float32: eidos {co['eidos'][0] * 1e6:.2f} / "
          f"{co['eidos'][1] * 1e6:.2f} us, np.add {co['numpy'][0] * 1e6:.2f} / {co['numpy'][1] * 1e6:.2f} us")
    for r in gemm():
        print(f"GEMM F32 {r['n']}^3: eidos {r['eidos'][0]:7.1f} / {r['eidos'][1]:7.1f} GFLOP/s, "
              f"numpy {r['numpy'][0]:7.1f} / {r['numpy'][1]:7.1f}  ({r['eidos'][0] / r['numpy'][0]:.2f}x)")
    ct = compile_times()
    print(f"compile, first execute in a new process: cold {ct['cold'][0]:.2f} / {ct['cold'][1]:.2f} s, "
          f"warm from disk {ct['warm'][0]:.3f} / {ct['warm'][1]:.3f} s, next call {ct['second_call'][0] * 1e3:.2f} ms "
          f"(import numba, apart: {ct['import_numba'][0]:.2f} s)")


def reference_main() -> None:
    r = reference_ns_per_lane_instruction()
    print(f"reference interpreter: {r['min']:.0f} ns min, {r['median']:.0f} ns median wall, {r['cpu_min']:.0f} ns "
          f"CPU per lane-instruction ({r['lanes']} lanes, {r['instructions']} lane-instructions)")


if __name__ == "__main__":
    import sys

    if "--cpu-only" not in sys.argv:
        reference_main()
    if "--reference-only" not in sys.argv:
        cpu_main()
