"""Ray's per-stage costs on this machine, TPC-H on the ray lane beside the polars and duckdb lanes, and a
model of SF100 on N nodes built from them.

    python bench/ray.py costs [--repeats 5] [--sizes 64 256 1024] [--partitions 2 4 8 16] [--json F]
    python bench/ray.py volumes [--scale 1]
    python bench/ray.py tpch  [--scale 1] [--runs 5] [--queries q1 q6] [--cpus 1 2] [--json F]
    python bench/ray.py model --costs F --tpch F [--nodes 8 64] [--cores 16] [--net-gbps 25] ...
    python bench/ray.py       (costs, volumes and tpch)

costs: one local Ray started here (2 CPUs, free ports, a temp folder under /tmp, removed at the end), and
  - the anchor: a NumPy copy of 1 GiB, on one thread and on two, and into fresh memory, in the same run;
  - task launch: an empty task's round trip, many empty tasks' throughput, a first task's (cold) start,
    and the floor of a task that runs a tiny eidos plan (run_local: what every stage task of the lane pays);
  - objects: 16 map tasks returning 64 parts each (1 KiB, inlined; 256 KiB, in the store) and the same
    bytes in 16 times fewer parts: what one object costs apart from its bytes;
  - the object store: ray.put and ray.get of Arrow tables of 64 MiB .. 1 GiB (per GB; first touch of the
    store's memory and memory used before), whether a get is zero-copy (the table's buffers lie in the
    store's shared memory, in the driver and in a worker), a task handed the table and a task returning it;
  - a scan task's read of parquet row groups (pyarrow, as the lane's tasks read them) beside Polars';
  - a hash shuffle of TPC-H lineitem on l_orderkey with the lane's own map step (execute.py): map tasks
    (polars hash_rows of the key mod P, a stable argsort, one take, P slices returned with num_returns=P)
    and P reduce tasks concatenating their parts; per GB, for several P, beside the same map work in one
    process without Ray (the compute floor) and Ray Data's own hash shuffle (repartition by keys);
  - Ray's transfer of an object between two nodes (two raylets on this machine, loopback TCP).
volumes: the bytes each join side of Q3, Q5 and Q10 holds (filtered, projected), the rows entering the
  final aggregates, and the parquet bytes each query's scans read: the model's exchanges and reads.
tpch: per number of CPUs (--cpus 1 2), a child process (pinned to that many cores when fewer than the
  machine's, so its Ray, its workers and the local lanes all see a machine of that size) starts a local
  Ray with num_cpus=n and times, in interleaved rounds, native DuckDB and Polars, the polars and duckdb
  lanes, and the ray lane on that Ray (its default partitions, the cluster's CPUs and at least 2; set
  --partitions-tpch to change them). Every result is checked against native DuckDB's.
model: SF100 (--model-scale) on N nodes of C cores from a costs and a tpch run's JSON and the volumes;
  the formula and its assumptions are in predict() and in bench/RESULTS.md.

The TPC-H data is generated on first use into --data (default /tmp/eidos-bench/tpch-sf<scale>; needs
tpchgen-cli). Results and the model built on them: bench/RESULTS.md, section "Ray (the cluster lane)".
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[0] = str(ROOT)   # the repository root; bench/ (this file is ray.py) would shadow the ray package

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402

GiB = 1 << 30
MiB = 1 << 20


def load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def best(fn, repeats: int) -> tuple[float, float]:
    """(min, median) seconds of `repeats` calls of fn(), after one call to warm up."""
    fn()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return min(samples), statistics.median(samples)


def start_ray(cpus: int, store: int) -> tuple[float, str]:
    """A local Ray of our own: free ports (ray.init picks them), a temp folder of our own, `store` bytes
    of object store. Returns (seconds it took, its folder); stop_ray(folder) stops it."""
    import ray

    temp = tempfile.mkdtemp(prefix="rb-", dir="/tmp")   # short: Ray's socket paths must fit 107 bytes
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")   # a private local cluster: no token file needed
    start = time.perf_counter()
    ray.init(num_cpus=cpus, object_store_memory=store, include_dashboard=False, _temp_dir=temp,
             logging_level=logging.WARNING, log_to_driver=False)
    return time.perf_counter() - start, temp


def stop_ray(temp: str) -> None:
    import ray

    ray.shutdown()
    shutil.rmtree(temp, ignore_errors=True)


# ---------------------------------------------------------------- the anchor: memory bandwidth

def copy_bandwidth(repeats: int) -> dict[str, float]:
    """GB/s of a 1 GiB NumPy copy (bytes copied per second; the memory moves twice that: read + write), into
    memory already touched (one thread, two) and into fresh memory (np.copy: the pages are faulted in)."""
    from concurrent.futures import ThreadPoolExecutor

    src = np.random.default_rng(1).integers(0, 1 << 62, GiB // 8)
    dst = np.empty_like(src)
    one, _ = best(lambda: np.copyto(dst, src), repeats)
    fresh, _ = best(lambda: np.copy(src), repeats)   # into memory the process has not touched yet
    half = len(src) // 2
    with ThreadPoolExecutor(2) as pool:   # np.copyto lets go of the GIL: two threads copy at once
        def two():
            list(pool.map(lambda s: np.copyto(dst[s], src[s]), (slice(0, half), slice(half, None))))
        both, _ = best(two, repeats)
    return {"copy 1 thread GB/s": GiB / one / 1e9, "copy 2 threads GB/s": GiB / both / 1e9,
            "copy into fresh memory GB/s": GiB / fresh / 1e9}


# ---------------------------------------------------------------- task launch

def noop():
    return None


def tiny_plan():
    """A task's floor in the lane: run a 3-row eidos plan through run_local, as every stage task does."""
    import eidos as ei
    from eidos.lanes.ray.local import run_local

    flow = ei.from_arrow(pa.table({"a": [1, 2, 3]})).filter(ei.col("a") > 1)
    return run_local(flow.plan).num_rows


def task_costs(repeats: int) -> dict[str, float]:
    import ray

    remote_noop = ray.remote(noop)
    remote_tiny = ray.remote(tiny_plan)
    start = time.perf_counter()
    ray.get(remote_noop.remote())
    out = {"first task (cold worker) s": time.perf_counter() - start}
    ray.get([remote_noop.remote() for _ in range(8)])   # both workers up
    samples = []
    for _ in range(300):
        start = time.perf_counter()
        ray.get(remote_noop.remote())
        samples.append(time.perf_counter() - start)
    out["empty task round trip ms (median)"] = statistics.median(samples) * 1e3
    out["empty task round trip ms (min)"] = min(samples) * 1e3
    n = 2000
    low, _ = best(lambda: ray.get([remote_noop.remote() for _ in range(n)]), repeats)
    out["empty tasks/s (2000 at once)"] = n / low
    ray.get(remote_tiny.remote())   # eidos imported in the worker
    samples = []
    for _ in range(50):
        start = time.perf_counter()
        assert ray.get(remote_tiny.remote()) == 2
        samples.append(time.perf_counter() - start)
    out["tiny eidos plan task ms (median)"] = statistics.median(samples) * 1e3
    return out


# ---------------------------------------------------------------- the object store

def mapping(address: int) -> str:
    """The file mapped at `address` in this process ('' for anonymous memory)."""
    with open("/proc/self/maps") as f:
        for line in f:
            fields = line.split()
            lo, hi = (int(x, 16) for x in fields[0].split("-"))
            if lo <= address < hi:
                return fields[5] if len(fields) > 5 else ""
    return "?"


def shared(table: pa.Table) -> bool:
    """Whether every buffer of `table` lies in Ray's object store (its /dev/shm plasma file): read in place."""
    return all("plasma" in mapping(b.address) for col in table.columns for chunk in col.chunks
               for b in chunk.buffers() if b is not None and b.size)


def read_arg(table: pa.Table) -> tuple[bool, float, float]:
    """In a worker: (the argument is in the store's memory, seconds to sum a column of it, the sum)."""
    start = time.perf_counter()
    total = float(np.sum(table.column("v").to_numpy()))
    return shared(table), time.perf_counter() - start, total


def echo(table: pa.Table) -> pa.Table:
    """A task returning its argument: the worker writes it to the store again (a worker's put)."""
    return table


def numbers(size: int) -> pa.Table:
    rows = size // 16
    rng = np.random.default_rng(size)
    return pa.table({"k": rng.integers(0, 1 << 40, rows), "v": rng.random(rows)})


def store_costs(sizes: list[int], repeats: int, noop_s: float) -> list[dict]:
    import ray

    remote_read = ray.remote(read_arg)
    remote_echo = ray.remote(echo)
    tables = [numbers(size) for size in sizes]
    cold, kept = [], []
    for table in tables:   # a fresh store: each put writes store memory no object has used yet
        start = time.perf_counter()
        kept.append(ray.put(table))
        cold.append(time.perf_counter() - start)
    del kept
    rows = []
    for table, cold_s in zip(tables, cold):
        nbytes = table.nbytes
        put_min, put_med = best(lambda: ray.put(table), repeats)   # each ref dropped at once: its memory reused
        ref = ray.put(table)
        get_min, get_med = best(lambda: ray.get(ref), repeats)
        got = ray.get(ref)
        in_store_driver = shared(got)
        local_sum_s, _ = best(lambda: float(np.sum(table.column("v").to_numpy())), repeats)
        del got
        ray.get(remote_read.remote(ref))   # warm
        arg = []
        for _ in range(repeats):
            start = time.perf_counter()
            in_store_worker, sum_s, total = ray.get(remote_read.remote(ref))
            arg.append((time.perf_counter() - start, sum_s))
        assert abs(total - float(np.sum(table.column("v").to_numpy()))) < 1e-6 * max(1.0, abs(total))
        returned = []
        for _ in range(repeats):
            start = time.perf_counter()
            back = remote_echo.remote(ref)
            ray.wait([back], fetch_local=False)
            returned.append(time.perf_counter() - start)
            del back
        ref = None   # freed in the store
        rows.append({
            "MiB": nbytes / MiB,
            "put, first touch of store memory GB/s": nbytes / cold_s / 1e9,
            "put GB/s": nbytes / put_min / 1e9, "put s/GB": put_min / (nbytes / 1e9),
            "put median s": put_med,
            "get ms (driver)": get_min * 1e3, "get median ms": get_med * 1e3,
            "zero-copy get in driver": in_store_driver,
            "zero-copy get in worker": in_store_worker,
            "task with it as argument ms (over empty, sum excluded)": min(t - x for t, x in arg) * 1e3 - noop_s * 1e3,
            "worker sums a column GB/s": (nbytes / 2) / min(s for _, s in arg) / 1e9,
            "driver sums its own column GB/s": (nbytes / 2) / local_sum_s / 1e9,
            "task returning it s/GB (worker put)": (min(returned) - noop_s) / (nbytes / 1e9),
        })
    return rows


# ---------------------------------------------------------------- the hash shuffle

def hash_parts(table: pa.Table, key: str, partitions: int) -> tuple[pa.Table, ...]:
    """The lane's own map step (execute.py _hashed and _parts): polars hash_rows of the key with the lane's
    seed, mod P, a stable argsort, one take, P zero-copy slices."""
    from eidos.ir import expr as E
    from eidos.lanes.ray import execute
    from eidos.lanes.ray.stages import HASH, Exchange

    out = Exchange(HASH, partitions, keys=(E.Column(key),), types=(None,))
    return execute._parts(table, execute._hashed(table, out), partitions)


def reduce_parts(*parts: pa.Table) -> tuple[int, int]:
    """The lane's reduce step's input: the parts concatenated (zero-copy); (rows, sum of the key) to check."""
    table = pa.concat_tables(parts)
    return table.num_rows, int(np.sum(table.column(0).to_numpy())) if table.num_rows else 0


def even_parts(table: pa.Table, partitions: int) -> tuple[pa.Table, ...]:
    """`table` cut into `partitions` equal slices: a map step with no work but its returns."""
    n = table.num_rows
    return tuple(table.slice(n * j // partitions, n * (j + 1) // partitions - n * j // partitions)
                 for j in range(partitions))


def object_costs(repeats: int, maps: int = 16, partitions: int = 64) -> list[dict]:
    """What each of the maps x partitions objects of a shuffle costs, apart from its bytes: parts of 1 KiB
    (under Ray's 100 KiB inlining threshold: they travel through the owner, the driver), of 256 KiB (each
    one an object in the store), and the same bytes as the latter in 16 times fewer, larger parts."""
    import ray

    remote_reduce = ray.remote(reduce_parts)
    rows = []
    for part, p in ((1 << 10, partitions), (256 << 10, partitions), (4 << 20, partitions // 16)):
        remote_map = ray.remote(num_returns=p)(even_parts)
        refs = [ray.put(numbers(part * p)) for _ in range(maps)]

        def shuffle():
            outs = [remote_map.remote(r, p) for r in refs]
            ray.get([remote_reduce.remote(*(outs[i][j] for i in range(maps))) for j in range(p)])

        low, med = best(shuffle, repeats)
        rows.append({"part KiB": part >> 10, "maps x reduces": f"{maps} x {p}", "s": low, "median s": med,
                     "us per object": low / (maps * p) * 1e6, "MB/s": maps * p * part / low / 1e6})
        refs = None
    return rows


def scan_costs(data: str, repeats: int) -> dict[str, float]:
    """A scan task's read: half of lineitem's row groups, Q6's four columns (three of them decimals, stored
    as fixed-size binaries), read the way execute.py reads them (pyarrow read_row_groups) and the way the
    polars lane reads a file (scan_parquet, the same rows as a slice)."""
    import polars as pl
    import pyarrow.parquet as pq

    path = f"{data}/lineitem.parquet"
    cols = ["l_quantity", "l_extendedprice", "l_discount", "l_shipdate"]
    meta = pq.ParquetFile(path).metadata
    groups = list(range(meta.num_row_groups // 2))
    rows = sum(meta.row_group(g).num_rows for g in groups)
    arrow_s, _ = best(lambda: pq.ParquetFile(path).read_row_groups(groups, columns=cols), repeats)
    polars_s, _ = best(lambda: pl.scan_parquet(path).slice(0, rows).select(cols).collect(), repeats)
    dates_s, _ = best(lambda: pq.ParquetFile(path).read_row_groups(groups, columns=cols[3:]), repeats)
    return {"rows": rows, "pyarrow read_row_groups s": arrow_s, "polars scan_parquet slice s": polars_s,
            "pyarrow, the date column alone s": dates_s, "pyarrow / polars": arrow_s / polars_s}


def lineitem(data: str, size: int | None) -> pa.Table:
    import pyarrow.parquet as pq

    table = pq.read_table(f"{data}/lineitem.parquet")
    if size is not None and size < table.nbytes:
        table = table.slice(0, int(table.num_rows * size / table.nbytes))
    return table.combine_chunks()


def shuffle_costs(data: str, sizes: list[int | None], partitions: list[int], repeats: int,
                  ray_data: bool) -> list[dict]:
    import ray

    remote_reduce = ray.remote(reduce_parts)
    rows = []
    for size in sizes:
        table = lineitem(data, size)
        nbytes, n = table.nbytes, table.num_rows
        want = (n, int(np.sum(table.column("l_orderkey").to_numpy())))
        local_min, _ = best(lambda: hash_parts(table, "l_orderkey", 8), repeats)
        rows.append({"MiB": nbytes / MiB, "how": "map work in one process (no Ray), P=8",
                     "s": local_min, "s/GB": local_min / (nbytes / 1e9)})
        for p in partitions:
            m = p
            blocks = [table.slice(n * i // m, n * (i + 1) // m - n * i // m) for i in range(m)]
            start = time.perf_counter()
            refs = [ray.put(b) for b in blocks]
            put_s = time.perf_counter() - start
            remote_map = ray.remote(num_returns=p)(hash_parts)

            def shuffle():
                parts = [remote_map.remote(r, "l_orderkey", p) for r in refs]
                parts = [[x] for x in parts] if p == 1 else parts
                done = ray.get([remote_reduce.remote(*(parts[i][j] for i in range(m))) for j in range(p)])
                assert (sum(r for r, _ in done), sum(s for _, s in done)) == want, "shuffle lost rows"

            low, med = best(shuffle, repeats)
            rows.append({"MiB": nbytes / MiB, "how": f"Ray tasks, {m} maps x {p} reduces", "s": low,
                         "median s": med, "s/GB": low / (nbytes / 1e9), "input put s": put_s})
            refs = None
        if ray_data:
            rows.append(ray_data_shuffle(table, max(partitions), repeats))
        table = None
    return rows


def ray_data_shuffle(table: pa.Table, partitions: int, repeats: int) -> dict:
    """Ray Data's own hash shuffle of the same table (repartition by the key), for comparison."""
    import ray
    import ray.data

    ray.data.DataContext.get_current().enable_progress_bars = False
    n, nbytes = table.num_rows, table.nbytes
    refs = [ray.put(table.slice(n * i // partitions, n * (i + 1) // partitions - n * i // partitions))
            for i in range(partitions)]

    def shuffle():
        ds = ray.data.from_arrow_refs(refs).repartition(partitions, keys=["l_orderkey"]).materialize()
        assert ds.count() == n

    try:
        low, med = best(shuffle, max(1, repeats // 2))
    except Exception as e:   # reported, not hidden: Ray Data's shuffle may not run on so small a cluster
        return {"MiB": nbytes / MiB, "how": f"Ray Data repartition(keys), P={partitions}",
                "failed": f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"}
    return {"MiB": nbytes / MiB, "how": f"Ray Data repartition(keys), P={partitions}", "s": low,
            "median s": med, "s/GB": low / (nbytes / 1e9)}


def far_rows(table: pa.Table) -> int:
    return table.num_rows


def transfer_costs(sizes: list[int], repeats: int, store: int) -> list[dict]:
    """A table put on one node and read by a task on another: two raylets on this machine
    (ray.cluster_utils.Cluster), so the bytes go through Ray's object transfer over loopback TCP: Ray's
    own ceiling for moving objects between nodes here, without a network's limit."""
    import ray
    from ray.cluster_utils import Cluster

    temp = tempfile.mkdtemp(prefix="rb-", dir="/tmp")
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "object_store_memory": store,
                                                            "temp_dir": temp, "include_dashboard": False})
    rows = []
    try:
        cluster.add_node(num_cpus=1, object_store_memory=store, resources={"far": 1})
        ray.init(address=cluster.address, logging_level=logging.WARNING, log_to_driver=False)
        remote_rows = ray.remote(resources={"far": 1}, num_cpus=0)(far_rows)
        remote_noop = ray.remote(resources={"far": 1}, num_cpus=0)(noop)
        ray.get(remote_noop.remote())
        noop_s, _ = best(lambda: ray.get(remote_noop.remote()), repeats)
        for size in sizes:
            table = numbers(size)
            samples = []
            for _ in range(repeats):
                ref = ray.put(table)   # a new object each time: the far node has no copy of it yet
                start = time.perf_counter()
                assert ray.get(remote_rows.remote(ref)) == table.num_rows
                samples.append(time.perf_counter() - start)
                ref = None
            rows.append({"MiB": table.nbytes / MiB, "s": min(samples),
                         "GB/s": table.nbytes / (min(samples) - noop_s) / 1e9})
    finally:
        ray.shutdown()
        cluster.shutdown()
        shutil.rmtree(temp, ignore_errors=True)
    return rows


def costs(a) -> dict:
    import ray

    print(f"load average at the start: {load()}")
    result = {"anchor": copy_bandwidth(a.repeats)}
    for k, v in result["anchor"].items():
        print(f"  {k:40} {v:8.2f}")
    result["ray start s"], temp = start_ray(2, a.store * GiB)
    try:
        print(f"ray {ray.__version__}: a local Ray with 2 CPUs and {a.store} GiB of object store, started in "
              f"{result['ray start s']:.2f} s")
        result["tasks"] = task_costs(a.repeats)
        for k, v in result["tasks"].items():
            print(f"  {k:40} {v:10.3f}")
        noop_s = result["tasks"]["empty task round trip ms (min)"] / 1e3
        result["objects"] = object_costs(a.repeats)
        for row in result["objects"]:
            print("  " + ", ".join(f"{k} {_fmt(v)}" for k, v in row.items()))
        result["store"] = store_costs([s * MiB for s in a.sizes], a.repeats, noop_s)
        for row in result["store"]:
            print("  " + ", ".join(f"{k} {_fmt(v)}" for k, v in row.items()))
        data = str(tpch_data_dir(a))
        result["scan"] = scan_costs(data, a.repeats)
        print("  scan task read: " + ", ".join(f"{k} {_fmt(v)}" for k, v in result["scan"].items()))
        sizes = [256 * MiB, None]
        result["shuffle"] = shuffle_costs(data, sizes, a.partitions, a.repeats, not a.no_ray_data)
        for row in result["shuffle"]:
            print("  " + ", ".join(f"{k} {_fmt(v)}" for k, v in row.items()))
    finally:
        stop_ray(temp)
    result["transfer"] = transfer_costs([s * MiB for s in a.sizes], a.repeats, a.store * GiB)
    print("two nodes on this machine, a task on one reading an object put on the other:")
    for row in result["transfer"]:
        print("  " + ", ".join(f"{k} {_fmt(v)}" for k, v in row.items()))
    print(f"load average at the end: {load()}")
    return result


def _fmt(v) -> str:
    return f"{v:.3f}" if isinstance(v, float) else str(v)


# ---------------------------------------------------------------- what the joins of Q3, Q5, Q10 exchange

def exchange_volumes(data: str) -> dict[str, list[tuple[str, int]]]:
    """Bytes (Arrow, as Polars estimates them) of each side of each join of Q3, Q5 and Q10 at this scale,
    filtered and cut to the columns the rest of the query reads (as projection pushdown leaves them), in
    the queries' join order, and of the rows entering the final aggregate of Q1, Q3, Q6 and Q10 (what a
    hash exchange of rows moves when the aggregate has no partial states). The model in bench/RESULTS.md
    scales them to SF100 and applies the lane's broadcast rule to each join."""
    import datetime as dt

    import polars as pl

    def scan(name: str, *cols: str) -> pl.LazyFrame:
        return pl.scan_parquet(f"{data}/{name}.parquet").select(cols)

    def size(frame: pl.LazyFrame) -> tuple[pl.DataFrame, int]:
        got = frame.collect()
        return got, int(got.estimated_size())

    out = {}
    # Q1: its aggregate's input rows (what a hash exchange of rows moves when there are no partial states)
    _, rows = size(scan("lineitem", "l_returnflag", "l_linestatus", "l_quantity", "l_extendedprice", "l_discount",
                        "l_tax", "l_shipdate").filter(pl.col("l_shipdate") <= dt.date(1998, 9, 2)).drop("l_shipdate"))
    out["q1"] = [("aggregate input (rows)", rows)]
    # Q3: customer(BUILDING) x orders(< 1995-03-15) x lineitem(> 1995-03-15)
    cust, c = size(scan("customer", "c_custkey", "c_mktsegment").filter(pl.col("c_mktsegment") == "BUILDING")
                   .select("c_custkey"))
    ords, o = size(scan("orders", "o_orderkey", "o_custkey", "o_orderdate", "o_shippriority")
                   .filter(pl.col("o_orderdate") < dt.date(1995, 3, 15)))
    co, j = size(cust.lazy().join(ords.lazy(), left_on="c_custkey", right_on="o_custkey")
                 .select("o_orderkey", "o_orderdate", "o_shippriority"))
    lines, li = size(scan("lineitem", "l_orderkey", "l_extendedprice", "l_discount", "l_shipdate")
                     .filter(pl.col("l_shipdate") > dt.date(1995, 3, 15)).drop("l_shipdate"))
    _, agg = size(co.lazy().join(lines.lazy(), left_on="o_orderkey", right_on="l_orderkey"))
    out["q3"] = [("customer (BUILDING)", c), ("orders (date <)", o), ("customer x orders", j), ("lineitem (date >)", li),
                 ("aggregate input (rows)", agg)]
    # Q5: customer x orders(1994) x lineitem x supplier x nation x region
    cust, c = size(scan("customer", "c_custkey", "c_nationkey"))
    ords, o = size(scan("orders", "o_orderkey", "o_custkey", "o_orderdate")
                   .filter(pl.col("o_orderdate").is_between(dt.date(1994, 1, 1), dt.date(1995, 1, 1), closed="left"))
                   .drop("o_orderdate"))
    co, j = size(cust.lazy().join(ords.lazy(), left_on="c_custkey", right_on="o_custkey")
                 .select("o_orderkey", "c_nationkey"))
    lines, li = size(scan("lineitem", "l_orderkey", "l_suppkey", "l_extendedprice", "l_discount"))
    col, j2 = size(co.lazy().join(lines.lazy(), left_on="o_orderkey", right_on="l_orderkey").drop("o_orderkey"))
    _, s = size(scan("supplier", "s_suppkey", "s_nationkey"))
    out["q5"] = [("customer", c), ("orders (1994)", o), ("customer x orders", j), ("lineitem", li),
                 ("... x lineitem", j2), ("supplier", s)]
    out["q6"] = [("aggregate input (rows)", size(scan("lineitem", "l_quantity", "l_extendedprice", "l_discount",
                                                      "l_shipdate")
                                                 .filter(pl.col("l_shipdate").is_between(dt.date(1994, 1, 1),
                                                                                         dt.date(1995, 1, 1),
                                                                                         closed="left")
                                                         & pl.col("l_discount").is_between(0.05, 0.07)
                                                         & (pl.col("l_quantity") < 24))
                                                 .select("l_extendedprice", "l_discount"))[1])]
    # Q10: customer x orders(Q4 1993) x lineitem(R) x nation
    cols = ("c_custkey", "c_name", "c_acctbal", "c_phone", "c_nationkey", "c_address", "c_comment")
    cust, c = size(scan("customer", *cols))
    ords, o = size(scan("orders", "o_orderkey", "o_custkey", "o_orderdate")
                   .filter(pl.col("o_orderdate").is_between(dt.date(1993, 10, 1), dt.date(1994, 1, 1), closed="left"))
                   .drop("o_orderdate"))
    co, j = size(cust.lazy().join(ords.lazy(), left_on="c_custkey", right_on="o_custkey"))
    lines, li = size(scan("lineitem", "l_orderkey", "l_extendedprice", "l_discount", "l_returnflag")
                     .filter(pl.col("l_returnflag") == "R").drop("l_returnflag"))
    _, agg = size(co.lazy().join(lines.lazy(), left_on="o_orderkey", right_on="l_orderkey").drop("o_orderkey"))
    out["q10"] = [("customer", c), ("orders (Q4 1993)", o), ("customer x orders", j), ("lineitem (R)", li),
                  ("aggregate input (rows)", agg)]
    return out


def scanned_bytes(data: str, queries: list[str]) -> dict[str, tuple[int, int]]:
    """Per query, (compressed bytes in the parquet files, uncompressed bytes) of the columns its scans read,
    after eidos's projection pruning: what its scan stage reads from storage and decodes."""
    import pyarrow.parquet as pq

    from eidos.hal import planner
    from eidos.ir import nodes as N
    from examples.tpch.queries import QUERIES

    out = {}
    for name in queries:
        packed = plain = 0
        for node in planner.decide(QUERIES[name](data).plan, "polars").plan.walk():
            if isinstance(node, N.Scan) and hasattr(node.source, "files"):
                for path in node.source.files:
                    meta = pq.ParquetFile(path).metadata
                    for g in range(meta.num_row_groups):
                        for c in range(meta.num_columns):
                            col = meta.row_group(g).column(c)
                            if node.columns is None or col.path_in_schema in node.columns:
                                packed += col.total_compressed_size
                                plain += col.total_uncompressed_size
        out[name] = (packed, plain)
    return out


def volumes(a) -> dict:
    data = str(tpch_data_dir(a))
    found = {"exchanges": exchange_volumes(data), "scanned": scanned_bytes(data, a.queries)}
    print(f"bytes each join side holds at SF{a.scale:g} (x100 for SF100), after filters and projection:")
    for name, sides in found["exchanges"].items():
        print(f"  {name}: " + ", ".join(f"{what} {b / MiB:.1f} MiB" for what, b in sides))
    print("parquet bytes each query's scans read (compressed / uncompressed):")
    for name, (packed, plain) in found["scanned"].items():
        print(f"  {name}: {packed / MiB:.1f} / {plain / MiB:.1f} MiB")
    return found


# ---------------------------------------------------------------- the model: SF100 on N nodes

# The exchanges of each query at a large scale, in the lane's terms: ("join", [side, side]) broadcasts a side
# under the broadcast threshold, else hashes both; ("hash", [what]) hashes it. Q1's and Q6's aggregates, and
# Q3's (whose groups lie within one order, so within one partition after the join), move partial states of a
# few bytes to kilobytes a task: left out. Q10's groups (customers) spread over the join's partitions: its
# partial states are counted at the size of the aggregate's input rows (an upper bound).
EXCHANGES = {
    "q1": [],
    "q3": [("join", ["customer (BUILDING)", "orders (date <)"]), ("join", ["customer x orders", "lineitem (date >)"])],
    "q5": [("join", ["customer", "orders (1994)"]), ("join", ["customer x orders", "lineitem"]),
           ("join", ["... x lineitem", "supplier"])],
    "q6": [],
    "q10": [("join", ["customer", "orders (Q4 1993)"]), ("join", ["customer x orders", "lineitem (R)"]),
            ("hash", ["aggregate input (rows)"])],
}


def predict(q: str, m: dict, nodes: int, cores: int, net: float, storage: float, today: bool) -> dict:
    """Seconds of query `q` at m["scale"] on `nodes` nodes of `cores` cores (see bench/RESULTS.md, Ray).

    today: the lane as measured (its 1-CPU SF1 time as the work; every map task returns one object per
    partition, P = the cluster's CPUs: P^2 objects an exchange); else the lane with tasks reading parquet as
    the polars lane does (the best local lane's 1-CPU time as the work) and the map outputs of a node
    combined and split by destination node (N^2 objects an exchange)."""
    scale, cpus = m["scale"], nodes * cores
    sizes = dict(m["volumes"].get(q, []))
    w = m["work_ray" if today else "work_local"][q] * scale
    hashed, broadcast, exchanges = 0.0, 0.0, 0
    for how, sides in EXCHANGES[q]:
        got = [sizes[x] * scale for x in sides]
        if how == "join" and min(got) < m["broadcast"]:
            broadcast += min(got)
        else:
            hashed += sum(got)
            exchanges += len(got)
    cpu = (w + hashed / 1e9 * m["shuffle_core_s_per_gb"]) / cpus
    io = m["scanned"][q] * scale / (nodes * storage)
    net_s = hashed * (nodes - 1) / nodes ** 2 / net + broadcast / net
    each = cpus * cpus if today else nodes * nodes
    objects, part = exchanges * each, hashed / max(1, exchanges) / each
    overhead = objects * m["object_s"] + m["stages"][q] * cpus / m["tasks_per_s"] + m["stages"][q] * m["round_trip_s"]
    return {"cpu": cpu, "io": io, "net": net_s, "objects": objects, "part": part,
            "overhead": overhead, "total": max(cpu, io) + net_s + overhead,
            "hashed GB": hashed / 1e9, "inline": exchanges > 0 and part < m["inline"]}


def model(a) -> dict:
    """The SF100 predictions from this machine's figures (--costs and --tpch: JSON files this script wrote
    with --json) and the volumes measured on the SF1 data."""
    costs = json.loads(Path(a.costs).read_text())["costs"]
    runs = json.loads(Path(a.tpch).read_text())["tpch"]
    data = str(tpch_data_dir(a))
    one = runs.get("1") or runs.get(1)
    queries = [q for q in a.queries if q in EXCHANGES]
    shuffles = [r for r in costs["shuffle"] if r["how"].startswith("Ray tasks") and r["MiB"] > 512]
    small, large = (next(r for r in costs["objects"] if r["part KiB"] == k) for k in (256, 4096))
    count = {r["part KiB"]: math.prod(int(x) for x in r["maps x reduces"].split(" x ")) for r in (small, large)}
    m = {"scale": a.model_scale, "broadcast": 64 * MiB, "inline": 100 * 1024,
         "volumes": exchange_volumes(data), "scanned": {q: b for q, (b, _) in scanned_bytes(data, queries).items()},
         "work_ray": {q: one["median"][q]["eidos ray"] for q in queries},
         "work_local": {q: min(one["median"][q][x] for x in ("eidos polars", "eidos duckdb")) for q in queries},
         "shuffle_core_s_per_gb": 2 * min(r["s/GB"] for r in shuffles),   # both cores busy
         # an object's own cost: the same bytes in 16 times more objects, the extra time per extra object
         "object_s": a.object_us / 1e6 if a.object_us else (small["s"] - large["s"]) / (count[256] - count[4096]),
         "tasks_per_s": a.tasks_per_s or costs["tasks"]["empty tasks/s (2000 at once)"],
         "round_trip_s": costs["tasks"]["empty task round trip ms (median)"] / 1e3,
         "stages": {q: _stage_count(q, data) for q in queries},
         "transfer": max((r["GB/s"] for r in costs.get("transfer", [])), default=0) * 1e9}
    print(f"model inputs: shuffle {m['shuffle_core_s_per_gb']:.2f} core-s/GB, {m['object_s'] * 1e6:.0f} us an object, "
          f"{m['tasks_per_s']:.0f} tasks/s, round trip {m['round_trip_s'] * 1e3:.2f} ms; work core-s at SF1 (ray lane / "
          f"best local lane, 1 CPU): " + ", ".join(f"{q} {m['work_ray'][q]:.2f}/{m['work_local'][q]:.2f}" for q in queries))
    out = {}
    # and Daft's published SF100 setup: 4 nodes of 8 vCPUs, up to 10 Gb/s, parquet read from S3
    for nodes, cores, gbps, storage in [(n, a.cores, a.net_gbps, a.storage_gbs) for n in a.nodes] + \
            [(4, 8, 10, 1.0)]:
        net = gbps / 8 * 1e9 * a.net_efficiency
        if m["transfer"]:
            net = min(net, m["transfer"])
        print(f"\nSF{m['scale']:g} on {nodes} nodes x {cores} cores, {gbps:g} Gb/s ({a.net_efficiency:.0%} of it; "
              f"a node receives at {net / 1e9:.2f} GB/s), storage {storage:g} GB/s a node")
        print(f"{'query':6} {'lane':7} {'total s':>8} {'cpu':>7} {'io':>6} {'net':>6} {'overhead':>9} "
              f"{'hashed GB':>10} {'objects':>9} {'part KiB':>9}")
        for q in queries:
            for today in (True, False):
                r = predict(q, m, nodes, cores, net, storage * 1e9, today)
                out[f"{q} {nodes}x{cores} {'today' if today else 'fixed'}"] = r
                print(f"{q:6} {'today' if today else 'fixed':7} {r['total']:8.2f} {r['cpu']:7.2f} {r['io']:6.2f} "
                      f"{r['net']:6.2f} {r['overhead']:9.2f} {r['hashed GB']:10.1f} {r['objects']:9.0f} "
                      f"{r['part'] / 1024:9.1f}{' inline: through the driver' if r['inline'] else ''}")
    return out


def _stage_count(q: str, data: str) -> int:
    from eidos.hal import planner
    from eidos.lanes.ray import RayLane
    from examples.tpch.queries import QUERIES

    return sum(1 for _ in RayLane().stages(planner.decide(QUERIES[q](data).plan, "ray").plan, 2).walk())


# ---------------------------------------------------------------- TPC-H

def tpch_data_dir(a) -> Path:
    from examples.tpch import data as tpch_data

    data = Path(a.data or f"/tmp/eidos-bench/tpch-sf{a.scale:g}")
    tpch_data.ensure(a.scale, data, level=3)
    return data


def tpch(a) -> dict:
    """One child per CPU count (see the module's docstring); their figures side by side."""
    data = tpch_data_dir(a)
    print(f"data: {data}; load average at the start: {load()}")
    found = {}
    for cpus in a.cpus:
        args = [sys.executable, __file__, "tpch-child", "--cpus", str(cpus), "--data", str(data),
                "--runs", str(a.runs), "--store", str(a.store), "--queries", *a.queries]
        if a.partitions_tpch:
            args += ["--partitions-tpch", str(a.partitions_tpch)]
        out = subprocess.run(args, stdout=subprocess.PIPE, text=True, check=True).stdout
        lines = out.splitlines()
        print("\n".join(line for line in lines if not line.startswith("{")))
        found[cpus] = json.loads(next(line for line in lines if line.startswith("{")))
    print(f"\nload average at the end: {load()}")
    print("summary: median s (min s); ratios of medians")
    labels = ["polars native", "duckdb native", "eidos polars", "eidos duckdb", "eidos ray"]
    for name in a.queries:
        print(f"\n{name:6} {'cpus':>4} " + " ".join(f"{x:>17}" for x in labels)
              + f" {'ray/polars lane':>16} {'ray/best lane':>14}")
        for cpus in a.cpus:
            med, low = found[cpus]["median"][name], found[cpus]["min"][name]
            cells = [f"{med[x]:.3f} ({low[x]:.3f})" if x in med else "failed" for x in labels]
            lanes = [med[x] for x in ("eidos polars", "eidos duckdb") if x in med]
            ray_med = med.get("eidos ray")
            r1 = f"{ray_med / med['eidos polars']:.2f}" if ray_med and "eidos polars" in med else "n/a"
            r2 = f"{ray_med / min(lanes):.2f}" if ray_med and lanes else "n/a"
            print(f"{name:6} {cpus:>4} " + " ".join(f"{c:>17}" for c in cells) + f" {r1:>16} {r2:>14}")
        if len(a.cpus) > 1:
            first, last = a.cpus[0], a.cpus[-1]
            speedups = [f"{x} {found[first]['median'][name][x] / found[last]['median'][name][x]:.2f}x"
                        for x in labels if x in found[first]["median"][name] and x in found[last]["median"][name]]
            print(f"{name:6} {first}->{last} CPUs: " + ", ".join(speedups))
    return found


def tpch_child(a) -> None:
    if a.cpus < (os.cpu_count() or 1):
        os.sched_setaffinity(0, set(sorted(os.sched_getaffinity(0))[:a.cpus]))   # before any engine starts
    if a.partitions_tpch:
        os.environ["EIDOS_RAY_PARTITIONS"] = str(a.partitions_tpch)
    import duckdb
    import polars as pl
    import ray

    import eidos as ei
    from bench import tpch as bench
    from examples.tpch.queries import QUERIES

    started, temp = start_ray(a.cpus, a.store * GiB)
    try:
        from eidos.lanes.ray import RayLane, connect

        cluster = connect.connect()
        parts = RayLane().partition_count(cluster.cpus)
        print(f"\n== {a.cpus} CPU{'s' if a.cpus > 1 else ''}: cores {sorted(os.sched_getaffinity(0))}, a local Ray "
              f"with num_cpus={a.cpus} ({cluster.where()}; started in {started:.1f} s), ray lane partitions "
              f"{parts}; polars {pl.__version__} ({pl.thread_pool_size()} threads), duckdb {duckdb.__version__}, "
              f"ray {ray.__version__}, eidos {ei.__version__}, python {platform.python_version()}; runs={a.runs}; "
              f"load average {load()}")
        con = duckdb.connect()
        natives = bench.polars_queries(a.data)
        medians, mins = {}, {}
        for name in a.queries:
            flow = QUERIES[name](a.data)
            variants = {"duckdb native": lambda: bench.native_duckdb_answer(con, name, a.data),
                        "polars native": lambda: natives[name]().collect().to_arrow()}
            for lane in ("polars", "duckdb", "ray"):
                variants[f"eidos {lane}"] = lambda lane=lane: flow.run(engine=lane, strict=True)
            times, results = bench.timed(variants, a.runs)
            expected = results["duckdb native"]
            print(f"{name:6} {'what':14} {'min s':>8} {'median s':>9}  check")
            for label, res in results.items():
                if isinstance(res, Exception):
                    print(f"{name:6} {label:14} failed: {type(res).__name__}: {str(res).splitlines()[0]}")
                    continue
                check = "(answer)" if label == "duckdb native" else \
                    bench.same(res, expected, native=label.endswith("native"))
                print(f"{name:6} {label:14} {min(times[label]):8.4f} {statistics.median(times[label]):9.4f}  {check}")
            medians[name] = {k: statistics.median(v) for k, v in times.items()}
            mins[name] = {k: min(v) for k, v in times.items()}
        print(f"load average after the {a.cpus}-CPU runs: {load()}")
        print(json.dumps({"median": medians, "min": mins}))
    finally:
        stop_ray(temp)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("what", nargs="?", choices=("costs", "volumes", "tpch", "tpch-child", "model", "all"), default="all")
    p.add_argument("--repeats", type=int, default=5, help="costs: timed repeats of each measurement")
    p.add_argument("--sizes", type=int, nargs="*", default=[64, 256, 1024], help="costs: object sizes, MiB")
    p.add_argument("--partitions", type=int, nargs="*", default=[2, 4, 8, 16], help="costs: shuffle partitions")
    p.add_argument("--no-ray-data", action="store_true", help="costs: skip Ray Data's shuffle")
    p.add_argument("--store", type=int, default=4, help="object store GiB of each Ray started")
    p.add_argument("--scale", type=float, default=1.0)
    p.add_argument("--data", default=None, help="folder of <table>.parquet (default /tmp/eidos-bench/tpch-sf<scale>)")
    p.add_argument("--runs", type=int, default=5, help="tpch: timed rounds")
    p.add_argument("--queries", nargs="*", default=["q1", "q3", "q5", "q6", "q10"])
    p.add_argument("--cpus", type=int, nargs="*", default=[1, 2], help="tpch: local Ray sizes (num_cpus)")
    p.add_argument("--partitions-tpch", type=int, default=None, help="tpch: the ray lane's partitions")
    p.add_argument("--json", default=None, help="also write the figures to this file")
    p.add_argument("--costs", default=None, help="model: the JSON of a costs run")
    p.add_argument("--tpch", default=None, help="model: the JSON of a tpch run")
    p.add_argument("--model-scale", type=float, default=100.0, help="model: the scale factor predicted")
    p.add_argument("--nodes", type=int, nargs="*", default=[8, 64], help="model: cluster sizes")
    p.add_argument("--cores", type=int, default=16, help="model: cores a node")
    p.add_argument("--net-gbps", type=float, default=25.0, help="model: network Gb/s a node")
    p.add_argument("--net-efficiency", type=float, default=0.7, help="model: share of the link a shuffle gets")
    p.add_argument("--storage-gbs", type=float, default=2.0, help="model: parquet read GB/s a node")
    p.add_argument("--object-us", type=float, default=None, help="model: an object's cost (default: measured)")
    p.add_argument("--tasks-per-s", type=float, default=None, help="model: tasks the driver starts a second "
                   "(default: measured)")
    a = p.parse_args(argv)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, {platform.python_version()}, "
          f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / GiB:.0f} GiB memory")
    if a.what == "tpch-child":
        a.cpus = a.cpus[0]
        tpch_child(a)
        return 0
    found = {}
    if a.what in ("costs", "all"):
        found["costs"] = costs(a)
    if a.what in ("volumes", "all"):
        found["volumes"] = volumes(a)
    if a.what in ("tpch", "all"):
        found["tpch"] = tpch(a)
    if a.what == "model":
        found["model"] = model(a)
    if a.json:
        Path(a.json).write_text(json.dumps(found, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
