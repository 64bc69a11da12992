"""A Flow of heavy numeric maps on the Triton lane next to the Polars lane, in one run.

Run on the GPU machine:  python bench/gpu_flow.py [--rows 100000000] [--repeats 5]
                         python bench/gpu_flow.py --crossover --out triton_cost.json
Run here (no GPU):       python bench/gpu_flow.py --smoke [--crossover --out x.json]   (a few thousand rows,
                         Triton's interpreter)

--crossover times the same Flows at growing row counts (1e4 .. 1e8; --sizes) on both lanes, prints
min / median of each and the planner's cost-model estimates beside them, and the row count and
input bytes from which the triton lane wins (it wins at that size and every larger one measured).
It fits the cost model's fixed costs and copy rates to the run (src/eidos/lanes/triton/cost.py)
and writes all of it as JSON to --out: EIDOS_TRITON_COST=that.json makes the planner use the
fitted constants; the printed provenance line goes into bench/RESULTS.md beside the run.

Each case is a Flow over in-memory Arrow columns (float64 x, y; int32 k; float64 z with 1% nulls):
maps (exp, tanh, log, sqrt, arithmetic, a when/then), a filter, then a global aggregation or a
group_by over k. Both lanes get the same Flow; the answers are compared (the triton lane's float
sums are correctly rounded, the polars lane's too: docs/semantics.md), and min / median wall time of
several runs are printed with the ratio. The same queries written in native Polars (float sums not
correctly rounded) are timed beside them, as what a user would write instead. The times include moving the columns to the device and the
results back (the lane's whole job); the host->device copy of the inputs alone is printed as the
physical floor of that part.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time


def setup(smoke: bool) -> str:
    """Interpreter and kernel target for a machine without a GPU (before triton is imported)."""
    import torch

    note = ""
    if not torch.cuda.is_available():
        if not smoke:
            sys.exit("no CUDA device: run with --smoke here, or on the GPU machine without it")
        os.environ.setdefault("TRITON_INTERPRET", "1")
        note = "Triton interpreter (no GPU)"
    return note or f"CUDA: {torch.cuda.get_device_name()}"


def data(rows: int):
    import numpy as np
    import pyarrow as pa

    rng = np.random.default_rng(0)
    z = rng.normal(size=rows)
    return pa.table({"x": rng.random(rows), "y": rng.random(rows) + 0.5, "k": rng.integers(0, 16, rows, dtype=np.int32),
                     "z": pa.array(z, mask=rng.random(rows) < 0.01)})


def flows(table):
    import eidos as ei
    from eidos import col, when

    base = ei.from_arrow(table).with_columns(
        u=((col("x") * 2 + 1).exp() * col("y")),
        v=(col("x") - col("y")).tanh() * (col("y") + 0.5).log(),
        w=(col("x") * col("x") + col("y") * col("y")).sqrt() + when(col("z") > 0).then(col("z")).otherwise(0.0),
    ).filter((col("u") > 1.5) & (col("v") < 0.25))
    return {
        "maps + filter + global agg": base.agg(s=col("u").sum(), m=col("v").mean(), top=col("w").max(),
                                                lo=col("z").min(), n=ei.count()),
        "maps + filter + group_by k": base.group_by("k").agg(s=col("u").sum(), m=col("w").mean(), n=ei.count()),
    }


def native_polars(table):
    """The same queries written directly in Polars (what a user would write instead; its float sums
    are not correctly rounded), or {} when Polars is absent."""
    try:
        import polars as pl
    except ImportError:
        return {}
    x, y, z = pl.col("x"), pl.col("y"), pl.col("z")
    df = pl.from_arrow(table)

    def base():
        return df.lazy().with_columns(
            u=((x * 2 + 1).exp() * y), v=(x - y).tanh() * (y + 0.5).log(),
            w=(x * x + y * y).sqrt() + pl.when(z > 0).then(z).otherwise(0.0),
        ).filter((pl.col("u") > 1.5) & (pl.col("v") < 0.25))
    return {
        "maps + filter + global agg": lambda: base().select(
            s=pl.col("u").sum(), m=pl.col("v").mean(), top=pl.col("w").max(), lo=z.min(), n=pl.len()).collect(),
        "maps + filter + group_by k": lambda: base().group_by("k").agg(
            s=pl.col("u").sum(), m=pl.col("w").mean(), n=pl.len()).collect(),
    }


def timeit(fn, repeats: int) -> dict:
    fn()   # warm: kernel compilation, caches
    wall = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        wall.append(time.perf_counter() - start)
    return {"min": min(wall), "median": statistics.median(wall)}


def h2d_floor(table, repeats: int) -> str:
    import numpy as np
    import torch

    if not torch.cuda.is_available():
        return "host->device copy: no CUDA device"
    host = [torch.from_numpy(np.ascontiguousarray(c.to_numpy(zero_copy_only=False))) for c in table.columns]
    nbytes = sum(h.numel() * h.element_size() for h in host)

    def copy():
        for h in host:
            h.to("cuda")
        torch.cuda.synchronize()
    t = timeit(copy, repeats)
    return f"host->device copy of the inputs ({nbytes / 1e9:.2f} GB, pageable): {t['min'] * 1e3:.1f} ms " \
           f"= {nbytes / t['min'] / 1e9:.1f} GB/s"


def copy_rates(repeats: int) -> dict:
    """Host->device and device->host copy rates of pageable memory (what the lane does per column), 256 MiB."""
    import torch

    if not torch.cuda.is_available():
        return {}
    host = torch.empty(256 << 20, dtype=torch.uint8).fill_(1)
    dev = host.to("cuda")

    def h2d():
        host.to("cuda")
        torch.cuda.synchronize()

    def d2h():
        dev.to("cpu")
        torch.cuda.synchronize()
    return {"h2d_bytes_per_s": host.numel() / timeit(h2d, repeats)["min"],
            "d2h_bytes_per_s": host.numel() / timeit(d2h, repeats)["min"]}


def crossover(sizes: list[int], repeats: int, where: str, smoke: bool, out: str | None) -> None:
    """Both lanes at each size; where the triton lane starts to win; the cost model fitted to the run."""
    import dataclasses
    import datetime
    import json

    import torch

    import eidos as ei
    from eidos.hal import registry
    from eidos.lanes.triton import cost
    from eidos.testing.compare import assert_tables_equal

    polars_lane = any(b.name == "polars" and b.available for b in ei.backends())
    if not polars_lane:
        sys.exit("--crossover compares with the polars lane, which is unavailable here: pip install polars")
    rates = copy_rates(repeats)
    fitted = dataclasses.replace(cost.costs(), **rates)
    lanes = {name: registry.get(name) for name in ("triton", "polars")}
    biggest = data(max(sizes))
    print(f"# crossover, triton lane vs polars lane; {where}; {platform.node()} {os.cpu_count()} CPUs, "
          f"torch {torch.__version__}" + ("; SMOKE: interpreter, tiny sizes, no figures" if smoke else ""))
    if rates:
        print(f"# pageable copies of 256 MiB: host->device {rates['h2d_bytes_per_s'] / 1e9:.2f} GB/s, "
              f"device->host {rates['d2h_bytes_per_s'] / 1e9:.2f} GB/s")
    print("| case | rows | input MB | triton min / median ms | polars min / median ms | polars / triton "
          "| model triton / polars ms |")
    print("|---|---|---|---|---|---|---|")
    cases: dict[str, dict] = {}
    for n in sizes:
        table = biggest.slice(0, n)
        for name, flow in flows(table).items():
            plan = flow.plan.optimized
            got = flow.run(engine="triton")
            assert_tables_equal(got, flow.run(engine="polars"), ordered=False, float_rel=1e-9)
            t = timeit(lambda: flow.run(engine="triton"), repeats)
            p = timeit(lambda: flow.run(engine="polars"), repeats)
            model = {lane: lanes[lane].estimate(plan) for lane in lanes}
            gpu = cost.estimate(plan, fitted)
            row = {"rows": n, "input_bytes": int(gpu.input_bytes or 0), "triton_s": t, "polars_s": p,
                   "model_triton_s": model["triton"].seconds, "model_polars_s": model["polars"].seconds,
                   "model_fixed_s": gpu.fixed_s, "model_fitted_s": gpu.seconds}
            cases.setdefault(name, {"runs": []})["runs"].append(row)
            print(f"| {name} | {n:,} | {row['input_bytes'] / 1e6:.2f} | {t['min'] * 1e3:.2f} / {t['median'] * 1e3:.2f} "
                  f"| {p['min'] * 1e3:.2f} / {p['median'] * 1e3:.2f} | {p['min'] / t['min']:.2f}x "
                  f"| {model['triton'].seconds * 1e3:.2f} / {model['polars'].seconds * 1e3:.2f} |")
    for name, case in cases.items():
        runs = case["runs"]
        wins = [r["triton_s"]["min"] < r["polars_s"]["min"] for r in runs]
        first = next((i for i in range(len(runs)) if all(wins[i:])), None)
        case["crossover_rows"] = None if first is None else runs[first]["rows"]
        case["crossover_bytes"] = None if first is None else runs[first]["input_bytes"]
        said = ("never, at the sizes measured" if first is None else
                f"from {runs[first]['rows']:,} rows ({runs[first]['input_bytes'] / 1e6:.2f} MB of input columns)")
        print(f"# {name}: the triton lane wins {said}")
    # the model's fixed part, fitted: the smallest size's time less the model's row and copy work there
    small = [r for case in cases.values() for r in case["runs"] if r["rows"] == min(sizes)]
    excess = statistics.median(r["triton_s"]["min"] - r["model_fitted_s"] for r in small)
    constants = {**rates, "setup_s": max(0.0, fitted.setup_s + excess)}
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    crossings = "; ".join(f"{name}: {c['crossover_rows']:,} rows ({c['crossover_bytes'] / 1e6:.3g} MB)"
                          if c["crossover_rows"] is not None else f"{name}: no size measured" for name, c in cases.items())
    provenance = (f"MEASURED {stamp} on {where} ({os.cpu_count()} CPUs) by bench/gpu_flow.py --crossover "
                  f"(min of {repeats}): pageable copies " +
                  (f"h2d {rates['h2d_bytes_per_s'] / 1e9:.2f} GB/s, d2h {rates['d2h_bytes_per_s'] / 1e9:.2f} GB/s; "
                   if rates else "not measured (no CUDA); ") +
                  f"setup_s fitted to the {min(sizes):,}-row runs; the triton lane beats the polars lane from {crossings}")
    print("# fitted constants (paste into src/eidos/lanes/triton/cost.py, or EIDOS_TRITON_COST=<--out file>):")
    print("#   " + ", ".join(f"{k}={v:.3g}" for k, v in constants.items()))
    print(f"# provenance: {provenance}")
    if out:
        with open(out, "w") as f:
            json.dump({"smoke": smoke, "device": where, "sizes": sizes, "repeats": repeats, "cases": cases,
                       "constants": constants, "provenance": provenance}, f, indent=1)
        print(f"# wrote {out}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=100_000_000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--smoke", action="store_true", help="a few thousand rows under Triton's interpreter")
    ap.add_argument("--crossover", action="store_true", help="time the Flows at growing row counts on both lanes "
                                                             "and find where the triton lane starts to win")
    ap.add_argument("--sizes", default="1e4,1e5,1e6,1e7,1e8", help="row counts for --crossover")
    ap.add_argument("--out", default=None, help="--crossover: write the figures and fitted constants here as JSON")
    args = ap.parse_args()
    rows = 3000 if args.smoke else args.rows
    repeats = 2 if args.smoke else args.repeats
    where = setup(args.smoke)
    if args.crossover:
        sizes = [300, 3000] if args.smoke else [int(float(x)) for x in args.sizes.split(",")]
        return crossover(sizes, repeats, where, args.smoke, args.out)

    import torch

    import eidos as ei
    from eidos.testing.compare import assert_tables_equal

    table = data(rows)
    print(f"# Flow on the triton lane vs the polars lane: {rows:,} rows; {where}")
    print(f"# {platform.node()} {os.cpu_count()} CPUs, Python {platform.python_version()}, torch {torch.__version__}")
    print(f"# {h2d_floor(table, repeats)}")
    print("| case | triton lane min / median | polars lane min / median | polars lane / triton lane "
          "| native Polars min / median | native Polars / triton lane |")
    print("|---|---|---|---|---|---|")
    native = native_polars(table)
    polars_lane = any(b.name == "polars" and b.available for b in ei.backends())
    small = flows(table.slice(0, 5000))
    for name, flow in flows(table).items():
        # the answer: against the reference lane on the first rows, against the polars lane on all of them
        assert_tables_equal(small[name].run(engine="triton"), small[name].run(engine="reference"),
                            ordered=False, float_rel=1e-9)
        first = flow.explain().splitlines()[0]
        got = flow.run(engine="triton")
        if polars_lane:
            assert_tables_equal(got, flow.run(engine="polars"), ordered=False, float_rel=1e-9)
        t = timeit(lambda: flow.run(engine="triton"), repeats)
        p = timeit(lambda: flow.run(engine="polars"), repeats) if polars_lane else None
        n = timeit(native[name], repeats) if name in native else None
        lane = f"{p['min'] * 1e3:.1f} / {p['median'] * 1e3:.1f} ms | {p['min'] / t['min']:.2f}x" if p else "absent |"
        shown = f"{n['min'] * 1e3:.1f} / {n['median'] * 1e3:.1f} ms | {n['min'] / t['min']:.2f}x" if n else "absent |"
        print(f"| {name} | {t['min'] * 1e3:.1f} / {t['median'] * 1e3:.1f} ms | {lane} | {shown} |")
        print(f"|   (automatic choice: {first}) | | | | | |")


if __name__ == "__main__":
    main()
