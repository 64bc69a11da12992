"""ISA programs and sharded tensors across GPUs, beside torch.distributed and one GPU, in one run.

    python bench/multigpu.py                 # on a host with 2 GPUs (after bench/gpu_setup.sh)
    python bench/multigpu.py --ranks 4       # 1 GPU against 4 (any N the host has)
    python bench/multigpu.py --quick         # gloo between 2 CPU processes, tiny sizes: a smoke check

Measures, with one process per GPU (eidos.isa.distributed.Ranks over NCCL):
- all-reduce bus bandwidth (float32 Sum) at 1 MiB, 64 MiB and 1 GiB: eidos's AllReduce instruction run by
  each rank's triton target, beside torch.distributed.all_reduce on a tensor of the same size, in the same
  processes, rounds interleaved; bus bandwidth = bytes * 2 (N - 1) / N / time, as nccl-tests counts it;
- a data-parallel map+sum of n float32 (sum(abs(2 x))): a Split (one ISA program per rank, the partials
  combined by AllReduce) and a sharded tensor chain, on 1 and on N GPUs (2 unless --ranks), beside torch on one GPU;
- a model-parallel bf16 GEMM, A (rows sharded) @ B (replicated), the result kept sharded, and then gathered
  by AllGather, on 1 and on N GPUs, beside torch.matmul (cuBLAS) on one GPU.
Times are taken in the driver (what a caller waits for) except the all-reduce, timed inside each rank
(the slowest rank's time per sample); min and median of the samples. The limits: NVLink between the two
GPUs (KINDS.md: NCCL's all-reduce of 1 GiB at about 329 GB/s on 2 H100s), HBM bandwidth for the map+sum
(about 3.35 TB/s per H100), the matrix units for the GEMM (about 780 TFLOP/s measured per H100 in bf16).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("NCCL_NVLS_ENABLE", "0")   # NVLink multicast stays off (the host's GPUs are shared)
os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
os.environ.setdefault("NVSHMEM_DISABLE_NVLS", "1")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

import numpy as np  # noqa: E402

MiB = 1 << 20


def _sync(rank):
    if rank.device == "gpu":
        import torch

        torch.cuda.synchronize()


def _all_reduce(rank, nbytes, samples, iters):
    """Per-sample seconds per all-reduce on this rank: eidos's AllReduce program, torch's all_reduce."""
    import torch
    import torch.distributed as dist

    from eidos.isa import Address, LaunchConfig, ProgramBuilder, ReduceOperation, Type
    from eidos.isa import instructions as I

    t, n = rank.target, nbytes // 4
    h = t.allocate_typed(n, Type.F32)
    prog = ProgramBuilder().add(I.AllReduce(Address.buffer(h), n, ReduceOperation.Sum, ty=Type.F32)).build()
    cfg = LaunchConfig.linear(1)
    x = torch.zeros(n, device="cuda" if rank.device == "gpu" else "cpu")
    ways = {"eidos": lambda: t.execute_program(prog, cfg), "torch": lambda: dist.all_reduce(x)}
    got = {k: [] for k in ways}
    for f in ways.values():   # warm-up: plans, NCCL channels
        f()
        f()
    for _ in range(samples):
        for k, f in ways.items():
            dist.barrier()
            _sync(rank)
            t0 = time.perf_counter()
            for _ in range(iters):
                f()
            _sync(rank)
            got[k].append((time.perf_counter() - t0) / iters)
    t.free_buffer(h)
    return got


def stats(xs):
    return min(xs), statistics.median(xs)


def timed(f, samples, warm=2):
    """(min, median) seconds of f(); what f returns (Sharded results, a list of them) is freed untimed."""
    out = []
    for i in range(warm + samples):
        t0 = time.perf_counter()
        made = f()
        took = time.perf_counter() - t0
        if i >= warm:
            out.append(took)
        for m in made if isinstance(made, list) else [made] if hasattr(made, "free") else []:
            m.free()
    return stats(out)


def _fill_f32(rank, shape):
    import torch

    g = torch.Generator(device="cuda" if rank.device == "gpu" else "cpu").manual_seed(rank.rank)
    return torch.randn(shape, generator=g, device=g.device) if rank.device == "gpu" else \
        torch.randn(shape, generator=g).numpy()


def _fill_bf16(rank, shape):
    import torch

    dev = "cuda" if rank.device == "gpu" else "cpu"
    x = torch.randn(shape, device=dev, generator=torch.Generator(device=dev).manual_seed(rank.rank + 7))
    return x.to(torch.bfloat16) if rank.device == "gpu" else x.numpy().astype("float32")


def _split_fill(start, count):
    """The same element i however the buffer is split (float32 arange rounds by where it starts)."""
    return ((np.arange(start, start + count, dtype=np.int64) % 1000 - 500) / 256).astype(np.float32)


def _noop(rank):
    return None


def _clocked(rank, fn, *args):
    """(start, end) of fn(rank, *args) on this host's monotonic clock, which the processes share; fn
    ends by reading its result back, so the device's work is inside."""
    t0 = time.perf_counter()
    fn(rank, *args)
    return t0, time.perf_counter()


def _profiled(rank, fn, args, calls):
    """Rank 0's profiles of `calls` runs of fn(rank, *args): cProfile's host functions by own time, and
    on a GPU torch.profiler's kernels and copies by device time (every rank runs them: collectives)."""
    import cProfile
    import io
    import pstats

    pr = cProfile.Profile()
    pr.enable()
    for _ in range(calls):
        fn(rank, *args)
    pr.disable()
    text = io.StringIO()
    pstats.Stats(pr, stream=text).sort_stats("tottime").print_stats(22)
    host = "\n".join(line for line in text.getvalue().splitlines() if line.strip())
    device = ""
    if rank.device == "gpu":
        import torch
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(calls):
                fn(rank, *args)
        avg = prof.key_averages()
        for key in ("device_time_total", "cuda_time_total", "self_cpu_time_total"):
            try:
                device = avg.table(sort_by=key, row_limit=14, max_name_column_width=60)
                break
            except (AttributeError, KeyError, ValueError):
                continue
        torch.cuda.synchronize()
    return (host, device) if rank.rank == 0 else None


def timeline(ranks, fn, args, samples, warm=2):
    """Where a call's time goes, medians over samples, ms: the driver's whole call; until the first rank
    starts fn (the message out); between the first and the last rank starting (the skew the collective
    waits for); each rank's fn (its work, device included); from the last rank's end to the driver
    having every answer (the messages back)."""
    rows = []
    for i in range(warm + samples):
        t0 = time.perf_counter()
        got = ranks.run(_clocked, fn, *args)
        t1 = time.perf_counter()
        if i >= warm:
            starts, ends = [g[0] for g in got], [g[1] for g in got]
            rows.append((t1 - t0, min(starts) - t0, max(starts) - min(starts),
                         [e - b for b, e in got], t1 - max(ends)))
    med = statistics.median
    return {"call": med(r[0] for r in rows) * 1e3, "out": med(r[1] for r in rows) * 1e3,
            "skew": med(r[2] for r in rows) * 1e3,
            "work": [round(med(r[3][k] for r in rows) * 1e3, 3) for k in range(ranks.size)],
            "back": med(r[4] for r in rows) * 1e3}


def torch_baselines(n, m, k, nn, samples, gpu):
    """One GPU through torch: the map+sum and the bf16 GEMM (cuBLAS)."""
    import torch

    dev = "cuda" if gpu else "cpu"
    x = torch.randn(n, device=dev)
    a = torch.randn(m, k, device=dev).to(torch.bfloat16 if gpu else torch.float32)
    b = torch.randn(k, nn, device=dev).to(a.dtype)

    def sync():
        if gpu:
            torch.cuda.synchronize()

    def map_sum():
        (2 * x).abs().sum().item()

    def gemm():
        torch.matmul(a, b)
        sync()
    return timed(map_sum, samples), timed(gemm, samples)


def run_ranks(size, backend, args, sizes, n, m, k, nn):
    from eidos.isa import BinaryMapOperation as B
    from eidos.isa import MapOperation as M
    from eidos.isa import Type
    from eidos.isa.distributed import Ranks, Split
    from eidos.tensor.sharded import make

    out = {}
    t0 = time.perf_counter()
    with Ranks(size, backend, spin_s=args.spin) as ranks:
        out["start_s"] = time.perf_counter() - t0

        def section(name, f):   # one failing section is reported, and the others still run
            before = set(out)
            try:
                f()
            except Exception as e:  # noqa: BLE001
                out.setdefault("errors", []).append(f"{size} rank(s), {name}: {type(e).__name__}: {e}"[:2000])
            for key in set(out) - before:   # as it goes, in case the run is cut short
                print(f"  [{size} rank(s)] {key}: {out[key]}", flush=True)

        def all_reduce():
            for nbytes in sizes:
                iters = 20 if nbytes <= 64 * MiB else 5
                got = ranks.run(_all_reduce, nbytes, args.samples, iters)
                for way in ("eidos", "torch"):
                    per = [max(r[way][i] for r in got) for i in range(args.samples)]
                    out[("allreduce", nbytes, way)] = stats(per)

        def split_map_sum():
            split = Split.generate(ranks, n, Type.F32, _split_fill)
            out["split_map_sum"] = timed(lambda: split.sum(M.Abs, (B.Mul, 2.0)), args.samples)
            out["split_value"] = float(split.sum(M.Abs, (B.Mul, 2.0)))
            split.free()

        def tensor_map_sum():
            x = make(ranks, (n,), "float32", 0, _fill_f32)
            def chain():
                y = x * 2.0
                z = y.abs()
                z.sum()
                return [y, z]
            out["tensor_map_sum"] = timed(chain, args.samples)
            x.free()

        def gemm():
            dtype = "bfloat16" if backend == "nccl" else "float32"
            a = make(ranks, (m, k), dtype, 0, _fill_bf16)
            b = make(ranks, (k, nn), dtype, None, _fill_bf16)
            a.realize()
            b.realize()
            out["gemm"] = timed(lambda: (a @ b).realize(), args.samples)

            def gathered():
                c = a @ b
                return [c, c.gather().realize()]
            out["gemm_gather"] = timed(gathered, args.samples)

        def breakdown():
            from eidos.isa import ReduceOperation
            from eidos.isa.distributed import executor as E
            from eidos.tensor import sharded as S

            out["round_trip_noop"] = timed(lambda: ranks.run(_noop) and None, 50)
            split = Split.generate(ranks, n, Type.F32, _split_fill)
            x = make(ranks, (n,), "float32", 0, _fill_f32)
            forms = {"split": (E._program, (split.key, None, E._steps((M.Abs, (B.Mul, 2.0))),
                                            ReduceOperation.Sum, "F32")),
                     "chain": (S._then, ([("bd-y", "mul", [("s", x.key), ("v", 2.0)]),
                                          ("bd-z", "abs", [("s", "bd-y")])], S._reduce, ("bd-z", "sum", False)))}
            for name, (fn, a) in forms.items():
                out[f"timeline_{name}"] = timeline(ranks, fn, a, args.samples)
                host, device = ranks.run(_profiled, fn, a, 5)[0]
                print(f"  [{size} rank(s)] {name}: rank 0's host profile, 5 calls\n{host}\n{device}", flush=True)
            ranks.run(S._free, "bd-y")
            ranks.run(S._free, "bd-z")
            split.free()
            x.free()

        for name, f in (("all-reduce", all_reduce), ("Split map+sum", split_map_sum),
                        ("tensor map+sum", tensor_map_sum), ("GEMM", gemm), ("breakdown", breakdown)):
            if name.split()[0].lower() in args.sections and (size > 1 or name != "all-reduce"):
                section(name, f)
    return out


def scaling(name, o, w, size, rate) -> None:
    print(f"  {name:<22} 1 rank {o[0] * 1e3:8.2f} ({o[1] * 1e3:8.2f})  {size} ranks {w[0] * 1e3:8.2f} "
          f"({w[1] * 1e3:8.2f})  speed-up {o[0] / w[0]:.2f}x  ({rate})")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="gloo between CPU processes, tiny sizes")
    ap.add_argument("--samples", type=int, default=None)
    ap.add_argument("--breakdown", action="store_true",
                    help="also where a map+sum call's time goes: the round trip, each rank's work, profiles")
    ap.add_argument("--sections", default="all-reduce,split,tensor,gemm",
                    help="which to run, comma-separated: all-reduce, split, tensor, gemm (default: all)")
    ap.add_argument("--map-log2", type=int, default=30,
                    help="the map+sum's length as a power of two (default 30: 2^30 float32, 4.3 GB); each call's "
                         "fixed host cost weighs less on more elements")
    ap.add_argument("--ranks", type=int, default=2, help="the GPUs set against one (default 2)")
    ap.add_argument("--spin", type=float, default=None,
                    help="seconds the ranks and the driver poll for a message before sleeping (Ranks' spin_s)")
    args = ap.parse_args(argv)
    args.sections = set(args.sections.split(",")) | ({"breakdown"} if args.breakdown else set())
    gpu = not args.quick
    if gpu:
        import torch

        if torch.cuda.device_count() < max(args.ranks, 2):
            print(f"needs {max(args.ranks, 2)} GPUs; this host has {torch.cuda.device_count()} (use --quick for the "
                  "CPU smoke check)")
            return 2
        card = torch.cuda.get_device_name(0)
        args.samples = args.samples or 10
        sizes, n, (m, k, nn) = (MiB, 64 * MiB, 1024 * MiB), 1 << args.map_log2, (16384, 16384, 16384)
    else:
        card = "CPU (gloo)"
        args.samples = args.samples or 3
        sizes, n, (m, k, nn) = (MiB,), 1 << 20, (256, 256, 256)
    backend = "nccl" if gpu else "gloo"
    import eidos

    print(f"card: {card}; backend {backend}; samples {args.samples}; eidos from {os.path.dirname(eidos.__file__)}")
    N = args.ranks
    two = run_ranks(N, backend, args, sizes, n, m, k, nn)
    one = run_ranks(1, backend, args, sizes, n, m, k, nn)
    try:
        tmap, tgemm = torch_baselines(n, m, k, nn, args.samples, gpu)
    except Exception as e:  # noqa: BLE001 - reported, the eidos figures still print
        print(f"FAILED: torch baselines: {type(e).__name__}: {e}")
        tmap = tgemm = (float("nan"), float("nan"))

    print(f"\nrank start-up: {N} ranks {two['start_s']:.1f} s, 1 rank {one['start_s']:.1f} s")
    for e in two.get("errors", []) + one.get("errors", []):
        print("FAILED:", e)
    nan = (float("nan"), float("nan"))
    for d in (one, two):
        for key in ("split_map_sum", "tensor_map_sum", "gemm", "gemm_gather",
                    *[("allreduce", b, w) for b in sizes for w in ("eidos", "torch")]):
            d.setdefault(key, nan)
        d.setdefault("split_value", None)
    print(f"\nall-reduce, float32 Sum, {N} ranks: bus bandwidth GB/s (max over ranks per sample; min time, median)")
    print(f"{'size':>8} {'eidos AllReduce':>22} {'torch all_reduce':>22} {'eidos/torch':>12}")
    for nbytes in sizes:
        e, t = two[("allreduce", nbytes, "eidos")], two[("allreduce", nbytes, "torch")]
        bw = [nbytes * 2 * (N - 1) / N / s / 1e9 for s in (e[0], e[1], t[0], t[1])]
        label = f"{nbytes // MiB} MiB" if nbytes < 1024 * MiB else f"{nbytes // (1024 * MiB)} GiB"
        print(f"{label:>8} {bw[0]:>10.1f} ({bw[1]:>7.1f}) {bw[2]:>12.1f} ({bw[3]:>7.1f}) {bw[0] / bw[2]:>12.2f}")
    gb = n * 4 / 1e9
    print(f"\nmap+sum sum(abs(2 x)) over {n:,} float32 ({gb:.1f} GB): ms, min (median); GB/s of x read")
    for name, key in (("Split (ISA programs)", "split_map_sum"), ("sharded tensor chain", "tensor_map_sum")):
        scaling(name, one[key], two[key], N, f"{gb / two[key][0]:.0f} GB/s on {N}")
    print(f"  {'torch, one device':<22} {tmap[0] * 1e3:8.2f} ({tmap[1] * 1e3:8.2f})")
    print(f"  Split sum values: 1 rank {one['split_value']!r}, {N} ranks {two['split_value']!r}")
    flop = 2 * m * k * nn / 1e12
    dt = "bf16" if gpu else "float32"
    print(f"\nGEMM {m}x{k} @ {k}x{nn} {dt}, A rows sharded, B replicated: ms, min (median); TFLOP/s")
    for name, key in (("result kept sharded", "gemm"), ("then AllGather", "gemm_gather")):
        scaling(name, one[key], two[key], N, f"{flop / two[key][0]:.0f} TFLOP/s on {N}")
    print(f"  {'torch.matmul, one':<22} {tgemm[0] * 1e3:8.2f} ({tgemm[1] * 1e3:8.2f})  ({flop / tgemm[0]:.0f} TFLOP/s)")
    if args.breakdown:
        print("\nwhere a map+sum call goes, ms (medians): the call; out = until the first rank starts; skew = "
              "first to last rank starting; work = each rank's, device included; back = last rank's end to the answer")
        for d, label in ((one, "1 rank"), (two, f"{N} ranks")):
            rt = d.get("round_trip_noop")
            if rt:
                print(f"  {label}: round trip of a function doing nothing {rt[0] * 1e3:.3f} ({rt[1] * 1e3:.3f})")
            for form in ("split", "chain"):
                tl = d.get(f"timeline_{form}")
                if tl:
                    print(f"  {label}, {form}: call {tl['call']:.3f}  out {tl['out']:.3f}  skew {tl['skew']:.3f}  "
                          f"work {tl['work']}  back {tl['back']:.3f}")
    return 0


if __name__ == "__main__":   # run as the module `multigpu`, so its functions reach the ranks by name, not by value
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import importlib

    sys.exit(importlib.import_module("multigpu").main())
