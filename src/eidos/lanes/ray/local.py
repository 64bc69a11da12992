"""Sub-plans of a cluster plan run on this process's own lanes, by the usual rules, never on the cluster lane."""

from __future__ import annotations

import contextvars

import pyarrow as pa

from eidos.hal.planner import without
from eidos.ir import nodes as N

# Set while one of the cluster lane's own tasks runs (in a Ray worker): the lane is then unavailable.
in_task: contextvars.ContextVar[bool] = contextvars.ContextVar("eidos_ray_in_task", default=False)


def run_local(plan: N.Node) -> pa.Table:
    """`plan`'s result, run here on the lane the planner picks among this machine's own lanes, neither the
    cluster lane nor the free lane: a task holds the one CPU Ray gave it, so its Python functions run in
    its own thread rather than on a pool of processes of its own. It runs in a copy of the context, so the
    caller's ei.last_run() stays the record of the caller's run."""
    return contextvars.copy_context().run(_run, plan)


def _run(plan: N.Node) -> pa.Table:
    from eidos.hal.runner import run

    with without("cluster", "free"):
        return run(plan)
