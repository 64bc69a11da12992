"""eidos.Tensor next to NumPy, in one run: the fused chain, per-operation overhead, matmul.

Run: python bench/tensor.py [--quick]
Reports min and median wall time (and process CPU time) of several runs, and the ratio to NumPy.
Goals (issue 5): the fused chain at least 3x faster than NumPy; per-op overhead on 1,000 elements
within 2x of NumPy eager; matmul at NumPy's speed.
"""

from __future__ import annotations

import os
import platform
import statistics
import sys
import time

import numpy as np


def timeit(fn, repeats: int) -> dict:
    fn()  # warm: compile, caches
    wall, cpu = [], []
    for _ in range(repeats):
        w, c = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - w)
        cpu.append(time.process_time() - c)
    return {"min": min(wall), "median": statistics.median(wall), "cpu_min": min(cpu)}


def per_call(fn, calls: int, repeats: int) -> dict:
    def many():
        for _ in range(calls):
            fn()
    r = timeit(many, repeats)
    return {k: v / calls for k, v in r.items()}


def row(name: str, ours: dict, numpy: dict, unit: float = 1e3, suffix: str = "ms") -> str:
    ratio = numpy["min"] / ours["min"]
    return (f"| {name} | {ours['min'] * unit:.3f} / {ours['median'] * unit:.3f} {suffix} | "
            f"{numpy['min'] * unit:.3f} / {numpy['median'] * unit:.3f} {suffix} | {ratio:.2f}x |")


def main(quick: bool = False) -> None:
    import eidos as ei
    import eidos.tensor as T

    n = 10**6 if quick else 10**7
    reps = 3 if quick else 15  # a shared machine: more runs give the min a chance at a quiet moment
    rng = np.random.default_rng(0)
    x, y = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
    tx, ty = T(x), T(y)
    print(f"# Tensor benchmark: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
          f"Python {platform.python_version()}, NumPy {np.__version__}")
    print("| case | eidos min / median | NumPy min / median | NumPy time / eidos time |")
    print("|---|---|---|---|")
    two, one = np.float32(2), np.float32(1)
    bw = timeit(lambda: np.add(x, y), reps)
    print(f"| (anchor) NumPy add, {n:.0e} float32: {3 * 4 * n / bw['min'] / 1e9:.1f} GB/s | | | |")
    ours = timeit(lambda: float(((tx * 2 + 1).exp() * ty).sum()), reps)
    npy = timeit(lambda: float((np.exp(x * two + one) * y).sum()), reps)
    before = T.programs_executed()
    float(((tx * 2 + 1).exp() * ty).sum())
    progs = T.programs_executed() - before
    print(row(f"((x*2+1).exp()*y).sum(), {n:.0e} float32 ({progs} program)", ours, npy))
    # ei.tensor(array) copies the array (value semantics: NumPy may write it before the graph runs); copy=False
    # shares it. The same chain with the wrapping inside the timed call shows what the copy costs.
    ours = timeit(lambda: float(((T(x) * 2 + 1).exp() * T(y)).sum()), reps)
    print(row(f"the same, T(x) and T(y) inside (ei.tensor copies), {n:.0e} float32", ours, npy))
    if "copy" in T.__call__.__code__.co_varnames:
        ours = timeit(lambda: float(((T(x, copy=False) * 2 + 1).exp() * T(y, copy=False)).sum()), reps)
        print(row(f"the same, T(x, copy=False) and T(y, copy=False) inside (shared), {n:.0e} float32", ours, npy))
    ours = timeit(lambda: float(((tx * 2 + 1) * ty).sum()), reps)
    npy = timeit(lambda: float(((x * two + one) * y).sum()), reps)
    print(row(f"((x*2+1)*y).sum(), {n:.0e} float32 (no transcendental)", ours, npy))
    ours = timeit(lambda: ((tx * 2 + 1) * ty).numpy(), reps)
    npy = timeit(lambda: (x * two + one) * y, reps)
    print(row(f"(x*2+1)*y, {n:.0e} float32 (map form, no reduction)", ours, npy))
    ours = timeit(lambda: float((tx * ty).sum()), reps)
    npy = timeit(lambda: float((x * y).sum()), reps)
    print(row(f"(x*y).sum(), {n:.0e} float32", ours, npy))

    a, b = rng.random(1000, dtype=np.float32), rng.random(1000, dtype=np.float32)
    ta, tb = T(a), T(b)
    calls = 200 if quick else 1000
    npy = per_call(lambda: a + b, calls, reps)

    def eager_adds():  # eager mode entered once: the per-operation cost, not the context manager's
        with ei.eager():
            for _ in range(calls):
                ta + tb
    ours_e = {k: v / calls for k, v in timeit(eager_adds, reps).items()}
    ours_l = per_call(lambda: (ta + tb).numpy(), calls, reps)
    ours_g = per_call(lambda: ta + tb, calls, reps)
    print(row("a + b, 1,000 float32, eager (per op)", ours_e, npy, 1e6, "us"))
    print(row("(a + b).numpy(), 1,000 float32, lazy (per op)", ours_l, npy, 1e6, "us"))
    print(row("a + b, 1,000 float32, graph node only (per op)", ours_g, npy, 1e6, "us"))

    for m in ((512,) if quick else (1024, 2048)):
        A, B = rng.random((m, m), dtype=np.float32), rng.random((m, m), dtype=np.float32)
        tA, tB = T(A), T(B)
        r = 3 if m >= 2048 else reps
        ours = timeit(lambda: (tA @ tB).numpy(), r)
        npy = timeit(lambda: A @ B, r)
        print(row(f"matmul {m}x{m} float32", ours, npy))


if __name__ == "__main__":
    main("--quick" in sys.argv)
