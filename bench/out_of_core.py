"""Out-of-core: a group-by over a parquet dataset four times the memory budget.

Generates the dataset on demand (bench/data/, never committed), then runs the
same Flow twice, each in a fresh subprocess so peak RSS is the run's own:

- out of core: EIDOS_MEMORY_BUDGET set, engine=None (the planner's rule 3 picks
  a streaming lane);
- in memory: no budget override, engine=None.

Prints the lane chosen, wall time and peak RSS (VmHWM) of each, against the budget plus the
process's own (the peak of a child that ran a one-row plan on the duckdb lane: the interpreter and
libraries, which the budget does not count).

    python bench/out_of_core.py [--budget 512MiB] [--factor 4] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

DATA = Path(__file__).parent / "data" / "out_of_core"

CHILD = r"""
import json, os, sys, time
import eidos as ei
from eidos import col

flow = (ei.read_parquet(sys.argv[1])
        .group_by("key")
        .agg(total=col("value").sum(), mean=col("value").mean(), n=ei.count()))
idle = sys.argv[2:] == ["idle"]   # the process's own: a one-row plan on the duckdb lane
if idle:
    flow = ei.from_pydict({"a": [1]})
start = time.perf_counter()
rows = 0
for batch in flow.stream("duckdb" if idle else None):
    rows += batch.num_rows
seconds = time.perf_counter() - start
record = ei.last_run()
peak = next(int(line.split()[1]) * 1024 for line in open("/proc/self/status") if line.startswith("VmHWM"))
print(json.dumps({"seconds": seconds, "rows": rows, "peak_rss": peak, "lane": record.lane,
                  "rule": record.decision.rule, "reason": record.decision.reason}))
"""


def generate(target_bytes: int) -> tuple[Path, int]:
    """Parquet files whose uncompressed size is at least `target_bytes` (reused when present)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = DATA / f"{target_bytes}"
    done = folder / "_done"
    if not done.exists():
        folder.mkdir(parents=True, exist_ok=True)
        rng = np.random.default_rng(42)
        rows_per_file, written, i = 10_000_000, 0, 0
        while written < target_bytes:
            table = pa.table({
                "key": rng.integers(0, 1_000_000, rows_per_file),
                "value": rng.random(rows_per_file),
                "other": rng.integers(0, 2**40, rows_per_file),
            })
            pq.write_table(table, folder / f"part-{i:04d}.parquet", row_group_size=1_000_000)
            written += table.nbytes
            i += 1
        done.write_text(str(written))
    return folder, int(done.read_text())


def run_child(folder: Path, budget: str | None, *extra: str) -> dict:
    env = dict(os.environ)
    env.pop("EIDOS_MEMORY_BUDGET", None)
    if budget:
        env["EIDOS_MEMORY_BUDGET"] = budget
    out = subprocess.run([sys.executable, "-c", CHILD, str(folder), *extra], env=env, capture_output=True, text=True,
                         check=False)
    if out.returncode != 0:
        raise SystemExit(f"child failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--budget", default="512MiB", help="memory budget for the out-of-core run")
    parser.add_argument("--factor", type=float, default=4.0, help="dataset size as a multiple of the budget")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each mode (min and median reported)")
    args = parser.parse_args()

    from eidos.hal.devices import parse_size

    budget = parse_size(args.budget)
    t0 = time.perf_counter()
    folder, size = generate(int(budget * args.factor))
    print(f"dataset: {folder} ({size / 2**30:.2f} GiB in memory, {size / budget:.1f}x the budget; "
          f"generated or found in {time.perf_counter() - t0:.1f} s)")
    allowance = run_child(folder, None, "idle")["peak_rss"]
    print(f"the process's own (a one-row plan on the duckdb lane): peak RSS {allowance / 2**20:.0f} MiB")
    results = {}
    for mode, value in (("out of core", args.budget), ("in memory", None)):
        runs = [run_child(folder, value) for _ in range(args.repeat)]
        results[mode] = runs
        secs = [r["seconds"] for r in runs]
        peak = max(r["peak_rss"] for r in runs)
        print(f"{mode:12s} lane={runs[0]['lane']:10s} rule {runs[0]['rule']}  time min {min(secs):.2f} s "
              f"median {statistics.median(secs):.2f} s  peak RSS {peak / 2**20:.0f} MiB "
              f"({(peak - allowance) / budget:.2f}x budget over the process's own)  groups={runs[0]['rows']}")
        print(f"{'':12s} reason: {runs[0]['reason']}")
    ooc, mem = (min(r["seconds"] for r in results[m]) for m in ("out of core", "in memory"))
    print(f"out-of-core / in-memory time: {ooc / mem:.2f}x")
    under = max(r["peak_rss"] for r in results["out of core"]) - allowance <= budget
    print(f"out-of-core peak RSS over the process's own within the budget: {'yes' if under else 'NO'}")


if __name__ == "__main__":
    main()
