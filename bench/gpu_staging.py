"""The Triton lane's host copies through pinned staging, before and after, in one run (issue 15 item 7).

Run on the GPU machine:  python bench/gpu_staging.py [--rows 50000000] [--repeats 3]
Run here (no GPU):       python bench/gpu_staging.py --smoke   (the interpreter: no staging, checks only)

Two Flows over in-memory Arrow columns (float64 x, y; float64 z with 1% nulls; int32 k), each run end
to end on the Triton lane with `eidos.lanes.triton.target.STAGING` off (pageable copies, the code
before) and on (inputs through pinned memory on a copy stream, overlapping the next column's CPU copy
and this column's kernels; results back through pinned buffers), alternating, min / median wall time:
- rows back: three float64 columns of maps, every row returned (the device-to-host copy dominates)
- global agg: maps and a filter into five aggregates (the host-to-device copy dominates)
The answers of both settings are compared first. The bus's own rates (256 MiB, pageable and pinned,
each way) are printed beside them as the floor.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time


def rates() -> dict:
    import torch

    n = 256 << 20
    out = {}
    for pinned in (False, True):
        host = torch.empty(n, dtype=torch.uint8, pin_memory=pinned)
        host.fill_(1)
        dev = torch.empty(n, dtype=torch.uint8, device="cuda")
        for name, fn in (("h2d", lambda: dev.copy_(host, non_blocking=pinned)),
                         ("d2h", lambda: host.copy_(dev, non_blocking=pinned))):
            best = []
            for _ in range(5):
                torch.cuda.synchronize()
                t = time.perf_counter()
                fn()
                torch.cuda.synchronize()
                best.append(time.perf_counter() - t)
            out[f"{name} {'pinned' if pinned else 'pageable'}"] = n / min(best)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=50_000_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--smoke", action="store_true")
    args = ap.parse_args()
    import torch

    if not torch.cuda.is_available():
        if not args.smoke:
            sys.exit("no CUDA device: run with --smoke here")
        os.environ.setdefault("TRITON_INTERPRET", "1")
        args.rows, args.repeats = 5000, 1
    import numpy as np
    import pyarrow as pa

    import eidos as ei
    from eidos import col
    from eidos.lanes.triton import target

    rng = np.random.default_rng(0)
    n = args.rows
    table = pa.table({"x": rng.random(n), "y": rng.random(n) + 0.5, "k": rng.integers(0, 16, n, dtype=np.int32),
                      "z": pa.array(rng.normal(size=n), mask=rng.random(n) < 0.01)})
    base = ei.from_arrow(table)
    flows = {"rows back": base.select(u=(col("x") * 2 + 1).exp() * col("y"), v=col("x") - col("y"),
                                      z=col("z") * 2),
             "global agg": base.filter(col("x") > 0.1).agg(s=(col("x") * col("y")).sum(), m=col("z").mean(),
                                                           top=col("y").max(), lo=col("z").min(), n=ei.count())}
    where = torch.cuda.get_device_name() if torch.cuda.is_available() else "Triton interpreter (no GPU)"
    print(f"# the Triton lane end to end, {n:,} rows ({table.nbytes / 1e9:.2f} GB of columns), {where}; "
          f"min / median of {args.repeats}")
    if torch.cuda.is_available():
        print("# the bus alone (256 MiB): " + ", ".join(f"{k} {v / 1e9:.2f} GB/s" for k, v in rates().items()))
    print(f"{'case':12} {'pageable (before) ms':>22} {'pinned staging ms':>20} {'before / after':>15}")
    for name, flow in flows.items():
        results = {}
        times = {False: [], True: []}
        for staging in (False, True):
            target.STAGING = staging
            results[staging] = flow.run(engine="triton")   # warm: kernels compiled, pinned blocks cached
        assert results[True].equals(results[False]), name   # the same rows in the same order
        for _ in range(args.repeats):
            for staging in (False, True):
                target.STAGING = staging
                t = time.perf_counter()
                flow.run(engine="triton")
                times[staging].append(time.perf_counter() - t)
        target.STAGING = True
        before, after = (min(times[s]) * 1e3 for s in (False, True))
        meds = [statistics.median(times[s]) * 1e3 for s in (False, True)]
        print(f"{name:12} {before:10.1f} / {meds[0]:9.1f} {after:9.1f} / {meds[1]:8.1f} {before / after:14.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
