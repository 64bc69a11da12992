"""Every GPU benchmark in one run on one card, each beside what a user would use instead.

    python bench/gpu.py --out DIR          # on an H100/H200 (after bench/gpu_setup.sh)
    python bench/gpu.py --smoke            # tiny sizes under Triton's interpreter, no GPU

Runs, in this order and in fresh processes (so one's compiled kernels and allocator state do not
colour the next one's figures):
- gpu_isa.py        element-wise and fused ISA programs against the card's measured copy
                    bandwidth, torch eager and torch.compile; host cost of a cached launch;
- gpu_threads.py    register (per-lane) programs: a grid-stride axpy against the copy bandwidth,
                    a divergent integer loop in lanes/s;
- gpu_kernels.py    GEMM, attention, softmax against torch (cuBLAS, SDPA, torch.softmax);
- gpu_crossover.py  per tensor operation kind, the size from which the GPU backend beats the CPU;
- gpu_flow.py       a Flow with heavy numeric maps on the Triton lane beside the Polars lane, and
                    the row count from which the Triton lane wins (--crossover).
Each script's whole output goes to DIR/<name>.log (and its JSON where it writes one); the end
of each is printed here, so the last screen holds every table.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

# name -> (arguments on a GPU, arguments with --smoke); "{out}" is the output folder.
RUNS = {
    "gpu_isa": ([], ["--smoke"]),
    "gpu_threads": ([], ["--smoke"]),
    "gpu_kernels": ([], ["--smoke"]),
    "gpu_crossover": (["--json", "{out}/gpu_crossover.json"], ["--smoke", "--json", "{out}/gpu_crossover.json"]),
    "gpu_flow": (["--crossover", "--repeats", "3", "--out", "{out}/gpu_flow.json"], ["--smoke"]),
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--smoke", action="store_true", help="tiny sizes under Triton's interpreter")
    ap.add_argument("--out", default="gpu-bench", help="folder for each script's log and JSON")
    ap.add_argument("--only", action="append", choices=list(RUNS), help="run only these (repeatable)")
    ap.add_argument("--tail", type=int, default=25, help="lines of each script's output to print")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    failed = []
    tails = []
    for name in args.only or RUNS:
        extra = [a.format(out=out) for a in RUNS[name][1 if args.smoke else 0]]
        cmd = [sys.executable, str(HERE / f"{name}.py"), *extra]
        start = time.perf_counter()
        with open(out / f"{name}.log", "w") as log:
            rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=env).returncode
        took = time.perf_counter() - start
        lines = (out / f"{name}.log").read_text().splitlines()
        tails.append(f"== {name} (exit {rc}, {took:.0f} s): {' '.join(cmd[1:])}\n" + "\n".join(lines[-args.tail:]))
        if rc != 0:
            failed.append(name)
    print("\n\n".join(tails))
    if failed:
        print(f"\nfailed: {', '.join(failed)} (their logs are in {out}/)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
