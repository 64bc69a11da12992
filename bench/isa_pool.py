"""Pool streaming: inputs of 1 MB to 1 GB through a fixed 36 KB pool, beside the in-memory run.

Each size runs in a fresh subprocess that reads its own peak RSS (VmHWM): the
input is produced piece by piece (1 MiB at a time, never held whole), copied
through one `isa.Pool`-backed backend pool by `isa.stream`, and each chunk runs a
Relu ParallelMap on the compiled CPU backend; a sink folds each chunk's result
into a checksum. The in-memory run holds the whole input in one buffer and runs
the same program once. "Amplification" is input bytes / pool bytes (the
specification reports 2,844x at 100 MB).

    python bench/isa_pool.py [--sizes 1e6,1e7,1e8,1e9] [--pool 36864]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

CHILD = r"""
import json, sys, time
import numpy as np
from eidos import isa
from eidos.isa import Address, LaunchConfig, MapOperation, ProgramBuilder, Type
from eidos.isa.backends import CpuBackend

mode, total, pool_bytes = sys.argv[1], int(float(sys.argv[2])), int(sys.argv[3])
be = CpuBackend()
piece = np.arange(2**18, dtype=np.float32) - 2**17        # 1 MiB of float32, half negative

def pieces():
    left = total
    while left > 0:
        take = min(left, piece.nbytes)
        yield piece.view(np.uint8)[:take]
        left -= take

def relu(address, nbytes):
    return ProgramBuilder().add(isa.ParallelMap(dst_array=address, src_array=address, count=nbytes // 4,
                                                operation=MapOperation.Relu, ty=Type.F32)).build()

def rss():
    return next(int(l.split()[1]) * 1024 for l in open("/proc/self/status") if l.startswith("VmHWM"))

relu(Address.buffer(be.allocate_buffer(64)), 64)          # warm the kernel before measuring
be.execute_program(relu(Address.buffer(be.allocate_buffer(64)), 64), LaunchConfig.linear(1))
base = rss()
out = np.empty(pool_bytes // 4, dtype=np.float32)
checksum = 0.0
start = time.perf_counter()
if mode == "pool":
    def sink(pool, nbytes):
        global checksum
        view = out[: nbytes // 4]
        be.copy_from_pool(pool, 0, view)
        checksum += float(view.sum())
    isa.stream(be, pieces(), lambda pool, n: relu(Address.pool(pool, 0), n), pool_bytes=pool_bytes, sink=sink)
else:
    buf = be.allocate_buffer(total)
    program = relu(Address.buffer(buf), total)
    be.execute_program(program, LaunchConfig.linear(1))   # compile outside the timing, as the pool's kernel was
    start = time.perf_counter()
    offset = 0
    for p in pieces():
        be.copy_to_buffer(buf, p, offset=offset)
        offset += len(p)
    be.execute_program(program, LaunchConfig.linear(1))
    result = np.empty(total // 4, dtype=np.float32)
    be.copy_from_buffer(buf, result)
    checksum = float(result.sum(dtype=np.float64))
seconds = time.perf_counter() - start
print(json.dumps({"seconds": seconds, "peak_extra": rss() - base, "checksum": checksum}))
"""


def run(mode: str, size: float, pool: int) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, mode, str(size), str(pool)], capture_output=True,
                         text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"{mode} {size:g} failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1e6,1e7,1e8,1e9", help="input sizes in bytes, comma-separated")
    parser.add_argument("--pool", type=int, default=36 * 1024, help="pool size in bytes")
    args = parser.parse_args()
    print(f"pool: {args.pool} bytes; program: Relu ParallelMap (F32) on the CPU backend")
    print(f"{'input':>8} | {'pool MB/s':>9} | {'pool peak +RSS':>14} | {'in-memory MB/s':>14} | "
          f"{'in-memory peak +RSS':>19} | {'pool / in-mem time':>18} | amplification")
    for size in (float(s) for s in args.sizes.split(",")):
        pooled, whole = run("pool", size, args.pool), run("memory", size, args.pool)
        if abs(pooled["checksum"] - whole["checksum"]) > 1e-6 * max(1.0, abs(whole["checksum"])):
            raise SystemExit(f"checksums differ at {size:g}: {pooled['checksum']} vs {whole['checksum']}")
        print(f"{size:>8.0e} | {size / pooled['seconds'] / 1e6:>9.0f} | {pooled['peak_extra'] / 2**20:>11.1f} MiB | "
              f"{size / whole['seconds'] / 1e6:>14.0f} | {whole['peak_extra'] / 2**20:>15.1f} MiB | "
              f"{pooled['seconds'] / whole['seconds']:>17.2f}x | {size / args.pool:,.0f}x")


if __name__ == "__main__":
    main()
