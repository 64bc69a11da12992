"""Register programs over threads (compile.py) beside what a user would write instead, on one GPU.

    python bench/gpu_threads.py            # on an H100/H200: 2^26 elements, compiled
    python bench/gpu_threads.py --smoke    # tiny sizes in Triton's interpreter (checks the script)

Measures, in one run and on one device:
- axpy (out = 2x + y, float32) as the ISA's JSON kernel (a grid-stride loop of LDG, FMA-free
  register code and STG) on 132 x 8 blocks of 256 lanes, against torch's `2 * x + y`: GB/s moved
  (12 bytes an element) and the ratio; the device copy bandwidth (torch clone) beside it as the limit;
- a divergent loop (lane g runs g mod 64 iterations of integer work) per lane, against the same
  work as torch ops on the whole grid: lanes per second.

Each kernel's output is checked against torch's first. Times are triton.testing.do_bench over whole
launches (the host builds the handle table and reads the error flag each time, as the backend does);
min and median are printed, ratios use medians.
"""

from __future__ import annotations

import argparse
import os
import sys
import time


def parse():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--smoke", action="store_true", help="tiny sizes in Triton's interpreter")
    p.add_argument("--rep", type=int, default=200, help="do_bench repetition time in ms")
    return p.parse_args()


ARGS = parse()
if ARGS.smoke:
    os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported

import torch  # noqa: E402
import triton  # noqa: E402

from eidos import isa  # noqa: E402
from eidos.isa import Condition, ExecutionParams, Label, LaunchConfig, Predicate, Register, Special, Type  # noqa: E402
from eidos.isa.backends.triton.compile import compile_program  # noqa: E402
from eidos.isa.backends.triton.device_memory import DeviceMemory  # noqa: E402

DEVICE = "cpu" if ARGS.smoke else "cuda"


def timed(fn) -> tuple[float, float]:
    """(min, median) milliseconds per call."""
    if ARGS.smoke:
        times = []
        for _ in range(3):
            t = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t) * 1e3)
        times.sort()
        return times[0], times[1]
    med, lo = triton.testing.do_bench(fn, rep=ARGS.rep, quantiles=[0.5, 0.0])
    return lo, med


def show(case: str, ours, theirs, work: float, unit: str, scale: float) -> None:
    rate = lambda t: work / (t * 1e-3) / scale  # noqa: E731
    print(f"  {case:<40} ours {ours[1]:9.3f} ms (min {ours[0]:.3f})  torch {theirs[1]:9.3f} ms "
          f"(min {theirs[0]:.3f})  {rate(ours[1]):9.2f} vs {rate(theirs[1]):9.2f} {unit}  ratio {theirs[1] / ours[1]:.3f}",
          flush=True)


def bench_axpy(n: int, lanes: int) -> None:
    mem = DeviceMemory(torch.device(DEVICE))
    g = torch.Generator(device=DEVICE).manual_seed(0)
    x = torch.randn(n, device=DEVICE, generator=g)
    y = torch.randn(n, device=DEVICE, generator=g)
    out = torch.empty(n, device=DEVICE)
    hx, hy, ho = mem.adopt(x), mem.adopt(y), mem.adopt(out)
    program = isa.from_json({"kernel": "axpy", "type": "f32", "count": n, "inputs": {"x": hx, "y": hy},
                             "outputs": {"out": ho},
                             "compute": {"out": {"op": "add", "args": [{"op": "mul", "args": [2.0, "x"]}, "y"]}}})
    kernel = compile_program(program)
    params = ExecutionParams(LaunchConfig.linear(lanes))
    kernel.launch(mem, params)
    want = 2 * x + y
    if not torch.equal(out, want):
        sys.exit("FAILED correctness: axpy differs from torch; not timing a wrong kernel")
    print(f"axpy float32, {n} elements, {lanes} lanes ({kernel.how()})", flush=True)
    ours = timed(lambda: kernel.launch(mem, params))
    theirs = timed(lambda: torch.add(torch.mul(x, 2), y, out=out))
    show("axpy (JSON kernel, grid-stride loop)", ours, theirs, 12.0 * n, "GB/s", 1e9)
    copy = timed(lambda: x.clone())
    print(f"  device copy (torch clone) {8.0 * n / (copy[1] * 1e-3) / 1e9:.1f} GB/s: the limit", flush=True)


def bench_divergent(lanes: int) -> None:
    mem = DeviceMemory(torch.device(DEVICE))
    out = torch.empty(lanes, dtype=torch.int64, device=DEVICE)
    h = mem.adopt(out)
    R, I64, U64 = Register, Type.I64, Type.U64
    b = isa.ProgramBuilder()
    b.add(isa.MOV(R(1), Special.GLOBAL_ID, I64), isa.MOV_IMM(R(2), 64, I64), isa.REM(R(3), R(1), R(2), I64),
          isa.MOV_IMM(R(4), 0, I64), isa.MOV_IMM(R(5), 0, I64), isa.MOV_IMM(R(6), 1, I64),
          isa.MOV_IMM(R(7), 2654435761, I64))
    top = b.label("top")
    b.add(isa.SETcc(Predicate(0), R(5), R(3), Condition.GE, I64), isa.BRA(Label("done"), Predicate(0)),
          isa.MUL(R(4), R(4), R(7), I64), isa.ADD(R(4), R(4), R(5), I64), isa.ADD(R(5), R(5), R(6), I64), isa.BRA(top))
    b.label("done")
    b.add(isa.MOV(R(8), Special.GLOBAL_ID, U64), isa.MOV_IMM(R(9), 8, U64), isa.MUL(R(8), R(8), R(9), U64),
          isa.MOV_IMM(R(9), isa.pointer(h), U64), isa.ADD(R(8), R(8), R(9), U64),
          isa.STG(isa.Address.register(R(8)), R(4), I64))
    kernel = compile_program(b.build())
    params = ExecutionParams(LaunchConfig.linear(lanes))
    kernel.launch(mem, params)

    def torch_version():
        gid = torch.arange(lanes, device=DEVICE, dtype=torch.int64)
        k = gid % 64
        acc = torch.zeros_like(gid)
        for i in range(64):
            acc = torch.where(i < k, acc * 2654435761 + i, acc)
        return acc
    if not torch.equal(out, torch_version()):
        sys.exit("FAILED correctness: divergent loop differs from torch; not timing a wrong kernel")
    print(f"divergent loop, {lanes} lanes, 0..63 iterations each ({kernel.how()})", flush=True)
    ours = timed(lambda: kernel.launch(mem, params))
    theirs = timed(torch_version)
    show("divergent integer loop", ours, theirs, float(lanes), "Mlanes/s", 1e6)


def main() -> None:
    if ARGS.smoke:
        bench_axpy(1000, 256)
        bench_divergent(256)
    else:
        print(f"device: {torch.cuda.get_device_name()}; triton {triton.__version__}; torch {torch.__version__}")
        bench_axpy(1 << 26, 132 * 8 * 256)
        bench_divergent(1 << 20)


if __name__ == "__main__":
    main()
