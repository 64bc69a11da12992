"""The Triton kernel target at device bandwidth, and its host cost per launch, in one run.

Run on the GPU machine:  python bench/gpu_isa.py [--log2n 28] [--repeats 5]
Run here (no GPU):       python bench/gpu_isa.py --smoke   (2^12 floats, Triton's interpreter: checks
                         the logic and the answers, its times mean nothing)

Throughput cases, each on 2^log2n float32 elements (2^28: 1 GiB an operand), eidos ISA programs on
TritonBackend next to torch eager and torch.compile, each answer checked against torch's:
- copy:     torch clone, the device-to-device copy bandwidth every fraction is taken of
- add:      z = x + y                                    (ParallelMapBinary)
- fused:    z = (x * 2 + 1).exp() * y                    (one FusedMap; 2 and 1 are scalar operands: registers)
- map+sum:  s = ((x * 2 + 1).exp() * y).sum()           (what the tensor layer emits: a FusedMap into a
            pool, its ParallelReduce and the pool's PoolFree: one kernel that stores nothing)
- x*y+sum:  s = sum(x * y) with the product in a buffer  (FusedMap + ParallelReduce: one kernel; the
            product is stored too, as that ISA program says)
Bandwidth is the bytes each implementation must move (reads + writes of whole operands) over the
min time of `repeats` runs (CUDA events; median printed too); `of copy` is that over the copy's.
The fused and map+sum cases time eidos (graph and no graph) and torch.compile in turns, one sample
of each per round, so a slow stretch of the shared machine does not fall on one of them alone.

Host cost per launch: many launches of a tiny (1024-element) add with no synchronization between
them, wall time / launches: eidos execute_program on a cached program (a CUDA graph replay from its
third run), the same without graphs, a bare @triton.jit launch of an add kernel, and torch.add(out=).
The fused and map+sum cases run with and without graphs too (", no graph": the run before graphs).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time


def setup(smoke: bool) -> str:
    """The interpreter when there is no GPU (set before any kernel is defined)."""
    import torch

    if not torch.cuda.is_available():
        if not smoke:
            sys.exit("no CUDA device: run with --smoke here, or on the GPU machine without it")
        os.environ.setdefault("TRITON_INTERPRET", "1")
        return "Triton interpreter on the CPU (no GPU): times are not meaningful"
    return f"CUDA: {torch.cuda.get_device_name()}"


class Timer:
    """min and median seconds of fn over repeats (CUDA events on a GPU, wall clock otherwise)."""

    def __init__(self, device) -> None:
        import torch

        self.torch, self.cuda = torch, device.type == "cuda"

    def __call__(self, fn, repeats: int) -> tuple[float, float]:
        for _ in range(3):
            fn()  # warm: compile, allocate, capture (a cached program's third run is captured as a CUDA graph)
        self.sync()
        times = [self.once(fn) for _ in range(repeats)]
        return min(times), statistics.median(times)

    def interleaved(self, fns: list, repeats: int) -> list[tuple[float, float]]:
        """(min, median) of each fn, timed in turns (one sample of each per round), so that a slow
        stretch of the shared machine falls on every case alike rather than on whichever ran then."""
        for fn in fns:
            for _ in range(3):
                fn()
        self.sync()
        times: list[list[float]] = [[] for _ in fns]
        for _ in range(repeats):
            for fn, ts in zip(fns, times):
                ts.append(self.once(fn))
        return [(min(ts), statistics.median(ts)) for ts in times]

    def once(self, fn) -> float:
        torch = self.torch
        if not self.cuda:
            t = time.perf_counter()
            fn()
            return time.perf_counter() - t
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        return a.elapsed_time(b) / 1e3

    def sync(self) -> None:
        if self.cuda:
            self.torch.cuda.synchronize()


def programs(n: int, h: dict):
    """The ISA programs of the cases, over buffer handles h (x, y, z, t, out)."""
    from eidos import isa
    from eidos.isa import Address, ReduceOperation, Register, Type
    from eidos.isa import BinaryMapOperation as B
    from eidos.isa import MapOperation as M

    A = {k: Address.buffer(v) for k, v in h.items()}
    add = isa.ProgramBuilder().add(isa.ParallelMapBinary(A["z"], A["x"], A["y"], n, B.Add, Type.F32)).build()
    two, one = Register(1), Register(2)
    fused = isa.ProgramBuilder().add(
        isa.MOV_IMM(two, 2.0, Type.F32), isa.MOV_IMM(one, 1.0, Type.F32),
        isa.ParallelMapBinary(A["z"], A["x"], two, n, B.Mul, Type.F32),
        isa.ParallelMapBinary(A["z"], A["z"], one, n, B.Add, Type.F32),
        isa.ParallelMap(A["z"], A["z"], n, M.Exp, Type.F32),
        isa.ParallelMapBinary(A["z"], A["z"], A["y"], n, B.Mul, Type.F32)).build().optimize()
    dot = isa.ProgramBuilder().add(
        isa.ParallelMapBinary(A["t"], A["x"], A["y"], n, B.Mul, Type.F32),
        isa.ParallelReduce(Register(0), A["t"], n, ReduceOperation.Sum, Type.F32),
        isa.STG(A["out"], Register(0), Type.F32)).build().optimize()
    pool, P = 9, Address.pool(9)
    msum = isa.ProgramBuilder().add(
        isa.MOV_IMM(two, 2.0, Type.F32), isa.MOV_IMM(one, 1.0, Type.F32), isa.PoolAlloc(pool, 4 * n),
        isa.FusedMap(n, (isa.MapStep(P, B.Mul, A["x"], two), isa.MapStep(P, B.Add, P, one),
                         isa.MapStep(P, M.Exp, P), isa.MapStep(P, B.Mul, P, A["y"])), Type.F32),
        isa.ParallelReduce(Register(0), P, n, ReduceOperation.Sum, Type.F32), isa.PoolFree(pool),
        isa.STG(A["out"], Register(0), Type.F32)).build()
    return add, fused, dot, msum


def throughput(n: int, repeats: int, smoke: bool) -> tuple[list, dict]:
    import torch

    from eidos.isa import LaunchConfig
    from eidos.isa.backends.triton import TritonBackend

    be = TritonBackend()
    dev = be.device
    timer = Timer(dev)
    gen = torch.Generator(device="cpu").manual_seed(0)
    x = (torch.rand(n, generator=gen) * 2 - 1).to(dev)
    y = (torch.rand(n, generator=gen) * 2 - 1).to(dev)
    z, t = torch.empty_like(x), torch.empty_like(x)
    out = torch.zeros(1, device=dev)
    h = {"x": be.adopt(x), "y": be.adopt(y), "z": be.adopt(z), "t": be.adopt(t), "out": be.adopt(out)}
    add, fused, dot, msum = programs(n, h)
    cfg = LaunchConfig.linear(1)
    nb = n * 4
    rows, checks = [], {}

    def compiled(f):
        if smoke:
            return None  # torch.compile on the CPU needs a C++ toolchain and minutes; not a GPU figure
        return torch.compile(f)

    copy_min, copy_med = timer(lambda: x.clone(), repeats)
    copy_bw = 2 * nb / copy_min
    rows.append(("copy (torch clone)", 2 * nb, copy_min, copy_med, copy_bw))

    def case(name, bytes_moved, fn):
        if fn is None:
            rows.append((name, bytes_moved, None, None, None))
            return
        lo, med = timer(fn, repeats)
        rows.append((name, bytes_moved, lo, med, bytes_moved / lo))

    f_add = lambda a, b: a + b  # noqa: E731
    f_fused = lambda a, b: (a * 2 + 1).exp() * b  # noqa: E731
    f_dot = lambda a, b: (a * b).sum()  # noqa: E731
    c_add, c_fused, c_dot = compiled(f_add), compiled(f_fused), compiled(f_dot)

    case("add: eidos", 3 * nb, lambda: be.execute_program(add, cfg))
    checks["add"] = torch.equal(z, x + y)
    case("add: torch eager", 3 * nb, lambda: torch.add(x, y, out=t))
    case("add: torch.compile", 3 * nb, None if c_add is None else lambda: c_add(x, y))

    plain = TritonBackend()   # the same programs run step by step (no CUDA graph), for the before/after
    plain.graphs = False
    ph = {"x": plain.adopt(x), "y": plain.adopt(y), "z": plain.adopt(z), "t": plain.adopt(t), "out": plain.adopt(out)}
    _, p_fused, _, p_msum = programs(n, ph)
    def turns(names_bytes_fns):
        """Cases compared with each other, timed in turns (Timer.interleaved)."""
        live = [(n, b, f) for n, b, f in names_bytes_fns if f is not None]
        for (name, moved, _), (lo, med) in zip(live, timer.interleaved([f for _, _, f in live], repeats)):
            rows.append((name, moved, lo, med, moved / lo))

    turns([("fused: eidos, no graph", 3 * nb, lambda: plain.execute_program(p_fused, cfg)),
           ("fused: eidos", 3 * nb, lambda: be.execute_program(fused, cfg)),
           ("fused: torch.compile", 3 * nb, None if c_fused is None else lambda: c_fused(x, y))])
    ref = f_fused(x, y)
    checks["fused"] = bool(torch.allclose(z, ref, rtol=1e-5, atol=1e-6))
    case("fused: torch eager", 9 * nb, lambda: f_fused(x, y))

    f_msum = lambda a, b: ((a * 2 + 1).exp() * b).sum()  # noqa: E731
    c_msum = compiled(f_msum)
    turns([("map+sum: eidos, no graph", 2 * nb, lambda: plain.execute_program(p_msum, cfg)),
           ("map+sum: eidos (stores nothing)", 2 * nb, lambda: be.execute_program(msum, cfg)),
           ("map+sum: torch.compile", 2 * nb, None if c_msum is None else lambda: c_msum(x, y))])
    want = float(((x.double() * 2 + 1).exp() * y.double()).sum())
    checks["map+sum"] = abs(float(out) - want) <= 1e-4 * max(1.0, abs(want))
    case("map+sum: torch eager", 10 * nb, lambda: f_msum(x, y))

    case("x*y+sum: eidos (stores x*y)", 3 * nb, lambda: be.execute_program(dot, cfg))
    want = float((x.double() * y.double()).sum())
    checks["x*y+sum"] = abs(float(out) - want) <= 1e-4 * max(1.0, abs(want)) and torch.equal(t, x * y)
    case("x*y+sum: torch eager", 4 * nb, lambda: f_dot(x, y))
    case("x*y+sum: torch.compile", 2 * nb, None if c_dot is None else lambda: c_dot(x, y))
    return rows, {"copy_bw": copy_bw, "checks": checks, "backend": be}


def host_cost(launches: int) -> list:
    """Seconds of host time per launch of a tiny add: eidos (cached program), bare Triton, torch."""
    import torch
    import triton
    import triton.language as tl

    from eidos.isa import Address, BinaryMapOperation, LaunchConfig, ParallelMapBinary, ProgramBuilder, Type
    from eidos.isa.backends.triton import TritonBackend

    be = TritonBackend()
    dev = be.device
    n = 1024
    x, y, z = (torch.rand(n, device=dev) for _ in range(3))
    hx, hy, hz = be.adopt(x), be.adopt(y), be.adopt(z)
    p = ProgramBuilder().add(ParallelMapBinary(Address.buffer(hz), Address.buffer(hx), Address.buffer(hy), n,
                                               BinaryMapOperation.Add, Type.F32)).build()
    cfg = LaunchConfig.linear(1)

    @triton.jit
    def bare_add(a, b, c, m, BLOCK: tl.constexpr):
        i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(c + i, tl.load(a + i, mask=i < m) + tl.load(b + i, mask=i < m), mask=i < m)

    plain = TritonBackend()
    plain.graphs = False
    pp = ProgramBuilder().add(ParallelMapBinary(Address.buffer(plain.adopt(z)), Address.buffer(plain.adopt(x)),
                                                Address.buffer(plain.adopt(y)), n, BinaryMapOperation.Add,
                                                Type.F32)).build()
    cases = [("eidos execute_program (cached)", lambda: be.execute_program(p, cfg)),
             ("eidos, no graph", lambda: plain.execute_program(pp, cfg)),
             ("bare Triton kernel launch", lambda: bare_add[(1,)](x, y, z, n, BLOCK=1024)),
             ("torch.add(out=)", lambda: torch.add(x, y, out=z))]
    rows = []
    for name, fn in cases:
        for _ in range(3):
            fn()  # compile, cache
        be.synchronize()
        best = []
        for _ in range(5):
            t = time.perf_counter()
            for _ in range(launches):
                fn()
            be.synchronize()
            best.append((time.perf_counter() - t) / launches)
        rows.append((name, min(best), statistics.median(best)))
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--log2n", type=int, default=28, help="elements per operand, as a power of two (28: 1 GiB)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--launches", type=int, default=2000, help="launches per host-cost sample")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes under Triton's interpreter (no GPU)")
    args = ap.parse_args(argv)
    if args.smoke:
        args.log2n, args.repeats, args.launches = min(args.log2n, 12), 2, 3
    where = setup(args.smoke)
    n = 1 << args.log2n
    rows, info = throughput(n, args.repeats, args.smoke)
    print(f"# eidos ISA on the Triton target: {where}; n = 2^{args.log2n} float32 "
          f"({n * 4 / 2**30:.3g} GiB an operand); min and median of {args.repeats} runs (a shared machine)")
    print(f"{'case':34} {'GiB moved':>9} {'min ms':>9} {'median ms':>9} {'GB/s':>8} {'of copy':>7}")
    for name, moved, lo, med, bw in rows:
        if lo is None:
            print(f"{name:34} {moved / 2**30:9.3f} {'n/a':>9} {'n/a':>9} {'n/a':>8} {'n/a':>7}")
        else:
            print(f"{name:34} {moved / 2**30:9.3f} {lo * 1e3:9.3f} {med * 1e3:9.3f} {bw / 1e9:8.1f} "
                  f"{bw / info['copy_bw']:7.2f}")
    print(f"answers equal torch's: {info['checks']}")
    print(f"\n# host cost per launch (tiny add, {args.launches} launches a sample, min and median of 5)")
    for name, lo, med in host_cost(args.launches):
        print(f"{name:34} {lo * 1e6:9.1f} us {med * 1e6:9.1f} us")
    if not all(info["checks"].values()):
        print("ANSWERS DIFFER", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
