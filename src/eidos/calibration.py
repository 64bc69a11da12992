"""`eidos calibrate`: the lanes' cost constants measured on this machine, in well under a minute.

Each lane with a cost model lists the probes that measure its constants (`Constants.probes`, in order). A probe
is a small Flow run on that lane (min of `repeats` runs after a warm-up). The lane's cost model is linear in
its constants (seconds, and seconds per byte for a rate), so one probe gives one constant: the time measured
less what the model puts on the other constants (those measured before it, else the defaults scaled here),
divided by what the model puts on one unit of it. The result goes to costs.json in the user's cache
(eidos.hal.constants), which the planner reads from the next plan on.
"""

from __future__ import annotations

import math
import os
import tempfile
import time
from collections.abc import Callable

from eidos.hal import constants as K

BUDGET_S = 45.0     # probes stop (the rest keep their defaults) once calibration has run this long


def bandwidth(n: int = 1 << 23, repeats: int = 10) -> float:
    """One thread's memory copy bandwidth here, bytes read and written per second (NumPy, n float64)."""
    import numpy as np

    src, dst = np.ones(n), np.empty(n)
    best = math.inf
    for _ in range(repeats):
        t = time.perf_counter()
        np.copyto(dst, src)
        best = min(best, time.perf_counter() - t)
    return 16 * n / best


def _probes(rows: int, folder: str) -> dict[str, Callable]:
    """Probe name -> a function giving its Flow, over generated data of `rows` rows."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    import eidos as ei
    from eidos import col

    rng = np.random.default_rng(0)
    t = pa.table({"x": rng.random(rows), "y": rng.random(rows), "k": rng.integers(0, 16, rows, dtype=np.int32),
                  "g": rng.integers(0, max(rows // 2, 1), rows), "i": rng.permutation(rows)})
    path = os.path.join(folder, "probe.parquet")
    pq.write_table(t, path)
    x, y = col("x"), col("y")
    none = (x + y) > 5.0   # keeps no row, and no statistics can tell
    busy = ((x * 1.5 + y) * (x - y) + x * y * 2.0 - (y + 0.5) * x) / (y + 1.0)
    half = t.slice(0, rows // 2)
    return {
        "setup": lambda: ei.from_arrow(t.slice(0, 1000)).with_columns(z=x + 1),
        # every value read: no statistics answer an integer sum or a computed max (DuckDB answers max(x) from them)
        "parquet": lambda: ei.read_parquet(path).agg(a=col("k").sum(), b=col("g").sum(), c=col("i").sum(),
                                                     d=(x + y).max()),
        "arrow": lambda: ei.from_arrow(t).filter(none),
        "project": lambda: ei.from_arrow(t).filter(busy > 1e9),
        "libm": lambda: ei.from_arrow(t).filter(((x + 0.5).exp() + (y + 0.5).tanh()) > 1e9),
        "group": lambda: ei.from_arrow(t).group_by("k").agg(s=col("g").sum(), m=col("i").max(), n=ei.count()),
        "groups": lambda: ei.from_arrow(t).group_by("g").agg(s=col("i").sum(), n=ei.count()),
        "exact": lambda: ei.from_arrow(t).group_by("k").agg(s=x.sum()),
        "exact_groups": lambda: ei.from_arrow(t).group_by("g").agg(s=x.sum()),
        "exact_global": lambda: ei.from_arrow(t).agg(s=x.sum()),
        "join": lambda: ei.from_arrow(half.select(["i", "x"])).join(ei.from_arrow(t.select(["i", "y"])), on="i"),
        "sort": lambda: ei.from_arrow(t.select(["x", "y"])).sort("x"),
    }


def _time(flow, lane: str, repeats: int) -> float:
    flow.run(engine=lane)
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        flow.run(engine=lane)
        times.append(time.perf_counter() - t)
    return min(times)


def _fit(defaults: K.Constants, values: dict[str, float], name: str, plan, seconds: float) -> float | str:
    """The value of constant `name` that makes the lane's model give `seconds` for `plan` (see the module), or
    why it cannot be told: the probe took no longer than the model's other constants account for."""
    rate = name.endswith("_bytes_per_s")
    rest = defaults.estimate(plan, {**values, name: math.inf if rate else 0.0}).seconds
    unit = defaults.estimate(plan, {**values, name: 1.0}).seconds - rest
    if unit <= 0 or seconds <= rest:
        return (f"not measurable here: its probe took {seconds:.3g} s, no more than the model's other constants "
                f"give ({rest:.3g} s); it keeps its default")
    x = (seconds - rest) / unit
    return 1 / x if rate else x


def calibrate(*, lanes: list[str] | None = None, rows: int = 500_000, repeats: int = 3, save: bool = True,
              progress: Callable[[str], None] | None = None) -> dict:
    """Measure the cost constants of every lane available here that has a cost model (or those named) and,
    with `save`, store them for the planner (costs.json in the user's cache folder). Returns what was written:
    the machine (cores, memory, CPU model, measured copy bandwidth), seconds taken, the constants measured per
    lane (`lanes`) beside the shipped defaults (`defaults`) and those scaled to this machine (`scaled`), each
    lane skipped with why, and the file written (`path`)."""
    from eidos.hal import registry

    start = time.perf_counter()
    machine = K.here(bandwidth())
    measured: dict[str, dict[str, float]] = {}
    defaults_used: dict[str, dict[str, float]] = {}
    scaled: dict[str, dict[str, float]] = {}
    skipped: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="eidos-calibrate-") as folder:
        probes = None
        for lane in sorted(registry.lanes(), key=lambda l: l.name):
            if lanes is not None and lane.name not in lanes:
                continue
            defaults = lane.constants()
            available = defaults is not None and lane.is_available()
            if defaults is None:
                skipped[lane.name] = "no cost model: the planner does not weigh it by cost"
            elif not available:
                skipped[lane.name] = f"unavailable: {available.reason}"
            elif time.perf_counter() - start > BUDGET_S:
                skipped[lane.name] = f"out of time ({BUDGET_S:.0f} s): it keeps its defaults"
            else:
                probes = probes or _probes(rows, folder)
                values = dict(defaults.scaled(machine).values)
                defaults_used[lane.name] = {n: defaults.values[n] for n in defaults.probes.values()}
                scaled[lane.name] = {n: values[n] for n in defaults.probes.values()}
                for probe, name in defaults.probes.items():
                    if time.perf_counter() - start > BUDGET_S:
                        skipped[f"{lane.name}.{name}"] = f"out of time ({BUDGET_S:.0f} s): it keeps its default"
                        continue
                    if progress:
                        progress(f"{lane.name}: {name} ({probe})")
                    flow = probes[probe]()
                    got = _fit(defaults, values, name, flow.plan.optimized, _time(flow, lane.name, repeats))
                    if isinstance(got, str):
                        skipped[f"{lane.name}.{name}"] = got
                    else:
                        values[name] = got
                measured[lane.name] = {n: values[n] for n in defaults.probes.values() if f"{lane.name}.{n}" not in skipped}
    seconds = time.perf_counter() - start
    result = {"machine": machine, "seconds": seconds, "lanes": measured, "skipped": skipped,
              "defaults": defaults_used, "scaled": scaled}
    if save:
        result["path"] = str(K.save(measured, machine, skipped, seconds))
    return result


def cost_constants() -> dict[str, K.Constants]:
    """The cost constants the planner uses here, per lane with a cost model: each set's `values` and its
    `source` (measured here by `eidos calibrate`, or the defaults scaled to this machine, and why)."""
    from eidos.hal import registry

    return {lane.name: K.in_use(c) for lane in sorted(registry.lanes(), key=lambda l: l.name)
            if (c := lane.constants()) is not None}

