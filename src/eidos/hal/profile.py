"""A run, profiled: where each part and the finishing plan ran with their rows and time, the plan's nodes
with the rows the planner estimated for them, and each engine's own profile where it keeps one (DuckDB:
its operators with rows and time). `Flow.profile()` and `explain(analyze=True)` show it.

Polars 2 keeps no per-node profile (it dropped `LazyFrame.profile`, whose timings misled under its
streaming engine), so a polars part shows its rows and time as a whole.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from eidos import html
from eidos.hal.cost import RowFlow, rows_out
from eidos.hal.planner import RULES
from eidos.hal.runner import RunRecord, run
from eidos.ir import nodes as N
from eidos.ir.render import tree

# Only the row flow's own rules matter for a node's estimated rows (filters keep half, ...), not a lane's speed.
_ROWS = RowFlow(lane="estimate", setup_s=0.0, scan_bytes_per_s={"other": 1.0}, row_op_s=0.0, join_row_s=0.0, sort_row_s=0.0)


@dataclass(frozen=True)
class Profile:
    """What one run did (`record`, as `ei.last_run()` keeps it) and its `result`."""

    record: RunRecord
    result: pa.Table

    @property
    def steps(self) -> list[tuple[str, str, int | None, float]]:
        """(what: "part p0" or "plan", lane, rows, seconds), in the order they ran."""
        return self.record.steps

    def estimated_plan(self) -> str:
        """The optimized plan, each node with the rows the planner's row flow estimated for it."""
        return tree(self.record.decision.plan, "  ", lambda node: f"   ~{estimated_rows(node):,.0f} rows")

    def __str__(self) -> str:
        d = self.record.decision
        lines = [f"ran on {self.record.lane} in {self.record.seconds:.3f} s, {self.result.num_rows:,} rows"
                 f"   (rule {d.rule}, {RULES[d.rule]}: {d.reason})", "steps:"]
        lines += [f"  {what}: {lane}, {'?' if rows is None else f'{rows:,}'} rows, {seconds:.3f} s"
                  for what, lane, rows, seconds in self.steps]
        lines += ["plan (estimated rows):", self.estimated_plan()]
        for lane, engine in self.record.engine:
            lines += [f"{lane}'s own profile:"] + [f"  {line}" for line in engine] if engine else \
                     [f"{lane} keeps no profile of its own"]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        steps = html.table(("step", "lane", "rows", "seconds"),
                           ((w, lane, "?" if r is None else f"{r:,}", f"{s:.3f}") for w, lane, r, s in self.steps))
        engines = [html.folded(f"{lane}'s own profile", html.text("\n".join(engine) or "(none kept)"))
                   for lane, engine in self.record.engine]
        return html.box("eidos profile", f"ran on {self.record.lane} in {self.record.seconds:.3f} s, "
                        f"{self.result.num_rows:,} rows", steps,
                        html.folded("plan (estimated rows)", html.text(self.estimated_plan()), open_=True), *engines)


def estimated_rows(node: N.Node) -> float:
    return rows_out(node, _ROWS)


def profile(plan: N.Node, engine: str | None = None, *, address: str | None = None) -> Profile:
    """Run `plan` as `run` does, recording each step and the finishing engine's own profile."""
    from eidos.hal.runner import last_run

    table = run(plan, engine, address=address, profile=True)
    return Profile(last_run(), table)
