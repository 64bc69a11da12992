"""GPU crossover: per operation kind, the input size above which the tensor `gpu` backend beats the `cpu` one.

For each kind (elementwise, reduction, matmul, softmax, layer_norm) and growing sizes, three timings of the
same tensor program, in one run:
  cpu          host tensors on the cpu backend (the ISA CpuBackend);
  gpu, host    host tensors on the gpu backend: the inputs' host->device copies and the result's copy back
               are counted (what automatic dispatch decides for data in host memory: THRESHOLDS);
  gpu, device  inputs already on the gpu, the result left there (no copies: DEVICE_THRESHOLDS).
The crossover of a mode is the smallest size from which that mode is faster than the cpu at every larger
size measured (min of the repeats); a kind's sweep stops once both gpu modes have won --settle sizes in a
row, or at --max-bytes. Every gpu result is checked against the cpu one. Prints a table
(min / median wall ms) and writes the thresholds as JSON that eidos.tensor.backend.load_thresholds reads;
paste the figures and the printed provenance line into src/eidos/tensor/backend.py.

    python bench/gpu_crossover.py [--json thresholds.json] [--repeats 5] [--ops elementwise,matmul]
    python bench/gpu_crossover.py --smoke   # tiny sizes under Triton's interpreter: checks the script, no figures

Needs a CUDA GPU (torch.cuda.is_available()) except with --smoke.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import sys
import time

import numpy as np

OPS = ("elementwise", "reduction", "matmul", "softmax", "layer_norm")
ROW = 1024  # softmax and layer_norm rows have this many float32 values


def workloads(T):
    """kind -> (sizes: sizes to sweep, make(size, rng) -> host input arrays, run(tensors) -> Tensor)."""
    def vec(n, rng):
        return [rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)]

    def square(n, rng):
        return [rng.standard_normal((n, n), dtype=np.float32), rng.standard_normal((n, n), dtype=np.float32)]

    def rows(n, rng):
        return [rng.standard_normal((max(n // ROW, 1), ROW), dtype=np.float32)]

    return {
        "elementwise": ([4 ** k for k in range(5, 15)], vec, lambda x, y: (x * 2 + 1).tanh() * y),
        "reduction": ([4 ** k for k in range(5, 15)], lambda n, rng: vec(n, rng)[:1], lambda x: (x * x).sum()),
        "matmul": ([2 ** k for k in range(4, 13)], square, lambda a, b: a @ b),
        "softmax": ([ROW * 4 ** k for k in range(0, 9)], rows, lambda x: x.softmax(-1)),
        "layer_norm": ([ROW * 4 ** k for k in range(0, 9)], rows, lambda x: T.layer_norm(x)),
    }


SMOKE_SIZES = {"elementwise": [64, 256], "reduction": [64, 256], "matmul": [4, 8], "softmax": [ROW, 2 * ROW],
               "layer_norm": [ROW, 2 * ROW]}


def timed(fn, repeats: int, sync) -> tuple[list, object]:
    out = fn()  # warm: kernel compile, caches
    sync()
    wall = []
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        sync()
        wall.append(time.perf_counter() - t)
    return wall, out


def crossover(sizes_bytes: list, cpu: list, gpu: list):
    """The smallest size from which gpu < cpu at every larger measured size (None: the GPU never wins to the end)."""
    best = None
    for nbytes, c, g in reversed(list(zip(sizes_bytes, cpu, gpu))):
        if g < c:
            best = nbytes
        else:
            break
    return best


def copy_bandwidth(torch, dev, nbytes: int) -> float:
    """Host->device GB/s of the gpu tensors' upload path (the physical limit the host-input column pays)."""
    from eidos.tensor import storage as D

    a = np.ones(nbytes, dtype=np.uint8)
    wall, _ = timed(lambda: D.upload(a), 3, (lambda: torch.cuda.synchronize()) if dev.type == "cuda" else (lambda: None))
    return nbytes / min(wall) / 1e9


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--smoke", action="store_true", help="tiny sizes under Triton's interpreter; checks the script")
    ap.add_argument("--json", default=None, help="write the thresholds here (default: gpu_crossover.json, or "
                                                 "none with --smoke)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--ops", default=",".join(OPS))
    ap.add_argument("--max-bytes", type=float, default=1 << 30, help="largest input size to try (bytes)")
    ap.add_argument("--settle", type=int, default=3, help="stop a kind's sweep once both gpu modes have won at "
                                                           "this many sizes in a row (0: sweep every size)")
    args = ap.parse_args(argv)

    import torch
    if not torch.cuda.is_available():
        if not args.smoke:
            raise SystemExit("gpu_crossover.py measures on a CUDA GPU (torch.cuda.is_available() is False); "
                             "--smoke runs it under Triton's interpreter to check it")
        os.environ["TRITON_INTERPRET"] = "1"
    import eidos.tensor as T
    from eidos.tensor import backend as B
    from eidos.tensor import storage as D

    dev = D.torch_device()
    sync = (lambda: torch.cuda.synchronize()) if dev.type == "cuda" else (lambda: None)
    repeats = 1 if args.smoke else args.repeats
    ops = [o.strip() for o in args.ops.split(",") if o.strip()]
    for o in ops:
        if o not in OPS:
            raise SystemExit(f"unknown operation kind {o!r}; kinds: {', '.join(OPS)}")
    rng = np.random.default_rng(0)
    name = D.describe()
    bw = copy_bandwidth(torch, dev, (1 << 20) if args.smoke else (256 << 20))
    print(f"# GPU crossover: {name}; host CPU {platform.processor() or platform.machine()}, {os.cpu_count()} cores; "
          f"torch {torch.__version__}; host->device copy {bw:.2f} GB/s"
          + (" (SMOKE: interpreter, tiny sizes, no figures)" if args.smoke else ""))
    print("| operation | input bytes | cpu ms (min / median) | gpu, host inputs ms | gpu, device inputs ms |")
    print("|---|---|---|---|---|")
    host_t, dev_t, table = {}, {}, []
    for op in ops:
        sizes, make, run = workloads(T)[op]
        if args.smoke:
            sizes = SMOKE_SIZES[op]
        got_bytes, cpu_s, host_s, dev_s = [], [], [], []
        wins = 0
        for size in sizes:
            arrays = make(size, rng)
            nbytes = sum(a.nbytes for a in arrays)
            if nbytes > args.max_bytes:
                break
            host = [T(a) for a in arrays]
            on_dev = [t.to("gpu") for t in host]
            B.set_backend("cpu")
            c, want = timed(lambda: run(*host).realize(), repeats, lambda: None)
            B.set_backend("gpu")
            h, got_h = timed(lambda: run(*host).realize(), repeats, sync)
            B.set_backend(None)
            d, got_d = timed(lambda: run(*on_dev).realize(), repeats, sync)
            if got_h.device != "cpu" or got_d.device != "gpu":
                raise SystemExit(f"{op}: results on {got_h.device}/{got_d.device}, expected cpu/gpu")
            tol = 1e-3 if op == "matmul" else 1e-4
            for got in (got_h, got_d):
                np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=tol, atol=tol * max(1.0, size ** 0.5))
            got_bytes.append(nbytes)
            cpu_s.append(min(c))
            host_s.append(min(h))
            dev_s.append(min(d))
            ms = [(min(x) * 1e3, statistics.median(x) * 1e3) for x in (c, h, d)]
            print(f"| {op} | {nbytes} | " + " | ".join(f"{a:.3f} / {b:.3f}" for a, b in ms) + " |", flush=True)
            table.append({"op": op, "input_bytes": nbytes, "cpu_s": c, "gpu_host_inputs_s": h, "gpu_device_inputs_s": d})
            wins = wins + 1 if min(h) < min(c) and min(d) < min(c) else 0
            if args.settle and wins >= args.settle:
                break  # the crossover is behind us; larger sizes only cost time
        host_t[op] = crossover(got_bytes, cpu_s, host_s)
        dev_t[op] = crossover(got_bytes, cpu_s, dev_s)
    B.reset()
    today = datetime.date.today().isoformat()
    provenance = (f"Measured by bench/gpu_crossover.py on {name} ({today}; torch {torch.__version__}, host "
                  f"{os.cpu_count()} cores, host->device {bw:.1f} GB/s): the smallest input size from which the "
                  f"gpu backend beat the cpu one at every larger size, min of {repeats} runs; host inputs count the "
                  "copies to the device and back.")
    print()
    print("| operation | GPU from (host inputs, copies counted) | GPU from (inputs on the device) |")
    print("|---|---|---|")
    for op in ops:
        print(f"| {op} | {host_t[op] if host_t[op] is not None else 'never'} | "
              f"{dev_t[op] if dev_t[op] is not None else 'never'} |")
    print(f"\nprovenance: {provenance}")
    result = {"device": name, "date": today, "smoke": bool(args.smoke), "torch": torch.__version__,
              "python": platform.python_version(), "cpu_cores": os.cpu_count(), "host_to_device_gb_s": bw,
              "repeats": repeats, "host_inputs": host_t, "device_inputs": dev_t, "provenance": provenance,
              "table": table}
    path = args.json if args.json is not None else (None if args.smoke else "gpu_crossover.json")
    if path:
        with open(path, "w") as f:
            json.dump(result, f, indent=1)
        print(f"wrote {path}")
    return result


if __name__ == "__main__":
    main(sys.argv[1:])
