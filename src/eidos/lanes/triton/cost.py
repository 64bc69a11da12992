"""The Triton lane's cost model: what running a plan on the GPU costs, to weigh it against a CPU lane.

    seconds = setup_s                                        once per run (Python, device set-up, the result)
            + step_s per node with device work, + agg_s per aggregation   (launches, syncs, torch ops)
            + bytes of the columns read / h2d_bytes_per_s    (the host->device copy; parquet and csv are
                                                              first decoded on the host by pyarrow)
            + rows x expression nodes x row_op_s (agg_op_s in aggregations; group_row_s per row grouped)
            + float sums/means/std/var: rows x exact_row_s on the device; every sum/mean/std/var: groups x
              group_host_s on the host (exact totals are joined in Python)
            + result bytes / d2h_bytes_per_s                 (the device->host copy of the result)

Rows flow up the plan as in the CPU lanes' models (eidos.hal.cost's row flow), so the planner
compares like with like: rule 4 takes the GPU only where this estimate beats the CPU lane's
(planner._gpu_pays), and explain() names the input size from which the GPU pays for that plan.
Both sides are affine in the input size (fixed_s + bytes x per-byte), so that size follows from
the two estimates.

Every constant is in COSTS below: fitted by bench/gpu_flow.py --crossover; see bench/RESULTS.md,
section "The Triton lane's crossover" (the run and which constants remain estimates). `DEFAULTS` holds
them as data; the planner starts from `in_use(DEFAULTS)`: what `eidos calibrate` measured on this GPU
machine, else these (eidos.hal.constants). `EIDOS_TRITON_COST` overrides them:
`name=value` pairs (`setup_s=2ms,h2d_bytes_per_s=12GB/s`), or the path of the JSON that
`bench/gpu_flow.py --crossover --out PATH` writes on the GPU machine (its "constants").
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from dataclasses import dataclass

from eidos.errors import PlanError
from eidos.hal.constants import Constants, Machine, in_use
from eidos.hal.cost import RowFlow, row_bytes, summed
from eidos.hal.cost import estimate as row_flow
from eidos.hal.devices import parse_size
from eidos.hal.lane import Estimate
from eidos.ir import expr as E
from eidos.ir import nodes as N

ENV = "EIDOS_TRITON_COST"


@dataclass(frozen=True)
class Costs:
    """The model's constants (seconds, and bytes per second for the copies)."""

    setup_s: float = 7.85e-3          # per run: lowering lookups, device set-up, syncs, the Arrow result
    step_s: float = 0.3e-3            # per node with device work: the executor's Python and torch ops, a
                                      # launch (~12 us host), the error check's device->host sync
    agg_s: float = 0.15e-3            # per aggregation: torch scatter ops and 2-4 device->host syncs
    h2d_bytes_per_s: float = 7.52e9   # host->device copy of pageable memory
    d2h_bytes_per_s: float = 1.29e9   # device->host copy of the result (pageable)
    row_op_s: float = 7e-12           # one expression node on one row, fused in a program
    agg_op_s: float = 56e-12          # one expression node on one row inside an aggregation (scatters)
    group_row_s: float = 0.84e-9      # grouping one row (torch.unique sorts the keys), distinct too
    exact_row_s: float = 1.4e-9       # a float sum/mean (std/var: twice) per value: mantissa bins by exponent
    group_host_s: float = 1e-6        # per group of a sum/mean/std/var: exact totals joined in Python
    parquet_host_bytes_per_s: float = 4.0e9   # pyarrow decoding parquet on the host (per uncompressed byte)
    csv_host_bytes_per_s: float = 0.3e9       # pyarrow parsing csv on the host


COSTS = Costs()
_SECONDS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}
# the host rates are the polars lane's, fitted on the 2-vCPU VM: they scale with its bandwidth
H100_HOST = Machine(16, 0, "", 10e9, "an NVIDIA H100 80GB HBM3 host (16 CPUs)")


def costs() -> Costs:
    """The constants in use here (in_use(DEFAULTS)) with EIDOS_TRITON_COST's overrides applied."""
    base = Costs(**in_use(DEFAULTS).values)
    text = os.environ.get(ENV, "").strip()
    if not text:
        return base
    if "=" not in text:
        return dataclasses.replace(base, **_from_json(text))
    values = {}
    for pair in filter(None, (p.strip() for p in text.split(","))):
        name, _, value = (x.strip() for x in pair.partition("="))
        values[_field(name)] = _value(name, value)
    return dataclasses.replace(base, **values)


def _field(name: str) -> str:
    names = [f.name for f in dataclasses.fields(Costs)]
    if name not in names:
        raise PlanError(f"{ENV}: unknown constant {name!r}; the constants are {', '.join(names)}")
    return name


def _value(name: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = None
    if value is None and name.endswith("_bytes_per_s"):
        value = parse_size(text.removesuffix("/s")) if text.endswith("/s") else None
    elif value is None:
        match = re.fullmatch(r"([0-9.eE+-]+)\s*(s|ms|us|ns)", text)
        value = float(match.group(1)) * _SECONDS[match.group(2)] if match else None
    if value is None or value < 0 or (name.endswith("_bytes_per_s") and value == 0):
        form = "a rate such as 12GB/s or 1.2e10" if name.endswith("_bytes_per_s") else "seconds such as 2ms, 60us or 0.002"
        raise PlanError(f"{ENV}: cannot read {name}={text!r}; give {form}")
    return value


def _from_json(path: str) -> dict[str, float]:
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        raise PlanError(f"{ENV}={path!r}: not name=value pairs, and not a readable JSON file from "
                        f"bench/gpu_flow.py --crossover --out ({e})") from e
    if not isinstance(data, dict) or not isinstance(data.get("constants"), dict):
        raise PlanError(f"{ENV}={path!r}: expected bench/gpu_flow.py's JSON object with a 'constants' mapping")
    if data.get("smoke"):
        raise PlanError(f"{ENV}={path!r} is a --smoke run (Triton's interpreter, tiny sizes): its figures are not "
                        "measurements; run bench/gpu_flow.py --crossover on the GPU machine without --smoke")
    return {_field(k): _value(k, str(v)) for k, v in data["constants"].items()}


def model(c: Costs, constants: str = "") -> RowFlow:
    """The row flow with the device's constants (the columns read are what crosses to the device)."""
    def host_then_device(host: float) -> float:
        return 1 / (1 / host + 1 / c.h2d_bytes_per_s)

    return RowFlow(
        lane="triton",
        setup_s=c.setup_s,
        scan_bytes_per_s={"arrow": c.h2d_bytes_per_s, "parquet": host_then_device(c.parquet_host_bytes_per_s),
                          "csv": host_then_device(c.csv_host_bytes_per_s), "other": c.h2d_bytes_per_s},
        row_op_s=c.row_op_s,
        agg_op_s=c.agg_op_s,
        join_row_s=c.group_row_s,     # the row flow charges Distinct this per row: grouping on every column
        sort_row_s=c.group_row_s,     # the lane runs no sort; kept for completeness of the row flow
        columnar=frozenset({"parquet", "arrow"}),
        constants=constants,
    )


def estimate(plan: N.Node, c: Costs | None = None) -> Estimate:
    label = ""
    if c is None:
        c, label = costs(), in_use(DEFAULTS).source + (f"; {ENV} overrides some" if os.environ.get(ENV) else "")

    def extra(node: N.Node, rows: float, out: float) -> float:
        s = 0.0
        if isinstance(node, N.Aggregate):
            s += (rows * c.group_row_s if node.keys else 0.0)
            exact, summed = _sums(node)
            s += exact * rows * c.exact_row_s + summed * out * c.group_host_s
        if node is plan:   # the result goes back to the host
            s += out * row_bytes(node.schema) / c.d2h_bytes_per_s
        return s

    def fixed(node: N.Node) -> float:
        if isinstance(node, N.Scan):
            return 0.0
        aggs = sum(1 for _, e in getattr(node, "aggs", ()) for x in e.walk() if isinstance(x, E.Agg))
        return c.step_s + aggs * c.agg_s

    return row_flow(plan, model(c, label), extra, fixed)


DEFAULTS = Constants(
    "triton", dataclasses.asdict(COSTS), H100_HOST, lambda plan, values: estimate(plan, Costs(**values)),
    host_rates=frozenset({"parquet_host_bytes_per_s", "csv_host_bytes_per_s"}),
    probes={"setup": "setup_s", "arrow": "h2d_bytes_per_s", "project": "row_op_s", "group": "group_row_s",
            "exact": "exact_row_s"})


def _sums(node: N.Aggregate) -> tuple[int, int]:
    """(float passes, sums): float sums and means take one exact pass on the device, float std/var two
    (exact mean, then squared differences); every sum/mean/std/var is finished per group in Python."""
    found = list(summed(node))
    return sum((2 if fn in ("std", "var") else 1) for fn, t in found if t.is_float), len(found)
