"""The duckdb lane out of core: the settings that keep a run inside the memory budget, or the
ResourceError that says which budget would.

DuckDB holds its buffers under `memory_limit` and spills the rest to `temp_directory`, but a
sort, a hash table or a DISTINCT cannot run on less than a floor that grows with its threads (each
holds its own partitions) and a little with the input; below it DuckDB fails with its own
out-of-memory text. Past the limit the process also holds what DuckDB does not count (the Parquet
reader's pages, the batches handed to Arrow, the allocator's slack): measured, RSS over an idle
process is at most about `SLOPE` times the limit plus `OVERHEAD`.

So a run with budget B over input S takes the most threads t (up to the cores) whose floor fits,
`SLOPE * floor(t, S) + OVERHEAD <= B`, and gives DuckDB the rest as its limit, (B - OVERHEAD) / SLOPE;
when not even one thread fits, it raises ResourceError naming the smallest budget that would.

The figures come from bench/duckdb_memory.py (bench/RESULTS.md has the run): for each operation kind,
thread count and input size it finds by bisection the smallest memory_limit DuckDB finishes under
and measures the peak RSS over an idle process at 1, 2 and 4 times it. FLOORS are those smallest
limits rounded up by a margin (DuckDB's parallel runs vary from one run to the next).
"""

from __future__ import annotations

import math

from eidos.errors import ResourceError
from eidos.ir import expr as E
from eidos.ir import nodes as N

MiB = 2**20

# Per operation kind: the smallest DuckDB memory limit, in MiB, as base + per_thread * t + per_input * S
# + per_input_thread * S * t, for t threads and S MiB of input (the bytes the plan reads, estimated).
# A hash join's partitions grow with both: 148 MiB for 252 MiB of input with 4 threads, 64 for 63.
FLOORS: dict[str, tuple[float, float, float, float]] = {
    "group-by": (12, 20, 0, 0),
    "distinct": (24, 28, 0, 0),
    "sort": (16, 24, 1 / 16, 0),
    "join": (16, 20, 0, 1 / 6),
    "scan": (4, 4, 0, 0),          # filters and projections stream: a few MiB of vectors per thread
}
# A small input never needs more than this (MiB: base + per input MiB), whatever the threads: DuckDB
# holds it whole in a few MiB of buffers (measured up to 20 MiB for 3 MiB, 8 MiB for 1.5 MiB).
SMALL = (8, 4)
SLOPE = 1.5                         # RSS over an idle process per MiB of DuckDB's limit, at most
OVERHEAD = 40 * MiB                 # and what it holds besides, at most


def kinds(plan: N.Node) -> list[str]:
    """The operation kinds in `plan` whose memory DuckDB must hold: sorts, keyed or distinct
    aggregations, DISTINCT and joins; 'scan' when none."""
    found = []
    for node in plan.walk():
        if isinstance(node, N.Sort):
            found.append("sort")
        elif isinstance(node, N.Aggregate) and (node.keys or _distinct_aggregate(node)):
            found.append("group-by")
        elif isinstance(node, N.Distinct):
            found.append("distinct")
        elif isinstance(node, N.Join):
            found.append("join")
    return list(dict.fromkeys(found)) or ["scan"]


def _distinct_aggregate(node: N.Aggregate) -> bool:
    return any(isinstance(e, E.Agg) and e.fn == "n_unique" for _, x in node.aggs for e in x.walk())


def floor(plan_kinds: list[str], threads: int, input_bytes: int) -> int:
    """The smallest memory limit DuckDB runs these kinds under with `threads` threads: the operators
    of one plan hold their memory at once, so their floors add up."""
    s, t = input_bytes / MiB, threads
    return int(sum(min(base + per_thread * t + per_input * s + per_input_thread * s * t, SMALL[0] + SMALL[1] * s)
                   for base, per_thread, per_input, per_input_thread in (FLOORS[k] for k in plan_kinds)) * MiB)


def needs(limit: int) -> int:
    """The budget a DuckDB memory limit of `limit` bytes needs."""
    return math.ceil(SLOPE * limit + OVERHEAD)


def settings(plan: N.Node, budget: int, cores: int, input_bytes: int, budget_text: str) -> dict:
    """DuckDB's settings for running `plan` within `budget` bytes: memory_limit and threads (the
    caller adds the spill folder); ResourceError when the budget is below what one thread needs."""
    found = kinds(plan)
    threads = max((t for t in range(1, max(cores, 1) + 1) if needs(floor(found, t, input_bytes)) <= budget),
                  default=0)
    if not threads:
        least, every = (math.ceil(needs(floor(found, t, input_bytes)) / MiB) for t in (1, max(cores, 1)))
        raise ResourceError(
            f"{budget_text} is below what the duckdb lane needs for {_what(found)} over {input_bytes / MiB:.1f} MiB "
            f"of input even with 1 thread: set EIDOS_MEMORY_BUDGET to at least {least}MiB"
            + (f" ({every}MiB lets it use all {cores} cores)" if every > least else ""))
    limit = int((budget - OVERHEAD) / SLOPE)
    return {"memory_limit": f"{limit // 1024}KiB", "threads": threads}


def _what(found: list[str]) -> str:
    names = {"group-by": "a group-by", "distinct": "a distinct", "sort": "a sort", "join": "a join",
             "scan": "a scan"}
    shown = [names[k] for k in found]
    return shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " and " + shown[-1]
