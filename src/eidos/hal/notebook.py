"""What a notebook shows for a Flow and for a run: the schema, where the plan would run and why, the plan.

A Flow's view decides its lane (without running it) exactly as explain() does; when no lane can run the
plan, the view says so with the planner's reason instead of failing to display.
"""

from __future__ import annotations

from eidos import html
from eidos.errors import EidosError
from eidos.hal.planner import RULES, decide, render
from eidos.hal.runner import RunRecord
from eidos.ir import nodes as N
from eidos.ir.render import tree


def flow_html(plan: N.Node) -> str:
    schema = plan.schema
    try:
        decision = decide(plan)
    except EidosError as e:
        where, details = f"no lane can run it: {e}", ""
    else:
        where = f"lane {decision.lane_name} (rule {decision.rule}, {RULES[decision.rule]}: {decision.reason})"
        details = html.folded("explain", html.text(render(decision)))
    columns = html.table(("column", "dtype"), ((name, dtype) for name, dtype in schema.items()))
    n = len(schema.names)
    return html.box("eidos Flow", f"{n} column{'s' * (n != 1)}", html.line(where), columns,
                    html.folded("plan", html.text(tree(plan)), open_=True), details)


def run_html(record: RunRecord) -> str:
    tried = ((name, outcome) for name, outcome in record.attempts)
    return html.box("eidos run", f"ran on {record.lane} in {record.seconds:.3f} s",
                    html.table(("lane tried", "outcome"), tried),
                    html.folded("explain", html.text(render(record.decision))))
