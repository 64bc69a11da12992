"""Where the duckdb lane's out-of-core rule (src/eidos/lanes/sql/memory.py) comes from.

For each operation kind (group-by, sort, distinct, join: the SQL the duckdb lane runs for them), thread
count and input size, this finds by bisection the smallest DuckDB `memory_limit` the query finishes
under (each try a fresh process streaming the result as the lane does), then measures the peak RSS over
the process's own after DuckDB and pyarrow are loaded, at 1, 2 and 4 times that limit. Beside each it
prints what the rule says: its floor for that kind, threads and input, and its bound on RSS for the
limit (SLOPE * limit + OVERHEAD). A measured minimum above the floor, or an RSS above the bound, is a
rule that must change.

    python bench/duckdb_memory.py [--rows 2000000,8000000] [--threads 1,2,4] [--kinds group-by,sort,...]

Data: generated parquet in bench/data/duckdb_memory/ (git-ignored): k (about 4 rows a key), v (a float),
s (one of 100,000 short strings), and a table of the distinct keys for the join.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

DATA = Path(__file__).parent / "data" / "duckdb_memory"
MiB = 2**20

# Peak RSS from VmHWM: it belongs to the process's own memory since exec, where ru_maxrss starts at the
# peak of the process it was forked from (this one, which may have generated the data).
TRY = r"""
import json, sys, tempfile, duckdb
sql, limit, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
with tempfile.TemporaryDirectory() as spill:
    con = duckdb.connect(":memory:", config={"memory_limit": f"{limit}KiB", "threads": threads,
                                             "temp_directory": spill, "preserve_insertion_order": False})
    con.execute("SET enable_progress_bar = false")
    import pyarrow
    def peak():
        return next(int(line.split()[1]) * 1024 for line in open("/proc/self/status") if line.startswith("VmHWM"))
    base = peak()
    try:
        for _ in con.sql(sql).to_arrow_reader(122_880):
            pass
        ok = True
    except Exception:
        ok = False
    print(json.dumps({"ok": ok, "over": peak() - base}))
"""


def generate(rows: int) -> Path:
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    path = (DATA / f"{rows}.parquet").resolve()
    if not path.exists():
        DATA.mkdir(parents=True, exist_ok=True)
        rng = np.random.default_rng(7)
        names = pa.array([f"name-{i:06d}" for i in range(100_000)])
        table = pa.table({"k": rng.integers(0, rows // 4, rows), "v": rng.random(rows),
                          "s": names.take(pa.array(rng.integers(0, 100_000, rows)))})
        pq.write_table(pa.table({"k": pc.unique(table.column("k"))}), str(path).replace(".parquet", "-keys.parquet"))
        pq.write_table(table, path, row_group_size=500_000)
    return path


def plans(path: Path) -> dict:
    import eidos as ei
    from eidos import col

    f, keys = ei.read_parquet(path), ei.read_parquet(str(path).replace(".parquet", "-keys.parquet"))
    return {"group-by": f.group_by("k").agg(s=col("v").sum(), n=ei.count()), "sort": f.sort("v"),
            "distinct": f.select("k", "s").distinct(), "join": f.join(keys, on="k")}


def attempt(sql: str, limit: int, threads: int) -> dict:
    out = subprocess.run([sys.executable, "-c", TRY, sql, str(limit // 1024), str(threads)],
                         capture_output=True, text=True, check=True, cwd=tempfile.gettempdir())
    return json.loads(out.stdout)


def smallest(sql: str, threads: int, step: int = 4 * MiB) -> int:
    lo, hi = 0, 32 * MiB
    while not attempt(sql, hi, threads)["ok"]:
        lo, hi = hi, hi * 2
    while hi - lo > step:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if attempt(sql, mid, threads)["ok"] else (mid, hi)
    return hi


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", default="2000000,8000000")
    parser.add_argument("--threads", default="1,2,4")
    parser.add_argument("--kinds", default="group-by,sort,distinct,join")
    args = parser.parse_args()

    from eidos.hal.cost import input_bytes
    from eidos.lanes.sql.execute import prepare
    from eidos.lanes.sql.memory import OVERHEAD, SLOPE, floor, kinds

    print("| rows | input MiB | kind | threads | smallest limit MiB | rule's floor MiB | RSS over base at 1x / 2x / 4x "
          "MiB | rule's bound at 1x / 2x / 4x MiB |")
    print("| ---: | ---: | --- | ---: | ---: | ---: | --- | --- |")
    for rows in (int(r) for r in args.rows.split(",")):
        path = generate(rows)
        for kind, flow in plans(path).items():
            if kind not in args.kinds.split(","):
                continue
            plan = flow.plan.optimized
            sql, size = prepare("duckdb", plan).sql, input_bytes(plan)
            for threads in (int(t) for t in args.threads.split(",")):
                least = smallest(sql, threads)
                over = [attempt(sql, m * least, threads) for m in (1, 2, 4)]
                rule = floor(kinds(plan), threads, size)
                shown = " / ".join(f"{o['over'] / MiB:.0f}" + ("" if o["ok"] else " (failed)") for o in over)
                bound = " / ".join(f"{(SLOPE * m * least + OVERHEAD) / MiB:.0f}" for m in (1, 2, 4))
                print(f"| {rows:,} | {size / MiB:.0f} | {kind} | {threads} | {least / MiB:.0f} | {rule / MiB:.0f}"
                      f"{'' if rule >= least else ' (BELOW)'} | {shown} | {bound} |", flush=True)


if __name__ == "__main__":
    main()
