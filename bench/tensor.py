"""eidos.Tensor next to NumPy, in one run: the fused chain, per-operation overhead, matmul.

Run: python bench/tensor.py [--quick] [--cold-start] [--suite]
Reports min and median wall time (and process CPU time) of several runs, and the ratios to NumPy and to torch eager on
the CPU (torch.from_numpy of the same arrays; its columns read n/a without torch).
Goals (issue 5): the fused chain at least 3x faster than NumPy; matmul at NumPy's speed; (issue 17) an eager small
operation (a + b on 1,000 float32) within 1.5x of NumPy's time.
--cold-start (issue 18): the first call of each operation in a fresh process, with an empty kernel cache (cold:
numba compiles) and a warm one (goal: under 1 ms), NumPy's first calls beside them; only this section runs.
--suite (issue 18): the Array API test suite (../shared/array-api-tests, --max-examples 5, one seed) on
array-api-strict, NumPy and eidos.array_api (cold cache, then warm), with the machine's load; minutes.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

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


def interleaved(cases: dict, repeats: int) -> dict:
    """timeit of each case, their runs taken in turn (a shared machine's load falls on each alike)."""
    for fn in cases.values():
        fn()
    wall = {k: [] for k in cases}
    cpu = {k: [] for k in cases}
    for _ in range(repeats):
        for k, fn in cases.items():
            w, c = time.perf_counter(), time.process_time()
            fn()
            wall[k].append(time.perf_counter() - w)
            cpu[k].append(time.process_time() - c)
    return {k: {"min": min(wall[k]), "median": statistics.median(wall[k]), "cpu_min": min(cpu[k])} for k in cases}


def row(name: str, ours: dict, numpy: dict, torch: dict | None = None, unit: float = 1e3, suffix: str = "ms") -> str:
    def cell(r):
        return "n/a" if r is None else f"{r['min'] * unit:.3f} / {r['median'] * unit:.3f} {suffix}"
    vs_torch = "n/a" if torch is None else f"{torch['min'] / ours['min']:.2f}x"
    return (f"| {name} | {cell(ours)} | {cell(numpy)} | {cell(torch)} | {numpy['min'] / ours['min']:.2f}x | "
            f"{vs_torch} |")


def _torch():
    """torch on the CPU (eager, its default threads), or None where it is not installed."""
    try:
        import torch
    except ImportError:
        return None
    return torch


def main(quick: bool = False) -> None:
    import eidos as ei
    import eidos.tensor as T

    torch = _torch()
    n = 10**6 if quick else 10**7
    reps = 3 if quick else 15  # a shared machine: more runs give the min a chance at a quiet moment
    rng = np.random.default_rng(0)
    x, y = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
    tx, ty = T(x), T(y)
    xt, yt = (torch.from_numpy(x), torch.from_numpy(y)) if torch else (None, None)

    def tt(fn, r=reps):   # torch's time, or None without torch
        return None if torch is None else timeit(fn, r)
    print(f"# Tensor benchmark: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
          f"Python {platform.python_version()}, NumPy {np.__version__}, "
          f"torch {torch.__version__ + f' (CPU, eager, {torch.get_num_threads()} threads)' if torch else 'not installed'}"
          f"; {_load()}")
    print("| case | eidos min / median | NumPy min / median | torch min / median | NumPy time / eidos time | "
          "torch time / eidos time |")
    print("|---|---|---|---|---|---|")
    two, one = np.float32(2), np.float32(1)
    bw = timeit(lambda: np.add(x, y), reps)
    print(f"| (anchor) NumPy add, {n:.0e} float32: {3 * 4 * n / bw['min'] / 1e9:.1f} GB/s | | | | | |")
    ours = timeit(lambda: float(((tx * 2 + 1).exp() * ty).sum()), reps)
    npy = timeit(lambda: float((np.exp(x * two + one) * y).sum()), reps)
    tor = tt(lambda: float(((xt * 2 + 1).exp() * yt).sum()))
    before = T.programs_executed()
    float(((tx * 2 + 1).exp() * ty).sum())
    progs = T.programs_executed() - before
    print(row(f"((x*2+1).exp()*y).sum(), {n:.0e} float32 ({progs} program)", ours, npy, tor))
    # ei.tensor(array) copies the array (value semantics: NumPy may write it before the graph runs); copy=False
    # shares it. The same chain with the wrapping inside the timed call shows what the copy costs; torch's beside
    # them: torch.tensor copies, torch.from_numpy shares.
    ours = timeit(lambda: float(((T(x) * 2 + 1).exp() * T(y)).sum()), reps)
    tor = tt(lambda: float(((torch.tensor(x) * 2 + 1).exp() * torch.tensor(y)).sum()))
    print(row(f"the same, T(x) and T(y) inside (ei.tensor copies; torch.tensor), {n:.0e} float32", ours, npy, tor))
    if "copy" in T.__call__.__code__.co_varnames:
        ours = timeit(lambda: float(((T(x, copy=False) * 2 + 1).exp() * T(y, copy=False)).sum()), reps)
        tor = tt(lambda: float(((torch.from_numpy(x) * 2 + 1).exp() * torch.from_numpy(y)).sum()))
        print(row(f"the same, T(x, copy=False) and T(y, copy=False) inside (shared; torch.from_numpy), {n:.0e} "
                  "float32", ours, npy, tor))
    ours = timeit(lambda: float(((tx * 2 + 1) * ty).sum()), reps)
    npy = timeit(lambda: float(((x * two + one) * y).sum()), reps)
    tor = tt(lambda: float(((xt * 2 + 1) * yt).sum()))
    print(row(f"((x*2+1)*y).sum(), {n:.0e} float32 (no transcendental)", ours, npy, tor))
    ours = timeit(lambda: ((tx * 2 + 1) * ty).numpy(), reps)
    npy = timeit(lambda: (x * two + one) * y, reps)
    tor = tt(lambda: ((xt * 2 + 1) * yt).numpy())
    print(row(f"(x*2+1)*y, {n:.0e} float32 (map form, no reduction)", ours, npy, tor))
    ours = timeit(lambda: float((tx * ty).sum()), reps)
    npy = timeit(lambda: float((x * y).sum()), reps)
    tor = tt(lambda: float((xt * yt).sum()))
    print(row(f"(x*y).sum(), {n:.0e} float32", ours, npy, tor))

    a, b = rng.random(1000, dtype=np.float32), rng.random(1000, dtype=np.float32)
    ta, tb = T(a), T(b)
    at, bt = (torch.from_numpy(a), torch.from_numpy(b)) if torch else (None, None)
    calls = 200 if quick else 1000

    def many(fn):
        def run():
            for _ in range(calls):
                fn()
        return run

    def eager_adds():  # eager mode entered once: the per-operation cost, not the context manager's
        with ei.eager():
            for _ in range(calls):
                ta + tb
    cases = {"numpy": many(lambda: a + b), "eager": eager_adds, "lazy": many(lambda: (ta + tb).numpy()),
             "graph": many(lambda: ta + tb)}
    if torch is not None:
        cases.update(torch=many(lambda: at + bt), torch_numpy=many(lambda: (at + bt).numpy()))
    got = interleaved(cases, reps * 4)   # short runs: more of them
    got = {k: {m: v / calls for m, v in r.items()} for k, r in got.items()}
    small, ours_e, ours_l, ours_g = got["numpy"], got["eager"], got["lazy"], got["graph"]
    tor_e, tor_l = got.get("torch"), got.get("torch_numpy")
    print(row("a + b, 1,000 float32, eager (per op)", ours_e, small, tor_e, 1e6, "us"))
    print(row("(a + b).numpy(), 1,000 float32, lazy (per op; torch: eager, then .numpy())", ours_l, small, tor_l, 1e6,
              "us"))
    print(row("a + b, 1,000 float32, graph node only (per op; torch: its eager op)", ours_g, small, tor_e, 1e6, "us"))

    for m in ((512,) if quick else (1024, 2048)):
        A, B = rng.random((m, m), dtype=np.float32), rng.random((m, m), dtype=np.float32)
        tA, tB = T(A), T(B)
        r = 3 if m >= 2048 else reps
        ours = timeit(lambda: (tA @ tB).numpy(), r)
        npy = timeit(lambda: A @ B, r)
        tor = None if torch is None else timeit(lambda: (torch.from_numpy(A) @ torch.from_numpy(B)).numpy(), r)
        print(row(f"matmul {m}x{m} float32", ours, npy, tor))
    # the small op on process CPU time as well: on a shared machine the wall-clock minimum of a 1 us call waits for
    # a core; CPU time does not count the wait
    cpu = [f"{what} {r['cpu_min'] * 1e6:.3f} us" for what, r in (("eidos", ours_e), ("NumPy", small), ("torch", tor_e))
           if r is not None]
    print(f"\nEager a + b, 1,000 float32, process CPU time min per op: {', '.join(cpu)}; eidos time / NumPy time: "
          f"{ours_e['min'] / small['min']:.2f}x wall, {ours_e['cpu_min'] / small['cpu_min']:.2f}x CPU (goal 1.5x); "
          f"{_load()}")


# ---- cold start (issue 18) ---------------------------------------------------------------------------------

ROOT = Path(__file__).resolve().parent.parent
# One fresh process: each case's first call, in ms (the process's first tensor operation also pays the imports and
# backend selection every later one reuses, so it is shown apart).
FIRST_CALLS = r"""
import json, sys, time
import numpy as np
t = time.perf_counter()
import eidos as ei
import eidos.tensor as T
out = {"import eidos": time.perf_counter() - t}
rng = np.random.default_rng(0)
a32, b32 = rng.random(1000, dtype=np.float32), rng.random(1000, dtype=np.float32)
a64, i64 = rng.random(1000), rng.integers(0, 100, 1000)
ta, tb, tc, ti = T(a32), T(b32), T(a64), T(i64)
cases = [("process's first op: (a + b).numpy(), float32", lambda: (ta + tb).numpy()),
         ("(a * b).numpy(), float32", lambda: (ta * tb).numpy()), ("(a - b).numpy(), float32", lambda: (ta - tb).numpy()),
         ("(c + c).numpy(), float64", lambda: (tc + tc).numpy()), ("(i + i).numpy(), int64", lambda: (ti + ti).numpy()),
         ("a.exp().numpy(), float32", lambda: ta.exp().numpy()), ("c.sqrt().numpy(), float64", lambda: tc.sqrt().numpy()),
         ("float(a.sum()), float32 (reduction)", lambda: float(ta.sum()))]
if sys.argv[1] == "numpy":
    cases = [(n, f) for n, f in zip([c[0] for c in cases], [lambda: a32 + b32, lambda: a32 * b32, lambda: a32 - b32,
             lambda: a64 + a64, lambda: i64 + i64, lambda: np.exp(a32), lambda: np.sqrt(a64), lambda: float(a32.sum())])]
for name, f in cases:
    if "reduction" in name:
        out["numba imported"] = "numba" in sys.modules   # by the element-wise calls before the reduction
    t = time.perf_counter()
    f()
    out[name] = time.perf_counter() - t
print(json.dumps(out))
"""


def _child(kind: str, cache: str, warm_build: bool = False) -> dict:
    env = dict(os.environ, EIDOS_CACHE_DIR=cache, EIDOS_CACHE_WARM="1" if warm_build else "0",
               PYTHONPATH=str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("PYTHONDONTWRITEBYTECODE", None)   # a user's install has its bytecode: measure compiles, not parsing
    done = subprocess.run([sys.executable, "-c", FIRST_CALLS, kind], env=env, capture_output=True, text=True,
                          check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def _wait_build(cache: str, timeout: float = 600) -> None:
    end = time.time() + timeout
    while time.time() < end and list(Path(cache).glob("isa-cpu/*/native/.lock-build")):
        time.sleep(1)


def cold_start(runs: int = 5) -> None:
    """The first call of each operation in fresh processes: cold (empty cache), then warm (after one process
    filled it and the ahead-of-time build finished), NumPy's first calls beside them."""
    print(f"\n# Cold start: first call per operation in a fresh process (ms; load {_load()})")
    cache = tempfile.mkdtemp(prefix="eidos-bench-cache-")
    try:
        _child("eidos", cache)                  # bytecode of eidos's own modules written (not what is measured)
        shutil.rmtree(cache)
        cold = _child("eidos", cache, warm_build=True)   # numba compiles; starts the ahead-of-time build
        _wait_build(cache)
        _child("eidos", cache)
        warm = [_child("eidos", cache) for _ in range(runs)]
        npy = [_child("numpy", cache) for _ in range(runs)]
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    print(f"| case | eidos cold cache | eidos warm cache min / median ({runs} processes) | NumPy min / median |")
    print("|---|---|---|---|")
    for name in cold:
        if name == "numba imported":
            continue
        w = [r[name] * 1e3 for r in warm]
        n = [r[name] * 1e3 for r in npy] if name in npy[0] else [float("nan")]
        print(f"| {name} | {cold[name] * 1e3:.3f} | {min(w):.3f} / {statistics.median(w):.3f} | "
              f"{min(n):.3f} / {statistics.median(n):.3f} |")
    print(f"| numba imported by the element-wise calls | {cold['numba imported']} | {warm[0]['numba imported']} | |")


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"{os.cpu_count()} CPUs, load average {one:.2f} (1 min) {five:.2f} (5 min)"


# the pinned suite beside the project (../shared/array-api-tests; from a worktree under wt/, ../../shared), or
# $EIDOS_ARRAY_API_TESTS
SUITE = next((p for p in (Path(os.environ.get("EIDOS_ARRAY_API_TESTS", "")), ROOT.parent / "shared" / "array-api-tests",
                          ROOT.parent.parent / "shared" / "array-api-tests") if str(p) != "." and p.is_dir()),
             ROOT.parent / "shared" / "array-api-tests")


def suite(seed: int = 0) -> None:
    """The Array API suite, pinned (SUITE/PINNED.md), --max-examples 5 and one seed, on each namespace in turn;
    eidos twice, with an empty kernel cache and then with the one its first run left."""
    if not SUITE.is_dir():
        print(f"\n# Array API suite: not found at {SUITE} (see PINNED.md there)")
        return
    print(f"\n# Array API suite ({SUITE.name}, --max-examples 5, --hypothesis-seed {seed}); start: {_load()}")
    print("| namespace | result | wall time | load average (1 min) after |")
    print("|---|---|---|---|")
    work = Path(tempfile.mkdtemp(prefix="eidos-suite-"))
    cache = str(work / "cache")
    try:
        shutil.copytree(SUITE, work / "suite", ignore=shutil.ignore_patterns(".git", ".hypothesis"))
        for label, module, fresh in (("array_api_strict", "array_api_strict", False), ("numpy", "numpy", False),
                                     ("eidos.array_api, cold cache", "eidos.array_api", True),
                                     ("eidos.array_api, warm cache", "eidos.array_api", False)):
            if fresh:
                shutil.rmtree(cache, ignore_errors=True)
            env = dict(os.environ, ARRAY_API_TESTS_MODULE=module, EIDOS_CACHE_DIR=cache, EIDOS_CACHE_WARM="1",
                       PYTHONPATH=str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""))
            t = time.perf_counter()
            done = subprocess.run([sys.executable, "-m", "pytest", "array_api_tests", "-q", "--max-examples", "5",
                                   f"--hypothesis-seed={seed}", "-p", "no:cacheprovider"],
                                  cwd=work / "suite", env=env, capture_output=True, text=True)
            wall = time.perf_counter() - t
            last = (done.stdout.strip().splitlines() or ["(no output)"])[-1].strip("= ")
            print(f"| {label} | {last} | {wall:.1f} s | {os.getloadavg()[0]:.2f} |", flush=True)
            _wait_build(cache)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    if "--cold-start" in sys.argv:
        cold_start()
    if "--suite" in sys.argv:
        suite()
    if "--cold-start" not in sys.argv and "--suite" not in sys.argv:
        main("--quick" in sys.argv)
