"""The Triton extension kernels beside what a user would call instead, on one GPU.

    python bench/gpu_kernels.py            # on an H100/H200: the sizes below, compiled
    python bench/gpu_kernels.py --smoke    # tiny sizes in Triton's interpreter (no GPU needed)

Measures, in one run and on one device:
- GEMM bf16 and fp16 at 4096 and 8192 (square) against torch.matmul (cuBLAS): TFLOP/s, ratio;
- attention B8 H16 S4096 D128 bf16, causal and not, against torch's scaled_dot_product_attention
  (FlashAttention-2 or cuDNN, whichever torch picks): TFLOP/s (4 B H S^2 D, halved when causal);
- softmax over 4096 x 4096 float32 rows against torch.softmax: TB/s (one read and one write).

Where the TMA form applies (Hopper), GEMM and attention are measured in both forms: [tma] (what
the ISA instructions run) and [pointer] beside it. Before timing, each kernel's output is checked
against torch's in float32 (relative Frobenius error; the run stops if one is off). Times are triton.testing.do_bench over repeated launches
(the first call autotunes, so it runs before); min and median are printed, ratios use medians.
The goals the lead measures: GEMM >= 85% of torch.matmul at 8192, attention >= 70% of SDPA,
softmax near torch.
"""

from __future__ import annotations

import argparse
import os
import sys
import time


def parse():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--smoke", action="store_true", help="tiny sizes in Triton's interpreter (checks the script)")
    p.add_argument("--only", choices=["gemm", "attention", "softmax"], action="append",
                   help="run only these families (repeatable)")
    p.add_argument("--rep", type=int, default=200, help="do_bench repetition time in ms")
    return p.parse_args()


ARGS = parse()
if ARGS.smoke:
    os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported

import torch  # noqa: E402
import triton  # noqa: E402

from eidos.isa.backends.triton.kernels import attention, gemm, softmax  # noqa: E402

DEVICE = "cpu" if ARGS.smoke else "cuda"
GOALS = {"gemm": 0.85, "attention": 0.70, "softmax": 0.90}


def timed(fn) -> tuple[float, float]:
    """(min, median) milliseconds per call."""
    if ARGS.smoke:  # the interpreter has no CUDA events: a few wall-clock calls
        times = []
        for _ in range(3):
            t = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t) * 1e3)
        times.sort()
        return times[0], times[len(times) // 2]
    med, lo = triton.testing.do_bench(fn, rep=ARGS.rep, quantiles=[0.5, 0.0])
    return lo, med


def kernels(routed: str) -> list[str]:
    """The kernel route() picks first (the one the ISA instructions use), then the forms it passed
    over beside it for comparison: the Triton TMA and pointer forms under Gluon, pointer under TMA."""
    return [routed] + {"gluon": ["tma", "pointer"], "tma": ["pointer"]}.get(routed, [])


def rel_err(got: torch.Tensor, want: torch.Tensor) -> float:
    got, want = got.float(), want.float()
    return float(torch.linalg.vector_norm(got - want) / torch.linalg.vector_norm(want).clamp_min(1e-30))


ROWS: list[dict] = []


def record(family: str, case: str, ours, theirs, work: float, unit: str, err: float, tol: float) -> None:
    """work: FLOPs or bytes per call; the rate is work / median time."""
    scale = 1e12
    row = dict(family=family, case=case, ours_min=ours[0], ours_med=ours[1], torch_min=theirs[0],
               torch_med=theirs[1], ours_rate=work / (ours[1] * 1e-3) / scale,
               torch_rate=work / (theirs[1] * 1e-3) / scale, unit=unit, err=err, tol=tol)
    row["ratio"] = theirs[1] / ours[1]
    ROWS.append(row)
    print(f"  {case:<44} ours {ours[1]:9.3f} ms (min {ours[0]:.3f})  torch {theirs[1]:9.3f} ms (min {theirs[0]:.3f})"
          f"  {row['ours_rate']:8.3f} vs {row['torch_rate']:8.3f} {unit}  ratio {row['ratio']:.3f}  rel.err {err:.2e}",
          flush=True)


def check(case: str, err: float, tol: float) -> None:
    if not err <= tol:
        sys.exit(f"FAILED correctness: {case}: relative error {err:.3e} > {tol:.1e}; not timing a wrong kernel")


def bench_gemm(sizes) -> None:
    print("GEMM (square, row-major) vs torch.matmul", flush=True)
    g = torch.Generator(device=DEVICE).manual_seed(0)
    for dtype in (torch.bfloat16, torch.float16):
        for n in sizes:
            a = torch.randn(n, n, device=DEVICE, dtype=dtype, generator=g)
            b = torch.randn(n, n, device=DEVICE, dtype=dtype, generator=g)
            out = torch.empty(n, n, device=DEVICE, dtype=dtype)
            want = torch.matmul(a.float(), b.float())
            theirs = timed(lambda: torch.matmul(a, b, out=out))
            for kernel in kernels(gemm.route(a, b, out)):
                case = f"gemm {str(dtype).split('.')[1]} {n} [{kernel}]"
                gemm.matmul(a, b, out, kernel=kernel)  # autotunes on the first call
                err, tol = rel_err(out, want), 1e-2
                check(case, err, tol)
                ours = timed(lambda: gemm.matmul(a, b, out, kernel=kernel))
                record("gemm", case, ours, theirs, 2.0 * n ** 3, "TFLOP/s", err, tol)


def bench_attention(shape) -> None:
    b, h, s, d = shape
    print(f"attention B{b} H{h} S{s} D{d} bf16 vs torch scaled_dot_product_attention", flush=True)
    g = torch.Generator(device=DEVICE).manual_seed(1)
    q, k, v = (torch.randn(b, h, s, d, device=DEVICE, dtype=torch.bfloat16, generator=g) for _ in range(3))
    out = torch.empty_like(q)
    sdpa = torch.nn.functional.scaled_dot_product_attention
    for causal in (False, True):
        want = sdpa(q.float(), k.float(), v.float(), is_causal=causal)
        theirs = timed(lambda: sdpa(q, k, v, is_causal=causal))
        flops = 4.0 * b * h * s * s * d * (0.5 if causal else 1.0)
        for kernel in kernels(attention.route(q, s, d)):
            case = f"attention {'causal' if causal else 'full'} B{b}H{h}S{s}D{d} [{kernel}]"
            attention.attention(q, k, v, out, b, h, s, d, causal=causal, kernel=kernel)
            err, tol = rel_err(out, want), 2e-2
            check(case, err, tol)
            ours = timed(lambda: attention.attention(q, k, v, out, b, h, s, d, causal=causal, kernel=kernel))
            record("attention", case, ours, theirs, flops, "TFLOP/s", err, tol)


def bench_softmax(rows: int, n: int) -> None:
    print(f"softmax {rows} x {n} float32 vs torch.softmax", flush=True)
    g = torch.Generator(device=DEVICE).manual_seed(2)
    x = torch.randn(rows, n, device=DEVICE, dtype=torch.float32, generator=g) * 4
    out = torch.empty_like(x)
    case = f"softmax f32 {rows}x{n}"
    softmax.softmax(x, out, rows, n)
    err, tol = rel_err(out, torch.softmax(x.double(), dim=-1)), 1e-5
    check(case, err, tol)
    ours = timed(lambda: softmax.softmax(x, out, rows, n))
    theirs = timed(lambda: torch.softmax(x, dim=-1))
    record("softmax", case, ours, theirs, 2.0 * rows * n * 4, "TB/s", err, tol)


def table() -> None:
    dev = "Triton interpreter on the CPU (--smoke: not a performance figure)" if ARGS.smoke else \
        f"{torch.cuda.get_device_name()} (torch {torch.__version__}, triton {triton.__version__})"
    print(f"\n{dev}")
    head = f"{'case':<44} {'ours':>10} {'torch':>10} {'unit':>8} {'ratio':>6} {'goal':>5} {'rel.err':>8}"
    print(head)
    print("-" * len(head))
    for r in ROWS:
        goal = GOALS[r["family"]]
        mark = "" if ARGS.smoke else ("  ok" if r["ratio"] >= goal else "  BELOW")
        print(f"{r['case']:<44} {r['ours_rate']:10.3f} {r['torch_rate']:10.3f} {r['unit']:>8} {r['ratio']:6.3f} "
              f"{goal:5.2f} {r['err']:8.1e}{mark}")


def main() -> None:
    if not ARGS.smoke and not torch.cuda.is_available():
        sys.exit("no CUDA device: run with --smoke to check the script in Triton's interpreter")
    only = set(ARGS.only or ["gemm", "attention", "softmax"])
    if "gemm" in only:
        bench_gemm([64, 96] if ARGS.smoke else [4096, 8192])
    if "attention" in only:
        bench_attention((1, 2, 64, 16) if ARGS.smoke else (8, 16, 4096, 128))
    if "softmax" in only:
        bench_softmax(*((64, 300) if ARGS.smoke else (4096, 4096)))
    table()


if __name__ == "__main__":
    main()
