"""What the Polars lane covers, as data.

Every node, function, dtype and join kind of the IR: where Polars' own rule differs
from docs/semantics.md the translation emits what agrees (see translate.py), and the
few rules Polars has no form for (float or text -> decimal, text -> timestamp, decimal
round to negative places) run row by row with ir.evaluate's own functions. Anything
left out is listed here, so supports() names it and the planner picks another lane
rather than getting a different answer.
"""

from __future__ import annotations

from eidos.hal.coverage import Coverage
from eidos.ir import nodes as N

COVERAGE = Coverage.everything()

# Forms the name tables cannot express, by name, with a test for each: none at present
# (a UDF of no arguments, the last, now runs along some column of its frame).
UNSUPPORTED_FORMS: dict = {}


def extra_gaps(plan: N.Node) -> list[str]:
    """The gaps of `plan` that depend on more than a name (see UNSUPPORTED_FORMS), each once."""
    found: dict[str, None] = {}
    if not UNSUPPORTED_FORMS:
        return []
    for node in plan.walk():
        for root in node.expressions():
            for e in root.walk():
                for name, matches in UNSUPPORTED_FORMS.items():
                    if matches(e):
                        found[name] = None
    return list(found)
