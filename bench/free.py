"""The python lane (eidos.lanes.python_native) on a CPU-bound Python function, beside the other ways to run it.

The function parses one web-server log line with regular expressions (about 5 us a row here) and
returns an integer. Over the same rows, in one run, each timed in `--runs` rounds (min and median):

- a plain Python loop over the values (a list already in memory);
- Polars' `map_elements` on a Series of them (when polars is installed);
- the python lane's step (the Project the planner cuts out for it, run by FreeLane.execute: Arrow
  in, Arrow out, values checked as every lane checks them) in the calling thread (workers=1), and
  on 1..N worker processes and 1..N threads;
- the whole flow with engine="python" (the step plus the projection around it, on the vector
  lane), when a vector lane (polars or duckdb) is installed.

The runs take turns, round after round (the load of a shared machine falls on each alike), each
checked against the plain loop's answer. Worker processes are started before timing (their start,
once per process, is reported on its own). Ratios are to the lane's single-thread time; per-core
scaling is speed-up / workers. CPU seconds (this process's and its worker processes', from /proc)
measure the work each run did whatever share of the CPUs it got: on a loaded machine the single /
this ratio of CPU shows what the lane would reach with its cores to itself. At the start and the end the script measures what the machine
gives parallel work (N processes spinning at once against one alone): on a shared machine that
is less than N, and the lane cannot do better.

    python bench/free.py [--rows 1000000] [--runs 5] [--workers 1,2]

Runs without polars and duckdb (for a free-threaded CPython, where threads run in parallel).
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import re
import statistics
import sys
import time

import pyarrow as pa

import eidos as ei
from eidos import col
from eidos.hal.planner import decide
from eidos.lanes.python_native import FreeLane, pool

LINE = re.compile(r'^(\S+) - (\S+) \[([^\]]+)\] "(GET|POST|PUT|DELETE) ([^ ?"]+)(?:\?([^ "]*))? HTTP/1\.[01]" '
                  r'(\d{3}) (\d+) (\d+)ms$')
PARAM = re.compile(r"(\w+)=(\w+)")
WORDS = ["items", "users", "orders", "search", "static", "api", "v1", "v2", "cart", "login"]


def parse(line: str) -> int | None:
    """Bytes per millisecond of a successful request with a user, else -1; None for a line that does not parse."""
    m = LINE.match(line)
    if m is None:
        return None
    params = dict(PARAM.findall(m.group(6) or ""))
    status, size, ms = int(m.group(7)), int(m.group(8)), int(m.group(9))
    if status >= 400 or "user" not in params:
        return -1
    depth = len([p for p in m.group(5).split("/") if p])
    return size // max(ms, 1) + depth + len(params)


def lines(n: int, seed: int = 7) -> list[str]:
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        path = "/" + "/".join(rnd.choice(WORDS) for _ in range(rnd.randint(1, 4)))
        query = "&".join(f"{k}={rnd.randint(0, 999)}" for k in rnd.sample(["user", "page", "q", "sort"], rnd.randint(0, 3)))
        status = rnd.choice([200, 200, 200, 201, 304, 404, 500])
        line = (f'10.0.{i % 256}.{rnd.randint(1, 254)} - - [01/May/2024:12:{i % 60:02d}:{rnd.randint(0, 59):02d} +0000] '
                f'"{rnd.choice(["GET", "POST", "PUT", "DELETE"])} {path}{"?" + query if query else ""} HTTP/1.1" '
                f'{status} {rnd.randint(100, 90000)} {rnd.randint(1, 900)}ms')
        out.append(line if i % 97 else line.replace("HTTP", "HTTQ"))   # about 1% do not parse
    return out


def cpu_seconds() -> dict[object, float]:
    """CPU seconds used so far by this process (all its threads) and by each idle python-lane worker
    process (from /proc, where there is one): the work a run did, whatever share of the CPUs it got."""
    used: dict[object, float] = {"self": sum(os.times()[:2])}
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    for pid in pool.pids():
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            used[pid] = (int(fields[11]) + int(fields[12])) / tick
        except (OSError, IndexError):
            pass
    return used


def spin(n: int) -> float:
    start, x = time.perf_counter(), 0
    for i in range(n):
        x += i
    return time.perf_counter() - start


def capacity(workers: int, n: int = 20_000_000) -> float:
    """How much faster `workers` processes spinning at once finish than one alone, on this machine now:
    what any parallel run can get here (a shared machine gives less than its CPU count)."""
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(workers) as ex:
        list(ex.map(spin, [1000] * workers))
        alone = min(ex.submit(spin, n).result() for _ in range(2))
        start = time.perf_counter()
        list(ex.map(spin, [n] * workers))
        return workers * alone / (time.perf_counter() - start)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=5, help="rounds: each round times every run once")
    ap.add_argument("--workers", default=None, help="worker counts to try, e.g. 1,2 (default: 1 up to the CPUs)")
    args = ap.parse_args()
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    counts = [int(w) for w in args.workers.split(",")] if args.workers else list(range(1, cpus + 1))

    values = lines(args.rows)
    table = pa.table({"line": pa.array(values, pa.large_string())})
    flow = ei.from_arrow(table).select("line", n=ei.udf(parse, ei.Int64)(col("line")))
    step = flow.plan.optimized   # the Project the planner cuts out for the lane: udf over a column of a scan
    expected = [parse(v) for v in values]

    print(f"python {platform.python_version()} ({sys.implementation.name}), GIL "
          f"{'enabled' if pool.gil_enabled() else 'disabled'}, {cpus} CPUs, pyarrow {pa.__version__}; "
          f"{args.rows:,} rows, {args.runs} rounds; load average {os.getloadavg()[0]:.1f} at start; what this "
          f"machine gives parallel work now (processes spinning at once vs one alone): "
          + ", ".join(f"{n}: {capacity(n):.2f}x" for n in counts if n > 1), flush=True)

    def answer(t: pa.Table) -> list:
        return t.column("n").to_pylist()

    runs: list[tuple[str, object, object]] = [("plain Python loop", lambda: [parse(v) for v in values], lambda r: r)]
    try:
        import polars as pl
    except ImportError:
        print("  polars map_elements: skipped (polars is not installed)")
    else:
        series = pl.Series("line", values)
        runs.append(("polars map_elements", lambda: series.map_elements(parse, return_dtype=pl.Int64),
                     lambda r: r.to_list()))
    single = FreeLane(workers=1)
    runs.append(("python lane, calling thread (workers=1)", lambda: single.execute(step), answer))
    for mode in ("process", "thread"):
        for n in counts:
            lane = FreeLane(workers=n, mode=mode, timeout=3600)   # a timeout: never the calling thread
            if mode == "process":
                start = time.perf_counter()
                lane.execute(ei.from_arrow(table.slice(0, n * 8)).select(
                    "line", n=ei.udf(parse, ei.Int64)(col("line"))).plan.optimized)   # starts the workers
                print(f"  starting {n} worker process(es) and a first tiny step: {time.perf_counter() - start:.3f} s")
            runs.append((f"python lane, {n} worker {mode}{'es' if mode == 'process' else 's'}",
                         lambda lane=lane: lane.execute(step), answer))
    if [b.name for b in ei.backends() if b.kind == "vector" and b.available]:
        ei.register_backend("python", FreeLane())
        finish = decide(flow.plan, "python").lane_name
        where = "one step, the whole plan" if finish == "python" else f"the rest on {finish}"
        runs.append((f"flow.run(engine='python') (mode auto, {cpus} workers: {where})",
                     lambda: flow.run(engine="python"), answer))
    else:
        print("  flow.run(engine='python'): skipped (no vector lane: polars or duckdb)")

    # round by round, every run once a round: a shared machine's load falls on all of them alike
    times: dict[str, list[float]] = {name: [] for name, _, _ in runs}
    cpu: dict[str, list[float]] = {name: [] for name, _, _ in runs}
    for _ in range(args.runs):
        for name, fn, result in runs:
            before, start = cpu_seconds(), time.perf_counter()
            got = fn()
            times[name].append(time.perf_counter() - start)
            after = cpu_seconds()
            cpu[name].append(sum(t - before.get(k, 0.0) for k, t in after.items()))
            assert result(got) == expected, f"{name}: wrong answer"
    rows = [(name, min(ts), statistics.median(ts), min(cpu[name])) for name, ts in times.items()]

    single, single_cpu = next((lo, c) for name, lo, _, c in rows if name == "python lane, calling thread (workers=1)")
    print(f"\nload average {os.getloadavg()[0]:.1f} at the end; parallel capacity now: "
          + ", ".join(f"{n}: {capacity(n):.2f}x" for n in counts if n > 1) + "\n")
    print("| run | min s | median s | CPU s (min) | single thread / this (min) | per-core scaling | CPU: single / this |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, lo, med, c in rows:
        workers = re.search(r"(\d+) worker", name)
        scaling = f"{single / lo / int(workers.group(1)):.2f}" if workers else ""
        print(f"| {name} | {lo:.3f} | {med:.3f} | {c:.3f} | {single / lo:.2f}x | {scaling} | {single_cpu / c:.2f} |")


if __name__ == "__main__":
    main()
